// The soak's client (scripts/soak.sh runs it): an open-loop mixed load at a fixed rate against
// one `lifeline serve`, over raw TCP so malformed and over-limit requests are possible, that
// keeps its own books of every request and at the end reconciles them with the server's
// ledger on /metrics. Node's standard library only.
//
//   node scripts/soak-client.mjs --url http://127.0.0.1:8080 --rate 4 --duration-s 600 \
//        [--model NAME] [--out client.json]
//
// Kinds, in a fixed cycle of 20 arrivals: normal (6, non-streamed completions and chat,
// keep-alive), streamed (5, chat SSE to [DONE]), cancelled (3, closed after the first SSE
// event of a long stream), slow (2, a stream read a few hundred bytes at a time with pauses),
// malformed (2: bad JSON, a smuggling Transfer-Encoding, a broken request line, a request cut
// off mid-header), over-limit (2: body over max_body_bytes, headers over 16 KiB, max_tokens
// over the cap, n over 16). Exit status 0 when the books agree, 1 when they do not.
import net from 'node:net';
import fs from 'node:fs';

function parseArgs(argv) {
  const a = { url: 'http://127.0.0.1:8080', rate: 4, durationS: 60, model: '', out: '' };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (k === '--url') a.url = v;
    else if (k === '--rate') a.rate = Number(v);
    else if (k === '--duration-s') a.durationS = Number(v);
    else if (k === '--model') a.model = v;
    else if (k === '--out') a.out = v;
    else throw new Error(`unknown flag ${k}`);
  }
  if (!(a.rate > 0) || !(a.durationS > 0)) throw new Error('--rate and --duration-s must be > 0');
  return a;
}

const args = parseArgs(process.argv);
const target = new URL(args.url);
const host = target.hostname, port = Number(target.port || 80);

// The client's books. `accepted`: generation requests the server took into its engine (a
// 200 head arrived). Outcomes of accepted requests: completed (whole body / [DONE]),
// cancelled (we closed first), error_event (a terminal SSE error), cut (the server closed the
// stream without [DONE] or an error event). `status`: every HTTP status we read, by code.
const books = {
  sent: {}, accepted: 0, completed: 0, cancelled: 0, cancelled_after_done: 0, error_event: 0,
  cut: 0, status: {}, errors: {}, error_examples: {}, no_response: 0, connect_errors: 0,
  max_in_flight: 0,
};
let inFlight = 0;
const count = (obj, key) => { obj[key] = (obj[key] || 0) + 1; };

function modelField() { return args.model ? { model: args.model } : {}; }

// Every request says Connection: close unless `keepAlive` (the first of a keep-alive pair), so
// no connection waits for the server's idle timeout.
function request(method, path, body, extraHeaders = '', contentType = 'application/json',
                 keepAlive = false) {
  const b = body === undefined ? '' : body;
  let head = `${method} ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\n`;
  if (!keepAlive && !extraHeaders.includes('Connection:')) head += 'Connection: close\r\n';
  if (contentType) head += `Content-Type: ${contentType}\r\n`;
  if (method === 'POST') head += `Content-Length: ${Buffer.byteLength(b)}\r\n`;
  return head + extraHeaders + '\r\n' + b;
}

// One connection: writes `payload`, hands every received chunk to `onData(buf, socket)`,
// resolves with everything received when the server closes (or `done()` is called).
function exchange(payload, onData, timeoutMs = 120000) {
  return new Promise((resolve) => {
    const chunks = [];
    let settled = false;
    inFlight++;
    books.max_in_flight = Math.max(books.max_in_flight, inFlight);
    const sock = net.connect({ host, port });
    const finish = (why) => {
      if (settled) return;
      settled = true;
      inFlight--;
      clearTimeout(timer);
      sock.destroy();
      resolve({ data: Buffer.concat(chunks), why });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    sock.on('connect', () => sock.write(payload));
    sock.on('data', (buf) => {
      chunks.push(buf);
      if (onData) onData(Buffer.concat(chunks), sock, finish);
    });
    sock.on('end', () => finish('end'));
    sock.on('close', () => finish('close'));
    sock.on('error', (e) => { if (!chunks.length) books.connect_errors++; finish('error'); });
  });
}

// Splits a raw byte stream into HTTP responses (Content-Length or chunked bodies).
function parseResponses(buf) {
  const out = [];
  let s = buf.toString('latin1');
  while (s.length) {
    const end = s.indexOf('\r\n\r\n');
    if (end < 0) break;
    const headText = s.slice(0, end);
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(headText);
    if (!m) break;
    const status = Number(m[1]);
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

function noteStatuses(responses) {
  for (const r of responses) {
    count(books.status, String(r.status));
    if (r.status !== 200) {
      // Which error, and one message of each, for the report.
      let code = 'unparsed';
      let message = '';
      try {
        const e = JSON.parse(r.body).error;
        code = e.code || e.type || 'none';
        message = e.message || '';
      } catch (_) { /* an incomplete or non-JSON body */ }
      const key = `${r.status} ${code}`;
      count(books.errors, key);
      if (!(key in books.error_examples)) books.error_examples[key] = message.slice(0, 300);
    }
  }
  if (!responses.length) books.no_response++;
}

// --- the kinds -----------------------------------------------------------------------------

async function normal(i) {
  // Two requests on one keep-alive connection: a completion and a chat answer.
  const a = JSON.stringify({ ...modelField(), prompt: 'Once upon a time', max_tokens: 24,
                             temperature: 0.8, seed: i });
  const b = JSON.stringify({ ...modelField(), messages: [{ role: 'user', content: 'Hi' }],
                             max_tokens: 16 });
  const payload = request('POST', '/v1/completions', a, '', 'application/json', true) +
                  request('POST', '/v1/chat/completions', b);
  const r = await exchange(payload);
  const rs = parseResponses(r.data);
  noteStatuses(rs);
  for (const x of rs) {
    if (x.status === 200) { books.accepted++; if (x.complete) books.completed++; else books.cut++; }
  }
}

function sseOutcome(body) {
  if (body.includes('data: [DONE]')) return 'done';
  if (/data: \{"error"/.test(body)) return 'error';
  return 'cut';
}

// A one-request streaming exchange: counts its status and, when the server accepted it (200),
// the acceptance; returns its outcome ('done', 'error' or 'cut'), or null when not accepted.
function acceptedStreamOutcome(data) {
  const rs = parseResponses(data);
  noteStatuses(rs);
  const x = rs[0];
  if (!x || x.status !== 200) return null;
  books.accepted++;
  return sseOutcome(x.body);
}

// An accepted stream that ran to its end or stopped on its own.
function countStreamEnd(o) {
  if (o === 'done') books.completed++; else if (o === 'error') books.error_event++; else books.cut++;
}

async function streamed(i) {
  const body = JSON.stringify({ ...modelField(), messages: [{ role: 'user', content: 'Tell a story' }],
                                max_tokens: 64, stream: true, stream_options: { include_usage: true } });
  const r = await exchange(request('POST', '/v1/chat/completions', body, 'Connection: close\r\n'));
  const o = acceptedStreamOutcome(r.data);
  if (o !== null) countStreamEnd(o);
}

async function cancelled(i) {
  const body = JSON.stringify({ ...modelField(), prompt: 'The', max_tokens: 400, ignore_eos: true,
                                stream: true });
  let closedByUs = false;
  const r = await exchange(request('POST', '/v1/completions', body), (buf, sock, finish) => {
    const s = buf.toString('latin1');
    if (!closedByUs && s.includes('data: {')) { closedByUs = true; finish('cancel'); }
  });
  const o = acceptedStreamOutcome(r.data);
  if (o === null) return;
  if (o === 'cut' && closedByUs) books.cancelled++; else countStreamEnd(o);
}

async function slow(i) {
  // Reads a few hundred bytes, pauses, repeats: slow, but within the server's limits, so
  // the answer must complete.
  const body = JSON.stringify({ ...modelField(), prompt: 'A slow reader', max_tokens: 128,
                                stream: true });
  const r = await new Promise((resolve) => {
    const chunks = [];
    inFlight++;
    books.max_in_flight = Math.max(books.max_in_flight, inFlight);
    const sock = net.connect({ host, port });
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      inFlight--;
      sock.destroy();
      resolve(Buffer.concat(chunks));
    };
    sock.on('connect', () => sock.write(request('POST', '/v1/completions', body)));
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
  const o = acceptedStreamOutcome(r);
  if (o !== null) countStreamEnd(o);
}

const malformedPayloads = [
  () => request('POST', '/v1/completions', '{"prompt": "x", "max_tokens": }'),
  () => `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Transfer-Encoding: identity\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`,
  () => 'GARBAGE\r\n\r\n',
  () => 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Ty',  // cut off, then closed
];

async function malformed(i) {
  const p = malformedPayloads[i % malformedPayloads.length]();
  const cutOff = !p.endsWith('\r\n\r\n') && !p.includes('\r\n\r\n{');
  const r = await exchange(p, cutOff ? (buf, sock, finish) => {} : null, cutOff ? 300 : 30000);
  const rs = parseResponses(r.data);
  if (cutOff) { for (const x of rs) count(books.status, String(x.status)); return; }
  noteStatuses(rs);
}

const overLimitPayloads = [
  () => request('POST', '/v1/completions', JSON.stringify({ prompt: 'x'.repeat(1100000) })),
  () => request('GET', '/v1/models', undefined, `X-Big: ${'h'.repeat(17000)}\r\n`, ''),
  () => request('POST', '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 10000000 })),
  () => request('POST', '/v1/chat/completions',
                JSON.stringify({ messages: [{ role: 'user', content: 'x' }], n: 99 })),
];

async function overLimit(i) {
  const r = await exchange(overLimitPayloads[i % overLimitPayloads.length]());
  noteStatuses(parseResponses(r.data));
}

const cycle = ['normal', 'streamed', 'normal', 'cancelled', 'streamed', 'malformed', 'normal',
               'slow', 'streamed', 'overlimit', 'normal', 'cancelled', 'streamed', 'normal',
               'malformed', 'slow', 'streamed', 'overlimit', 'normal', 'cancelled'];
const kinds = { normal, streamed, cancelled, slow, malformed, overlimit: overLimit };

// --- the server's ledger -------------------------------------------------------------------

async function metrics() {
  const r = await exchange(request('GET', '/metrics', undefined, 'Connection: close\r\n', ''));
  const rs = parseResponses(r.data);
  if (!rs.length || rs[0].status !== 200) throw new Error('GET /metrics failed');
  const m = {};
  for (const line of rs[0].body.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    m[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return m;
}

function sumPrefix(m, prefix, filter = () => true) {
  let s = 0;
  for (const [k, v] of Object.entries(m)) if (k.startsWith(prefix) && filter(k)) s += v;
  return s;
}

async function main() {
  const t0 = Date.now();
  const before = await metrics();
  const periodMs = 1000 / args.rate;
  const pending = [];
  let n = 0;
  // Open loop: arrival k is due at t0 + k x period, whatever the answers do.
  while (Date.now() - t0 < args.durationS * 1000) {
    const due = t0 + n * periodMs;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const kind = cycle[n % cycle.length];
    count(books.sent, kind);
    // Each kind walks its own variants in turn.
    pending.push(kinds[kind](books.sent[kind] - 1).catch((e) => {
      count(books.sent, 'client_error');
    }));
    n++;
    if (pending.length > 4096) await Promise.all(pending.splice(0, 2048));
  }
  await Promise.all(pending);
  // Let the server close its books (a cancel is noticed within a step).
  await new Promise((r) => setTimeout(r, 1000));
  const after = await metrics();
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

  const checks = [];
  const check = (name, ok, detail) => checks.push({ name, ok, detail });
  check('ledger identity: accepted = completed + errored + cancelled, nothing in flight',
        server.accepted === server.completed + server.errored + server.cancelled &&
        server.in_flight === 0, server);
  check('accepted: the server took exactly the requests the client saw a 200 head for',
        server.accepted === books.accepted, { server: server.accepted, client: books.accepted });
  // A cancel the server saw after the request's done event counts as completed there.
  check('completed: every answer the client finished, plus cancels that raced the done event',
        server.completed >= books.completed &&
        server.completed - books.completed + server.cancelled_client_disconnect === books.cancelled,
        { server_completed: server.completed, client_completed: books.completed,
          server_client_disconnect: server.cancelled_client_disconnect,
          client_cancelled: books.cancelled });
  check('no slow_reader / write_timeout cuts (the slow readers stay within the limits)',
        server.cancelled_slow_reader === 0 && server.cancelled_write_timeout === 0 &&
        books.cut === 0, { slow_reader: server.cancelled_slow_reader,
                           write_timeout: server.cancelled_write_timeout, client_cut: books.cut });
  check('errors after acceptance: one terminal error event each',
        server.errored === books.error_event, { server: server.errored, client: books.error_event });
  let statusOk = true;
  for (const st of new Set([...Object.keys(serverStatus), ...Object.keys(books.status)])) {
    if ((serverStatus[st] || 0) !== (books.status[st] || 0)) statusOk = false;
  }
  check('responses by status (all routes but /metrics) match the client\'s count',
        statusOk, { server: serverStatus, client: books.status });

  const report = { duration_s: (Date.now() - t0) / 1000, rate: args.rate, arrivals: n, books,
                   server, server_status: serverStatus, checks,
                   ok: checks.every((c) => c.ok) };
  const text = JSON.stringify(report, null, 2);
  if (args.out) fs.writeFileSync(args.out, text + '\n');
  for (const c of checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name}`);
  if (!report.ok) console.log(text);
  process.exit(report.ok ? 0 : 1);
}

main().catch((e) => { console.error(`soak-client: ${e.stack || e}`); process.exit(2); });
