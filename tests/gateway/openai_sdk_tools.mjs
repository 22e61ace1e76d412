// Tool calling, reasoning and the Responses API through the gateway with the official OpenAI Node SDK (v4)
// and zod, run by tests/gateway/tool_calling_cluster_test.cc against a real controller, worker and gateway
// serving the small random-weight model (Qwen3's tokenizer and template: hermes tool calls, <think>
// reasoning). It cannot follow instructions, so every check holds for any weights: tool_choice "required"
// or a named tool constrains the answer to calls in the model's syntax, so whatever finishes is calls whose
// arguments the tool's schema accepts; streamed answers equal non-streamed ones for the same seed.
//
//   node openai_sdk_tools.mjs <node_modules folder> <base URL> <model> <API key>
//
// The folder holds openai and zod (scripts/fetch-tokenizers.sh). Prints "ok <step>" per passing step and
// "FAIL <step>: <why>" per failing one; exits 1 when any failed, and prints "all steps passed" otherwise.
import { pathToFileURL } from 'node:url';

const [modulesDir, baseURL, model, apiKey] = process.argv.slice(2);
if (!modulesDir || !baseURL || !model || !apiKey) {
  console.error('usage: openai_sdk_tools.mjs <node_modules folder> <base URL> <model> <API key>');
  process.exit(2);
}
const load = (path) => import(pathToFileURL(`${modulesDir}/${path}`).href);
const { default: OpenAI } = await load('openai/index.mjs');
const { zodFunction } = await load('openai/helpers/zod.mjs');
const { z } = await load('zod/index.js');

// No SDK retries: a 4xx or 5xx must show up as such. Node's own fetch, as in openai_sdk_e2e.mjs (why there).
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000, fetch: globalThis.fetch });

let failures = 0;
async function step(name, fn) {
  const started = Date.now();
  try {
    await fn();
    console.log(`ok ${name} (${Date.now() - started} ms)`);
  } catch (error) {
    failures++;
    console.error(`FAIL ${name}: ${error && error.stack ? error.stack : error}`);
    if (error && error.error) console.error(`  error body: ${JSON.stringify(error.error)}`);
  }
}

function check(condition, message, detail) {
  if (!condition) throw new Error(detail === undefined ? message : `${message}: ${JSON.stringify(detail)}`);
}

// Expects `fn` to throw the SDK's BadRequestError (400) in the OpenAI envelope with `param`, whose message
// names `word`.
async function expectBadRequest(param, word, fn) {
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
  check(thrown.param === param, `param ${thrown.param} instead of ${param}`, thrown.error);
  check(thrown.error.message.includes(word), `the message does not name ${word}`, thrown.error.message);
}

// Small argument schemas (enums, a bounded integer, a short string), so that a random model often finishes
// a call within max_tokens. .strict(): zod refuses members the schema does not list, as the JSON schema
// (additionalProperties: false) does.
const Cities = ['Paris', 'Tokyo', 'Lima'];
const Weather = z.object({ city: z.enum(Cities), unit: z.enum(['celsius', 'fahrenheit']) }).strict();
const Forecast = z.object({
  city: z.enum(Cities),
  days: z.number().int().min(1).max(7),
  note: z.string().max(12),
}).strict();
// JSON Schema counts a string's length in code points, zod's max() in UTF-16 units (an emoji is two): the
// check counts code points, as the grammar does.
const ForecastCheck = Forecast.extend({
  note: z.string().refine((text) => [...text].length <= 12, 'at most 12 code points'),
}).strict();
const schemas = { get_weather: Weather, get_forecast: ForecastCheck };
const weatherTool = zodFunction({ name: 'get_weather', parameters: Weather, description: 'The weather in a city' });
const forecastTool = zodFunction({ name: 'get_forecast', parameters: Forecast, description: 'A forecast' });
const tools = [weatherTool, forecastTool];
const messages = [{ role: 'user', content: 'What is the weather in Paris? Use the tools.' }];

// The tool-call arguments this test's tools accept (a JSON object per the tool's zod schema).
function checkArguments(name, argumentsText) {
  check(typeof argumentsText === 'string', 'arguments is not a string', argumentsText);
  let value;
  try {
    value = JSON.parse(argumentsText);
  } catch (error) {
    throw new Error(`arguments of ${name} are not JSON: ${JSON.stringify(argumentsText)}`);
  }
  check(schemas[name] !== undefined, 'a call of an unknown tool', name);
  const parsed = schemas[name].safeParse(value);
  check(parsed.success, `the schema of ${name} refuses the arguments`, { argumentsText, issues: parsed.error?.issues });
  return value;
}

// The model's format allows a reasoning block before the calls, whose text the grammar leaves free: a random
// model that opens one rarely closes it, so sampled answers are often cut by max_tokens and only some finish.
// Where an answer must finish (runTools, greedy comparisons), separate_reasoning: false (SGLang's) leaves the
// reasoning block out of the grammar, and the calls, of enums and a bounded integer, always finish.
const noReasoning = { separate_reasoning: false };

// One chat choice of a forced tool choice: calls whose arguments validate, no content; returns whether the
// choice finished (not cut by max_tokens). `names`: the tools it may call; `maxCalls`: at most this many.
function checkForcedChoice(choice, names, maxCalls, finishReasons = ['tool_calls']) {
  const message = choice.message;
  check([...finishReasons, 'length'].includes(choice.finish_reason), 'finish_reason', choice);
  const calls = message.tool_calls ?? [];
  const ids = new Set();
  for (const call of calls) {
    check(call.type === 'function', 'call type', call);
    check(typeof call.id === 'string' && call.id.length > 0 && !ids.has(call.id), 'call id (unique)', calls);
    ids.add(call.id);
    check(names.includes(call.function.name), `a call of ${call.function.name}, not one of ${names}`, call);
    checkArguments(call.function.name, call.function.arguments);
  }
  check(calls.length <= maxCalls, `more than ${maxCalls} call(s)`, calls);
  if (choice.finish_reason === 'length') return false;
  check(calls.length >= 1, 'a finished answer without tool calls', choice);
  // The grammar allows only a reasoning block before the calls: no other content.
  check(message.content === null || message.content.trim() === '', 'content beside forced calls', message);
  return true;
}

async function forcedChoices(body, names, maxCalls, finishReasons) {
  const completion = await client.chat.completions.create(body);
  check(completion.choices.length === (body.n ?? 1), 'number of choices', completion.choices.length);
  let finished = 0;
  for (const choice of completion.choices) finished += checkForcedChoice(choice, names, maxCalls, finishReasons);
  return { finished, total: completion.choices.length, completion };
}

// ---------------------------------------------------------------------------------------------------------
// Chat Completions

await step('tool_choice required: finished answers are calls of the tools whose arguments validate', async () => {
  const base = { model, messages, tools, tool_choice: 'required', max_tokens: 300 };
  const [sampled, greedy] = await Promise.all([
    forcedChoices({ ...base, n: 8, temperature: 1, seed: 7 }, ['get_weather', 'get_forecast'], Infinity),
    forcedChoices({ ...base, ...noReasoning, temperature: 0 }, ['get_weather', 'get_forecast'], Infinity),
  ]);
  const finished = sampled.finished + greedy.finished;
  console.log(`  required: ${finished} of ${sampled.total + greedy.total} answers finished`);
  check(finished > 0, 'no answer finished within max_tokens');
});

await step('parallel_tool_calls false: at most one call per answer', async () => {
  const { finished, total } = await forcedChoices(
      { model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, n: 6, temperature: 1, seed: 8,
        max_tokens: 300 },
      ['get_weather', 'get_forecast'], 1);
  console.log(`  parallel_tool_calls false: ${finished} of ${total} answers finished`);
  check(finished > 0, 'no answer finished within max_tokens');
});

await step('a named tool_choice: every call is of that tool, one per answer', async () => {
  const { finished, total } = await forcedChoices(
      { model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_forecast' } }, n: 4,
        temperature: 1, seed: 9, max_tokens: 300 },
      ['get_forecast'], 1, ['tool_calls', 'stop']);
  console.log(`  named: ${finished} of ${total} answers finished`);
  check(finished > 0, 'no answer finished within max_tokens');
});

// Reassembles a streamed chat answer per choice, as OpenAI streams tool calls: the first delta of an index
// carries id, type "function" and function.name; later ones only function.arguments fragments.
async function streamedChoices(body) {
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const choices = [];
  for await (const chunk of stream) {
    check(chunk.object === 'chat.completion.chunk', 'chunk object', chunk);
    for (const part of chunk.choices) {
      const choice = choices[part.index] ??= { content: null, reasoning: null, tool_calls: [], finish_reason: null };
      check(choice.finish_reason === null, 'a delta after the finish reason', chunk);
      const delta = part.delta ?? {};
      if (typeof delta.content === 'string') choice.content = (choice.content ?? '') + delta.content;
      if (typeof delta.reasoning_content === 'string') {
        choice.reasoning = (choice.reasoning ?? '') + delta.reasoning_content;
      }
      for (const entry of delta.tool_calls ?? []) {
        check(Number.isInteger(entry.index), 'tool call delta without an index', entry);
        const call = choice.tool_calls[entry.index];
        if (call === undefined) {
          check(entry.index === choice.tool_calls.length, 'tool call indexes out of order', chunk);
          check(typeof entry.id === 'string' && entry.id.length > 0, 'the first delta of a call has no id', entry);
          check(entry.type === 'function', 'the first delta of a call has no type "function"', entry);
          check(typeof entry.function?.name === 'string' && entry.function.name.length > 0,
                'the first delta of a call has no name', entry);
          choice.tool_calls[entry.index] = {
            id: entry.id, type: 'function',
            function: { name: entry.function.name, arguments: entry.function.arguments ?? '' },
          };
        } else {
          check(entry.id === undefined && entry.function?.name === undefined, 'a later delta repeats id or name', entry);
          check(typeof entry.function?.arguments === 'string', 'a later delta without arguments', entry);
          call.function.arguments += entry.function.arguments;
        }
      }
      if (part.finish_reason) choice.finish_reason = part.finish_reason;
    }
  }
  return choices;
}

function sameAnswer(streamed, whole, what) {
  const message = whole.message;
  check(streamed.finish_reason === whole.finish_reason, `${what}: finish_reason`, { streamed, whole });
  check((streamed.content ?? '') === (message.content ?? ''), `${what}: content`, { streamed, whole });
  check((streamed.reasoning ?? '') === (message.reasoning_content ?? ''), `${what}: reasoning`, { streamed, whole });
  const calls = message.tool_calls ?? [];
  check(streamed.tool_calls.length === calls.length, `${what}: number of calls`, { streamed, whole });
  for (let i = 0; i < calls.length; ++i) {
    // Ids are drawn per request; names and arguments are the model's.
    check(streamed.tool_calls[i].function.name === calls[i].function.name, `${what}: call name`, { streamed, whole });
    check(streamed.tool_calls[i].function.arguments === calls[i].function.arguments, `${what}: call arguments`,
          { streamed, whole });
  }
}

await step('streamed tool calls reassembled equal the non-streamed answer (greedy and seeded)', async () => {
  const bodies = [
    { model, messages, tools, tool_choice: 'required', ...noReasoning, temperature: 0, max_tokens: 300 },
    { model, messages, tools, tool_choice: 'required', n: 3, temperature: 1, seed: 21, max_tokens: 300 },
    { model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 1,
      seed: 22, max_tokens: 300 },
  ];
  let finished = 0;
  for (const [k, body] of bodies.entries()) {
    const [whole, streamed] = await Promise.all([client.chat.completions.create(body), streamedChoices(body)]);
    check(streamed.length === whole.choices.length, 'number of streamed choices', streamed.length);
    for (const [i, choice] of whole.choices.entries()) {
      sameAnswer(streamed[i], choice, `request ${k} choice ${i}`);
      if (choice.finish_reason !== 'length') {
        finished++;
        for (const call of streamed[i].tool_calls) checkArguments(call.function.name, call.function.arguments);
      }
    }
  }
  console.log(`  streaming: ${finished} of 5 answers finished`);
  check(finished > 0, 'no answer finished within max_tokens');
});

await step('runTools: the SDK calls the function and sends its result back (two completions)', async () => {
  const seen = [];
  const runner = client.beta.chat.completions.runTools({
    model, messages, ...noReasoning, temperature: 0, max_tokens: 200, tool_choice: 'required', parallel_tool_calls: false,
    tools: [zodFunction({
      name: 'get_weather', parameters: Weather, function: (args) => {
        seen.push(args);
        return { city: args.city, temperature: 21, unit: args.unit };
      },
    })],
  }, { maxChatCompletions: 2 });
  await runner.done();
  const completions = runner.allChatCompletions();
  const sent = runner.messages;
  const detail = { messages: sent, finish: completions.map((c) => c.choices[0].finish_reason) };
  check(completions.length >= 1, 'no completion', detail);
  check(seen.length >= 1, 'the tool function was never called (the first answer did not finish)', detail);
  for (const args of seen) check(Weather.safeParse(args).success, 'the function got arguments zod refuses', args);
  // Every tool message is the function's result (an argument the SDK could not parse would be an error text).
  const toolMessages = sent.filter((message) => message.role === 'tool');
  check(toolMessages.length === seen.length, 'tool messages', detail);
  for (const message of toolMessages) check(JSON.parse(message.content).temperature === 21, 'tool result', message);
  // The first answer called the tool, so the SDK sent a second request holding the call and its result.
  check(completions.length === 2, 'the second completion (with the tool result) did not happen', detail);
  console.log(`  runTools: ${completions.length} completions, ${seen.length} function call(s)`);
});

await step('a manual round trip: assistant tool_calls and a tool message are accepted', async () => {
  const first = await client.chat.completions.create({
    model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, ...noReasoning,
    parallel_tool_calls: false, temperature: 0, max_tokens: 200 });
  const message = first.choices[0].message;
  // A hand-written call when the model's was cut short, so that the second turn always runs.
  const call = message.tool_calls?.[0] ??
      { id: 'call_manual1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' } };
  const second = await client.chat.completions.create({
    model, tools, tool_choice: 'auto', temperature: 0, max_tokens: 8,
    messages: [
      ...messages,
      { role: 'assistant', content: message.content ?? null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' },
    ] });
  check(second.choices.length === 1 && second.choices[0].message.role === 'assistant', 'second answer', second);
  check(second.usage.prompt_tokens > first.usage.prompt_tokens, 'the second prompt is not longer', second.usage);
});

// ---------------------------------------------------------------------------------------------------------
// Responses API

const weatherParameters = weatherTool.function.parameters;
const responsesTools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city',
                          parameters: weatherParameters, strict: true }];

function checkResponseEnvelope(response) {
  check(response.object === 'response', 'object', response);
  check(typeof response.id === 'string' && response.id.startsWith('resp_'), 'id', response.id);
  check(['completed', 'incomplete'].includes(response.status), 'status', response);
  if (response.status === 'incomplete') {
    check(response.incomplete_details?.reason === 'max_output_tokens', 'incomplete_details', response);
  }
  check(Array.isArray(response.output) && response.output.length > 0, 'output', response);
  check(response.store === false, 'store', response.store);
  check(response.usage && response.usage.output_tokens > 0 && response.usage.input_tokens > 0, 'usage', response.usage);
}

// The text of a response's message items.
function messageText(response) {
  return response.output.filter((item) => item.type === 'message')
      .flatMap((item) => item.content).filter((part) => part.type === 'output_text').map((part) => part.text).join('');
}

await step('responses.create with text input: a message with output_text', async () => {
  const response = await client.responses.create({
    model, input: 'Tell me about the sea.', max_output_tokens: 16, temperature: 0 });
  checkResponseEnvelope(response);
  check(response.usage.output_tokens <= 16, 'more output tokens than max_output_tokens', response.usage);
  const message = response.output.find((item) => item.type === 'message');
  check(message !== undefined, 'no message item', response.output);
  check(message.role === 'assistant' && typeof message.id === 'string', 'message item', message);
  check(message.content.length >= 1 && message.content[0].type === 'output_text', 'output_text part', message);
  check(typeof message.content[0].text === 'string', 'output_text text', message);
  // The SDK's output_text joins the message items' text.
  check(response.output_text === messageText(response), 'output_text', response);
  check(response.model === model, 'model', response.model);
  // With instructions, as a system message.
  const instructed = await client.responses.create({
    model, instructions: 'Answer briefly.', input: [{ role: 'user', content: 'Hello' }], max_output_tokens: 4 });
  checkResponseEnvelope(instructed);
  check(instructed.instructions === 'Answer briefly.', 'instructions echoed', instructed.instructions);
});

// A Responses answer to tool_choice required: function_call items whose arguments validate; returns whether
// it finished.
function checkForcedResponse(response) {
  checkResponseEnvelope(response);
  const calls = response.output.filter((item) => item.type === 'function_call');
  for (const call of calls) {
    check(call.name === 'get_weather', 'call name', call);
    check(typeof call.call_id === 'string' && call.call_id.length > 0, 'call_id', call);
    checkArguments(call.name, call.arguments);
  }
  for (const item of response.output) {
    check(['function_call', 'reasoning', 'message'].includes(item.type), 'output item type', item);
    if (item.type === 'message') check(messageText({ output: [item] }).trim() === '', 'text beside calls', item);
    // The reasoning block the grammar allows before the calls comes back as a reasoning item.
    if (item.type === 'reasoning') {
      check(Array.isArray(item.content) && item.content.length > 0 &&
                item.content.every((part) => part.type === 'reasoning_text' && typeof part.text === 'string'),
            'reasoning item content', item);
    }
  }
  if (response.status !== 'completed') return false;
  check(calls.length >= 1, 'a completed response without a function_call', response.output);
  return true;
}

await step('responses.create with tool_choice required: function_call items whose arguments validate', async () => {
  const responses = await Promise.all([31, 32, 33, 34, 35, 36, 37, 38].map((seed) => client.responses.create({
    model, input: 'What is the weather in Paris?', tools: responsesTools, tool_choice: 'required',
    temperature: 1, seed, max_output_tokens: 200 })));
  let finished = 0;
  for (const response of responses) finished += checkForcedResponse(response);
  console.log(`  responses required: ${finished} of ${responses.length} finished`);
  check(finished > 0, 'no response finished within max_output_tokens');
});

await step('responses.create with reasoning, function_call and function_call_output input items', async () => {
  const response = await client.responses.create({
    model, tools: responsesTools, max_output_tokens: 8, temperature: 0,
    input: [
      { role: 'user', content: 'What is the weather in Paris?' },
      { type: 'reasoning', id: 'rs_weather1', summary: [],
        content: [{ type: 'reasoning_text', text: 'The user wants the weather.' }] },
      { type: 'function_call', call_id: 'call_weather1', name: 'get_weather',
        arguments: '{"city":"Paris","unit":"celsius"}' },
      { type: 'function_call_output', call_id: 'call_weather1', output: '{"temperature": 21}' },
    ] });
  checkResponseEnvelope(response);
  // The tool output is in the prompt: longer than the question alone.
  const alone = await client.responses.create({
    model, tools: responsesTools, max_output_tokens: 1, input: 'What is the weather in Paris?' });
  check(response.usage.input_tokens > alone.usage.input_tokens + 10, 'the call and its output are not in the prompt',
        { with: response.usage, without: alone.usage });
});

// Reads a responses.stream() to its end: the events in order, and the SDK's final response.
async function streamEvents(body) {
  const stream = client.responses.stream(body);
  const events = [];
  for await (const event of stream) events.push(event);
  const final = await stream.finalResponse();
  return { events, final };
}

function checkEventOrder(events) {
  const types = events.map((event) => event.type);
  check(types[0] === 'response.created', 'the first event', types);
  check(types[1] === 'response.in_progress', 'the second event', types);
  const last = types[types.length - 1];
  check(last === 'response.completed' || last === 'response.incomplete', 'the last event', types);
  for (let i = 0; i < events.length; ++i) {
    check(Number.isInteger(events[i].sequence_number), 'sequence_number', events[i]);
    if (i > 0) check(events[i].sequence_number > events[i - 1].sequence_number, 'sequence_number decreased', types);
  }
  check(types.filter((type) => type === 'response.created').length === 1, 'one response.created', types);
  const added = types.filter((type) => type === 'response.output_item.added').length;
  const done = types.filter((type) => type === 'response.output_item.done').length;
  check(added >= 1 && added === done, 'output_item.added and .done pair up', types);
  return events[events.length - 1].response;
}

await step('responses.stream: event order, sequence numbers, deltas equal the non-streamed text', async () => {
  const body = { model, input: 'Tell me about the sea.', max_output_tokens: 24, temperature: 0 };
  const [{ events, final }, whole] = await Promise.all([streamEvents(body), client.responses.create(body)]);
  const last = checkEventOrder(events);
  check(last.status === whole.status, 'the last event\'s status', { last, whole });
  const deltas = events.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta);
  check(deltas.join('') === messageText(whole), 'streamed text differs from the non-streamed', { deltas, whole });
  const textDone = events.filter((event) => event.type === 'response.output_text.done');
  check(textDone.length >= 1 && textDone.map((event) => event.text).join('') === deltas.join(''),
        'output_text.done text', textDone);
  check(messageText(final) === messageText(whole), 'the SDK\'s final response text', final);
  check(messageText(last) === messageText(whole), 'the last event\'s response text', last);
});

await step('responses.stream with tool_choice required: function_call_arguments events', async () => {
  let finished = 0;
  for (const seed of [41, 42, 43]) {
    const body = { model, input: 'What is the weather in Paris?', tools: responsesTools, tool_choice: 'required',
                   temperature: 1, seed, max_output_tokens: 200 };
    const [{ events }, whole] = await Promise.all([streamEvents(body), client.responses.create(body)]);
    const last = checkEventOrder(events);
    if (checkForcedResponse(last)) finished++;
    const doneEvents = events.filter((event) => event.type === 'response.function_call_arguments.done');
    for (const done of doneEvents) {
      const fragments = events.filter((event) => event.type === 'response.function_call_arguments.delta' &&
                                                 event.item_id === done.item_id).map((event) => event.delta);
      check(fragments.join('') === done.arguments, 'arguments deltas differ from .done', { fragments, done });
      checkArguments('get_weather', done.arguments);
    }
    const streamedCalls = last.output.filter((item) => item.type === 'function_call');
    const wholeCalls = whole.output.filter((item) => item.type === 'function_call');
    check(streamedCalls.length === doneEvents.length, 'a function_call without arguments.done', events);
    check(JSON.stringify(streamedCalls.map((c) => [c.name, c.arguments])) ===
              JSON.stringify(wholeCalls.map((c) => [c.name, c.arguments])),
          'streamed calls differ from the non-streamed', { streamedCalls, wholeCalls });
  }
  console.log(`  responses stream required: ${finished} of 3 finished`);
  check(finished > 0, 'no streamed response finished within max_output_tokens');
});

await step('responses: store true is a BadRequestError (this server keeps no responses)', async () => {
  await expectBadRequest('store', 'store', () => client.responses.create({
    model, input: 'Hello', max_output_tokens: 4, store: true }));
  await expectBadRequest('previous_response_id', 'previous_response_id', () => client.responses.create({
    model, input: 'Hello', max_output_tokens: 4, previous_response_id: 'resp_0123' }));
  // store false (or left out, above) is served.
  const response = await client.responses.create({ model, input: 'Hello', max_output_tokens: 4, store: false });
  checkResponseEnvelope(response);
});

await step('chat errors: an unknown named tool and tool_choice required without tools', async () => {
  await expectBadRequest('tool_choice.function.name', 'get_time', () => client.chat.completions.create({
    model, messages, tools, max_tokens: 4, tool_choice: { type: 'function', function: { name: 'get_time' } } }));
  await expectBadRequest('tool_choice', 'tools', () => client.chat.completions.create({
    model, messages, max_tokens: 4, tool_choice: 'required' }));
});

if (failures > 0) {
  console.error(`${failures} step(s) failed`);
  process.exit(1);
}
console.log('all steps passed');
