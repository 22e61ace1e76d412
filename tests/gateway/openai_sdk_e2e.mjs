// End-to-end check of the gateway with the official OpenAI Node SDK (v4), run by
// tests/gateway/gateway_e2e_test.cc against a real controller, worker and gateway.
//
//   node openai_sdk_e2e.mjs <openai package folder> <base URL> <model> <API key>
//
// Prints "ok <step>" per passing step and "FAIL <step>: <why>" per failing one; exits 1 when any failed.
import { pathToFileURL } from 'node:url';

const [sdkDir, baseURL, model, apiKey] = process.argv.slice(2);
if (!sdkDir || !baseURL || !model || !apiKey) {
  console.error('usage: openai_sdk_e2e.mjs <openai package folder> <base URL> <model> <API key>');
  process.exit(2);
}
const { default: OpenAI } = await import(pathToFileURL(`${sdkDir}/index.mjs`).href);

// No SDK retries: a 429 or 5xx must show up as such, not be hidden by a second try. Node's own fetch, as the
// SDK's version 5 uses: version 4's default, node-fetch 2.7, takes the end of a chunked stream on a kept-alive
// socket for a premature close under Node 20.19 (Debian 13's), although the stream ended cleanly.
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000, fetch: globalThis.fetch });

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

function checkUsage(usage, maxCompletion) {
  check(usage && typeof usage === 'object', 'usage missing', usage);
  check(Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0, 'prompt_tokens', usage);
  check(Number.isInteger(usage.completion_tokens) && usage.completion_tokens > 0, 'completion_tokens', usage);
  check(usage.completion_tokens <= maxCompletion, `completion_tokens above ${maxCompletion}`, usage);
  check(usage.total_tokens === usage.prompt_tokens + usage.completion_tokens, 'total_tokens', usage);
}

// Expects `fn` to throw the SDK error class `errorClass` with `status`, and checks its fields.
async function expectError(errorClass, status, fn, fields = {}) {
  let thrown = null;
  try {
    await fn();
  } catch (error) {
    thrown = error;
  }
  check(thrown !== null, `expected ${errorClass.name}, the call succeeded`);
  check(thrown instanceof errorClass, `expected ${errorClass.name}, got ${thrown && thrown.constructor.name}`,
        String(thrown && thrown.message));
  check(thrown.status === status, `status ${thrown.status} instead of ${status}`);
  check(thrown.error && typeof thrown.error.message === 'string' && thrown.error.message.length > 0,
        'the error envelope has no message', thrown.error);
  check(typeof thrown.error.type === 'string' && thrown.error.type.length > 0, 'the error envelope has no type',
        thrown.error);
  for (const [key, value] of Object.entries(fields)) {
    check(thrown[key] === value, `error.${key} is ${JSON.stringify(thrown[key])}, expected ${JSON.stringify(value)}`,
          thrown.error);
  }
}

const messages = [{ role: 'user', content: 'Write one short sentence about the sea.' }];
const chatRequest = { model, messages, temperature: 0, max_tokens: 16 };
let chatText = null;
let chatUsage = null;

await step('models.list contains the model', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  check(ids.includes(model), `models.list lacks ${model}`, ids);
  for (const m of page.data) check(m.object === 'model', 'object of a model', m);
});

await step('chat non-streaming', async () => {
  const completion = await client.chat.completions.create(chatRequest);
  check(completion.object === 'chat.completion', 'object', completion.object);
  check(typeof completion.id === 'string' && completion.id.length > 0, 'id', completion.id);
  check(completion.model === model, 'model', completion.model);
  check(completion.choices.length === 1, 'one choice', completion.choices);
  const choice = completion.choices[0];
  check(choice.index === 0, 'index', choice);
  check(choice.message.role === 'assistant', 'role', choice.message);
  check(typeof choice.message.content === 'string', 'content', choice.message);
  check(['stop', 'length'].includes(choice.finish_reason), 'finish_reason', choice.finish_reason);
  checkUsage(completion.usage, 16);
  if (choice.finish_reason === 'length') check(completion.usage.completion_tokens === 16, 'length at 16', completion.usage);
  chatText = choice.message.content;
  chatUsage = completion.usage;
  check(chatText.length > 0, 'empty content from 16 greedy tokens');
});

await step('chat streaming reassembles the non-streaming text', async () => {
  const stream = await client.chat.completions.create({ ...chatRequest, stream: true });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  check(chunks.length >= 2, 'too few chunks', chunks.length);
  for (const chunk of chunks) {
    check(chunk.object === 'chat.completion.chunk', 'chunk object', chunk);
    check(chunk.id === chunks[0].id, 'one id for the whole stream', chunk.id);
  }
  check(chunks[0].choices[0].delta.role === 'assistant', 'first chunk role', chunks[0]);
  const text = chunks.map((c) => (c.choices[0] && c.choices[0].delta.content) || '').join('');
  check(text === chatText, 'streamed text differs', { streamed: text, whole: chatText });
  const last = chunks[chunks.length - 1];
  check(['stop', 'length'].includes(last.choices[0].finish_reason), 'last chunk finish_reason', last);
  for (const chunk of chunks.slice(0, -1)) check(chunk.choices[0].finish_reason === null, 'early finish', chunk);
});

await step('chat streaming with include_usage ends with a usage chunk', async () => {
  const stream = await client.chat.completions.create({
    ...chatRequest,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const last = chunks[chunks.length - 1];
  check(Array.isArray(last.choices) && last.choices.length === 0, 'usage chunk has no choices', last);
  checkUsage(last.usage, 16);
  check(JSON.stringify(last.usage) === JSON.stringify(chatUsage) ||
            (last.usage.prompt_tokens === chatUsage.prompt_tokens &&
             last.usage.completion_tokens === chatUsage.completion_tokens),
        'usage differs from the non-streaming answer', { streamed: last.usage, whole: chatUsage });
  for (const chunk of chunks.slice(0, -1)) check(chunk.usage === null, 'usage before the last chunk', chunk);
  const text = chunks.map((c) => (c.choices[0] && c.choices[0].delta.content) || '').join('');
  check(text === chatText, 'streamed text differs', { streamed: text, whole: chatText });
});

await step('completions non-streaming and streaming agree', async () => {
  const request = { model, prompt: 'The capital of France is', temperature: 0, max_tokens: 12 };
  const completion = await client.completions.create(request);
  check(completion.object === 'text_completion', 'object', completion.object);
  check(completion.choices.length === 1 && completion.choices[0].index === 0, 'choices', completion.choices);
  const whole = completion.choices[0].text;
  check(typeof whole === 'string' && whole.length > 0, 'text', completion.choices[0]);
  check(['stop', 'length'].includes(completion.choices[0].finish_reason), 'finish_reason', completion.choices[0]);
  checkUsage(completion.usage, 12);

  const stream = await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const usageChunk = chunks[chunks.length - 1];
  check(usageChunk.choices.length === 0, 'usage chunk last', usageChunk);
  check(usageChunk.usage.completion_tokens === completion.usage.completion_tokens &&
            usageChunk.usage.prompt_tokens === completion.usage.prompt_tokens,
        'usage differs', { streamed: usageChunk.usage, whole: completion.usage });
  const textChunks = chunks.slice(0, -1);
  for (const chunk of textChunks) check(chunk.object === 'text_completion', 'chunk object', chunk);
  const text = textChunks.map((c) => c.choices[0].text).join('');
  check(text === whole, 'streamed text differs', { streamed: text, whole });
  check(textChunks[textChunks.length - 1].choices[0].finish_reason === completion.choices[0].finish_reason,
        'last chunk finish_reason', textChunks[textChunks.length - 1]);
});

await step('n: 2 gives choices 0 and 1', async () => {
  const completion = await client.chat.completions.create({ model, messages, max_tokens: 8, n: 2, temperature: 1,
                                                            seed: 7 });
  const indexes = completion.choices.map((c) => c.index).sort();
  check(JSON.stringify(indexes) === '[0,1]', 'indexes', indexes);
  for (const choice of completion.choices) check(choice.message.role === 'assistant', 'role', choice);
  check(completion.usage.completion_tokens <= 16 && completion.usage.completion_tokens >= 2, 'usage over choices',
        completion.usage);

  const stream = await client.chat.completions.create({ model, messages, max_tokens: 8, n: 2, stream: true });
  const seen = new Set();
  const finished = new Set();
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      seen.add(choice.index);
      if (choice.finish_reason) finished.add(choice.index);
    }
  }
  check(seen.size === 2 && seen.has(0) && seen.has(1), 'streamed indexes', [...seen]);
  check(finished.size === 2, 'both choices finish', [...finished]);
});

await step('BadRequestError for a wrong type and a negative max_tokens', async () => {
  await expectError(OpenAI.BadRequestError, 400,
                    () => client.chat.completions.create({ model, messages, temperature: 'hot' }),
                    { param: 'temperature', type: 'invalid_request_error' });
  await expectError(OpenAI.BadRequestError, 400,
                    () => client.chat.completions.create({ model, messages, max_tokens: -1 }), { param: 'max_tokens' });
  await expectError(OpenAI.BadRequestError, 400,
                    () => client.completions.create({ model, prompt: 'x', max_tokens: -1, stream: true }),
                    { param: 'max_tokens' });
});

await step('AuthenticationError for a wrong key', async () => {
  const wrong = new OpenAI({ baseURL, apiKey: `${apiKey}-wrong`, maxRetries: 0, timeout: 30000, fetch: globalThis.fetch });
  await expectError(OpenAI.AuthenticationError, 401, () => wrong.chat.completions.create(chatRequest));
  await expectError(OpenAI.AuthenticationError, 401, () => wrong.models.list());
});

await step('NotFoundError for an unknown model', async () => {
  await expectError(OpenAI.NotFoundError, 404,
                    () => client.chat.completions.create({ ...chatRequest, model: 'no-such-model' }),
                    { code: 'model_not_found' });
  await expectError(OpenAI.NotFoundError, 404,
                    () => client.chat.completions.create({ ...chatRequest, model: 'no-such-model', stream: true }),
                    { code: 'model_not_found' });
});

if (failures > 0) {
  console.error(`${failures} step(s) failed`);
  process.exit(1);
}
console.log('all steps passed');
