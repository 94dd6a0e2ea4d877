// The soak's client (scripts/soak.sh runs it): an open-loop mixed load at a fixed rate against
// `lifeline serve`, over raw TCP so malformed, over-limit and half-closed requests are
// possible, that keeps its own books of every request and at the end reconciles them with each
// server's ledger on /metrics. Node's standard library only.
//
//   node scripts/soak-client.mjs --url http://127.0.0.1:8080 --rate 4 --duration-s 600 \
//        [--model NAME] [--remote-model NAME --upstream-url URL] \
//        [--reason-url URL --reason-model NAME] [--out client.json]
//
// Kinds, in a fixed cycle of 32 arrivals:
//   normal (6): a non-streamed completion and chat answer on one keep-alive connection;
//   streamed (5): chat SSE to [DONE];
//   cancelled (3): closed after the first SSE event of a long stream;
//   slow (2): a stream read a few hundred bytes at a time with pauses;
//   malformed (2): bad JSON, a smuggling Transfer-Encoding, a broken request line, a request
//     cut off mid-header;
//   overlimit (2): body over max_body_bytes, headers over 16 KiB, max_tokens over the cap,
//     n over 16;
//   halfclose (2): a complete request, then the client shuts its write side (keep-alive,
//     Connection: close, HTTP/1.0, streamed); the answer must still come whole (the server
//     may probe with a `100 Continue` or an SSE comment, which a client must accept);
//   multiturn (3): chat with a system / user / assistant / user history, streamed and not;
//   reasoning (3, with --reason-url): chat against a server whose model has DeepSeek R1's
//     template, with `thinking_budget_tokens` or `reasoning_effort`, streamed and not; a
//     completed answer must carry `reasoning_content` (whole) or `delta.reasoning_content`
//     (streamed), and none with a budget of 0;
//   remote (4, with --remote-model): requests to a remote cascade member relayed to
//     scripts/soak-upstream.mjs, which misbehaves as each request asks (correct, slow,
//     streams past max_tokens, stalls, hangs past the remote timeout, malformed SSE, closes
//     mid-stream, HTTP 500; one stream the client cancels): each must end in the one outcome
//     the misbehaviour dictates (completed, an error event or a 502 upstream_error naming the
//     cause, cancelled), an endless stream stopped at max_tokens, the server's remote ledger
//     equal to the client's, the upstream called once per request and left with no
//     connection open, every stream the relay stopped closed by it.
// Without --reason-url / --remote-model their arrivals are normal ones.
// Exit status 0 when the books agree and every kind's check passes, 1 when not.
import net from 'node:net';
import fs from 'node:fs';

function parseArgs(argv) {
  const a = { url: 'http://127.0.0.1:8080', rate: 4, durationS: 60, model: '', out: '',
              remoteModel: '', upstreamUrl: '', reasonUrl: '', reasonModel: '' };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (k === '--url') a.url = v;
    else if (k === '--rate') a.rate = Number(v);
    else if (k === '--duration-s') a.durationS = Number(v);
    else if (k === '--model') a.model = v;
    else if (k === '--out') a.out = v;
    else if (k === '--remote-model') a.remoteModel = v;
    else if (k === '--upstream-url') a.upstreamUrl = v;
    else if (k === '--reason-url') a.reasonUrl = v;
    else if (k === '--reason-model') a.reasonModel = v;
    else throw new Error(`unknown flag ${k}`);
  }
  if (!(a.rate > 0) || !(a.durationS > 0)) throw new Error('--rate and --duration-s must be > 0');
  return a;
}

const args = parseArgs(process.argv);

// The client's books, one per server. `accepted`: generation requests the server took into
// its engine (a 200 head arrived, or a 502 upstream_error: a remote member's failure after
// acceptance). Outcomes of accepted requests: completed (whole body / [DONE]), cancelled (we
// closed first), error_event (a terminal SSE error), error_response (a 502 upstream_error),
// cut (the server closed the stream without [DONE] or an error event). `status`: every HTTP
// status we read, by code; `interim`: 1xx interim responses (not counted by the server).
function newBooks() {
  return {
    accepted: 0, completed: 0, cancelled: 0, error_event: 0, error_response: 0, cut: 0,
    status: {}, interim: 0, errors: {}, error_examples: {}, no_response: 0, connect_errors: 0,
    max_in_flight: 0,
  };
}
function newTarget(name, url) {
  const u = new URL(url);
  return { name, host: u.hostname, port: Number(u.port || 80), books: newBooks(), inFlight: 0 };
}
const main = newTarget('main', args.url);
const reason = args.reasonUrl ? newTarget('reason', args.reasonUrl) : null;
const targets = reason ? [main, reason] : [main];

// Arrivals by kind, and the checks of each new kind: per kind, requests by expected and
// actual outcome, and every mismatch (the first few kept as examples).
const sent = {};
const kindBooks = {};
const count = (obj, key, n = 1) => { obj[key] = (obj[key] || 0) + n; };
function kindBook(kind) {
  if (!kindBooks[kind]) kindBooks[kind] = { outcomes: {}, unexpected: 0, examples: [] };
  return kindBooks[kind];
}
// Records that a request of `kind`, variant `variant`, ended in `actual` (expected:
// `expected`); `problem`, when set, is a failed content check (missing reasoning, ...).
function expect(kind, variant, expected, actual, problem = '') {
  const kb = kindBook(kind);
  count(kb.outcomes, `${variant}: ${actual}`);
  if (actual !== expected || problem) {
    kb.unexpected++;
    if (kb.examples.length < 8) {
      kb.examples.push({ variant, expected, actual, ...(problem ? { problem } : {}) });
    }
  }
}

function modelField(t = main) {
  if (t === reason) return args.reasonModel ? { model: args.reasonModel } : {};
  return args.model ? { model: args.model } : {};
}

// Every request says Connection: close unless `keepAlive` (the first of a keep-alive pair), so
// no connection waits for the server's idle timeout.
function request(t, method, path, body, extraHeaders = '', contentType = 'application/json',
                 keepAlive = false, version = '1.1') {
  const b = body === undefined ? '' : body;
  let head = `${method} ${path} HTTP/${version}\r\nHost: ${t.host}:${t.port}\r\n`;
  if (!keepAlive && version === '1.1' && !extraHeaders.includes('Connection:')) {
    head += 'Connection: close\r\n';
  }
  if (contentType) head += `Content-Type: ${contentType}\r\n`;
  if (method === 'POST') head += `Content-Length: ${Buffer.byteLength(b)}\r\n`;
  return head + extraHeaders + '\r\n' + b;
}

// One connection to target `t`: writes `payload` (then shuts the write side when
// `halfClose`), hands every received chunk to `onData(buf, socket, finish)`, resolves with
// everything received when the server closes (or `finish()` is called).
function exchange(t, payload, onData, timeoutMs = 120000, halfClose = false) {
  return new Promise((resolve) => {
    const chunks = [];
    let settled = false;
    t.inFlight++;
    t.books.max_in_flight = Math.max(t.books.max_in_flight, t.inFlight);
    const sock = net.connect({ host: t.host, port: t.port, allowHalfOpen: true });
    const finish = (why) => {
      if (settled) return;
      settled = true;
      t.inFlight--;
      clearTimeout(timer);
      sock.destroy();
      resolve({ data: Buffer.concat(chunks), why });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    sock.on('connect', () => { sock.write(payload); if (halfClose) sock.end(); });
    sock.on('data', (buf) => {
      chunks.push(buf);
      if (onData) onData(Buffer.concat(chunks), sock, finish);
    });
    sock.on('end', () => finish('end'));
    sock.on('close', () => finish('close'));
    sock.on('error', (e) => { if (!chunks.length) t.books.connect_errors++; finish('error'); });
  });
}

// Splits a raw byte stream into HTTP responses (Content-Length or chunked bodies). 1xx
// interim responses are dropped and counted in the result's `interim`.
function parseResponses(buf) {
  const out = [];
  out.interim = 0;
  let s = buf.toString('latin1');
  while (s.length) {
    const end = s.indexOf('\r\n\r\n');
    if (end < 0) break;
    const headText = s.slice(0, end);
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(headText);
    if (!m) break;
    const status = Number(m[1]);
    if (status >= 100 && status < 200) { out.interim++; s = s.slice(end + 4); continue; }
    const headers = {};
    for (const line of headText.split('\r\n').slice(1)) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    let rest = s.slice(end + 4);
    let body = '';
    let complete = false;
    if (headers['transfer-encoding'] === 'chunked') {
      for (;;) {
        const nl = rest.indexOf('\r\n');
        if (nl < 0) break;
        const size = parseInt(rest.slice(0, nl), 16);
        if (Number.isNaN(size)) break;
        if (rest.length < nl + 2 + size + 2) break;
        body += rest.slice(nl + 2, nl + 2 + size);
        rest = rest.slice(nl + 2 + size + 2);
        if (size === 0) { complete = true; break; }
      }
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (rest.length >= n) { body = rest.slice(0, n); rest = rest.slice(n); complete = true; }
      else { body = rest; rest = ''; }
    } else {
      body = rest; rest = '';
    }
    out.push({ status, headers, body: Buffer.from(body, 'latin1').toString('utf8'), complete });
    if (!complete) break;
    s = rest;
  }
  return out;
}

function errorCodeOf(r) {
  try {
    const e = JSON.parse(r.body).error;
    return { code: e.code || e.type || 'none', message: e.message || '' };
  } catch (_) {
    return { code: 'unparsed', message: '' };  // an incomplete or non-JSON body
  }
}

function noteStatuses(t, responses) {
  t.books.interim += responses.interim || 0;
  for (const r of responses) {
    count(t.books.status, String(r.status));
    if (r.status !== 200) {
      // Which error, and one message of each, for the report.
      const { code, message } = errorCodeOf(r);
      const key = `${r.status} ${code}`;
      count(t.books.errors, key);
      if (!(key in t.books.error_examples)) t.books.error_examples[key] = message.slice(0, 300);
    }
  }
  if (!responses.length) t.books.no_response++;
}

// A remote member's failure after acceptance, answered before any stream began.
function isAcceptedError(r) {
  return r.status === 502 && r.complete && errorCodeOf(r).code === 'upstream_error';
}

// The JSON objects of an SSE body's `data:` events ([DONE] and comments left out).
function sseEvents(body) {
  const out = [];
  for (const line of body.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    try { out.push(JSON.parse(line.slice(6))); } catch (_) { out.push({ unparsed: line }); }
  }
  return out;
}

// By whole lines: an error's message may quote `data: [DONE]`.
function sseOutcome(body) {
  if (/^data: \[DONE\]\r?$/m.test(body)) return 'done';
  if (/^data: \{"error"/m.test(body)) return 'error';
  return 'cut';
}

// --- the kinds -----------------------------------------------------------------------------

async function normal(i) {
  // Two requests on one keep-alive connection: a completion and a chat answer.
  const a = JSON.stringify({ ...modelField(), prompt: 'Once upon a time', max_tokens: 24,
                             temperature: 0.8, seed: i });
  const b = JSON.stringify({ ...modelField(), messages: [{ role: 'user', content: 'Hi' }],
                             max_tokens: 16 });
  const payload = request(main, 'POST', '/v1/completions', a, '', 'application/json', true) +
                  request(main, 'POST', '/v1/chat/completions', b);
  const r = await exchange(main, payload);
  const rs = parseResponses(r.data);
  noteStatuses(main, rs);
  for (const x of rs) {
    if (x.status === 200) {
      main.books.accepted++;
      if (x.complete) main.books.completed++; else main.books.cut++;
    }
  }
}

// The outcome of a one-request exchange with `t`, counted in its books: 'completed', 'error'
// (an error event, or a 502 upstream_error), 'cut', 'cancelled' (when `closedByUs` and the
// stream had not ended), or null when the server did not accept it. Also returns the
// response. `stream`: the answer is an SSE stream (else one JSON body).
function settle(t, data, stream, closedByUs = false) {
  const rs = parseResponses(data);
  noteStatuses(t, rs);
  const x = rs[0];
  if (!x) return { outcome: null, x };
  if (isAcceptedError(x)) { t.books.accepted++; t.books.error_response++; return { outcome: 'error', x }; }
  if (x.status !== 200) return { outcome: null, x };
  t.books.accepted++;
  let o;
  if (stream) {
    const s = sseOutcome(x.body);
    o = s === 'done' ? 'completed' : s === 'error' ? 'error' : closedByUs ? 'cancelled' : 'cut';
  } else {
    o = x.complete ? 'completed' : closedByUs ? 'cancelled' : 'cut';
  }
  if (o === 'completed') t.books.completed++;
  else if (o === 'error') t.books.error_event++;
  else if (o === 'cancelled') t.books.cancelled++;
  else t.books.cut++;
  return { outcome: o, x };
}

async function streamed(i) {
  const body = JSON.stringify({ ...modelField(), messages: [{ role: 'user', content: 'Tell a story' }],
                                max_tokens: 64, stream: true, stream_options: { include_usage: true } });
  const r = await exchange(main, request(main, 'POST', '/v1/chat/completions', body, 'Connection: close\r\n'));
  settle(main, r.data, true);
}

async function cancelled(i) {
  const body = JSON.stringify({ ...modelField(), prompt: 'The', max_tokens: 400, ignore_eos: true,
                                stream: true });
  let closedByUs = false;
  const r = await exchange(main, request(main, 'POST', '/v1/completions', body), (buf, sock, finish) => {
    const s = buf.toString('latin1');
    if (!closedByUs && s.includes('data: {')) { closedByUs = true; finish('cancel'); }
  });
  settle(main, r.data, true, closedByUs);
}

async function slow(i) {
  // Reads a few hundred bytes, pauses, repeats: slow, but within the server's limits, so
  // the answer must complete.
  const body = JSON.stringify({ ...modelField(), prompt: 'A slow reader', max_tokens: 128,
                                stream: true });
  const r = await new Promise((resolve) => {
    const chunks = [];
    main.inFlight++;
    main.books.max_in_flight = Math.max(main.books.max_in_flight, main.inFlight);
    const sock = net.connect({ host: main.host, port: main.port });
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      main.inFlight--;
      sock.destroy();
      resolve(Buffer.concat(chunks));
    };
    sock.on('connect', () => sock.write(request(main, 'POST', '/v1/completions', body)));
    // Each piece read is followed by a pause before the next.
    sock.on('data', (buf) => {
      chunks.push(buf);
      const s = Buffer.concat(chunks).toString('latin1');
      if (s.includes('data: [DONE]') || s.includes('\r\n0\r\n\r\n')) return finish();
      sock.pause();
      setTimeout(() => { if (!done) sock.resume(); }, 100);
    });
    sock.on('end', finish);
    sock.on('close', finish);
    sock.on('error', finish);
    setTimeout(finish, 120000);
  });
  settle(main, r, true);
}

const malformedPayloads = [
  () => request(main, 'POST', '/v1/completions', '{"prompt": "x", "max_tokens": }'),
  () => `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Transfer-Encoding: identity\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`,
  () => 'GARBAGE\r\n\r\n',
  () => 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Ty',  // cut off, then closed
];

async function malformed(i) {
  const p = malformedPayloads[i % malformedPayloads.length]();
  const cutOff = !p.endsWith('\r\n\r\n') && !p.includes('\r\n\r\n{');
  const r = await exchange(main, p, cutOff ? (buf, sock, finish) => {} : null, cutOff ? 300 : 30000);
  const rs = parseResponses(r.data);
  if (cutOff) { for (const x of rs) count(main.books.status, String(x.status)); return; }
  noteStatuses(main, rs);
}

const overLimitPayloads = [
  () => request(main, 'POST', '/v1/completions', JSON.stringify({ prompt: 'x'.repeat(1100000) })),
  () => request(main, 'GET', '/v1/models', undefined, `X-Big: ${'h'.repeat(17000)}\r\n`, ''),
  () => request(main, 'POST', '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 10000000 })),
  () => request(main, 'POST', '/v1/chat/completions',
                JSON.stringify({ messages: [{ role: 'user', content: 'x' }], n: 99 })),
];

async function overLimit(i) {
  const r = await exchange(main, overLimitPayloads[i % overLimitPayloads.length]());
  noteStatuses(main, parseResponses(r.data));
}

// A complete request, then the write side shut: the answer must still come, whole.
const halfCloseVariants = [
  { name: 'keep-alive completion', path: '/v1/completions', stream: false, keepAlive: true },
  { name: 'Connection: close chat', path: '/v1/chat/completions', stream: false, keepAlive: false },
  { name: 'HTTP/1.0 completion', path: '/v1/completions', stream: false, version: '1.0' },
  { name: 'keep-alive streamed chat', path: '/v1/chat/completions', stream: true, keepAlive: true },
];

async function halfClose(i) {
  const v = halfCloseVariants[i % halfCloseVariants.length];
  const body = JSON.stringify({ ...modelField(), max_tokens: 48, stream: v.stream,
    ...(v.path.includes('chat') ? { messages: [{ role: 'user', content: 'Half a story' }] }
                                : { prompt: 'Half a story', seed: i }) });
  const r = await exchange(main, request(main, 'POST', v.path, body, '', 'application/json',
                                         !!v.keepAlive, v.version || '1.1'),
                           null, 120000, /*halfClose=*/true);
  const { outcome } = settle(main, r.data, v.stream);
  // After the answer the server closes: it read the end of the request stream.
  expect('halfclose', v.name, 'completed', outcome === null ? 'not accepted' : outcome,
         r.why === 'timeout' ? 'the server did not close after the answer' : '');
}

// Chat with a history: system, user, assistant, user (or user, assistant, user).
const history = [
  { role: 'system', content: 'You tell short stories to children.' },
  { role: 'user', content: 'Tell me about a cat.' },
  { role: 'assistant', content: 'Once upon a time there was a cat named Tom. He liked milk.' },
  { role: 'user', content: 'What did Tom do next?' },
];
const multiTurnVariants = [
  { name: '4 turns', messages: history, stream: false },
  { name: '4 turns streamed', messages: history, stream: true },
  { name: '3 turns', messages: history.slice(1), stream: false },
  { name: '3 turns streamed', messages: history.slice(1), stream: true },
];
const promptTokens = { multiturn: [], last_turn_alone: {} };

// Before the run (outside the books): the prompt tokens of each variant's last turn alone,
// which the whole history must pass by at least 5 tokens a turn.
async function multiTurnReference() {
  for (const v of multiTurnVariants) {
    const body = JSON.stringify({ ...modelField(), messages: v.messages.slice(-1), max_tokens: 1 });
    const r = await exchange(main, request(main, 'POST', '/v1/chat/completions', body));
    const x = parseResponses(r.data)[0];
    if (!x || x.status !== 200) throw new Error('the multi-turn reference request failed');
    promptTokens.last_turn_alone[v.name] = JSON.parse(x.body).usage.prompt_tokens;
  }
}

async function multiTurn(i) {
  const v = multiTurnVariants[i % multiTurnVariants.length];
  const body = JSON.stringify({ ...modelField(), messages: v.messages, max_tokens: 32,
                                stream: v.stream, ...(v.stream ? { stream_options: { include_usage: true } } : {}) });
  const r = await exchange(main, request(main, 'POST', '/v1/chat/completions', body));
  const { outcome, x } = settle(main, r.data, v.stream);
  let problem = '';
  if (outcome === 'completed') {
    // The usage says how long the rendered history was: every turn must be in the prompt.
    let usage = null;
    if (v.stream) usage = (sseEvents(x.body).find((e) => e.usage) || {}).usage;
    else usage = JSON.parse(x.body).usage;
    const least = promptTokens.last_turn_alone[v.name] + 5 * (v.messages.length - 1);
    if (!usage) problem = 'no usage';
    else if (usage.prompt_tokens < least) {
      problem = `prompt_tokens ${usage.prompt_tokens} < ${least}: the history is not in the prompt`;
    }
    if (usage) promptTokens.multiturn.push(usage.prompt_tokens);
  }
  expect('multiturn', v.name, 'completed', outcome === null ? 'not accepted' : outcome, problem);
}

// Against the thinking model: a budget or an effort, streamed and not, one turn or several.
// `thinks`: whether the answer must carry reasoning_content (a budget of 0 must not).
const reasoningVariants = [
  { name: 'budget 8', extra: { thinking_budget_tokens: 8 }, stream: false, messages: history.slice(3), thinks: true },
  { name: 'budget 8 streamed, 4 turns', extra: { thinking_budget_tokens: 8 }, stream: true, messages: history, thinks: true },
  { name: 'effort low, 4 turns', extra: { reasoning_effort: 'low' }, stream: false, messages: history, thinks: true },
  { name: 'effort low streamed', extra: { reasoning_effort: 'low' }, stream: true, messages: history.slice(3), thinks: true },
  { name: 'budget 0 streamed', extra: { thinking_budget_tokens: 0 }, stream: true, messages: history.slice(3), thinks: false },
  { name: 'effort minimal', extra: { reasoning_effort: 'minimal' }, stream: false, messages: history, thinks: false },
];
const reasoningSeen = { with_reasoning: 0, without_reasoning: 0 };

async function reasoning(i) {
  const v = reasoningVariants[i % reasoningVariants.length];
  const body = JSON.stringify({ ...modelField(reason), messages: v.messages, max_tokens: 32,
                                stream: v.stream, ...v.extra });
  const r = await exchange(reason, request(reason, 'POST', '/v1/chat/completions', body));
  const { outcome, x } = settle(reason, r.data, v.stream);
  let problem = '';
  if (outcome === 'completed') {
    let thinking = '';
    if (v.stream) {
      for (const e of sseEvents(x.body)) {
        const d = e.choices && e.choices[0] && e.choices[0].delta;
        if (d && typeof d.reasoning_content === 'string') thinking += d.reasoning_content;
      }
    } else {
      const msg = JSON.parse(x.body).choices[0].message;
      thinking = msg.reasoning_content || '';
    }
    if (thinking.trim()) reasoningSeen.with_reasoning++; else reasoningSeen.without_reasoning++;
    if (v.thinks && !thinking.trim()) problem = 'no reasoning_content';
    if (!v.thinks && thinking) problem = `reasoning_content with a budget of 0: ${JSON.stringify(thinking.slice(0, 80))}`;
  }
  expect('reasoning', v.name, 'completed', outcome === null ? 'not accepted' : outcome, problem);
}

// Requests to the remote member; scripts/soak-upstream.mjs reads the mode from the text.
// `expected`: the one outcome the misbehaviour allows. max_tokens 12 everywhere.
const remoteVariants = [
  { mode: 'ok', chat: true, stream: true, expected: 'completed' },
  { mode: 'forever', chat: false, stream: true, expected: 'completed' },
  { mode: 'stall', chat: true, stream: false, expected: 'completed' },
  { mode: 'malformed', chat: true, stream: true, expected: 'error' },
  { mode: 'slow', chat: false, stream: false, expected: 'completed' },
  { mode: 'close', chat: true, stream: true, expected: 'error' },
  { mode: '500', chat: true, stream: false, expected: 'error' },
  { mode: 'hang', chat: false, stream: true, expected: 'error' },
  { mode: 'forever', chat: true, stream: false, expected: 'completed' },
  { mode: 'hang', chat: true, stream: true, cancel: true, expected: 'cancelled' },
  { mode: 'close', chat: false, stream: false, expected: 'error' },
  { mode: 'malformed', chat: false, stream: false, expected: 'error' },
  { mode: '500', chat: false, stream: true, expected: 'error' },
  { mode: 'stall', chat: false, stream: true, expected: 'completed' },
  { mode: 'slow', chat: true, stream: true, expected: 'completed' },
  { mode: 'ok', chat: false, stream: false, expected: 'completed' },
  { mode: 'hang', chat: true, stream: false, expected: 'error' },
];
const remoteMaxTokens = 12;
const remoteErrorCause = { malformed: 'malformed SSE data', close: 'connection closed before data: [DONE]',
                           500: 'HTTP 500: the soak upstream fails on purpose', hang: 'timed out after' };
// Per upstream mode: requests the upstream must have seen (each accepted one, once), and
// how many connections the relay must have closed before the answer ended (it stops an
// endless stream, a hung one at the timeout, a malformed one, a cancelled one).
const remoteBooks = { by_mode: {}, upstream_closes_expected: 0, outcome: {} };

async function remote(i) {
  const v = remoteVariants[i % remoteVariants.length];
  const text = `Tell a story [mode=${v.mode}]`;
  const body = JSON.stringify({ model: args.remoteModel, max_tokens: remoteMaxTokens, stream: v.stream,
    ...(v.chat ? { messages: [{ role: 'user', content: text }] } : { prompt: text }) });
  const path = v.chat ? '/v1/chat/completions' : '/v1/completions';
  let closedByUs = false;
  const r = await exchange(main, request(main, 'POST', path, body), v.cancel ? (buf, sock, finish) => {
    if (!closedByUs && buf.toString('latin1').includes('data: {')) { closedByUs = true; finish('cancel'); }
  } : null);
  const { outcome, x } = settle(main, r.data, v.stream, closedByUs);
  const name = `${v.mode} ${v.chat ? 'chat' : 'completion'}${v.stream ? ' streamed' : ''}${v.cancel ? ' cancelled' : ''}`;
  let problem = '';
  if (outcome !== null) {
    count(remoteBooks.by_mode, v.mode);
    count(remoteBooks.outcome, outcome);
    if (['forever', 'hang', 'malformed'].includes(v.mode) || closedByUs) remoteBooks.upstream_closes_expected++;
  }
  if (outcome === 'completed') {
    // The relay holds every member to max_tokens: at most that many text events, and an
    // endless stream ends with "length".
    let texts = 0, finish = null;
    if (v.stream) {
      for (const e of sseEvents(x.body)) {
        const c = e.choices && e.choices[0];
        if (!c) continue;
        const t = v.chat ? (c.delta && c.delta.content) : c.text;
        if (t) texts++;
        if (c.finish_reason) finish = c.finish_reason;
      }
    } else {
      const j = JSON.parse(x.body);
      texts = j.usage ? j.usage.completion_tokens : -1;
      finish = j.choices[0].finish_reason;
    }
    if (texts > remoteMaxTokens) problem = `${texts} text events over max_tokens ${remoteMaxTokens}`;
    else if (v.mode === 'forever' && finish !== 'length') problem = `finish_reason ${finish}, not length`;
  } else if (outcome === 'error') {
    // The one error names the misbehaviour (docs/slo.md, "Remote cascade members").
    let message = '';
    if (x.status === 502) message = errorCodeOf(x).message;
    else message = ((sseEvents(x.body).find((e) => e.error) || {}).error || {}).message || '';
    const cause = remoteErrorCause[v.mode];
    if (cause && !message.includes(cause)) problem = `error message ${JSON.stringify(message)} lacks "${cause}"`;
  }
  expect('remote', name, v.expected, outcome === null ? `not accepted (${x ? x.status : 'no response'})` : outcome, problem);
}

const baseCycle = ['normal', 'streamed', 'remote', 'normal', 'cancelled', 'multiturn', 'streamed',
                   'reasoning', 'malformed', 'normal', 'halfclose', 'slow', 'remote', 'streamed',
                   'overlimit', 'reasoning', 'normal', 'cancelled', 'multiturn', 'remote',
                   'streamed', 'normal', 'malformed', 'halfclose', 'slow', 'reasoning',
                   'streamed', 'remote', 'overlimit', 'normal', 'multiturn', 'cancelled'];
const cycle = baseCycle.map((k) =>
  (k === 'reasoning' && !reason) || (k === 'remote' && !args.remoteModel) ? 'normal' : k);
const kinds = { normal, streamed, cancelled, slow, malformed, overlimit: overLimit,
                halfclose: halfClose, multiturn: multiTurn, reasoning, remote };

// --- the servers' ledgers ------------------------------------------------------------------

function parseMetrics(body) {
  const m = {};
  for (const line of body.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    m[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return m;
}

async function metrics(t) {
  const r = await exchange(t, request(t, 'GET', '/metrics', undefined, 'Connection: close\r\n', ''));
  const rs = parseResponses(r.data);
  if (!rs.length || rs[0].status !== 200) throw new Error(`GET /metrics failed on ${t.name}`);
  return parseMetrics(rs[0].body);
}

async function upstreamStats() {
  if (!args.upstreamUrl) return null;
  const t = newTarget('upstream', args.upstreamUrl);
  const r = await exchange(t, request(t, 'GET', '/stats', undefined, 'Connection: close\r\n', ''));
  const rs = parseResponses(r.data);
  if (!rs.length || rs[0].status !== 200) throw new Error('GET /stats failed on the upstream');
  return JSON.parse(rs[0].body);
}

function sumPrefix(m, prefix, filter = () => true) {
  let s = 0;
  for (const [k, v] of Object.entries(m)) if (k.startsWith(prefix) && filter(k)) s += v;
  return s;
}

// The server's ledger over the run, and the checks of `t`'s books against it.
function reconcile(t, before, after, check) {
  const books = t.books;
  const d = (key) => (after[key] || 0) - (before[key] || 0);
  const server = {
    accepted: d('lifeline_requests_accepted_total'),
    completed: d('lifeline_requests_completed_total'),
    errored: sumPrefix(after, 'lifeline_requests_errored_total') -
             sumPrefix(before, 'lifeline_requests_errored_total'),
    cancelled_client_disconnect: d('lifeline_requests_cancelled_total{reason="client_disconnect"}'),
    cancelled_slow_reader: d('lifeline_requests_cancelled_total{reason="slow_reader"}'),
    cancelled_write_timeout: d('lifeline_requests_cancelled_total{reason="write_timeout"}'),
    cancelled_shutdown: d('lifeline_requests_cancelled_total{reason="shutdown"}'),
    in_flight: after['lifeline_requests_in_flight'] || 0,
  };
  server.cancelled = server.cancelled_client_disconnect + server.cancelled_slow_reader +
                     server.cancelled_write_timeout + server.cancelled_shutdown;
  // Responses by status, over every route but /metrics (our own polls are not in the books).
  const statusOf = (k) => (/status="(\d+)"/.exec(k) || [])[1];
  const serverStatus = {};
  for (const [k, v] of Object.entries(after)) {
    if (!k.startsWith('lifeline_http_responses_total') || k.includes('route="/metrics"')) continue;
    const st = statusOf(k);
    serverStatus[st] = (serverStatus[st] || 0) + v - (before[k] || 0);
  }
  for (const k of Object.keys(serverStatus)) if (serverStatus[k] === 0) delete serverStatus[k];

  const n = `[${t.name}] `;
  check(n + 'ledger identity: accepted = completed + errored + cancelled, nothing in flight',
        server.accepted === server.completed + server.errored + server.cancelled &&
        server.in_flight === 0, server);
  check(n + 'accepted: the server took exactly the requests the client saw accepted',
        server.accepted === books.accepted, { server: server.accepted, client: books.accepted });
  // A cancel the server saw after the request's done event counts as completed there.
  check(n + 'completed: every answer the client finished, plus cancels that raced the done event',
        server.completed >= books.completed &&
        server.completed - books.completed + server.cancelled_client_disconnect === books.cancelled,
        { server_completed: server.completed, client_completed: books.completed,
          server_client_disconnect: server.cancelled_client_disconnect,
          client_cancelled: books.cancelled });
  check(n + 'no slow_reader / write_timeout cuts (the slow readers stay within the limits)',
        server.cancelled_slow_reader === 0 && server.cancelled_write_timeout === 0 &&
        books.cut === 0, { slow_reader: server.cancelled_slow_reader,
                           write_timeout: server.cancelled_write_timeout, client_cut: books.cut });
  check(n + 'errors after acceptance: one terminal error event or 502 each',
        server.errored === books.error_event + books.error_response,
        { server: server.errored, client_error_events: books.error_event,
          client_502: books.error_response });
  let statusOk = true;
  for (const st of new Set([...Object.keys(serverStatus), ...Object.keys(books.status)])) {
    if ((serverStatus[st] || 0) !== (books.status[st] || 0)) statusOk = false;
  }
  check(n + 'responses by status (all routes but /metrics) match the client\'s count',
        statusOk, { server: serverStatus, client: books.status });
  return { server, server_status: serverStatus };
}

async function main_() {
  if (cycle.includes('multiturn')) await multiTurnReference();
  const t0 = Date.now();
  const before = {};
  for (const t of targets) before[t.name] = await metrics(t);
  const upstreamBefore = cycle.includes('remote') ? await upstreamStats() : null;
  const periodMs = 1000 / args.rate;
  const pending = [];
  let n = 0;
  // Open loop: arrival k is due at t0 + k x period, whatever the answers do.
  while (Date.now() - t0 < args.durationS * 1000) {
    const due = t0 + n * periodMs;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const kind = cycle[n % cycle.length];
    count(sent, kind);
    // Each kind walks its own variants in turn.
    pending.push(kinds[kind](sent[kind] - 1).catch((e) => {
      count(sent, 'client_error');
      console.error(`soak-client: ${kind}: ${e.stack || e}`);
    }));
    n++;
    if (pending.length > 4096) await Promise.all(pending.splice(0, 2048));
  }
  await Promise.all(pending);
  // Let the servers close their books (a cancel is noticed within a step).
  await new Promise((r) => setTimeout(r, 1000));
  const checks = [];
  const check = (name, ok, detail) => checks.push({ name, ok, detail });
  const ledgers = {};
  for (const t of targets) ledgers[t.name] = reconcile(t, before[t.name], await metrics(t), check);
  check('no client errors (an exception in a kind)', !sent.client_error, { client_error: sent.client_error || 0 });

  for (const [kind, what] of [
    ['halfclose', 'half-close: every request whose sender shut its write side was answered in full'],
    ['multiturn', 'multi-turn: every history answered, all its turns in the prompt'],
    ['reasoning', 'reasoning: every answer completed, with reasoning_content (none at budget 0)'],
    ['remote', 'remote member: each request ended in the one outcome its misbehaviour dictates, within max_tokens'],
  ]) {
    if (!sent[kind]) continue;
    const kb = kindBook(kind);
    const total = Object.values(kb.outcomes).reduce((a, b) => a + b, 0);
    check(what, kb.unexpected === 0 && total === sent[kind],
          { sent: sent[kind], outcomes: kb.outcomes, unexpected: kb.unexpected, examples: kb.examples });
  }

  let upstream = null;
  if (sent.remote) {
    const m = await metrics(main);
    const rd = (o) => (m[`lifeline_remote_requests_total{model="${args.remoteModel}",outcome="${o}"}`] || 0) -
                      (before.main[`lifeline_remote_requests_total{model="${args.remoteModel}",outcome="${o}"}`] || 0);
    const serverRemote = { completed: rd('completed'), upstream_error: rd('upstream_error'),
                           cancelled: rd('cancelled'),
                           in_flight: m[`lifeline_remote_in_flight{model="${args.remoteModel}"}`] || 0 };
    check('remote member: the server\'s remote ledger by outcome equals the client\'s',
          serverRemote.completed === (remoteBooks.outcome.completed || 0) &&
          serverRemote.upstream_error === (remoteBooks.outcome.error || 0) &&
          serverRemote.cancelled === (remoteBooks.outcome.cancelled || 0) && serverRemote.in_flight === 0,
          { server: serverRemote, client: remoteBooks.outcome });
    const up = await upstreamStats();
    if (up) {
      // Over the run: the counts less those before it.
      upstream = { requests: {}, open: up.open,
                   closed_by_peer: up.closed_by_peer - upstreamBefore.closed_by_peer,
                   bad_requests: up.bad_requests - upstreamBefore.bad_requests };
      for (const [k, v] of Object.entries(up.requests)) {
        const dv = v - (upstreamBefore.requests[k] || 0);
        if (dv) upstream.requests[k] = dv;
      }
      let same = true;
      for (const k of new Set([...Object.keys(upstream.requests), ...Object.keys(remoteBooks.by_mode)])) {
        if ((upstream.requests[k] || 0) !== (remoteBooks.by_mode[k] || 0)) same = false;
      }
      check('remote member: the upstream saw each accepted request once (no retries), by mode',
            same && upstream.bad_requests === 0,
            { upstream: upstream.requests, client: remoteBooks.by_mode, bad_requests: upstream.bad_requests });
      check('remote member: no upstream connection left open; the relay closed each stream it stopped',
            upstream.open === 0 && upstream.closed_by_peer === remoteBooks.upstream_closes_expected,
            { open: upstream.open, closed_by_relay: upstream.closed_by_peer,
              expected: remoteBooks.upstream_closes_expected });
    }
  }

  const books = {};
  for (const t of targets) books[t.name] = t.books;
  const report = { duration_s: (Date.now() - t0) / 1000, rate: args.rate, arrivals: n, sent, books,
                   kinds: kindBooks, reasoning_seen: reasoningSeen,
                   multiturn_prompt_tokens: promptTokens.multiturn.length
                     ? { min: Math.min(...promptTokens.multiturn), max: Math.max(...promptTokens.multiturn),
                         last_turn_alone: promptTokens.last_turn_alone } : null,
                   remote: remoteBooks, upstream, ledgers, checks,
                   ok: checks.every((c) => c.ok) };
  const text = JSON.stringify(report, null, 2);
  if (args.out) fs.writeFileSync(args.out, text + '\n');
  for (const c of checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name}`);
  if (!report.ok) console.log(text);
  process.exit(report.ok ? 0 : 1);
}

main_().catch((e) => { console.error(`soak-client: ${e.stack || e}`); process.exit(2); });
