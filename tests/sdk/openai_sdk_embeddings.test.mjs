// The official OpenAI JS SDK's embeddings.create against a real `lifeline serve`, and
// POST /v1/rerank (llama.cpp's / Jina's / Cohere's shape) with fetch: a small random qwen3
// embedder (mean pooling) and a reranker (a two-output classifier head) made by make-model.
//
//   - the SDK's default request (it asks for base64 and decodes it) and encoding_format
//     "float" give the same unit vectors;
//   - dimensions truncates, then normalises: equal to the first d values of the raw vector
//     (normalize: false), normalised here;
//   - an input's vector does not depend on the batch it came in;
//   - a bad input is a 400 the SDK reports with the field;
//   - a rerank ranks its documents by the scores each gets alone, cut to top_n.
//
// Run by CTest with LIFELINE_BINARY set.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startLifeline, stopLifeline } from './lifeline_server.mjs';

const BINARY = process.env.LIFELINE_BINARY;

let dir, server, client, base;

function makeModel(file, extra) {
  execFileSync(BINARY, ['make-model', '--arch', 'qwen3', '--dim', '64', '--layers', '2', '--heads', '4',
                        '--kv-heads', '2', '--ffn', '128', '--vocab', '600', '--ctx', '512', '--type', 'f32',
                        '--seed', '9', ...extra, '-o', file], { stdio: 'ignore' });
}

before(async () => {
  assert.ok(BINARY, 'LIFELINE_BINARY must be set');
  dir = mkdtempSync(path.join(os.tmpdir(), 'lifeline-sdk-embed-'));
  const emb = path.join(dir, 'emb.gguf');
  const rr = path.join(dir, 'rr.gguf');
  makeModel(emb, ['--pooling', 'mean']);
  makeModel(rr, ['--pooling', 'rank', '--rerank-outputs', '2', '--rerank-template',
                 '<|im_start|>query: {query}\ndocument: {document}<|im_end|>']);
  let port;
  ({ server, port } = await startLifeline(BINARY, ['--model', `emb=${emb}`, '--model', `rr=${rr}`,
                                                   '-t', '1', '--kv-memory', '32']));
  base = `http://127.0.0.1:${port}`;
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
});

after(async () => {
  await stopLifeline(server);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const inputs = ['the cat sat on the mat', 'a dog ran in the park after the ball', 'rain'];

async function post(route, body) {
  const r = await fetch(`${base}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                             body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}

test('the SDK default (base64) and float give the same unit vectors', async () => {
  const b64 = await client.embeddings.create({ model: 'emb', input: inputs });
  const flt = await client.embeddings.create({ model: 'emb', input: inputs, encoding_format: 'float' });
  assert.equal(b64.object, 'list');
  assert.equal(b64.data.length, inputs.length);
  assert.ok(b64.usage.prompt_tokens > inputs.length, JSON.stringify(b64.usage));
  assert.equal(b64.usage.total_tokens, b64.usage.prompt_tokens);
  for (let i = 0; i < inputs.length; ++i) {
    assert.equal(b64.data[i].index, i);
    assert.equal(b64.data[i].embedding.length, 64);
    assert.ok(Math.abs(norm(b64.data[i].embedding) - 1) < 1e-5);
    // float32 on the wire either way: the same numbers.
    for (let k = 0; k < 64; ++k) {
      assert.ok(Math.abs(b64.data[i].embedding[k] - flt.data[i].embedding[k]) < 1e-6, `input ${i} dim ${k}`);
    }
  }
  assert.ok(Math.abs(b64.data[0].embedding[0] - b64.data[1].embedding[0]) > 1e-6, 'inputs differ');
});

test('dimensions truncates the raw vector, then normalises', async () => {
  const raw = await post('/v1/embeddings', { model: 'emb', input: inputs[1], normalize: false,
                                             encoding_format: 'float' });
  assert.equal(raw.status, 200, JSON.stringify(raw.json));
  const v = raw.json.data[0].embedding;
  assert.ok(Math.abs(norm(v) - 1) > 1e-3, 'a raw mean-pooled state is not a unit vector');
  const cut = await client.embeddings.create({ model: 'emb', input: inputs[1], dimensions: 16,
                                               encoding_format: 'float' });
  const want = v.slice(0, 16);
  const n = norm(want);
  assert.equal(cut.data[0].embedding.length, 16);
  for (let k = 0; k < 16; ++k) assert.ok(Math.abs(cut.data[0].embedding[k] - want[k] / n) < 1e-5, `dim ${k}`);
});

test('an input embeds the same alone and in a batch', async () => {
  const batch = await client.embeddings.create({ model: 'emb', input: inputs, encoding_format: 'float' });
  const alone = await client.embeddings.create({ model: 'emb', input: inputs[2], encoding_format: 'float' });
  for (let k = 0; k < 64; ++k) {
    assert.ok(Math.abs(batch.data[2].embedding[k] - alone.data[0].embedding[k]) < 1e-4, `dim ${k}`);
  }
});

test('bad input is a 400 naming the field', async () => {
  await assert.rejects(client.embeddings.create({ model: 'emb', input: '' }),
                       (e) => e.status === 400 && /input/.test(e.param ?? e.message));
  await assert.rejects(client.embeddings.create({ model: 'emb', input: 'x', dimensions: 65 }),
                       (e) => e.status === 400 && /dimensions/.test(e.param ?? e.message));
  const r = await post('/v1/rerank', { model: 'emb', query: 'q', documents: ['d'] });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, 'model_not_reranker');
});

test('a rerank orders the documents by the score each gets alone', async () => {
  const docs = ['cats purr softly', 'the stock market fell', 'a kitten sleeps', 'rain on the roof'];
  const alone = [];
  for (const d of docs) {
    const r = await post('/v1/rerank', { model: 'rr', query: 'small cats', documents: [d] });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    alone.push(r.json.results[0].relevance_score);
  }
  const r = await post('/v1/rerank', { model: 'rr', query: 'small cats', documents: docs, top_n: 3,
                                       return_documents: true });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.equal(r.json.results.length, 3);
  const order = docs.map((_, i) => i).sort((a, b) => alone[b] - alone[a] || a - b).slice(0, 3);
  assert.deepEqual(r.json.results.map((x) => x.index), order);
  for (const x of r.json.results) {
    assert.ok(Math.abs(x.relevance_score - alone[x.index]) < 1e-5);
    assert.ok(x.relevance_score > 0 && x.relevance_score < 1, 'p(yes) of a softmaxed head');
    assert.equal(x.document.text, docs[x.index]);
  }
  assert.ok(r.json.usage.prompt_tokens > 0);
});
