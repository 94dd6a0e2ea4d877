// The dashboard's thinking view in a real browser (Debian's headless Chromium, puppeteer-core)
// against a real `lifeline serve` running a thinking model: a small random model on Qwen's
// real vocabulary served with DeepSeek R1's real chat template, whose generation prompt opens
// "<think>" (so every chat request thinks until its budget ends the thinking).
//
// The class "think" has a 5 ms TTFA target (a histogram bound) that requests thinking 64
// tokens miss on any machine, and a TTFT target they meet; under load the thinking rung must
// halve the class's thinking before anything else, and the page must show it:
//   - the class row's TTFA P95 / P99 / target and thinking P95 equal GET /v1/slo's within one
//     refresh (read before and after the page, compared when both reads agree), and its
//     "thinking budget" cell the lowest thinking_scale of the class's ladders;
//   - the thinking rung's moves appear in the events table (data-k="thinking-change", from
//     1 to 0.5 first), and the class's card charts TTFA and the thinking budget;
//   - no console or page errors.
// Screenshot: build/dashboard-thinking.png.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { BINARY, launchBrowser, startLoad, startServer, stopServer, tempDir, waitFor } from './lib.mjs';

const VOCAB = process.env.LIFELINE_QWEN2_VOCAB;
const TEMPLATE = process.env.LIFELINE_R1_TEMPLATE;
const SHOTS = process.env.LIFELINE_SCREENSHOT_DIR || '.';

const CONFIG = `default_class = "think"
use_presets = false

[classes.think]
ttft_p95_ms = 60000
ttfa_p95_ms = 5
priority = 1
max_level = 2

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

let dir, server, browser;
const errors = [];

before(async () => {
  assert.ok(BINARY && VOCAB && TEMPLATE, 'LIFELINE_BINARY, LIFELINE_QWEN2_VOCAB and LIFELINE_R1_TEMPLATE must be set');
  dir = tempDir('lifeline-dashboard-thinking-');
  const model = path.join(dir.dir, 'r1.gguf');
  execFileSync(BINARY, ['make-model', '--dim', '64', '--layers', '1', '--heads', '2', '--ffn', '128', '--tied',
                        '--type', 'f16', '--seed', '5', '--ctx', '2048', '--vocab-from', VOCAB, '-o', model],
               { stdio: 'ignore' });
  server = await startServer(['--model', `r1=${model}`, '--chat-template-file', TEMPLATE, '-t', '1',
                              '--kv-memory', '64', '--config', dir.write('slo.toml', CONFIG)]);
  browser = await launchBrowser(puppeteer);
});

after(async () => {
  if (browser) await browser.close();
  await stopServer(server);
  if (dir) dir.remove();
});

const slo = async () => (await fetch(server.url + '/v1/slo')).json();

// What the page must show for the class "think" in a /v1/slo body: data-k -> value.
function expectedValues(status) {
  const c = status.classes.find((x) => x.name === 'think');
  const stat = (metric, q) => (c.live && c.live[metric] && c.live[metric].count > 0 ? c.live[metric][q + '_ms'] : null);
  const k = 'class/think';
  return { [`${k}/ttfa/p95`]: stat('ttfa', 'p95'), [`${k}/ttfa/p99`]: stat('ttfa', 'p99'),
           [`${k}/ttfa/target`]: c.targets.ttfa_p95_ms, [`${k}/think/p95`]: stat('think', 'p95'),
           [`${k}/thinking_scale`]: Math.min(1, ...c.ladders.map((l) => l.thinking_scale)) };
}

async function compareOnce(page) {
  const a = await slo();
  await waitFor('a page snapshot newer than the first /v1/slo read',
                async () => Number(await page.$eval('#snapshot', (e) => e.dataset.nowMs || 0)) > a.now_ms,
                { timeoutMs: 5000, everyMs: 25 });
  const shown = await page.$$eval('[data-k^="class/think/"]', (els) =>
    Object.fromEntries(els.map((e) => [e.dataset.k, { v: e.dataset.v, text: e.textContent }])));
  const b = await slo();
  const ea = expectedValues(a), eb = expectedValues(b);
  if (JSON.stringify(ea) !== JSON.stringify(eb)) return false;
  // The rung may move on the ages of requests still thinking, before any has answered: the
  // comparison below wants answered ones.
  if (ea['class/think/ttfa/p95'] === null || ea['class/think/think/p95'] === null) return false;
  for (const [key, want] of Object.entries(ea)) {
    const got = shown[key];
    assert.ok(got, `the page shows ${key}`);
    if (want === null) {
      assert.equal(got.text, '–', key);
    } else {
      assert.equal(Number(got.v), want, `${key}: page ${got.v}, /v1/slo ${want}`);
    }
  }
  return ea;
}

test('dashboard: TTFA, thinking time and the thinking rung of a thinking model', async () => {
  const page = await browser.browser.newPage();
  await page.setViewport({ width: 1600, height: 1800 });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  await page.goto(server.url + '/?interval_ms=250');
  await page.waitForSelector('#conn[data-state="live"]', { timeout: 10000 });

  const load = startLoad(server.url, { concurrency: 3, endpoint: '/v1/chat/completions',
                                       body: { max_tokens: 80, thinking_budget_tokens: 64, temperature: 0 } });
  try {
    await waitFor('the thinking rung to halve the class\'s thinking', async () => {
      const s = await slo();
      return (s.thinking_changes || []).some((c) => c.class === 'think' && c.to < c.from);
    }, { timeoutMs: 60000, everyMs: 200 });
    await waitFor('the page to show a thinking change', async () =>
      (await page.$$('[data-k="thinking-change"]')).length > 0, { timeoutMs: 10000 });
    const first = await page.$$eval('[data-k="thinking-change"]', (rows) =>
      rows.map((r) => ({ from: Number(r.dataset.from), to: Number(r.dataset.to), cls: r.dataset.class })).pop());
    assert.deepEqual(first, { from: 1, to: 0.5, cls: 'think' }, 'the oldest move halves the thinking');

    let compared = null;
    for (let i = 0; i < 200 && !compared; ++i) compared = await compareOnce(page);
    assert.ok(compared, '/v1/slo never held still long enough to compare');
    assert.ok(compared['class/think/ttfa/p95'] > 5, 'TTFA misses its 5 ms target under this load: ' + JSON.stringify(compared));
    assert.ok(compared['class/think/think/p95'] !== null, 'the requests thought');

    const headings = await page.$$eval('[data-chart-class="think"] h3', (hs) => hs.map((x) => x.textContent));
    assert.ok(headings.some((t) => t.includes('TTFA')), headings.join(' | '));
    assert.ok(headings.some((t) => t.includes('thinking budget')), headings.join(' | '));
    await page.screenshot({ path: path.join(SHOTS, 'dashboard-thinking.png'), fullPage: true });
  } finally {
    const tally = await load.stop();
    assert.ok(tally.ok > 0, JSON.stringify(tally.status));
  }
  assert.deepEqual(errors, []);
});
