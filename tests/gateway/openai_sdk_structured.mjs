// Structured outputs through the gateway with the official OpenAI Node SDK (v4) and zod, run by
// tests/gateway/structured_outputs_cluster_test.cc against a real controller, worker and gateway serving the
// small random-weight model. It cannot follow instructions, so every check holds for any weights: what
// finishes must be what the constraint allows.
//
//   node openai_sdk_structured.mjs <node_modules folder> <base URL> <model> <API key>
//
// The folder holds openai and zod (scripts/fetch-tokenizers.sh). Prints "ok <step>" per passing step and
// "FAIL <step>: <why>" per failing one; exits 1 when any failed, and prints "all steps passed" otherwise.
import { pathToFileURL } from 'node:url';

const [modulesDir, baseURL, model, apiKey] = process.argv.slice(2);
if (!modulesDir || !baseURL || !model || !apiKey) {
  console.error('usage: openai_sdk_structured.mjs <node_modules folder> <base URL> <model> <API key>');
  process.exit(2);
}
const load = (path) => import(pathToFileURL(`${modulesDir}/${path}`).href);
const { default: OpenAI } = await load('openai/index.mjs');
const { zodResponseFormat } = await load('openai/helpers/zod.mjs');
const { LengthFinishReasonError } = await load('openai/error.mjs');
const { z } = await load('zod/index.js');

// No SDK retries: a 4xx or 5xx must show up as such. Node's own fetch, as in openai_sdk_e2e.mjs (why there).
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000, fetch: globalThis.fetch });
// SDK 4.x has parse() under beta; 5.x also under chat.completions.
const completions = typeof client.chat.completions.parse === 'function' ? client.chat.completions
                                                                         : client.beta.chat.completions;

let failures = 0;
async function step(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (error) {
    failures++;
    console.error(`FAIL ${name}: ${error && error.stack ? error.stack : error}`);
  }
}

function check(condition, message, detail) {
  if (!condition) throw new Error(detail === undefined ? message : `${message}: ${JSON.stringify(detail)}`);
}

// Expects `fn` to throw the SDK's BadRequestError (400) in the OpenAI envelope, whose message names `word`.
async function expectBadRequest(word, fn) {
  let thrown = null;
  try {
    await fn();
  } catch (error) {
    thrown = error;
  }
  check(thrown !== null, 'expected BadRequestError, the call succeeded');
  check(thrown instanceof OpenAI.BadRequestError, `expected BadRequestError, got ${thrown.constructor.name}`,
        String(thrown.message));
  check(thrown.status === 400, `status ${thrown.status} instead of 400`);
  check(thrown.error && typeof thrown.error.message === 'string', 'the error envelope has no message', thrown.error);
  check(thrown.error.type === 'invalid_request_error', 'error type', thrown.error);
  check(thrown.error.message.includes(word), `the message does not name ${word}`, thrown.error.message);
}

const messages = [{ role: 'user', content: 'Describe the weather in a city as JSON.' }];

// Mostly enums and booleans, so that a random model often finishes within max_tokens. A nullable boolean (or
// string, number without checks) becomes OpenAPI's {"type": ..., "nullable": true}; other nullables become
// anyOf with null.
const Weather = z.object({
  unit: z.enum(['celsius', 'fahrenheit']),
  sunny: z.boolean().nullable(),
  wind: z.enum(['calm', 'breeze', 'gale']).nullable(),
  days: z.array(z.enum(['mon', 'tue', 'wed'])),
  city: z.object({ name: z.string(), rank: z.number().int() }).nullable(),
});

await step('chat.completions.parse with a zod schema: every finished answer parses to what zod accepts', async () => {
  const attempts = 8;
  const format = zodResponseFormat(Weather, 'weather');
  check(format.type === 'json_schema' && format.json_schema.strict === true, 'zodResponseFormat', format);
  check(format.json_schema.schema.properties.sunny.nullable === true, 'OpenAPI nullable from zod', format);
  const outcomes = await Promise.all(Array.from({ length: attempts }, async (_, i) => {
    try {
      const completion = await completions.parse({
        model, messages, response_format: format, temperature: 1, seed: 100 + i, max_tokens: 120 });
      return { completion };
    } catch (error) {
      // parse() refuses an answer cut by max_tokens: nothing to check in it.
      if (error instanceof LengthFinishReasonError) return { length: true };
      throw error;
    }
  }));
  let finished = 0;
  for (const outcome of outcomes) {
    if (outcome.length) continue;
    const choice = outcome.completion.choices[0];
    check(choice.finish_reason === 'stop', 'finish_reason', choice.finish_reason);
    const parsed = choice.message.parsed;
    check(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), 'message.parsed', choice.message);
    const again = Weather.safeParse(JSON.parse(choice.message.content));
    check(again.success, 'the zod schema refuses the content', { content: choice.message.content, again });
    check(JSON.stringify(again.data) === JSON.stringify(parsed), 'parsed differs from the content', choice.message);
    finished++;
  }
  console.log(`  parse: ${finished} of ${attempts} answers finished and parsed`);
  check(finished > 0, `none of ${attempts} answers finished within max_tokens`);
});

await step('response_format json_object: finished answers are JSON objects', async () => {
  const completion = await client.chat.completions.create({
    model, messages, response_format: { type: 'json_object' }, n: 8, temperature: 1, seed: 5, max_tokens: 120 });
  check(completion.choices.length === 8, 'eight choices', completion.choices.length);
  let finished = 0;
  for (const choice of completion.choices) {
    check(['stop', 'length'].includes(choice.finish_reason), 'finish_reason', choice.finish_reason);
    if (choice.finish_reason !== 'stop') continue;
    const value = JSON.parse(choice.message.content);
    check(value !== null && typeof value === 'object' && !Array.isArray(value), 'not an object', choice.message);
    finished++;
  }
  console.log(`  json_object: ${finished} of 8 answers finished`);
  check(finished > 0, 'no json_object answer finished within max_tokens');
});

await step('a schema with a keyword llmc cannot enforce is a BadRequestError naming it', async () => {
  const tags = { type: 'array', items: { type: 'string' }, uniqueItems: true };
  const schema = { type: 'object', properties: { tags }, required: ['tags'], additionalProperties: false };
  await expectBadRequest('uniqueItems', () => client.chat.completions.create({
    model, messages, max_tokens: 8,
    response_format: { type: 'json_schema', json_schema: { name: 'tags', schema, strict: true } } }));
  // zod's sets become uniqueItems too, and parse() gets the same error.
  const setFormat = zodResponseFormat(z.object({ tags: z.set(z.string()) }), 'tags');
  await expectBadRequest('uniqueItems', () => completions.parse({
    model, messages, max_tokens: 8, response_format: setFormat }));
  // An unknown response_format type is the gateway's 400, naming the parameter.
  await expectBadRequest('structural_tag', () => client.chat.completions.create({
    model, messages, max_tokens: 8, response_format: { type: 'structural_tag' } }));
});

await step('the server still answers after the refusals', async () => {
  const completion = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
  check(completion.choices.length === 1 && typeof completion.choices[0].message.content === 'string', 'answer',
        completion);
});

if (failures > 0) {
  console.error(`${failures} step(s) failed`);
  process.exit(1);
}
console.log('all steps passed');
