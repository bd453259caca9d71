// streamText / generateText with no tools: `node text.mjs --base-url URL/v1 [--mode stream|generate]`.
import { generateText, streamText } from 'ai';
import { commonSummary, drain, main, providerOptions, responsesModel } from './common.mjs';

await main(async (opts) => {
  const args = { model: responsesModel(opts), prompt: opts.prompt, maxRetries: 0, providerOptions: providerOptions(opts) };
  if (opts.mode === 'generate') {
    const result = await generateText(args);
    return { mode: 'generate', ...(await commonSummary(result)) };
  }
  const result = streamText(args);
  const streamed = await drain(result);
  return { mode: 'stream', ...streamed, ...(await commonSummary(result)) };
});
