// The soak's misbehaving remote member (scripts/soak.sh starts it): a small OpenAI-compatible
// server that `lifeline serve` relays to as a remote `[[models]]` entry. Each request names how
// it misbehaves with a tag `[mode=NAME]` in its prompt or last message, so the soak client
// knows what each of its requests must end in. Node's standard library only.
//
//   node scripts/soak-upstream.mjs [--port 0] [--stall-ms 800]
//   prints "soak-upstream: listening on http://127.0.0.1:PORT" on stdout
//
// Modes (the answer is always an SSE stream, as the relay asks for one):
//   ok        a correct answer: max_tokens text events (at most 16), a finish chunk, usage, [DONE]
//   slow      a correct answer, one event every 100 ms
//   forever   text events every 5 ms past max_tokens, never a finish: the relay must stop it
//             at max_tokens and close the connection
//   stall     three events, a pause of --stall-ms, then the rest of a correct answer
//   hang      three events, then nothing, connection open: the relay's remote timeout ends it
//   malformed three events, then `data: {not json`, then nothing
//   close     three events, then the connection is closed without a finish or [DONE]
//   500       an HTTP 500 with an OpenAI error body
// GET /stats answers the requests seen by mode, how many connections are open now and how many
// the relay closed before the answer ended (the soak checks the relay closes what it stops).
import http from 'node:http';

const args = { port: 0, stallMs: 800 };
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i], v = process.argv[i + 1];
  if (k === '--port') args.port = Number(v);
  else if (k === '--stall-ms') args.stallMs = Number(v);
  else throw new Error(`unknown flag ${k}`);
}

const stats = { requests: {}, open: 0, closed_by_peer: 0, bad_requests: 0 };
const count = (k) => { stats.requests[k] = (stats.requests[k] || 0) + 1; };

function modeOf(body) {
  let text = '';
  if (typeof body.prompt === 'string') text = body.prompt;
  else if (Array.isArray(body.messages) && body.messages.length) {
    const c = body.messages[body.messages.length - 1].content;
    text = typeof c === 'string' ? c : JSON.stringify(c);
  }
  const m = /\[mode=([a-z0-9]+)\]/.exec(text);
  return m ? m[1] : 'ok';
}

const words = ['Once', ' upon', ' a', ' time', ' there', ' was', ' a', ' little', ' fox', '.'];

function answer(req, res, body) {
  const chat = req.url.endsWith('/chat/completions');
  const mode = modeOf(body);
  count(mode);
  const id = `up-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const maxTokens = Math.min(Number.isInteger(body.max_tokens) ? body.max_tokens : 16, 16);
  if (mode === '500') {
    const e = JSON.stringify({ error: { message: 'the soak upstream fails on purpose',
                                        type: 'server_error', code: 'internal' } });
    res.writeHead(500, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(e) });
    res.end(e);
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  let sent = 0, ended = false, timer = null;
  const chunk = (delta, finish) => JSON.stringify(chat
    ? { id, object: 'chat.completion.chunk', model: body.model,
        choices: [{ index: 0, delta: delta === null ? {} : { content: delta }, finish_reason: finish }] }
    : { id, object: 'text_completion', model: body.model,
        choices: [{ index: 0, text: delta === null ? '' : delta, finish_reason: finish }] });
  const event = (s) => { if (!ended) res.write(`data: ${s}\n\n`); };
  const text = () => { event(chunk(words[sent % words.length], null)); sent++; };
  const finish = () => {
    event(chunk(null, sent >= maxTokens ? 'length' : 'stop'));
    event(JSON.stringify({ id, object: 'chat.completion.chunk', choices: [],
                           usage: { prompt_tokens: 4, completion_tokens: sent,
                                    total_tokens: 4 + sent } }));
    event('[DONE]');
    ended = true;
    res.end();
  };
  res.on('close', () => {
    if (!ended) { stats.closed_by_peer++; ended = true; }
    stats.open--;
    clearTimeout(timer);
  });
  stats.open++;
  // Sends `n` text events `gapMs` apart, then calls `then`.
  const run = (n, gapMs, then) => {
    const step = () => {
      if (ended) return;
      if (n-- <= 0) return then();
      text();
      timer = setTimeout(step, gapMs);
    };
    step();
  };
  const rest = () => run(maxTokens - sent, 2, finish);
  switch (mode) {
    case 'slow': run(maxTokens, 100, finish); break;
    case 'forever': run(Infinity, 5, () => {}); break;
    case 'stall': run(Math.min(3, maxTokens), 2, () => { timer = setTimeout(rest, args.stallMs); }); break;
    case 'hang': run(Math.min(3, maxTokens), 2, () => {}); break;
    case 'malformed': run(Math.min(3, maxTokens), 2, () => { event('{not json'); }); break;
    case 'close': run(Math.min(3, maxTokens), 2, () => { ended = true; res.socket.destroy(); }); break;
    default: run(maxTokens, 2, finish);
  }
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    const s = JSON.stringify(stats);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(s) });
    res.end(s);
    return;
  }
  const parts = [];
  req.on('data', (b) => parts.push(b));
  req.on('end', () => {
    let body = null;
    try { body = JSON.parse(Buffer.concat(parts).toString('utf8')); } catch (_) { /* below */ }
    if (req.method !== 'POST' || !body || !/\/(chat\/)?completions$/.test(req.url)) {
      stats.bad_requests++;
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end('{"error":{"message":"not found","type":"invalid_request_error"}}');
      return;
    }
    answer(req, res, body);
  });
});
server.keepAliveTimeout = 1000;
server.listen(args.port, '127.0.0.1', () => {
  console.log(`soak-upstream: listening on http://127.0.0.1:${server.address().port}`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
