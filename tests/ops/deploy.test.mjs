// The files under deploy/ against the real thing:
//   - Prometheus rules: `promtool check rules` and `promtool test rules` (synthetic series with
//     hand-computed answers in deploy/prometheus/rules_test.yml);
//   - Grafana: the dashboard parses, its first row is SLO attainment coloured red below 0.90
//     and green from 0.99, every query parses as PromQL (promtool checks them as recording
//     rules) and names only metrics a real `lifeline serve` exports or the rules record;
//   - Kubernetes: every manifest parses; readiness on /ready, a preStop that drains, resource
//     requests, ports that line up, the HPA's metric is the one prometheus-adapter serves, and
//     the adapter's and the endpoint picker's metrics exist on a real server's /metrics;
//   - Containerfile: both stages on debian:12-slim, and its runtime packages are the shared
//     libraries the binary links.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { BINARY, MODEL, startServer, stopServer, tempDir } from './lib.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DEPLOY = path.join(ROOT, 'deploy');
const PROMTOOL = process.env.LIFELINE_PROMTOOL || 'promtool';

// A class whose 1 us TTFT target every request misses, a fast controller: one request makes
// a ladder transition, so every family (transitions included) shows up on /metrics.
const CONFIG = `default_class = "tight"
[classes.tight]
ttft_p95_ms = 0.001
[admission]
predictive = false
[controller]
tick_ms = 50
min_samples = 1
[ladder]
min_dwell_ms = 0
raise_interval_ms = 0
`;

let dir, server, families;

before(async () => {
  dir = tempDir('lifeline-deploy-');
  server = await startServer(['--model', `stories=${MODEL}`, '--threads', '1', '--kv-memory', '16',
                              '--config', dir.write('slo.toml', CONFIG)]);
  for (let i = 0; i < 3; ++i) {
    const r = await fetch(server.url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                            body: JSON.stringify({ prompt: 'Hi', max_tokens: 4 }) });
    await r.text();
  }
  let text = '';
  for (let i = 0; i < 50 && !text.includes('lifeline_slo_ladder_transitions_total{'); ++i) {
    await new Promise((r) => setTimeout(r, 100));
    text = await (await fetch(server.url + '/metrics')).text();
  }
  families = new Set(text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(/[{ ]/)[0]));
});

after(async () => {
  await stopServer(server);
  if (dir) dir.remove();
});

function promtool(args, cwd) {
  const r = spawnSync(PROMTOOL, args, { cwd, encoding: 'utf8' });
  return { code: r.status, out: (r.stdout || '') + (r.stderr || '') };
}

function recordedNames() {
  const rules = YAML.parse(readFileSync(path.join(DEPLOY, 'prometheus/rules.yml'), 'utf8'));
  return new Set(rules.groups.flatMap((g) => g.rules.filter((r) => r.record).map((r) => r.record)));
}

// Metric names in a PromQL expression: identifiers followed by a selector, a range or the end
// of a function argument, excluding functions, keywords, label names and strings.
function metricNames(expr) {
  const noStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const noLabelSets = noStrings.replace(/\{[^}]*\}/g, '{}').replace(/(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const names = new Set();
  for (const m of noLabelSets.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const id = m[0];
    const rest = noLabelSets.slice(m.index + id.length);
    if (/^\s*\(/.test(rest)) continue;  // a function call
    if (['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'bool', 'offset', 'inf', 'nan'].includes(id)) continue;
    if (/^[0-9]/.test(id)) continue;
    if (!/^(lifeline_|vllm:|[a-z_]+:)/.test(id)) continue;
    names.add(id);
  }
  return names;
}

test('Prometheus rules pass promtool check and the unit tests', () => {
  const check = promtool(['check', 'rules', 'rules.yml'], path.join(DEPLOY, 'prometheus'));
  assert.equal(check.code, 0, check.out);
  const unit = promtool(['test', 'rules', 'rules_test.yml'], path.join(DEPLOY, 'prometheus'));
  assert.equal(unit.code, 0, unit.out);
  const rules = YAML.parse(readFileSync(path.join(DEPLOY, 'prometheus/rules.yml'), 'utf8'));
  const alerts = rules.groups.flatMap((g) => g.rules.filter((r) => r.alert).map((r) => r.alert));
  for (const a of ['LifelineSLOBurnRateFast', 'LifelineSLOBurnRateSlow', 'LifelineLadderStuck', 'LifelineShedRateHigh']) {
    assert.ok(alerts.includes(a), a);
  }
  const recorded = recordedNames();
  for (const g of rules.groups) {
    for (const r of g.rules) {
      for (const name of metricNames(r.expr)) {
        assert.ok(families.has(name) || recorded.has(name), `${r.record || r.alert}: ${name} is neither exported nor recorded`);
      }
    }
  }
});

test('the Grafana dashboard: attainment first, every query valid and about real metrics', () => {
  const dash = JSON.parse(readFileSync(path.join(DEPLOY, 'grafana/lifeline.json'), 'utf8'));
  assert.equal(dash.uid, 'lifeline-slo');
  const panels = dash.panels;
  const ids = panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, 'unique panel ids');
  assert.equal(panels[0].type, 'row');
  assert.match(panels[0].title, /attainment/i);
  const firstRow = [];
  for (const p of panels.slice(1)) {
    if (p.type === 'row') break;
    firstRow.push(p);
  }
  assert.ok(firstRow.length >= 2);
  for (const p of firstRow) {
    const steps = p.fieldConfig.defaults.thresholds.steps;
    assert.deepEqual(steps.map((s) => [s.color, s.value]), [['red', null], ['yellow', 0.9], ['green', 0.99]], p.title);
    assert.equal(p.fieldConfig.defaults.unit, 'percentunit');
  }
  const titles = panels.map((p) => p.title.toLowerCase()).join(' | ');
  for (const want of ['attainment', 'p95 against target', 'ladder level', 'queue', 'kv', 'tokens per second', 'cascade']) {
    assert.ok(titles.includes(want), `a panel about ${want}`);
  }
  // Every expression, with the dashboard's variables filled in, through promtool's parser.
  const exprs = panels.flatMap((p) => (p.targets || []).map((t) => ({ panel: p.title, expr: t.expr })));
  assert.ok(exprs.length >= 15);
  const recorded = recordedNames();
  for (const { panel, expr } of exprs) {
    for (const name of metricNames(expr)) {
      assert.ok(families.has(name) || recorded.has(name), `${panel}: ${name} is not exported by lifeline serve`);
    }
  }
  const concrete = exprs.map(({ expr }) => expr.replaceAll('$__rate_interval', '1m').replaceAll('$job', '.*').replaceAll('$class', '.*'));
  const file = dir.write('grafana_queries.yml', YAML.stringify({ groups: [{ name: 'grafana', rules: concrete.map((expr, i) => ({ record: `grafana:query_${i}`, expr })) }] }));
  const check = promtool(['check', 'rules', file]);
  assert.equal(check.code, 0, check.out);
});

function manifests() {
  const docs = [];
  for (const f of readdirSync(path.join(DEPLOY, 'k8s')).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const d of YAML.parseAllDocuments(readFileSync(path.join(DEPLOY, 'k8s', f), 'utf8'))) {
      assert.deepEqual(d.errors, [], f);
      const obj = d.toJS();
      if (obj) docs.push({ file: f, ...obj });
    }
  }
  return docs;
}

test('metric names are found in PromQL', () => {
  assert.deepEqual([...metricNames('sum by (class, le) (rate(lifeline_x_bucket{a="b",c=~"d|e"}[5m])) / on (pod) group_left ns:rec:ratio')],
                   ['lifeline_x_bucket', 'ns:rec:ratio']);
  assert.deepEqual([...metricNames('label_replace(max(vllm:num_requests_waiting), "metric", "ttft", "", "") > 0.9')],
                   ['vllm:num_requests_waiting']);
});

test('Kubernetes manifests line up with each other and with the server', async () => {
  const docs = manifests();
  const kind = (k) => docs.filter((d) => d.kind === k);
  const kust = kind('Kustomization')[0];
  assert.deepEqual([...kust.resources].sort(), [...new Set(docs.filter((d) => d.kind !== 'Kustomization').map((d) => d.file))].sort(),
                   'kustomization.yaml lists every manifest');
  const [deploy] = kind('Deployment');
  const pod = deploy.spec.template.spec;
  const c = pod.containers[0];
  assert.deepEqual(deploy.spec.selector.matchLabels, deploy.spec.template.metadata.labels);
  assert.equal(c.readinessProbe.httpGet.path, '/ready');
  assert.equal(c.livenessProbe.httpGet.path, '/health');
  const preStop = c.lifecycle.preStop.exec.command.join(' ');
  assert.match(preStop, /kill -TERM 1/, 'the preStop hook starts the drain');
  assert.match(preStop, /while kill -0 1/, 'and waits for it');
  const drain = Number(c.args.find((a) => a.startsWith('--drain-timeout=')).split('=')[1]);
  assert.ok(pod.terminationGracePeriodSeconds > drain + 5, 'the grace period covers the preStop wait and the drain');
  assert.ok(c.resources.requests.cpu && c.resources.requests.memory, 'resource requests');
  const threads = Number(c.args.find((a) => a.startsWith('--threads=')).split('=')[1]);
  assert.equal(String(threads), String(c.resources.requests.cpu), 'one compute thread per requested CPU');
  const port = c.ports.find((p) => p.name === 'http').containerPort;
  assert.ok(c.args.includes(`--port=${port}`));
  // The SLO file the Deployment mounts is a valid config for the real server.
  const [slo] = kind('ConfigMap').filter((m) => m.data['slo.toml']);
  assert.ok(c.args.includes('--config=/etc/lifeline/slo.toml'));
  const withK8sConfig = await startServer(['--model', `stories=${MODEL}`, '--threads', '1', '--kv-memory', '16',
                                           '--config', dir.write('k8s-slo.toml', slo.data['slo.toml'])]);
  await stopServer(withK8sConfig);  // it started: the ConfigMap's slo.toml is a valid config

  const [svc] = kind('Service');
  assert.deepEqual(svc.spec.selector, deploy.spec.template.metadata.labels);
  assert.equal(svc.spec.ports[0].targetPort, 'http');
  const [pm] = kind('PodMonitor');
  assert.deepEqual(pm.spec.selector.matchLabels, deploy.spec.template.metadata.labels);
  assert.equal(pm.spec.podMetricsEndpoints[0].port, 'http');
  assert.equal(pm.spec.podMetricsEndpoints[0].path, '/metrics');

  const [hpa] = kind('HorizontalPodAutoscaler');
  assert.equal(hpa.spec.scaleTargetRef.name, deploy.metadata.name);
  const hpaMetric = hpa.spec.metrics[0].pods.metric;
  const adapter = YAML.parse(kind('ConfigMap').find((m) => m.data['config.yaml']).data['config.yaml']);
  const rule = adapter.rules.find((r) => r.name.as === hpaMetric.name);
  assert.ok(rule, 'prometheus-adapter serves the metric the HPA reads');
  for (const name of metricNames(rule.seriesQuery + ' ' + rule.metricsQuery.replaceAll('<<.LabelMatchers>>', '').replaceAll('<<.GroupBy>>', 'pod'))) {
    assert.ok(families.has(name), `the adapter's ${name} is on /metrics`);
  }
  for (const label of Object.keys(hpaMetric.selector.matchLabels)) {
    assert.ok(['class', 'metric'].includes(label), `the HPA selects on a label the series carry: ${label}`);
  }
  const classes = [...slo.data['slo.toml'].matchAll(/\[classes\.([a-z0-9_-]+)\]/g)].map((m) => m[1]);
  assert.ok(classes.includes(hpaMetric.selector.matchLabels.class), 'the HPA scales on a configured class');

  const [pool] = kind('InferencePool');
  assert.deepEqual(pool.spec.selector.matchLabels, deploy.spec.template.metadata.labels);
  assert.equal(pool.spec.targetPorts[0].number, port);
  // What the endpoint picker reads from vLLM-compatible servers.
  for (const name of ['vllm:num_requests_waiting', 'vllm:num_requests_running', 'vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc',
                      'vllm:cache_config_info']) {
    assert.ok(families.has(name), `${name} on /metrics`);
  }
});

test('the Containerfile builds on debian:12-slim and installs what the binary links', () => {
  const text = readFileSync(path.join(ROOT, 'Containerfile'), 'utf8');
  const froms = [...text.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
  assert.deepEqual(froms, ['debian:12-slim', 'debian:12-slim']);
  const runtime = text.slice(text.lastIndexOf('FROM '));
  const ldd = execFileSync('ldd', [BINARY], { encoding: 'utf8' });
  const libs = [...ldd.matchAll(/=> (\/\S+)/g)].map((m) => m[1]);
  // Debian 12 is usr-merged: a library's package is registered under /lib or /usr/lib. One
  // dpkg -S for every candidate path (it lists the ones it knows).
  const candidates = libs.flatMap((lib) => [lib, '/usr' + lib, realpathSync(lib)]);
  const known = new Map();
  for (const line of spawnSync('dpkg', ['-S', ...candidates], { encoding: 'utf8' }).stdout.split('\n')) {
    const m = line.match(/^([^:]+):[^ ]*: (\/.*)$/);
    if (m) known.set(m[2], m[1]);
  }
  const ownerOf = (lib) => known.get(lib) || known.get('/usr' + lib) || known.get(realpathSync(lib)) || `(no package owns ${lib})`;
  for (const lib of libs) {
    const owner = ownerOf(lib);
    if (['libc6', 'libgcc-s1', 'libstdc++6'].includes(owner)) continue;  // in debian:12-slim itself
    assert.ok(runtime.includes(owner), `the runtime stage installs ${owner} for ${path.basename(lib)}`);
  }
});
