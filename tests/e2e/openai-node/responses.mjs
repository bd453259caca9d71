// The official OpenAI Node SDK (`client.responses`) against the gateway: one conversation that uses every
// call a Node app makes, printed as one JSON summary on stdout.
//
//   node responses.mjs --base-url http://127.0.0.1:8080/v1 --model fake-model
//
// Steps, in order (the caller scripts the upstream's answers in the same order):
//   1. create, not streamed             -> text
//   2. responses.stream(...)            -> deltas, and the final response of the helper
//   3. create with a function tool      -> a function_call
//   4. create with its function_call_output, chained by previous_response_id -> text
//   5. retrieve (4), delete (4), retrieve again -> the SDK's NotFoundError
// A failure prints {"error": {...}} and exits 1, so the caller always has JSON to read.
import { parseArgs } from 'node:util';
import OpenAI from 'openai';

const { values } = parseArgs({ options: { 'base-url': { type: 'string' }, model: { type: 'string' } } });
const client = new OpenAI({ baseURL: values['base-url'], apiKey: 'test-key', maxRetries: 0 });
const model = values.model ?? 'fake-model';

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the weather for a location.',
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
  strict: false,
};

async function main() {
  const summary = {};

  const plain = await client.responses.create({ model, input: 'Say hello.' });
  summary.text = { id: plain.id, status: plain.status, outputText: plain.output_text };

  const stream = client.responses.stream({ model, input: 'Count to three.' });
  const deltas = [];
  const types = [];
  stream.on('response.output_text.delta', (event) => deltas.push(event.delta));
  for await (const event of stream) types.push(event.type);
  const streamed = await stream.finalResponse();
  summary.stream = { deltas, first: types[0], last: types.at(-1), outputText: streamed.output_text,
                     usage: streamed.usage };

  const asked = await client.responses.create({ model, input: 'Weather in Paris?', tools: [weather] });
  const call = asked.output.find((item) => item.type === 'function_call');
  summary.tool = { id: asked.id, name: call?.name, arguments: JSON.parse(call?.arguments ?? 'null'),
                   callId: call?.call_id };

  const answered = await client.responses.create({
    model,
    previous_response_id: asked.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temperature": 21}' }],
    tools: [weather],
  });
  summary.chain = { id: answered.id, previousResponseId: answered.previous_response_id,
                    outputText: answered.output_text };

  const retrieved = await client.responses.retrieve(answered.id);
  const deleted = await client.responses.delete(answered.id);
  let afterDelete = null;
  try {
    await client.responses.retrieve(answered.id);
  } catch (err) {
    afterDelete = { name: err.constructor.name, status: err.status };
  }
  summary.stored = { retrievedText: retrieved.output_text, deleted: deleted ?? null, afterDelete };
  return summary;
}

main().then(
  (summary) => console.log(JSON.stringify(summary)),
  (err) => {
    console.log(JSON.stringify({ error: { name: err?.constructor?.name, message: String(err?.message ?? err),
                                          status: err?.status ?? null } }));
    process.exit(1);
  },
);
