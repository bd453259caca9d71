// The provider-executed web search tool, `openai.tools.webSearch`, streamed or not:
// `node websearch.mjs --base-url URL/v1 [--mode stream|generate]`. Reports the tool calls and results the SDK
// made of the gateway's web_search_call items, the sources from its url_citation annotations, and the text.
import { generateText, streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { commonSummary, drain, main, providerOptions, responsesModel } from './common.mjs';

await main(async (opts) => {
  const openai = createOpenAI({ baseURL: opts.baseURL, apiKey: 'test-key' });
  const args = {
    model: responsesModel(opts),
    prompt: opts.prompt,
    tools: {
      web_search: openai.tools.webSearch({ searchContextSize: 'low', filters: { allowedDomains: ['127.0.0.1'] } }),
    },
    maxRetries: 0,
    providerOptions: providerOptions(opts),
  };
  const result = opts.mode === 'generate' ? await generateText(args) : streamText(args);
  const streamed = opts.mode === 'generate' ? {} : await drain(result);
  const content = await result.content;
  const sources = (await result.sources).map(({ sourceType, url, title }) => ({ sourceType, url, title: title ?? null }));
  return {
    mode: opts.mode,
    ...streamed,
    ...(await commonSummary(result)),
    sources,
    calls: content.filter((p) => p.type === 'tool-call').map(({ toolName, providerExecuted }) => ({ toolName, providerExecuted })),
    results: content.filter((p) => p.type === 'tool-result').map(({ toolName, output }) => ({ toolName, output })),
  };
});
