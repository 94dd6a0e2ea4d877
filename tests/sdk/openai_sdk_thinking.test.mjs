// The official OpenAI JS SDK against a thinking model behind a real `lifeline serve`: a small
// random model on Qwen's real vocabulary served with DeepSeek R1's real chat template, whose
// generation prompt opens "<think>" (the model never closes it itself: the budget does).
//
//   - a whole answer: message.reasoning_content holds the thinking, message.content only the
//     answer (no think tags in either), usage.completion_tokens_details.reasoning_tokens
//     counts the thinking;
//   - a stream read through the SDK's iterator: delta.reasoning_content then delta.content,
//     assembling to exactly the whole answer's two fields (greedy, same body);
//   - reasoning_effort (the SDK's own parameter): "minimal" thinks not at all;
//   - a bad reasoning_effort is a 400 naming the field.
//
// Run by CTest with LIFELINE_BINARY, LIFELINE_QWEN2_VOCAB and LIFELINE_R1_TEMPLATE set.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startLifeline, stopLifeline } from './lifeline_server.mjs';

const BINARY = process.env.LIFELINE_BINARY;
const VOCAB = process.env.LIFELINE_QWEN2_VOCAB;
const TEMPLATE = process.env.LIFELINE_R1_TEMPLATE;

let dir, server, client;

before(async () => {
  assert.ok(BINARY && VOCAB && TEMPLATE, 'LIFELINE_BINARY, LIFELINE_QWEN2_VOCAB and LIFELINE_R1_TEMPLATE must be set');
  dir = mkdtempSync(path.join(os.tmpdir(), 'lifeline-sdk-thinking-'));
  const model = path.join(dir, 'r1.gguf');
  execFileSync(BINARY, ['make-model', '--dim', '64', '--layers', '1', '--heads', '2', '--ffn', '128', '--tied',
                        '--type', 'f16', '--seed', '5', '--ctx', '2048', '--vocab-from', VOCAB, '-o', model],
               { stdio: 'ignore' });
  let port;
  ({ server, port } = await startLifeline(BINARY, ['--model', `r1=${model}`, '--chat-template-file',
                                                   TEMPLATE, '-t', '1', '--kv-memory', '64']));
  client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
});

after(async () => {
  await stopLifeline(server);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// thinking_budget_tokens is a Lifeline (and llama.cpp) field: the SDK sends extra body fields
// as they are.
const body = { model: 'r1', messages: [{ role: 'user', content: 'Why is the sky blue?' }],
               max_tokens: 30, temperature: 0, thinking_budget_tokens: 8 };

const noTags = (s) => !s.includes('<think>') && !s.includes('</think>');

test('a whole answer: reasoning_content holds the thinking, content the answer', async () => {
  const r = await client.chat.completions.create(body);
  const m = r.choices[0].message;
  assert.equal(typeof m.reasoning_content, 'string');
  assert.ok(m.reasoning_content.length > 0, 'the model thought');
  assert.equal(typeof m.content, 'string');
  assert.ok(m.content.length > 0, 'an answer followed the budget');
  assert.ok(noTags(m.reasoning_content) && noTags(m.content), JSON.stringify(m));
  const reasoning = r.usage.completion_tokens_details.reasoning_tokens;
  assert.ok(reasoning >= 8 && reasoning < r.usage.completion_tokens, JSON.stringify(r.usage));
});

test('a stream through the SDK assembles to exactly the whole answer', async () => {
  const whole = (await client.chat.completions.create(body)).choices[0].message;
  const stream = await client.chat.completions.create({ ...body, stream: true });
  let reasoning = '', content = '', sawAnswerBeforeThinkingEnded = false, chunks = 0;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta || {};
    chunks++;
    if (typeof d.reasoning_content === 'string') {
      if (content.length > 0) sawAnswerBeforeThinkingEnded = true;
      reasoning += d.reasoning_content;
    }
    if (typeof d.content === 'string') content += d.content;
  }
  assert.ok(chunks > 2);
  assert.equal(reasoning, whole.reasoning_content);
  assert.equal(content, whole.content);
  assert.ok(!sawAnswerBeforeThinkingEnded, 'the thinking comes first, then the answer');
});

test('reasoning_effort minimal thinks not at all', async () => {
  const { thinking_budget_tokens, ...rest } = body;
  const r = await client.chat.completions.create({ ...rest, reasoning_effort: 'minimal' });
  const m = r.choices[0].message;
  assert.ok(!m.reasoning_content, JSON.stringify(m));
  // The prompt opened the block, so the server closes it at once: the close's few tokens are
  // all the thinking there is (reasoning_tokens counts the close).
  assert.ok((r.usage.completion_tokens_details?.reasoning_tokens ?? 0) <= 4, JSON.stringify(r.usage));
});

test('a bad reasoning_effort is a 400 naming the field', async () => {
  await assert.rejects(client.chat.completions.create({ ...body, reasoning_effort: 'extreme' }), (e) => {
    assert.equal(e.status, 400);
    assert.match(e.message, /reasoning_effort/);
    return true;
  });
});
