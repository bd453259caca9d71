// A function tool the SDK runs itself, then a second model call with the tool result:
// `node tools.mjs --base-url URL/v1 [--mode stream|generate] [--store true|false]`.
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import { commonSummary, drain, main, providerOptions, responsesModel } from './common.mjs';

await main(async (opts) => {
  const executed = [];
  const getWeather = tool({
    description: 'The current weather for a city',
    inputSchema: z.object({ city: z.string().describe('City name') }),
    execute: async ({ city }) => {
      executed.push({ city });
      return { city, forecast: 'sunny', temperatureC: 21 };
    },
  });
  const args = {
    model: responsesModel(opts),
    prompt: opts.prompt,
    tools: { get_weather: getWeather },
    stopWhen: stepCountIs(2),
    maxRetries: 0,
    providerOptions: providerOptions(opts),
  };
  if (opts.mode === 'generate') {
    const result = await generateText(args);
    return { mode: 'generate', executed, ...(await commonSummary(result)) };
  }
  const result = streamText(args);
  const streamed = await drain(result);
  return { mode: 'stream', executed, ...streamed, ...(await commonSummary(result)) };
});
