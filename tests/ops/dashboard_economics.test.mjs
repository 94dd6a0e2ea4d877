// The dashboard's "Your users' cliff" table in a real browser (Debian's headless Chromium,
// puppeteer-core) against a real `lifeline serve` (stories260K) refitting every second:
//   - before any fit the table says there is no estimate yet;
//   - requests of spread prompt lengths, then outcomes posted from a planted model
//     (abandonment 5 % below a knee at the median TTFT, 60 % at or above it): once the
//     server's refit finds the cliff, the page's row shows GET /v1/economics's cliff, interval,
//     target and status for the class;
//   - no console or page errors.
// Screenshot: build/dashboard-economics.png.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { MODEL, launchBrowser, startServer, stopServer, tempDir, waitFor } from './lib.mjs';

const SHOTS = process.env.LIFELINE_SCREENSHOT_DIR || '.';
// Autotune on, moving at every refit once two agree (the same data gives the same cliff), so
// the events table must show the target's moves.
const CONFIG = `default_class = "search"
use_presets = false

[classes.search]
ttft_p95_ms = 600000
max_level = 0

[autotune]
enabled = true
stable_refits = 2
min_interval_ms = 0
`;

let dir, server, browser;
const errors = [];

before(async () => {
  assert.ok(process.env.LIFELINE_BINARY && MODEL, 'LIFELINE_BINARY and LIFELINE_MODEL must be set');
  dir = tempDir('lifeline-dashboard-economics-');
  server = await startServer(['--model', `stories=${MODEL}`, '-t', '1', '--config', dir.write('slo.toml', CONFIG),
                              '--economics-refit-s', '1']);
  browser = await launchBrowser(puppeteer);
});

after(async () => {
  if (browser) await browser.close();
  await stopServer(server);
  if (dir) dir.remove();
});

const economics = async () => (await fetch(server.url + '/v1/economics')).json();

async function complete(i) {
  // The number first: no two prompts share a cached prefix, and the lengths spread the TTFT.
  const prompt = `${i} Once` + ' upon a time there'.repeat((i * 37) % 60);
  const r = await fetch(server.url + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: 1, temperature: 0 }),
  });
  const body = await r.json();
  return r.status === 200 ? { id: r.headers.get('x-request-id'), ttft: body.timings.latency.ttft_ms } : null;
}

test('dashboard: the live cliff per class beside its target', async () => {
  const page = await browser.browser.newPage();
  await page.setViewport({ width: 1600, height: 1600 });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  await page.goto(server.url + '/?interval_ms=250');
  await page.waitForSelector('#conn[data-state="live"]', { timeout: 10000 });
  const empty = await page.$eval('#economics tbody', (b) => b.textContent);
  assert.match(empty, /No estimate yet/);

  const answers = [];
  for (let i = 0; i < 900; i += 3) {
    const batch = await Promise.all([complete(i), complete(i + 1), complete(i + 2)]);
    for (const a of batch) if (a) answers.push(a);
  }
  assert.ok(answers.length >= 800, `only ${answers.length} requests answered`);
  const sorted = answers.map((a) => a.ttft).sort((x, y) => x - y);
  const knee = sorted[Math.floor(sorted.length / 2)];
  let seed = 7;
  const u = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const events = answers.map((a) => ({ request_id: a.id, type: u() < (a.ttft >= knee ? 0.6 : 0.05) ? 'abandoned' : 'completed' }));
  const r = await fetch(server.url + '/v1/outcomes', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ events }),
  });
  assert.equal(r.status, 200, await r.text());

  let found = null;
  await waitFor('a refit that finds the cliff', async () => {
    const e = await economics();
    const c = (e.classes || []).find((x) => x.class === 'search');
    if (c && c.status === 'found' && c.samples === answers.length) found = c;
    return found !== null;
  }, { timeoutMs: 30000, everyMs: 250 });
  assert.ok(Math.abs(found.cliff_ms - knee) <= 2, `cliff ${found.cliff_ms} ms, planted ${knee} ms`);

  // The page's row for the class holds the same numbers (one fit later at most: the fit
  // repeats every second on the same data, so the same cliff).
  await waitFor('the page to show the cliff', async () =>
    (await page.$$('[data-k="economics"][data-status="found"]')).length === 1, { timeoutMs: 10000 });
  const row = await page.$eval('[data-k="economics"][data-class="search"]', (tr) =>
    ({ cliff: Number(tr.dataset.cliffMs), cells: [...tr.children].map((td) => td.textContent) }));
  const latest = (await economics()).classes.find((x) => x.class === 'search');
  assert.equal(row.cliff, latest.cliff_ms);
  assert.equal(row.cells[1], `${latest.cliff_ms.toFixed(0)} ms`);
  assert.equal(row.cells[2], `[${latest.ci95_ms[0].toFixed(0)}, ${latest.ci95_ms[1].toFixed(0)}] ms`);
  assert.equal(row.cells[6], 'found');

  // Autotune's first move, 600000 -> 540000 ms (one step of 10 %), in the events table with
  // its evidence, as /v1/economics records it.
  await waitFor('a target move on the page', async () =>
    (await page.$$('[data-k="target-change"]')).length > 0, { timeoutMs: 10000 });
  const moves = (await economics()).autotune.moves;
  assert.equal(moves[0].from_ms, 600000);
  assert.equal(moves[0].to_ms, 540000);
  const first = await page.$$eval('[data-k="target-change"]', (rows) =>
    rows.map((r) => ({ from: Number(r.dataset.from), to: Number(r.dataset.to), text: r.textContent })).pop());
  assert.equal(first.from, 600000);
  assert.equal(first.to, 540000);
  assert.match(first.text, /autotune: cliff \d+ ms/);
  await page.screenshot({ path: path.join(SHOTS, 'dashboard-economics.png'), fullPage: true });
  await page.close();
  assert.deepEqual(errors, []);
});
