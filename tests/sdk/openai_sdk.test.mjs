// The official OpenAI JS SDK against a real `lifeline serve` (stories260K, a trained 260K
// llama): structured outputs, tool calls (streamed and not), logprobs, n, logit_bias,
// models.retrieve, fill-in-the-middle refusal, field validation, CORS preflight, API keys.
//
// Run by CTest (tests/CMakeLists.txt) as `node --test`, with LIFELINE_BINARY and
// LIFELINE_MODEL set; the SDK comes from tests/sdk/node_modules (scripts/test.sh installs it).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startLifeline, stopLifeline } from './lifeline_server.mjs';

const BINARY = process.env.LIFELINE_BINARY;
const MODEL_PATH = process.env.LIFELINE_MODEL;
const API_KEY = 'sk-lifeline-test';
const ORIGIN = 'http://localhost:3000';

let server;
let baseURL;
let client;

before(async () => {
  assert.ok(BINARY && MODEL_PATH, 'LIFELINE_BINARY and LIFELINE_MODEL must be set');
  let port;
  ({ server, port } = await startLifeline(BINARY, ['--model', `stories=${MODEL_PATH}`, '--cors-origin',
                                                   ORIGIN, '--api-key', API_KEY, '-t', '1']));
  baseURL = `http://127.0.0.1:${port}/v1`;
  client = new OpenAI({ baseURL, apiKey: API_KEY, maxRetries: 0, timeout: 60000 });
});

after(async () => {
  await stopLifeline(server);
});

const personSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' }, happy: { type: 'boolean' } },
  required: ['name', 'age', 'happy'],
  additionalProperties: false,
};

// The schema check written out by hand (not by the server's code).
function assertPerson(value) {
  assert.equal(typeof value, 'object');
  assert.deepEqual(Object.keys(value).sort(), ['age', 'happy', 'name']);
  assert.equal(typeof value.name, 'string');
  assert.ok(Number.isInteger(value.age), `age ${value.age}`);
  assert.equal(typeof value.happy, 'boolean');
}

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    strict: true,
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer' } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
const timeTool = {
  type: 'function',
  function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } },
};

test('models.list and models.retrieve', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ['stories']);
  const m = await client.models.retrieve('stories');
  assert.equal(m.id, 'stories');
  assert.equal(m.object, 'model');
  await assert.rejects(client.models.retrieve('nope'), (e) => e.status === 404);
});

test('chat.completions.parse with a strict json_schema gives a schema-valid object', async () => {
  const r = await client.chat.completions.parse({
    model: 'stories',
    messages: [{ role: 'user', content: 'Tell me about a person.' }],
    temperature: 0,
    max_tokens: 200,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: personSchema } },
  });
  const msg = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'stop');
  assertPerson(msg.parsed);
  assertPerson(JSON.parse(msg.content));
});

// zod's z.number().int() writes the safe-integer bounds, and .min() / .max() their own: a
// strict schema with numeric bounds is served, and the answer keeps them.
test('a strict json_schema with integer and number bounds (as zod writes them) is kept', async () => {
  const schema = {
    type: 'object',
    properties: {
      id: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
      age: { type: 'integer', minimum: 18, maximum: 99 },
      score: { type: 'number', minimum: 0, maximum: 10 },
    },
    required: ['id', 'age', 'score'],
    additionalProperties: false,
  };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.parse({
      model: 'stories',
      messages: [{ role: 'user', content: 'A record, please.' }],
      temperature: 1,
      seed,
      max_tokens: 200,
      response_format: { type: 'json_schema', json_schema: { name: 'record', strict: true, schema } },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const v = r.choices[0].message.parsed;
    assert.ok(Number.isInteger(v.id) && Math.abs(v.id) <= 9007199254740991, JSON.stringify(v));
    assert.ok(Number.isInteger(v.age) && v.age >= 18 && v.age <= 99, JSON.stringify(v));
    assert.ok(typeof v.score === 'number' && v.score >= 0 && v.score <= 10, JSON.stringify(v));
  }
});

test('json_object mode answers one JSON object (or its start, when max_tokens cuts it)', async () => {
  for (const temperature of [0, 1]) {
    const r = await client.chat.completions.create({
      model: 'stories',
      messages: [{ role: 'user', content: 'Answer in JSON.' }],
      temperature,
      seed: 7,
      max_tokens: 64,
      response_format: { type: 'json_object' },
    });
    const { content } = r.choices[0].message;
    // A 260K story model stays inside its first free-form key for long; without the grammar
    // it would not start with a brace at all.
    assert.match(content, /^\s*\{\s*"/);
    if (r.choices[0].finish_reason === 'stop') {
      const value = JSON.parse(content);
      assert.ok(typeof value === 'object' && !Array.isArray(value) && value !== null);
    } else {
      assert.equal(r.choices[0].finish_reason, 'length');
      assert.throws(() => JSON.parse(content));  // unfinished, as OpenAI reports it
    }
  }
});

test('a named tool call, not streamed', async () => {
  const r = await client.chat.completions.create({
    model: 'stories',
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    temperature: 0,
    max_tokens: 200,
    tools: [weatherTool, timeTool],
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_[A-Za-z0-9]+$/);
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.equal(typeof args.city, 'string');
  assert.ok(Number.isInteger(args.days));
});

test('a named tool call, streamed: deltas assemble into the call', async () => {
  const stream = await client.chat.completions.create({
    model: 'stories',
    messages: [{ role: 'user', content: 'What is the weather in Rome?' }],
    temperature: 0,
    max_tokens: 200,
    stream: true,
    tools: [weatherTool],
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.finish_reason) finish = c.finish_reason;
    for (const d of c.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: '', name: '', arguments: '' };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].name = d.function.name;
      calls[d.index].arguments += d.function?.arguments ?? '';
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.ok(calls[0].id.startsWith('call_'));
  const args = JSON.parse(calls[0].arguments);
  assert.equal(typeof args.city, 'string');
});

test('tool_choice required makes a call to one of the tools', async () => {
  const r = await client.chat.completions.create({
    model: 'stories',
    messages: [{ role: 'user', content: 'Help me.' }],
    temperature: 0,
    max_tokens: 200,
    tools: [weatherTool, timeTool],
    tool_choice: 'required',
    parallel_tool_calls: false,
  });
  const calls = r.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.ok(['get_weather', 'get_time'].includes(calls[0].function.name));
  JSON.parse(calls[0].function.arguments);
});

test('logprobs: the greedy token is the top alternative at every step', async () => {
  const r = await client.chat.completions.create({
    model: 'stories',
    messages: [{ role: 'user', content: 'Once upon a time' }],
    temperature: 0,
    max_tokens: 8,
    logprobs: true,
    top_logprobs: 3,
  });
  const content = r.choices[0].logprobs.content;
  assert.ok(content.length >= 1);
  for (const e of content) {
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6);
    assert.ok(e.logprob <= 0);
    for (let i = 1; i < 3; ++i) assert.ok(e.top_logprobs[i].logprob <= e.top_logprobs[i - 1].logprob);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
  }
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
});

test('n=3 gives three choices, usage counts them all', async () => {
  const r = await client.completions.create({
    model: 'stories', prompt: 'Once upon a time', max_tokens: 6, temperature: 1, n: 3, seed: 3,
  });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of r.choices) assert.ok(c.text.length > 0);
  assert.ok(r.usage.completion_tokens >= 3 && r.usage.completion_tokens <= 18);
  const chat = await client.chat.completions.create({
    model: 'stories', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, n: 3, stream: true,
  });
  const seen = new Set();
  for await (const chunk of chat) for (const c of chunk.choices) seen.add(c.index);
  assert.deepEqual([...seen].sort(), [0, 1, 2]);
});

test('logit_bias -100 on the greedy token changes it (ids through /tokenize)', async () => {
  const prompt = 'Once upon a time';
  const base = await client.completions.create({ model: 'stories', prompt, max_tokens: 1, temperature: 0, logprobs: 1 });
  const first = base.choices[0].logprobs.tokens[0];
  const tok = await fetch(baseURL.replace('/v1', '') + '/tokenize', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ content: prompt + first }),
  }).then((res) => res.json());
  const plain = await fetch(baseURL.replace('/v1', '') + '/tokenize', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ content: prompt }),
  }).then((res) => res.json());
  assert.equal(tok.tokens.length, plain.tokens.length + 1);
  const id = tok.tokens[tok.tokens.length - 1];
  const banned = await client.completions.create({
    model: 'stories', prompt, max_tokens: 1, temperature: 0, logprobs: 1, logit_bias: { [id]: -100 },
  });
  assert.notEqual(banned.choices[0].logprobs.tokens[0], first);
});

test('bad input is a 400 naming the field', async () => {
  const cases = [
    [{ logit_bias: { 999999: 5 } }, 'logit_bias.999999'],
    [{ response_format: { type: 'yaml' } }, 'response_format.type'],
    [{ tools: [{ type: 'retrieval' }] }, 'tools[0].type'],
    [{ tool_choice: { type: 'function', function: { name: 'missing' } }, tools: [weatherTool] }, 'tool_choice.function.name'],
    [{ top_logprobs: 2 }, 'top_logprobs'],
    [{ n: 17 }, 'n'],
  ];
  for (const [extra, param] of cases) {
    await assert.rejects(
      client.chat.completions.create({ model: 'stories', messages: [{ role: 'user', content: 'x' }], max_tokens: 2, ...extra }),
      (e) => e.status === 400 && e.param === param,
      JSON.stringify(extra));
  }
  await assert.rejects(
    client.completions.create({ model: 'stories', prompt: 'x', max_tokens: 2, suffix: 'y' }),
    (e) => e.status === 400 && e.param === 'suffix');  // stories260K has no FIM tokens
});

test('a browser preflight is answered', async () => {
  const res = await fetch(baseURL + '/chat/completions', {
    method: 'OPTIONS',
    headers: {
      Origin: ORIGIN,
      'Access-Control-Request-Method': 'POST',
      'Access-Control-Request-Headers': 'authorization,content-type,x-stainless-os,x-stainless-lang',
    },
  });
  assert.equal(res.status, 204);
  assert.equal(res.headers.get('access-control-allow-origin'), ORIGIN);
  const allowed = res.headers.get('access-control-allow-headers').toLowerCase();
  for (const h of ['authorization', 'content-type', 'x-stainless-os', 'x-stainless-lang']) {
    assert.ok(allowed.includes(h), `${h} in ${allowed}`);
  }
});

test('a wrong API key is a 401', async () => {
  const wrong = new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e.status === 401);
});

// POST /v1/responses through the SDK's responses API: served on the chat path, answered in
// the Responses shapes (whole and streamed), tools as function_call items, a stateless
// multi-turn input with the call's output, and unknown or stateful fields refused by name.
test('responses.create: output_text whole and streamed agree (greedy)', async () => {
  const body = { model: 'stories', input: 'Once upon a time', max_output_tokens: 12, temperature: 0 };
  const r = await client.responses.create(body);
  assert.equal(r.object, 'response');
  assert.ok(r.id.startsWith('resp_'));
  assert.ok(r.output_text.length > 0, JSON.stringify(r));
  assert.ok(['completed', 'incomplete'].includes(r.status));
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0, JSON.stringify(r.usage));
  const stream = await client.responses.create({ ...body, stream: true });
  let text = '', completed = null;
  const types = [];
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') completed = ev.response;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(completed, types.join(' '));
  assert.equal(text, r.output_text);
  assert.equal(completed.output[0].content[0].text, r.output_text);
});

test('responses.create with a required function tool answers a function_call item', async () => {
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather of a city',
                   parameters: { type: 'object', properties: { city: { type: 'string' } },
                                 required: ['city'], additionalProperties: false }, strict: true }];
  const r = await client.responses.create({ model: 'stories', input: 'Weather in Paris?', tools,
                                            tool_choice: 'required', parallel_tool_calls: false,
                                            max_output_tokens: 200,
                                            temperature: 0 });
  const call = r.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.arguments).city, 'string');
  // The next turn, stateless: the call and its output go back in `input`.
  const next = await client.responses.create({
    model: 'stories', max_output_tokens: 8, temperature: 0, tools,
    input: [{ role: 'user', content: 'Weather in Paris?' }, call,
            { type: 'function_call_output', call_id: call.call_id, output: '{"sky":"blue"}' }] });
  assert.ok(next.output_text.length > 0, JSON.stringify(next.output));
});

test('responses.create refuses what it cannot do, naming the field', async () => {
  await assert.rejects(client.responses.create({ model: 'stories', input: 'x', previous_response_id: 'resp_1' }),
                       (e) => e.status === 400 && /previous_response_id/.test(e.message));
  await assert.rejects(client.responses.create({ model: 'stories', input: [{ type: 'image', url: 'u' }] }),
                       (e) => e.status === 400 && /input\[0\]\.type/.test(e.message));
});

// POST /v1/messages through Anthropic's official SDK (@anthropic-ai/sdk): served on the chat
// path, answered in Anthropic's shapes, whole and streamed, with a tool_use round trip.
test('anthropic messages.create: text whole and streamed agree, tool_use round trip', async () => {
  const { default: Anthropic } = await import('@anthropic-ai/sdk');
  // The key goes as Anthropic's clients send it: x-api-key.
  const anthropic = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ''), apiKey: API_KEY,
                                    maxRetries: 0, timeout: 60000 });
  const body = { model: 'stories', max_tokens: 12, temperature: 0, system: 'Tell stories.',
                 messages: [{ role: 'user', content: 'Once upon a time' }] };
  const m = await anthropic.messages.create(body);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  const text = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  assert.ok(text.length > 0, JSON.stringify(m));
  assert.ok(m.usage.input_tokens > 0 && m.usage.output_tokens > 0);
  const stream = anthropic.messages.stream(body);
  let streamed = '';
  stream.on('text', (t) => { streamed += t; });
  const final = await stream.finalMessage();
  assert.equal(streamed, text);
  assert.equal(final.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), text);

  const tools = [{ name: 'get_weather', description: 'Weather of a city',
                   input_schema: { type: 'object', properties: { city: { type: 'string' } },
                                   required: ['city'], additionalProperties: false } }];
  const call = await anthropic.messages.create({
    model: 'stories', max_tokens: 200, temperature: 0, tools,
    tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  const use = call.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(call.content));
  assert.equal(use.name, 'get_weather');
  assert.equal(typeof use.input.city, 'string');
  assert.equal(call.stop_reason, 'tool_use');
  const next = await anthropic.messages.create({
    model: 'stories', max_tokens: 8, temperature: 0, tools,
    messages: [{ role: 'user', content: 'Weather in Paris?' },
               { role: 'assistant', content: call.content },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] }] });
  assert.ok(next.content.some((b) => b.type === 'text'), JSON.stringify(next.content));
  await assert.rejects(anthropic.messages.create({ model: 'stories', messages: [{ role: 'user', content: 'x' }] }),
                       (e) => e.status === 400 && /max_tokens/.test(e.message));
});
