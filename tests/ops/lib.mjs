// Shared by the ops tests: start and stop `lifeline serve`, pick free ports, launch Debian's
// headless Chromium through puppeteer-core, and a small closed-loop load client.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const BINARY = process.env.LIFELINE_BINARY;
export const MODEL = process.env.LIFELINE_MODEL;
export const CHROMIUM = process.env.LIFELINE_CHROMIUM || '/usr/bin/chromium';

export function tempDir(prefix) {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, write: (name, text) => { const p = path.join(dir, name); writeFileSync(p, text); return p; },
           remove: () => rmSync(dir, { recursive: true, force: true }) };
}

// A port nothing listens on right now (the kernel's pick, released again).
export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return port;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts `lifeline serve` with `args` (after `serve`) and resolves once it listens.
export async function startServer(args, { port = 0, timeoutMs = 30000 } = {}) {
  const proc = spawn(BINARY, ['serve', '--port', String(port), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stderr.on('data', (c) => { out += c; });
  const listening = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line within ${timeoutMs} ms: ${out}`)), timeoutMs);
    proc.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/listening on http:\/\/([0-9.]+):(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[2])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${out}`)); });
  });
  return { proc, port: listening, url: `http://127.0.0.1:${listening}`, log: () => out };
}

export async function stopServer(server) {
  if (!server || server.proc.exitCode !== null || server.proc.signalCode !== null) return;
  server.proc.kill('SIGTERM');
  await once(server.proc, 'exit');
}

// Chromium as this machine runs it: headless, as root (no sandbox), no network services of
// its own, a fresh profile.
export async function launchBrowser(puppeteer) {
  const profile = tempDir('lifeline-chromium-');
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           '--disable-dev-shm-usage', `--user-data-dir=${profile.dir}`],
  });
  return { browser, close: async () => { await browser.close(); profile.remove(); } };
}

// Closed-loop load: `concurrency` workers send completions until stop() is called. Returns
// what the clients saw.
// `body`: fields merged into every request, or a function of the request's ordinal returning
// them (to vary the prompt, e.g. so the prefix cache cannot serve it).
// `endpoint`: the path (default /v1/completions; chat bodies need /v1/chat/completions and
// their own `messages`, which `body` supplies).
export function startLoad(url, { concurrency = 8, headers = {}, body = {}, endpoint = '/v1/completions' } = {}) {
  const tally = { sent: 0, ok: 0, status: {}, failures: [], responses: [] };
  let running = true;
  const worker = async () => {
    while (running) {
      tally.sent++;
      try {
        const r = await fetch(url + endpoint, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', ...headers },
          body: JSON.stringify({ ...(endpoint.includes('/chat/')
                                        ? { messages: [{ role: 'user', content: 'Once upon a time' }] }
                                        : { prompt: 'Once upon a time' }),
                                 max_tokens: 64, temperature: 0.8,
                                 ...(typeof body === 'function' ? body(tally.sent) : body) }),
        });
        const text = await r.text();
        tally.status[r.status] = (tally.status[r.status] || 0) + 1;
        if (r.status === 200) {
          tally.ok++;
          // The most recent 1000: the dashboard's ring shows the latest requests, and a fast
          // run completes more than 1000 (keeping the first ones left none to compare).
          tally.responses.push({ id: r.headers.get('x-request-id'), body: JSON.parse(text) });
          if (tally.responses.length > 1000) tally.responses.shift();
        }
      } catch (e) {
        tally.failures.push(String(e));
        await sleep(50);
      }
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  return { tally, stop: async () => { running = false; await Promise.all(workers); return tally; } };
}

// Polls `fn` until it returns a truthy value (returned) or `timeoutMs` passes (throws with
// `what` and the last value).
export async function waitFor(what, fn, { timeoutMs = 20000, everyMs = 100 } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
}
