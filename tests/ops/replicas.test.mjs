// scripts/replicas.sh: two `lifeline serve` replicas behind Debian's nginx (least
// connections, proxy_next_upstream on 429/503/connection errors, POST included).
//
// Load above one replica's capacity, the way a balancer meets it when it is not the only
// source of traffic: each replica takes one running and two waiting requests
// (--max-running 1 --max-waiting 2; a fourth is shed with 429 at once), four clients keep
// replica 0 full by talking to it directly (nginx does not see them), and two clients send
// their requests through nginx. nginx's least-connections choice sends some of those to the
// full replica; they must come back 429 from it and 200 from the other replica, so:
//   - every request sent through nginx is answered 200;
//   - some were shed by one replica and served by the other (access log and the response's
//     X-Lifeline-Upstream / -Status headers both say "replica 0: 429, replica 1: 200");
//   - the replicas' ledgers add up to what the clients counted: completed requests summed over
//     both replicas = 200s seen by all clients; 429s answered by the replicas = 429s the
//     direct clients saw + the 429 attempts nginx logged (and retried); nothing in flight.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { MODEL, sleep, startLoad, tempDir, waitFor } from './lib.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function portFree(port) {
  const srv = net.createServer();
  return new Promise((resolve) => {
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

// `n` consecutive free ports.
async function freePorts(n) {
  for (let attempt = 0; attempt < 200; ++attempt) {
    const base = 20000 + Math.floor(Math.random() * 40000);
    let ok = true;
    for (let i = 0; i < n && ok; ++i) ok = await portFree(base + i);
    if (ok) return base;
  }
  throw new Error('no free port range');
}

// The value of every sample of `name` whose labels include all of `labels`, summed.
function metric(text, name, labels = {}) {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

let script, dir;

after(async () => {
  if (script && script.exitCode === null) {
    script.kill('SIGTERM');
    await once(script, 'exit');
  }
  if (dir) dir.remove();
});

test('replicas behind nginx: shed requests are served by another replica, ledgers add up', async () => {
  dir = tempDir('lifeline-replicas-');
  const base = await freePorts(3);
  const [lbPort, port0, port1] = [base, base + 1, base + 2];
  script = spawn('bash', [path.join(ROOT, 'scripts/replicas.sh'), '2', '--port', String(lbPort),
                          '--base-port', String(port0), '--dir', dir.dir, '--',
                          '--model', `stories=${MODEL}`, '--threads', '1', '--max-running', '1',
                          '--max-waiting', '2', '--kv-memory', '16'],
                 { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  let out = '';
  script.stdout.on('data', (c) => { out += c; });
  script.stderr.on('data', (c) => { out += c; });
  await waitFor('replicas.sh to start nginx', () => out.includes('replicas.sh: nginx on') || script.exitCode !== null,
                { timeoutMs: 60000 });
  assert.equal(script.exitCode, null, out);
  const lb = `http://127.0.0.1:${lbPort}`;
  const r0 = `http://127.0.0.1:${port0}`, r1 = `http://127.0.0.1:${port1}`;

  // Replica 0 kept full by clients nginx does not see.
  const direct = startLoad(r0, { concurrency: 4, body: { max_tokens: 200, ignore_eos: true } });
  await sleep(300);
  const through = { status: {}, retried: 0, headers: [] };
  const send = async () => {
    const r = await fetch(lb + '/v1/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 16 }) });
    const body = await r.json();
    through.status[r.status] = (through.status[r.status] || 0) + 1;
    const upstream = r.headers.get('x-lifeline-upstream'), statuses = r.headers.get('x-lifeline-upstream-status');
    through.headers.push({ upstream, statuses });
    if (r.status === 200) {
      assert.ok(Array.isArray(body.choices) && body.choices.length === 1, JSON.stringify(body));
      if (statuses.split(', ').length > 1) {
        through.retried++;
        assert.equal(statuses, '429, 200', `a retried request: ${upstream} ${statuses}`);
        assert.equal(upstream, `127.0.0.1:${port0}, 127.0.0.1:${port1}`);
      }
    }
  };
  const SENT = 40;
  let next = 0;
  const workers = Array.from({ length: 2 }, async () => {
    while (next < SENT) {
      next++;
      await send();
    }
  });
  await Promise.all(workers);
  const directTally = await direct.stop();

  assert.deepEqual(through.status, { 200: SENT }, JSON.stringify(through.headers.slice(0, 10)));
  assert.ok(through.retried > 0, `no request was shed by one replica and served by the other: ${JSON.stringify(through.headers)}`);
  assert.ok((directTally.status[429] || 0) > 0 || through.retried > 0, 'replica 0 was over capacity');

  // Ledgers, once both replicas are idle.
  const scrape = async (url) => (await fetch(url + '/metrics')).text();
  await waitFor('both replicas idle', async () =>
    metric(await scrape(r0), 'lifeline_requests_in_flight') === 0 && metric(await scrape(r1), 'lifeline_requests_in_flight') === 0);
  const m = [await scrape(r0), await scrape(r1)];
  const sum = (name, labels) => m.reduce((a, t) => a + metric(t, name, labels), 0);
  const clientOk = (directTally.status[200] || 0) + through.status[200];
  assert.equal(sum('lifeline_requests_completed_total'), clientOk, 'completed on the replicas = 200s the clients saw');
  assert.equal(sum('lifeline_requests_accepted_total'), clientOk, 'nothing accepted that did not complete');
  assert.equal(sum('lifeline_http_responses_total', { route: '/v1/completions', status: '200' }), clientOk);

  const log = readFileSync(path.join(dir.dir, 'access.log'), 'utf8').trim().split('\n').filter((l) => l.includes('POST /v1/completions'));
  assert.equal(log.length, SENT, 'one access-log line per request sent through nginx');
  let loggedShed = 0, loggedRetriedOk = 0;
  for (const line of log) {
    const statuses = line.match(/upstream_status="([^"]*)"/)[1].split(', ');
    loggedShed += statuses.filter((s) => s === '429').length;
    if (statuses.length > 1 && statuses.at(-1) === '200') loggedRetriedOk++;
  }
  assert.equal(loggedRetriedOk, through.retried, 'the access log and the response headers agree');
  const replica429 = sum('lifeline_http_responses_total', { route: '/v1/completions', status: '429' });
  assert.equal(replica429, (directTally.status[429] || 0) + loggedShed,
               `429s on the replicas (${replica429}) = direct clients' ${directTally.status[429] || 0} + nginx's ${loggedShed} retried attempts`);
  // The shed attempts all hit replica 0, the one kept full.
  assert.equal(metric(m[1], 'lifeline_http_responses_total', { route: '/v1/completions', status: '429' }), 0);
});

// --session-affinity: nginx hashes X-Session-Id (consistent), so every turn of a conversation
// goes to one replica and finds its history in that replica's prefix cache; a replica the
// session never reached has no cached tokens for it. Requests without the header still work.
test('replicas with session affinity: a conversation stays on the replica that caches it', async () => {
  const d = tempDir('lifeline-affinity-');
  const base = await freePorts(3);
  const [lbPort, port0, port1] = [base, base + 1, base + 2];
  const proc = spawn('bash', [path.join(ROOT, 'scripts/replicas.sh'), '2', '--port', String(lbPort),
                              '--base-port', String(port0), '--dir', d.dir, '--session-affinity', '--',
                              '--model', `stories=${MODEL}`, '--threads', '1', '--kv-memory', '16'],
                     { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  let out = '';
  proc.stdout.on('data', (c) => { out += c; });
  proc.stderr.on('data', (c) => { out += c; });
  try {
    await waitFor('replicas.sh to start nginx', () => out.includes('replicas.sh: nginx on') || proc.exitCode !== null,
                  { timeoutMs: 60000 });
    assert.equal(proc.exitCode, null, out);
    assert.match(readFileSync(path.join(d.dir, 'nginx.conf'), 'utf8'), /hash \$lifeline_affinity consistent;/);
    const lb = `http://127.0.0.1:${lbPort}`;
    const ask = async (session, prompt) => {
      const headers = { 'Content-Type': 'application/json' };
      if (session) headers['X-Session-Id'] = session;
      const r = await fetch(lb + '/v1/completions', { method: 'POST', headers,
        body: JSON.stringify({ prompt, max_tokens: 4, temperature: 0 }) });
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      return { upstream: r.headers.get('x-lifeline-upstream'), cached: body.timings.tokens.cached };
    };
    const words = 'the little dog ran to a big tree and saw a bird sing a happy song'.split(' ');
    for (let s = 0; s < 6; ++s) {
      let history = `Conversation ${s}:`;
      for (let i = 0; i < 60; ++i) history += ' ' + words[(i * 7 + s * 3) % words.length];
      const seen = [];
      for (let turn = 0; turn < 3; ++turn) {
        history += ` Turn ${turn}.`;
        seen.push(await ask(`session-${s}`, history));
      }
      assert.equal(new Set(seen.map((x) => x.upstream)).size, 1, `session ${s}: ${JSON.stringify(seen)}`);
      assert.equal(seen[0].cached, 0);
      for (const later of seen.slice(1)) assert.ok(later.cached >= 48, `session ${s}: ${JSON.stringify(seen)}`);
    }
    const anonymous = await ask(null, 'Once upon a time');
    assert.ok(anonymous.upstream);
  } finally {
    proc.kill('SIGTERM');
    await once(proc, 'exit');
    d.remove();
  }
});
