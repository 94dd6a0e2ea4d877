// The dashboard in a real browser: Debian's headless Chromium, driven by puppeteer-core,
// against a real `lifeline serve` (stories260K) behind --api-key and --cors-origin, under a
// scripted load that drives one class up the degradation ladder and back.
//
//   - the page asks for the API key (the state answers 401 without it) and goes live with it;
//   - under load the class's level badge leaves "normal" and the ladder event appears in the
//     events table; after the load stops the level returns to "normal" with its event;
//   - the numbers shown (levels, P95/P99 of TTFT, TTFA and e2e per class and per model,
//     targets, the thinking P95 and the thinking rung's share)
//     equal GET /v1/slo's within one refresh: /v1/slo is read before and after the page's
//     values, the page must hold a snapshot newer than the first read, and whenever both
//     reads agree the page must show exactly those values (as data-v, and as text rounded to
//     0.1 ms);
//   - the three-layer bars carry the split of requests the load client received, recomputed
//     here from each response's own `timings`;
//   - the page, served from another origin allowed by --cors-origin, reads the server too;
//   - the server is stopped and started again on the same port: the page says it lost the
//     server, then goes live again with the new instance;
//   - no console errors or page errors, except the browser's own "Failed to load resource"
//     lines for the 401 before the key was entered and while the server was down.
// Screenshots: build/dashboard-ladder.png (under load) and build/dashboard.png (the end).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { MODEL, freePort, launchBrowser, sleep, startLoad, startServer, stopServer, tempDir,
         waitFor } from './lib.mjs';

const API_KEY = 'sk-dashboard-test';
const SHOTS = process.env.LIFELINE_SCREENSHOT_DIR || '.';
const INTERVAL_MS = 500;

// "tight": a 5 ms TTFT target (a histogram bound) that the load below misses on any machine:
// eight concurrent clients each send a prompt of about 300 tokens that starts with its own
// number (so the prefix cache cannot serve it), and with one engine thread a request waits for
// the prefills of the ones ahead of it. (A short shared prompt was not enough: a fast machine
// answered its first token within 5 ms at P95.) The class may climb to level 2 only (no
// shedding, no cascade needed). A 8-10 s window of 2 s buckets (it changes only every 2 s, so
// /v1/slo holds still long enough to compare), a fast controller and a 1 s dwell: the class
// rises within seconds of the load and returns to "normal" once it is idle after the load.
const CONFIG = `default_class = "tight"
use_presets = false

[classes.tight]
ttft_p95_ms = 5
priority = 1
max_level = 2

[classes.relaxed]
ttft_p95_ms = 387
e2e_p95_ms = 5000

[controller]
tick_ms = 100
min_samples = 5

[ladder]
min_dwell_ms = 1000
raise_interval_ms = 500
recover_ticks = 3

[window]
bucket_ms = 2000
buckets = 5

[admission]
predictive = false
`;

let dir, port, server, corsPort, corsServer, browser;
const errors = [];
let allowNetworkErrors = false;

async function serve() {
  return startServer(['--model', `stories=${MODEL}`, '-t', '1', '--config', dir.write('slo.toml', CONFIG),
                      '--api-key', API_KEY, '--cors-origin', `http://127.0.0.1:${corsPort}`],
                     { port });
}

before(async () => {
  assert.ok(process.env.LIFELINE_BINARY && MODEL, 'LIFELINE_BINARY and LIFELINE_MODEL must be set');
  dir = tempDir('lifeline-dashboard-');
  port = await freePort();
  corsPort = await freePort();
  server = await serve();
  // Another origin serving the very same page bytes (fetched from the server).
  const page = await (await fetch(server.url + '/')).text();
  corsServer = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(page);
  });
  corsServer.listen(corsPort, '127.0.0.1');
  await once(corsServer, 'listening');
  browser = await launchBrowser(puppeteer);
});

after(async () => {
  if (browser) await browser.close();
  if (corsServer) corsServer.close();
  await stopServer(server);
  if (dir) dir.remove();
});

async function openPage(url) {
  const page = await browser.browser.newPage();
  await page.setViewport({ width: 1400, height: 1700 });
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (allowNetworkErrors && /^Failed to load resource/.test(m.text())) return;
    errors.push(`console: ${m.text()} (${url})`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  await page.goto(url);
  return page;
}

async function enterKey(page) {
  await page.waitForSelector('#auth:not([hidden])', { timeout: 10000 });
  assert.equal(await page.$eval('#conn', (e) => e.dataset.state), 'auth');
  await page.type('#api-key', API_KEY);
  await page.click('#api-key-submit');
  await page.waitForSelector('#conn[data-state="live"]', { timeout: 10000 });
}

const slo = async () => {
  const r = await fetch(`http://127.0.0.1:${port}/v1/slo`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  assert.equal(r.status, 200);
  return r.json();
};

// What the page must show for a /v1/slo body: data-k -> value (null: "–").
function expectedValues(status) {
  const out = {};
  const stat = (series, metric, q) => (series && series[metric] && series[metric].count > 0 ? series[metric][q + '_ms'] : null);
  for (const c of status.classes) {
    if (!c.live && c.level === 0) continue;  // a class without traffic is only listed
    const k = `class/${c.name}`;
    out[`${k}/level`] = c.level;
    const scale = (model) => Math.min(1, ...c.ladders.filter((l) => model === null || l.model === model).map((l) => l.thinking_scale));
    out[`${k}/thinking_scale`] = scale(null);
    out[`${k}/think/p95`] = stat(c.live, 'think', 'p95');
    for (const [model, series] of Object.entries(c.by_model)) {
      out[`${k}/model/${model}/thinking_scale`] = scale(model);
      out[`${k}/model/${model}/think/p95`] = stat(series, 'think', 'p95');
    }
    for (const metric of ['ttft', 'ttfa', 'e2e']) {
      out[`${k}/${metric}/target`] = c.targets[`${metric}_p95_ms`];
      for (const q of ['p95', 'p99']) {
        out[`${k}/${metric}/${q}`] = stat(c.live, metric, q);
        for (const [model, series] of Object.entries(c.by_model)) out[`${k}/model/${model}/${metric}/${q}`] = stat(series, metric, q);
      }
    }
  }
  return out;
}

async function pageValues(page) {
  return page.$$eval('[data-k^="class/"]', (els) => Object.fromEntries(els.map((e) => [e.dataset.k, { v: e.dataset.v, text: e.textContent }])));
}

async function pageSnapshotMs(page) {
  return page.$eval('#snapshot', (e) => Number(e.dataset.nowMs || 0));
}

// One comparison: true when /v1/slo was stable around the page's read (and then the page
// matched it), false when /v1/slo moved in between (try again).
async function compareOnce(page) {
  const a = await slo();
  await waitFor('a page snapshot newer than the first /v1/slo read',
                async () => (await pageSnapshotMs(page)) > a.now_ms, { timeoutMs: 5000, everyMs: 25 });
  const shown = await pageValues(page);
  const b = await slo();
  const ea = expectedValues(a), eb = expectedValues(b);
  if (JSON.stringify(ea) !== JSON.stringify(eb)) return false;
  assert.ok(Object.keys(ea).length > 0, 'a class with traffic to compare');
  for (const [key, want] of Object.entries(ea)) {
    const got = shown[key];
    assert.ok(got, `the page shows ${key}`);
    if (key.endsWith('/level')) {
      assert.equal(Number(got.v), want, key);
      continue;
    }
    if (key.endsWith('/thinking_scale')) {
      assert.equal(Number(got.v), want, key);
      assert.equal(got.text, want >= 1 ? 'full' : '× ' + String(want), key);
      continue;
    }
    if (want === null) {
      assert.equal(got.v, '', key);
      assert.equal(got.text, '–', key);
    } else {
      assert.equal(Number(got.v), want, `${key}: page ${got.v}, /v1/slo ${want}`);
      assert.equal(got.text, want.toFixed(1), key);
    }
  }
  return true;
}

async function compareUntilStable(page, wanted) {
  let stable = 0;
  for (let i = 0; i < 60 && stable < wanted; ++i) {
    if (await compareOnce(page)) stable++;
  }
  assert.ok(stable >= wanted, `only ${stable} of ${wanted} comparisons found /v1/slo stable`);
}

// The three-layer split of a response, from its own timings (the documented grouping).
function splitOf(t) {
  const sum = (...keys) => keys.reduce((a, k) => a + (typeof t[k] === 'number' && t[k] > 0 ? t[k] : 0), 0);
  return { network: sum('http_read_ms'),
           service: sum('validate_ms', 'template_ms', 'tokenize_ms', 'queue_ms', 'kv_alloc_ms', 'model_load_ms', 'handoff_ms'),
           compute: sum('prefill_ms', 'decode_ms', 'sampling_ms') };
}

test('dashboard: API key, ladder up and back, numbers equal /v1/slo, restart, CORS', async (t) => {
  const url = `http://127.0.0.1:${port}/?interval_ms=${INTERVAL_MS}`;
  allowNetworkErrors = true;  // the first poll's 401, before the key is typed
  const page = await openPage(url);
  await t.test('the page asks for the API key and goes live with it', async () => {
    await enterKey(page);
    await sleep(2 * INTERVAL_MS);  // a poll sent before the key may still answer 401
    allowNetworkErrors = false;
    assert.equal(await page.$eval('#server-url', (e) => e.textContent), `http://127.0.0.1:${port}`);
  });

  const story = 'Once upon a time there was a little girl who liked to play in the park. '.repeat(12);
  const load = startLoad(server.url, { concurrency: 8, headers: { Authorization: `Bearer ${API_KEY}`, 'X-SLO-Class': 'tight' },
                                       body: (n) => ({ prompt: `${n} ${story}` }) });
  let tally;
  try {
    await t.test('under load the class climbs the ladder and the event appears', async () => {
      await page.waitForSelector('[data-k="class/tight/level"]:not([data-v="0"])', { timeout: 25000 });
      await page.waitForSelector('#events tr[data-class="tight"][data-from="normal"][data-to="truncate"]', { timeout: 5000 });
      const status = await slo();
      assert.ok(status.events.some((e) => e.class === 'tight' && e.to === 'truncate'), 'the event is in /v1/slo too');
      await sleep(1500);  // let the charts gather a few points
      await page.screenshot({ path: path.join(SHOTS, 'dashboard-ladder.png'), fullPage: true });
    });
  } finally {
    tally = await load.stop();
  }
  assert.ok(tally.ok > 20, `the load completed requests: ${JSON.stringify(tally.status)} ${tally.failures.slice(0, 3)}`);

  await t.test('the numbers shown equal /v1/slo within one refresh', async () => {
    await compareUntilStable(page, 2);
  });

  await t.test('the three-layer bars are the responses\' own timings', async () => {
    const bars = await page.$$eval('g[data-k="split"]', (gs) => gs.map((g) => ({ id: g.dataset.id, title: g.querySelector('title').textContent })));
    assert.ok(bars.length > 0, 'bars are drawn');
    const byId = new Map(tally.responses.map((r) => [r.id, r.body]));
    let checked = 0;
    for (const bar of bars) {
      const body = byId.get(bar.id);
      if (!body) continue;
      const want = splitOf(body.timings);
      for (const [name, ms] of Object.entries(want)) {
        const m = bar.title.match(new RegExp(`${name} ([0-9.]+) ms`));
        assert.ok(m, `${name} in ${bar.title}`);
        assert.ok(Math.abs(Number(m[1]) - ms) <= 0.006, `${bar.id} ${name}: bar ${m[1]}, response ${ms}`);
      }
      checked++;
    }
    assert.ok(checked > 0, 'some bars belong to requests the load client saw');
  });

  await t.test('the page from an origin --cors-origin allows reads the server too', async () => {
    // The new page polls without a key until one is typed: its 401s are expected from the
    // moment it loads (the flag is set before it does) until any poll sent before the key
    // has come back (two intervals after the page went live).
    allowNetworkErrors = true;
    let other;
    try {
      other = await openPage(`http://127.0.0.1:${corsPort}/?server=http://127.0.0.1:${port}&interval_ms=${INTERVAL_MS}`);
      await enterKey(other);
      await sleep(2 * INTERVAL_MS);
    } finally {
      allowNetworkErrors = false;
    }
    await other.waitForSelector('[data-k="class/tight/level"]', { timeout: 5000 });
    await other.close();
  });

  await t.test('after the load the level returns to normal with its event', async () => {
    await page.waitForSelector('[data-k="class/tight/level"][data-v="0"]', { timeout: 30000 });
    // Idle, a ladder goes straight back to normal from whatever level it reached.
    await page.waitForSelector('#events tr[data-class="tight"][data-to="normal"]', { timeout: 5000 });
    assert.equal((await slo()).classes.find((c) => c.name === 'tight').level, 0);
  });

  await t.test('the page keeps working after the server restarts', async () => {
    const before = await page.$eval('#snapshot', (e) => e.dataset.instance);
    allowNetworkErrors = true;
    await stopServer(server);
    await page.waitForSelector('#conn[data-state="down"]', { timeout: 10000 });
    server = await serve();
    await page.waitForSelector('#conn[data-state="live"]', { timeout: 10000 });
    allowNetworkErrors = false;
    const afterInstance = await page.$eval('#snapshot', (e) => e.dataset.instance);
    assert.notEqual(afterInstance, before, 'a new server instance');
    // Fresh traffic on the new instance shows up.
    const r = await fetch(server.url + '/v1/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}`, 'X-SLO-Class': 'relaxed' },
      body: JSON.stringify({ prompt: 'Hello', max_tokens: 8 }) });
    assert.equal(r.status, 200);
    await page.waitForSelector('[data-k="class/relaxed/ttft/p95"]:not([data-v=""])', { timeout: 10000 });
    await page.waitForSelector('[data-k="server/completed"][data-v="1"]', { timeout: 5000 });
    await page.screenshot({ path: path.join(SHOTS, 'dashboard.png'), fullPage: true });
  });

  assert.deepEqual(errors, [], 'no console or page errors');
});
