// The dashboard's script: polls GET /v1/dashboard about once a second (If-None-Match with the
// last ETag, so an unchanged state costs a bodyless 304), keeps a bounded history in memory
// for the charts and the rates, and draws everything as SVG. Values from the server are only
// ever written with textContent / attributes, never parsed as HTML.
//
// Query parameters: server=<base URL of another Lifeline> (its --cors-origin must allow
// this page's origin), interval_ms (250..10000, default 1000).
'use strict';
(() => {
  const LEVELS = ['normal', 'truncate', 'trim_context', 'cascade', 'shed'];
  const HISTORY_MAX = 600;         // points kept (10 minutes at 1 Hz)
  const LIVE_WINDOW_MS = 30000;    // attainment and cascade share over this trailing window
  const RATE_WINDOW_MS = 5000;     // tiles' rates over this trailing window
  const SPLIT_BARS = 40;
  const COLORS = ['#2f6fdb', '#e8710a', '#1a7f37', '#9334e6', '#c62828', '#00838f', '#795548'];
  // Per-model lines: none of them red (the target line) or the P95/P99 colours.
  const MODEL_COLORS = ['#00838f', '#795548', '#1a7f37', '#e8710a', '#5f6b7a'];
  const SPLIT = [['network_ms', 'network', '#4e79a7'], ['service_ms', 'service', '#f28e2b'],
                 ['compute_ms', 'compute', '#59a14f'], ['remote_ms', 'remote', '#b07aa1']];

  const params = new URLSearchParams(location.search);
  const BASE = serverBase();
  const INTERVAL_MS = Math.min(10000, Math.max(250, Number(params.get('interval_ms')) || 1000));
  const KEY_STORE = 'lifeline.api_key ' + BASE;

  let apiKey = sessionStorage.getItem(KEY_STORE) || '';
  let etag = null;
  let state = null;      // the last full state
  let history = [];      // one point per poll answered (200 or 304)
  let clockOffsetMs = 0; // server unix ms - local unix ms at the last 200
  let waitingForKey = false;

  function serverBase() {
    const s = (params.get('server') || '').replace(/\/+$/, '');
    if (/^https?:\/\/[A-Za-z0-9.\-:[\]]+$/.test(s)) return s;
    if (location.protocol === 'http:' || location.protocol === 'https:') return location.origin;
    return 'http://127.0.0.1:8080';
  }

  // ---- Polling ------------------------------------------------------------------------

  async function poll() {
    if (waitingForKey) return;
    const headers = {};
    if (apiKey) headers.Authorization = 'Bearer ' + apiKey;
    if (etag && state) headers['If-None-Match'] = etag;
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), Math.max(3000, 3 * INTERVAL_MS));
    try {
      const r = await fetch(BASE + '/v1/dashboard', { headers, cache: 'no-store', signal: ctrl.signal });
      if (r.status === 401) {
        needKey(apiKey ? 'the server refused this key' : '');
      } else if (r.status === 304 && state) {
        onUnchanged(Number(r.headers.get('X-Lifeline-Now-Ms')));
      } else if (r.ok) {
        const s = await r.json();
        etag = r.headers.get('ETag');
        onState(s);
      } else {
        onDown('HTTP ' + r.status);
      }
    } catch (e) {
      onDown(e && e.name === 'AbortError' ? 'timed out' : 'unreachable');
    } finally {
      clearTimeout(timer);
      if (!waitingForKey) setTimeout(poll, INTERVAL_MS);
    }
  }

  function needKey(message) {
    waitingForKey = true;
    setConn('auth', 'API key needed');
    byId('auth').hidden = false;
    byId('auth-message').textContent = message;
    byId('api-key').focus();
  }

  byId('auth-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    apiKey = byId('api-key').value.trim();
    sessionStorage.setItem(KEY_STORE, apiKey);
    byId('auth').hidden = true;
    byId('forget-key').hidden = !apiKey;
    waitingForKey = false;
    etag = null;
    poll();
  });
  byId('forget-key').addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORE);
    apiKey = '';
    byId('forget-key').hidden = true;
  });

  function onState(s) {
    const restarted = state !== null && s.instance !== state.instance;
    clockOffsetMs = s.unix_ms - Date.now();
    pushPoint(pointOf(s, s.unix_ms, restarted));
    state = s;
    setConn('live', 'live');
    render();
  }

  function onUnchanged(nowMs) {
    // Only the clocks moved: the state shown is current as of the server's clock now.
    if (state.slo && Number.isFinite(nowMs) && nowMs > 0) state.slo.now_ms = nowMs;
    // Repeat the last point at the server's present time.
    const last = history[history.length - 1];
    pushPoint(Object.assign({}, last, { t: Date.now() + clockOffsetMs, restart: false }));
    setConn('live', 'live');
    render();
  }

  function onDown(why) {
    setConn('down', 'disconnected: ' + why + ', retrying');
  }

  function setConn(kind, text) {
    const pill = byId('conn');
    pill.dataset.state = kind;
    pill.textContent = text;
    document.body.classList.toggle('stale', kind === 'down');
  }

  // ---- History and rates --------------------------------------------------------------

  function pointOf(s, t, restart) {
    const p = { t, instance: s.instance, restart, classes: {}, models: {}, c: {}, att: {}, out: {} };
    for (const c of (s.slo && s.slo.classes) || []) {
      const models = {};
      for (const [m, series] of Object.entries(c.by_model || {})) {
        models[m] = { ttft: stat(series, 'ttft', 'p95_ms'), ttfa: stat(series, 'ttfa', 'p95_ms'),
                      e2e: stat(series, 'e2e', 'p95_ms') };
      }
      const quantiles = (metric) => ({ p95: stat(c.live, metric, 'p95_ms'), p99: stat(c.live, metric, 'p99_ms') });
      p.classes[c.name] = { level: c.level, models, thinking: thinkingScale(c, null),
                            ttft: quantiles('ttft'), ttfa: quantiles('ttfa'), e2e: quantiles('e2e') };
    }
    let tokens = 0;
    for (const m of s.models || []) {
      if (m.remote) {
        p.models[m.name] = { running: m.in_flight, waiting: 0 };
        continue;
      }
      tokens += m.generation_tokens || 0;
      p.models[m.name] = { waiting: m.waiting, running: m.running, max_running: m.max_running };
      p.c['lookup|' + m.name] = m.prefix_lookup_tokens;
      p.c['hit|' + m.name] = m.prefix_hit_tokens;
    }
    const sv = s.server || {};
    p.c.completed = sv.completed || 0;
    p.c.r429 = sv.responses_429 || 0;
    p.c.tokens = tokens;
    for (const a of s.attainment || []) {
      p.att[attKey(a.class, a.model, a.metric)] = { count: a.count, within: a.within };
    }
    for (const o of s.outcomes || []) p.out[o.class + '|' + o.model + '|' + o.outcome] = o.count;
    return p;
  }

  function pushPoint(p) {
    history.push(p);
    if (history.length > HISTORY_MAX) history.splice(0, history.length - HISTORY_MAX);
  }

  // The oldest point of the latest server instance within `ms` of the newest one.
  function baseline(ms) {
    const last = history[history.length - 1];
    let base = last;
    for (let i = history.length - 1; i >= 0; --i) {
      const p = history[i];
      if (p.instance !== last.instance || last.t - p.t > ms) break;
      base = p;
      if (p.restart) break;
    }
    return base;
  }

  function rate(key, ms) {
    const last = history[history.length - 1];
    const base = baseline(ms);
    const dt = last.t - base.t;
    if (!last || dt <= 0) return null;
    return (last.c[key] - base.c[key]) * 1000 / dt;
  }

  // Share of requests within target: over the trailing window when requests arrived in it,
  // else (a page just opened) since the server started.
  function attainment(cls, model, metric) {
    const key = attKey(cls, model, metric);
    const last = history[history.length - 1];
    const now = last && last.att[key];
    if (!now) return null;
    const base = baseline(LIVE_WINDOW_MS);
    const then = base.att[key] || { count: 0, within: 0 };
    if (base !== last && now.count > then.count) {
      return { v: (now.within - then.within) / (now.count - then.count), live: true, n: now.count - then.count };
    }
    if (base === last && now.count > 0) return { v: now.within / now.count, live: false, n: now.count };
    return null;
  }

  // ---- Rendering ----------------------------------------------------------------------

  function render() {
    const s = state;
    const slo = s.slo;
    const snap = byId('snapshot');
    snap.dataset.instance = s.instance;
    snap.dataset.unixMs = s.unix_ms;
    snap.dataset.nowMs = slo ? slo.now_ms : '';
    byId('updated').textContent = new Date(Date.now() + clockOffsetMs).toLocaleTimeString();
    byId('readiness').textContent = s.draining ? 'draining' : s.ready ? 'ready' : 'not ready';
    byId('window-note').textContent = slo ? `(sliding window ${slo.window_s} s; attainment over the last 30 s)` : '(no SLO control plane)';
    renderTiles(s);
    renderClasses(s);
    renderClassCharts(s);
    renderEvents(s);
    renderEconomics(s);
    renderEngines(s);
    renderRates();
    renderSplit(s);
    renderCascade(s);
  }

  function renderTiles(s) {
    setNum('rate/requests', rate('completed', RATE_WINDOW_MS), 1);
    setNum('rate/tokens', rate('tokens', RATE_WINDOW_MS), 0);
    setNum('rate/429', rate('r429', RATE_WINDOW_MS), 1);
    const sv = s.server || {};
    setNum('server/in_flight', sv.in_flight, 0);
    setNum('server/completed', sv.completed, 0);
    setNum('server/responses_429', sv.responses_429, 0);
  }

  // A class is shown once it has had traffic (or a level or an event); the rest are listed.
  function shownClasses(s) {
    const shown = [], idle = [];
    const withEvents = new Set(((s.slo && s.slo.events) || []).map((e) => e.class));
    const counted = new Set((s.attainment || []).map((a) => a.class));
    for (const c of (s.slo && s.slo.classes) || []) {
      const active = c.live || c.level > 0 || withEvents.has(c.name) || counted.has(c.name);
      (active ? shown : idle).push(c);
    }
    return { shown, idle };
  }

  function renderClasses(s) {
    const body = document.querySelector('#classes tbody');
    const { shown, idle } = shownClasses(s);
    const rows = [];
    for (const c of shown) {
      const k = 'class/' + c.name;
      const tr = h('tr', { 'data-class': c.name });
      tr.append(h('td', {}, h('b', {}, c.name)));
      const badge = h('span', { class: 'badge l' + c.level, 'data-k': k + '/level', 'data-v': c.level }, c.level_name);
      badge.title = `at this level for ${(c.level_age_ms / 1000).toFixed(0)} s`;
      tr.append(h('td', {}, badge));
      latencyCells(tr, k, c.live, c.targets, c.name, null);
      thinkingCells(tr, k, c.live, thinkingScale(c, null));
      tr.append(numCell(k + '/samples', c.live ? Math.max(c.live.ttft.count, c.live.e2e.count) : null, 0));
      rows.push(tr);
      for (const [model, series] of Object.entries(c.by_model || {})) {
        const mk = k + '/model/' + model;
        const mr = h('tr', { class: 'model' });
        mr.append(h('td', {}, model), h('td'));
        latencyCells(mr, mk, series, c.targets, c.name, model);
        thinkingCells(mr, mk, series, thinkingScale(c, model));
        mr.append(numCell(mk + '/samples', Math.max(series.ttft.count, series.e2e.count), 0));
        rows.push(mr);
      }
    }
    body.replaceChildren(...rows);
    byId('idle-classes').textContent = idle.length ? 'No traffic yet: ' + idle.map((c) => c.name).join(', ') : '';
  }

  // The share of the thinking budget the rung grants a (class, model) ladder now, or the
  // lowest over the class's ladders (model null); 1 when no ladder says otherwise.
  function thinkingScale(c, model) {
    const ladders = (c.ladders || []).filter((l) => model === null || l.model === model);
    const scales = ladders.map((l) => l.thinking_scale).filter((v) => typeof v === 'number');
    return scales.length ? Math.min(...scales) : 1;
  }

  function scaleText(v) { return v >= 1 ? 'full' : '× ' + fmt(v, 3).replace(/\.?0+$/, ''); }

  function thinkingCells(tr, k, live, scale) {
    const st = live && live.think && live.think.count > 0 ? live.think : null;
    tr.append(numCell(`${k}/think/p95`, st ? st.p95_ms : null, 1));
    const td = h('td', { 'data-k': `${k}/thinking_scale`, 'data-v': scale }, scaleText(scale));
    if (scale < 1) {
      td.classList.add('over');
      td.title = 'the thinking rung shortens new requests\' thinking budgets to this share';
    }
    tr.append(td);
  }

  function latencyCells(tr, k, live, targets, cls, model) {
    for (const metric of ['ttft', 'ttfa', 'e2e']) {
      const target = targets[metric + '_p95_ms'];
      const st = live && live[metric] && live[metric].count > 0 ? live[metric] : null;
      for (const q of ['p95', 'p99']) {
        const v = st ? st[q + '_ms'] : null;
        const td = numCell(`${k}/${metric}/${q}`, v, 1);
        if (v !== null && target !== null && v > target) td.classList.add('over');
        tr.append(td);
      }
      tr.append(numCell(`${k}/${metric}/target`, target, 1));
      const a = target === null ? null : attainment(cls, model, metric);
      const td = h('td', { 'data-k': `${k}/${metric}/attainment`, 'data-v': a ? a.v : '' },
                   a ? (a.v * 100).toFixed(1) + ' %' + (a.live ? '' : ' Σ') : '–');
      if (a) {
        td.classList.add(a.v < 0.9 ? 'att-bad' : a.v < 0.99 ? 'att-warn' : 'att-good');
        td.title = `${a.n} requests ${a.live ? 'in the last 30 s' : 'since the server started'}`;
      }
      tr.append(td);
    }
  }

  function renderClassCharts(s) {
    const box = byId('class-charts');
    const { shown } = shownClasses(s);
    const span = timeSpan();
    const cards = [];
    for (const c of shown) {
      const card = h('div', { class: 'card', 'data-chart-class': c.name });
      const marks = eventMarks(s, c.name);
      const pts = history.filter((p) => p.classes[c.name]);
      for (const [metric, label] of [['ttft', 'TTFT'], ['ttfa', 'TTFA (first answer token)'], ['e2e', 'end-to-end']]) {
        const target = c.targets[metric + '_p95_ms'];
        const series = [
          { name: 'P95', color: COLORS[0], points: pts.map((p) => [p.t, p.classes[c.name][metric].p95]) },
          { name: 'P99', color: COLORS[3], points: pts.map((p) => [p.t, p.classes[c.name][metric].p99]), dash: true }];
        const models = Object.keys(c.by_model || {});
        if (models.length > 1) {
          models.forEach((m, i) => series.push({ name: m + ' P95', color: MODEL_COLORS[i % MODEL_COLORS.length],
                                                   points: pts.map((p) => [p.t, (p.classes[c.name].models[m] || {})[metric] ?? null]) }));
        }
        const hasData = series.some((sr) => sr.points.some((p) => p[1] !== null));
        if (target === null && !hasData) continue;
        // TTFA differs from TTFT only for requests that think: its chart is shown when the
        // class has a TTFA target or its requests thought.
        const thought = c.live && c.live.think && c.live.think.count > 0;
        if (metric === 'ttfa' && target === null && !thought) continue;
        card.append(h('h3', {}, `${c.name}: ${label} (ms)` + (target === null ? ', no target' : `, target ${fmt(target, 1)} ms`)));
        const hlines = target === null ? [] : [{ v: target, color: '#c62828', label: 'target ' + fmt(target, 1) }];
        card.append(lineChart({ series, hlines, marks, span, height: 130 }));
      }
      card.append(h('h3', {}, `${c.name}: ladder level`));
      card.append(lineChart({ series: [{ name: 'level', color: '#b76e00', points: pts.map((p) => [p.t, p.classes[c.name].level]), step: true }],
                              marks, span, height: 100, yMax: 4, yLabels: LEVELS }));
      if (pts.some((p) => p.classes[c.name].thinking < 1)) {
        card.append(h('h3', {}, `${c.name}: thinking budget granted (share of each request's)`));
        card.append(lineChart({ series: [{ name: 'thinking', color: COLORS[3], points: pts.map((p) => [p.t, p.classes[c.name].thinking]), step: true }],
                                marks, span, height: 100, yMax: 1 }));
      }
      cards.push(card);
    }
    box.replaceChildren(...cards);
  }

  function eventMarks(s, cls) {
    const slo = s.slo;
    if (!slo) return [];
    const marks = (slo.events || []).filter((e) => e.class === cls)
      .map((e) => ({ t: eventUnixMs(e), color: e.to_level > e.from_level ? '#c62828' : '#1a7f37', label: `${e.from} -> ${e.to}: ${e.reason}` }));
    for (const p of history) if (p.restart) marks.push({ t: p.t, color: '#6a7280', label: 'restart' });
    return marks;
  }

  function eventUnixMs(e) { return state.unix_ms - (state.slo.now_ms - e.at_ms); }

  // The ladder's transitions and the thinking rung's moves, newest first.
  function renderEvents(s) {
    const body = document.querySelector('#events tbody');
    const rows = ((s.slo && s.slo.events) || []).map((e) => ({ t: eventUnixMs(e), tr: eventRow(e) }));
    for (const c of (s.slo && s.slo.thinking_changes) || []) {
      const t = s.unix_ms - c.age_ms;
      const tr = h('tr', { 'data-k': 'thinking-change', 'data-class': c.class, 'data-model': c.model, 'data-from': c.from, 'data-to': c.to });
      tr.append(h('td', {}, new Date(t).toLocaleTimeString()), h('td', {}, `${c.class} / ${c.model}`),
                h('td', {}, 'thinking ' + scaleText(c.from)),
                h('td', {}, h('span', { class: 'badge ' + (c.to < c.from ? 'l1' : 'l0') }, 'thinking ' + scaleText(c.to))),
                h('td', {}, c.reason), h('td', {}, '–'), h('td', {}, '–'));
      rows.push({ t, tr });
    }
    // Autotune's target moves (docs/economics.md), with the evidence behind each.
    const moves = (s.economics && s.economics.autotune && s.economics.autotune.moves) || [];
    for (const m of moves) {
      const tr = h('tr', { 'data-k': 'target-change', 'data-class': m.class, 'data-from': m.from_ms, 'data-to': m.to_ms });
      tr.append(h('td', {}, new Date(m.at_unix_ms).toLocaleTimeString()), h('td', {}, m.class),
                h('td', {}, 'TTFT target ' + fmt(m.from_ms, 0) + ' ms'),
                h('td', {}, h('span', { class: 'badge l0' }, 'TTFT target ' + fmt(m.to_ms, 0) + ' ms')),
                h('td', {}, `autotune: cliff ${fmt(m.cliff_ms, 0)} ms [${fmt(m.ci95_ms[0], 0)}, ${fmt(m.ci95_ms[1], 0)}], p ${fmt(m.p_value, 3)}, ${m.samples} samples, stable over ${m.stable_refits} refits`),
                h('td', {}, '–'), h('td', {}, fmt(m.goal_ms, 0) + ' ms (goal)'));
      rows.push({ t: m.at_unix_ms, tr });
    }
    rows.sort((a, b) => b.t - a.t);
    body.replaceChildren(...rows.map((r) => r.tr));
    if (!rows.length) body.replaceChildren(h('tr', {}, h('td', { colspan: 7 }, 'No ladder transitions yet.')));
  }

  function eventRow(e) {
    const tr = h('tr', { 'data-k': 'event', 'data-class': e.class, 'data-from': e.from, 'data-to': e.to, 'data-at-ms': e.at_ms });
    tr.append(h('td', {}, new Date(eventUnixMs(e)).toLocaleTimeString()), h('td', {}, e.class),
              h('td', {}, e.from), h('td', {}, h('span', { class: 'badge l' + e.to_level }, e.to)),
              h('td', {}, e.reason), h('td', {}, e.p95_ms === null ? '–' : fmt(e.p95_ms, 1) + ' ms'),
              h('td', {}, e.target_ms === null ? '–' : fmt(e.target_ms, 1) + ' ms'));
    return tr;
  }

  // The live cliff per class beside its P95 target (GET /v1/economics, in the state).
  function renderEconomics(s) {
    const body = document.querySelector('#economics tbody');
    const e = s.economics;
    if (!e) return body.replaceChildren(h('tr', {}, h('td', { colspan: 7 }, 'This server keeps no latency economics.')));
    const rows = (e.classes || []).map((c) => {
      const found = c.cliff_ms !== null && c.cliff_ms !== undefined;
      const over = found && c.target_ms !== null && c.target_ms > c.cliff_ms;
      const tr = h('tr', { 'data-k': 'economics', 'data-class': c.class, 'data-status': c.status,
                           'data-cliff-ms': found ? c.cliff_ms : '' });
      tr.append(h('td', {}, c.class),
                h('td', {}, found ? fmt(c.cliff_ms, 0) + ' ms' : '–'),
                h('td', {}, found ? `[${fmt(c.ci95_ms[0], 0)}, ${fmt(c.ci95_ms[1], 0)}] ms` : '–'),
                h('td', {}, c.target_ms === null ? '–' : h('span', { class: over ? 'badge l3' : '' }, fmt(c.target_ms, 0) + ' ms')),
                h('td', {}, found ? `${fmt(100 * c.rate_below, 1)} % / ${fmt(100 * c.rate_above, 1)} %` : '–'),
                h('td', {}, String(c.samples)),
                h('td', {}, c.status));
      return tr;
    });
    if (!rows.length) {
      const when = e.refits ? 'no class has finished requests in the last hour' : `first fit in at most ${e.refit_interval_s} s`;
      return body.replaceChildren(h('tr', {}, h('td', { colspan: 7 }, `No estimate yet (${when}).`)));
    }
    body.replaceChildren(...rows);
  }

  function renderEngines(s) {
    const span = timeSpan();
    const cards = (s.models || []).map((m) => {
      const k = 'model/' + m.name;
      const card = h('div', { class: 'card', 'data-model': m.name });
      card.append(h('h3', {}, m.name + (m.remote ? ' (remote)' : '')));
      const kv = h('div', { class: 'kv' });
      const item = (label, key, v, digits, suffix) => {
        kv.append(h('div', {}, h('span', {}, label + ' '), h('b', { 'data-k': k + '/' + key, 'data-v': v ?? '' }, v === null || v === undefined ? '–' : fmt(v, digits) + (suffix || ''))));
      };
      if (m.remote) {
        item('in flight', 'in_flight', m.in_flight, 0);
        item('completed', 'completed', m.completed, 0);
        item('errored', 'errored', m.errored, 0);
      } else {
        item('queue depth', 'waiting', m.waiting, 0);
        item('running', 'running', m.running, 0);
        item('batch limit', 'max_running', m.max_running, 0);
        item('step tokens', 'max_step_tokens', m.max_step_tokens, 0);
        item('batch window', 'max_queue_delay_ms', m.max_queue_delay_ms, 0, ' ms');
        item('preemptions', 'preemptions', m.preemptions, 0);
        const used = m.kv_blocks_total > 0 ? m.kv_blocks_used / m.kv_blocks_total : null;
        item('KV blocks', 'kv_blocks_used', m.kv_blocks_used, 0, ` / ${m.kv_blocks_total}`);
        const look = rate('lookup|' + m.name, LIVE_WINDOW_MS), hit = rate('hit|' + m.name, LIVE_WINDOW_MS);
        const ratio = look > 0 ? hit / look : m.prefix_lookup_tokens > 0 ? m.prefix_hit_tokens / m.prefix_lookup_tokens : null;
        item('prefix-cache hits', 'prefix_hit_ratio', ratio === null ? null : ratio * 100, 1, ' %');
        item('KV used', 'kv_used_ratio', used === null ? null : used * 100, 1, ' %');
        card.append(kv);
        const bar = h('div', { class: 'bar', title: 'KV blocks in use' }, h('div'));
        bar.firstChild.style.width = ((used || 0) * 100).toFixed(1) + '%';
        card.append(bar);
      }
      if (m.remote) card.append(kv);
      const pts = (key) => history.filter((p) => p.models[m.name]).map((p) => [p.t, p.models[m.name][key] ?? null]);
      const series = [{ name: 'queue depth', color: COLORS[1], points: pts('waiting') },
                      { name: 'running', color: COLORS[0], points: pts('running') }];
      if (!m.remote) series.push({ name: 'batch limit', color: '#6a7280', points: pts('max_running'), dash: true, step: true });
      card.append(lineChart({ series, span, height: 130 }));
      return card;
    });
    byId('engines').replaceChildren(...cards);
  }

  function renderRates() {
    const span = timeSpan();
    const perPoint = (key) => {
      const out = [];
      for (let i = 1; i < history.length; ++i) {
        const a = history[i - 1], b = history[i];
        if (a.instance !== b.instance || b.t <= a.t) { out.push([b.t, null]); continue; }
        out.push([b.t, (b.c[key] - a.c[key]) * 1000 / (b.t - a.t)]);
      }
      return out;
    };
    byId('rate-chart').replaceWith(withId(lineChart({ span, height: 170, series: [
      { name: 'requests/s', color: COLORS[0], points: perPoint('completed') },
      { name: '429/s', color: '#c62828', points: perPoint('r429') }] }), 'rate-chart'));
    byId('token-chart').replaceWith(withId(lineChart({ span, height: 170, series: [
      { name: 'tokens/s', color: COLORS[2], points: perPoint('tokens') }] }), 'token-chart'));
  }

  function renderSplit(s) {
    const recent = (s.recent || []).slice(-SPLIT_BARS);
    const W = 640, H = 190, L = 46, R = 8, T = 22, B = 18;
    const svg = svgEl('svg', { id: 'split-chart', class: 'chart', viewBox: `0 0 ${W} ${H}` });
    legend(svg, SPLIT.map(([, name, color]) => ({ name, color })), L);
    if (!recent.length) {
      svgEl('text', { x: L, y: H / 2 }, svg).textContent = 'No finished requests yet.';
      byId('split-chart').replaceWith(svg);
      return;
    }
    const yMax = niceMax(Math.max(...recent.map((r) => SPLIT.reduce((a, [key]) => a + (r[key] || 0), 0))));
    yAxis(svg, yMax, L, W - R, T, H - B, (v) => fmt(v, yMax < 4 ? 2 : yMax < 40 ? 1 : 0) + ' ms');
    const slot = (W - L - R) / SPLIT_BARS;
    recent.forEach((r, i) => {
      let y = H - B;
      const g = svgEl('g', { 'data-k': 'split', 'data-id': r.id }, svg);
      svgEl('title', {}, g).textContent =
        `${r.id} (${r.model}): ` + SPLIT.map(([key, name]) => `${name} ${fmt(r[key], 2)} ms`).join(', ') + `; total ${fmt(r.total_ms, 2)} ms`;
      for (const [key, , color] of SPLIT) {
        const hgt = (r[key] || 0) / yMax * (H - B - T);
        if (hgt <= 0) continue;
        y -= hgt;
        svgEl('rect', { x: L + i * slot + 1, y, width: Math.max(1, slot - 2), height: hgt, fill: color }, g);
      }
    });
    byId('split-chart').replaceWith(svg);
  }

  function renderCascade(s) {
    const box = byId('cascade');
    const last = history[history.length - 1];
    const base = baseline(LIVE_WINDOW_MS);
    const byClass = new Map();
    for (const o of s.outcomes || []) {
      if (!byClass.has(o.class)) byClass.set(o.class, new Map());
      const m = byClass.get(o.class);
      if (!m.has(o.model)) m.set(o.model, { admitted: 0, routed: 0, shed: 0, recent: 0 });
      const row = m.get(o.model);
      if (o.outcome === 'admitted') {
        row.admitted = o.count;
        row.recent = o.count - (base.out[o.class + '|' + o.model + '|admitted'] || 0);
      } else if (o.outcome === 'routed') row.routed = o.count;
      else if (o.outcome.startsWith('shed')) row.shed += o.count;
    }
    if (!byClass.size) {
      box.replaceChildren(h('p', { class: 'note' }, 'No admissions yet.'));
      return;
    }
    const parts = [];
    const models = [...new Set((s.models || []).map((m) => m.name))];
    const colorOf = (model) => COLORS[Math.max(0, models.indexOf(model)) % COLORS.length];
    for (const [cls, rows] of byClass) {
      const entries = [...rows.entries()];
      const recentTotal = entries.reduce((a, [, r]) => a + r.recent, 0);
      const useRecent = base !== last && recentTotal > 0;
      const total = useRecent ? recentTotal : entries.reduce((a, [, r]) => a + r.admitted, 0);
      parts.push(h('h3', {}, `${cls}: share of admitted requests ${useRecent ? '(last 30 s)' : '(since start)'}`));
      const bar = h('div', { class: 'bar', style: 'display:flex;height:14px' });
      const table = h('table', { class: 'grid' }, h('tr', {}, h('th', {}, 'model'), h('th', {}, 'share'), h('th', {}, 'admitted'), h('th', {}, 'routed on'), h('th', {}, 'shed')));
      for (const [model, r] of entries) {
        const share = total > 0 ? (useRecent ? r.recent : r.admitted) / total : 0;
        const seg = h('div', { title: `${model} ${(share * 100).toFixed(1)} %` });
        seg.style.width = (share * 100).toFixed(2) + '%';
        seg.style.background = colorOf(model);
        bar.append(seg);
        table.append(h('tr', {}, h('td', {}, h('i', { style: `display:inline-block;width:10px;height:10px;background:${colorOf(model)};margin-right:4px` }), model),
                       h('td', { 'data-k': `cascade/${cls}/${model}`, 'data-v': share }, (share * 100).toFixed(1) + ' %'),
                       h('td', {}, String(r.admitted)), h('td', {}, String(r.routed)), h('td', {}, String(r.shed))));
      }
      parts.push(bar, table);
    }
    box.replaceChildren(...parts);
  }

  // ---- SVG charts ---------------------------------------------------------------------

  function timeSpan() {
    const last = history[history.length - 1];
    const t1 = last ? last.t : Date.now();
    const t0 = Math.min(history.length ? history[0].t : t1, t1 - 10000);
    return [t0, t1];
  }

  // series: [{name, color, points: [[t, v|null]], dash, step}]; hlines: [{v, color, label}];
  // marks: [{t, color, label}] (vertical); yLabels: names for 0..n (the ladder).
  function lineChart({ series = [], hlines = [], marks = [], span, height, yMax, yLabels }) {
    const W = 640, H = height, L = yLabels ? 78 : 46, R = 8, T = 20, B = 16;
    const svg = svgEl('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}` });
    const [t0, t1] = span;
    const x = (t) => L + (t - t0) / Math.max(1, t1 - t0) * (W - L - R);
    let top = yMax;
    if (top === undefined) {
      const vals = series.flatMap((s) => s.points.map((p) => p[1])).concat(hlines.map((l) => l.v)).filter((v) => v !== null && isFinite(v));
      top = niceMax(vals.length ? Math.max(...vals) : 1);
    }
    const y = (v) => H - B - v / top * (H - B - T);
    if (yLabels) {
      yLabels.forEach((name, i) => {
        svgEl('line', { x1: L, x2: W - R, y1: y(i), y2: y(i), stroke: '#eceef1' }, svg);
        svgEl('text', { x: L - 4, y: y(i) + 3, 'text-anchor': 'end' }, svg).textContent = name;
      });
    } else {
      yAxis(svg, top, L, W - R, T, H - B, (v) => fmt(v, top < 4 ? 2 : top < 40 ? 1 : 0));
    }
    svgEl('text', { x: L, y: H - 3 }, svg).textContent = new Date(t0).toLocaleTimeString();
    svgEl('text', { x: W - R, y: H - 3, 'text-anchor': 'end' }, svg).textContent = new Date(t1).toLocaleTimeString();
    for (const l of hlines) {
      svgEl('line', { x1: L, x2: W - R, y1: y(l.v), y2: y(l.v), stroke: l.color, 'stroke-dasharray': '5 3', 'data-threshold': l.v }, svg);
      svgEl('text', { x: W - R - 2, y: y(l.v) - 3, 'text-anchor': 'end', fill: l.color }, svg).textContent = l.label;
    }
    for (const m of marks) {
      if (m.t < t0 || m.t > t1) continue;
      const line = svgEl('line', { x1: x(m.t), x2: x(m.t), y1: T, y2: H - B, stroke: m.color, 'stroke-dasharray': '2 2' }, svg);
      svgEl('title', {}, line).textContent = m.label;
      if (m.label === 'restart') svgEl('text', { x: x(m.t) + 2, y: T + 8, fill: m.color }, svg).textContent = m.label;
    }
    for (const s of series) {
      for (const run of runs(s.points)) {
        let d = '';
        run.forEach(([t, v], i) => {
          if (i === 0) d += `M${x(t).toFixed(1)},${y(v).toFixed(1)}`;
          else if (s.step) d += `H${x(t).toFixed(1)}V${y(v).toFixed(1)}`;
          else d += `L${x(t).toFixed(1)},${y(v).toFixed(1)}`;
        });
        svgEl('path', { d, fill: 'none', stroke: s.color, 'stroke-width': 1.6, 'stroke-dasharray': s.dash ? '4 3' : null }, svg);
      }
    }
    legend(svg, series, L);
    return svg;
  }

  // Consecutive non-null stretches, so a gap (no samples, a restart) is not bridged.
  function runs(points) {
    const out = [];
    let cur = [];
    for (const p of points) {
      if (p[1] === null || p[1] === undefined || !isFinite(p[1])) {
        if (cur.length) out.push(cur);
        cur = [];
      } else cur.push(p);
    }
    if (cur.length) out.push(cur);
    return out;
  }

  function yAxis(svg, top, x0, x1, yTop, yBottom, label) {
    for (let i = 0; i <= 4; ++i) {
      const v = top * i / 4;
      const yy = yBottom - (yBottom - yTop) * i / 4;
      svgEl('line', { x1: x0, x2: x1, y1: yy, y2: yy, stroke: '#eceef1' }, svg);
      svgEl('text', { x: x0 - 4, y: yy + 3, 'text-anchor': 'end' }, svg).textContent = label(v);
    }
  }

  function legend(svg, items, x0) {
    let x = x0;
    for (const it of items) {
      svgEl('rect', { x, y: 4, width: 9, height: 9, fill: it.color }, svg);
      const t = svgEl('text', { x: x + 12, y: 12 }, svg);
      t.textContent = it.name;
      x += 22 + it.name.length * 6.6;
    }
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 4, 6, 8, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // ---- Small helpers --------------------------------------------------------------------

  function stat(live, metric, field) {
    return live && live[metric] && live[metric].count > 0 ? live[metric][field] : null;
  }
  function attKey(cls, model, metric) { return cls + '|' + (model || '') + '|' + metric; }
  function fmt(v, digits) { return v === null || v === undefined || !isFinite(v) ? '–' : Number(v).toFixed(digits); }
  function byId(id) { return document.getElementById(id); }
  function withId(node, id) { node.id = id; return node; }

  function setNum(key, v, digits) {
    const node = document.querySelector(`[data-k="${key}"]`);
    node.dataset.v = v === null || v === undefined ? '' : v;
    node.textContent = fmt(v, digits);
  }

  function numCell(key, v, digits) {
    return h('td', { 'data-k': key, 'data-v': v === null || v === undefined ? '' : v }, fmt(v, digits));
  }

  function h(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined) continue;
      if (k === 'style') node.style.cssText = v;
      else node.setAttribute(k, String(v));
    }
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  function svgEl(tag, attrs, parent) {
    const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, String(v));
    if (parent) parent.append(node);
    return node;
  }

  byId('server-url').textContent = BASE;
  byId('forget-key').hidden = !apiKey;
  poll();
})();
