// Shared helpers for the Vercel AI SDK end-to-end scripts.
//
// Every script reads its settings from argv (`--base-url URL --model M --prompt P --store true|false`
// `--mode stream|generate --reasoning-summary auto`) with environment fallbacks (GATEWAY_BASE_URL,
// GATEWAY_MODEL, GATEWAY_PROMPT, GATEWAY_STORE, GATEWAY_MODE, GATEWAY_REASONING_SUMMARY), and prints one
// JSON summary on stdout.
// A failure prints {"error": {...}} on stdout and exits 1, so the caller always has JSON to read.
import { parseArgs } from 'node:util';
import { createOpenAI } from '@ai-sdk/openai';

export function readOptions() {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      model: { type: 'string' },
      prompt: { type: 'string' },
      store: { type: 'string' },
      mode: { type: 'string' },
      'reasoning-summary': { type: 'string' },
    },
    strict: true,
  });
  const env = process.env;
  const baseURL = values['base-url'] ?? env.GATEWAY_BASE_URL;
  if (!baseURL) throw new Error('no base URL: pass --base-url http://host:port/v1 or set GATEWAY_BASE_URL');
  const store = values.store ?? env.GATEWAY_STORE ?? 'default';
  if (!['true', 'false', 'default'].includes(store)) throw new Error(`--store must be true, false or default, not ${store}`);
  const mode = values.mode ?? env.GATEWAY_MODE ?? 'stream';
  if (!['stream', 'generate'].includes(mode)) throw new Error(`--mode must be stream or generate, not ${mode}`);
  return {
    baseURL,
    model: values.model ?? env.GATEWAY_MODEL ?? 'fake-model',
    prompt: values.prompt ?? env.GATEWAY_PROMPT ?? 'Say hello.',
    store,
    mode,
    reasoningSummary: values['reasoning-summary'] ?? env.GATEWAY_REASONING_SUMMARY,
  };
}

// Every request body the SDK sends is kept in `sent`, for the summary's `requests`.
export const sent = [];

// The Responses API model of the provider: `openai.responses(model)`.
export function responsesModel(opts) {
  const recordingFetch = async (url, init) => {
    sent.push({ url: String(url), body: parseBody(init?.body) });
    return fetch(url, init);
  };
  const openai = createOpenAI({ baseURL: opts.baseURL, apiKey: 'test-key', fetch: recordingFetch });
  return openai.responses(opts.model);
}

// providerOptions.openai for the settings that change what the SDK sends.
export function providerOptions(opts) {
  const openai = {};
  if (opts.store !== 'default') openai.store = opts.store === 'true';
  if (opts.reasoningSummary) {
    openai.reasoningSummary = opts.reasoningSummary;
    // A model name the SDK does not know as a reasoning model gets no `reasoning` field unless forced.
    openai.forceReasoning = true;
  }
  return { openai };
}

// What every summary reports of the result, stream or not (all of these are promises on a stream result).
export async function commonSummary(result) {
  const steps = await result.steps;
  return {
    text: await result.text,
    reasoningText: (await result.reasoningText) ?? null,
    reasoning: (await result.reasoning).map((r) => r.text),
    finishReason: await result.finishReason,
    rawFinishReason: (await result.rawFinishReason) ?? null,
    usage: await result.usage,
    totalUsage: await result.totalUsage,
    toolCalls: (await result.toolCalls).map(({ toolCallId, toolName, input }) => ({ toolCallId, toolName, input })),
    toolResults: (await result.toolResults).map(({ toolCallId, toolName, output }) => ({ toolCallId, toolName, output })),
    warnings: (await result.warnings) ?? [],
    providerMetadata: (await result.providerMetadata) ?? null,
    responseId: (await result.response)?.id ?? null,
    steps: steps.map((s) => ({
      text: s.text,
      finishReason: s.finishReason,
      toolCalls: s.toolCalls.map(({ toolCallId, toolName, input }) => ({ toolCallId, toolName, input })),
      toolResults: s.toolResults.map(({ toolCallId, toolName, output }) => ({ toolCallId, toolName, output })),
      usage: s.usage,
    })),
    requests: sent,
  };
}

// Stream a result's fullStream, recording part types and any error part.
export async function drain(result) {
  const partTypes = [];
  const errors = [];
  const reasoningDeltas = [];
  for await (const part of result.fullStream) {
    partTypes.push(part.type);
    if (part.type === 'error') errors.push(describeError(part.error));
    if (part.type === 'reasoning-delta') reasoningDeltas.push(part.text ?? part.delta);
  }
  return { partTypes, streamErrors: errors, reasoningDeltas };
}

function parseBody(body) {
  if (body == null) return null;
  if (typeof body !== 'string') return body;
  try { return JSON.parse(body); } catch { return body; }
}

export function describeError(error) {
  if (error == null || typeof error !== 'object') return { message: String(error) };
  return {
    name: error.name ?? null,
    message: error.message ?? String(error),
    statusCode: error.statusCode ?? null,
    responseBody: error.responseBody ?? null,
    requestBody: parseBody(error.requestBodyValues ? JSON.stringify(error.requestBodyValues) : null),
    cause: error.cause ? String(error.cause) : null,
  };
}

export async function main(run) {
  try {
    const summary = await run(readOptions());
    process.stdout.write(JSON.stringify(summary) + '\n');
  } catch (error) {
    process.stdout.write(JSON.stringify({ error: describeError(error), requests: sent }) + '\n');
    process.exitCode = 1;
  }
}
