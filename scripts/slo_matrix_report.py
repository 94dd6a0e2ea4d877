#!/usr/bin/env python3
"""Tables and verdicts of scripts/bench-slo-matrix.sh from its results directory.

Usage: slo_matrix_report.py RESULTS WORKLOADS FACTORS

For every workload and rate: admitted TTFT P50/P95/P99/max, e2e P95, goodput and smooth
goodput, shed / routed / truncated / late shares (server counters), seconds at each ladder
level (the highest level over the step's ladders, from /v1/slo's events), recovery time, and
the targets of docs/performance.md ("The SLO workload matrix"): admitted TTFT P95 <= budget,
P99 <= 1.5x, max <= 3x; no refusal while idle (a 429/503 with no other request of the run in
flight); goodput at 4x >= 90 % of the best; recovery
<= 5 s; the second model's P95 and shed rate beside an overloaded one within 20 % of alone.
Only Python's standard library.
"""
import json
import os
import re
import sys

BUDGET_MS = {"interactive": 387.0, "customer-service": 220.0}


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def metric_sum(text, name, **labels):
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        m = re.match(r"^[^{ ]+(?:\{(.*)\})? (\S+)$", line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def level_seconds(slo, duration_s):
    """Seconds at each level (0-4) of the highest ladder, over the events of the step."""
    events = sorted(slo.get("events", []), key=lambda e: e["at_ms"])
    if not events:
        return [duration_s, 0, 0, 0, 0]
    now_ms = slo.get("now_ms", events[-1]["at_ms"])
    start_ms = now_ms - duration_s * 1000.0
    levels = {}  # (class, model) -> level
    out = [0.0] * 5
    t = start_ms
    for e in events:
        at = max(e["at_ms"], start_ms)
        cur = max(levels.values(), default=0)
        out[cur] += max(0.0, at - t) / 1000.0
        t = max(t, at)
        levels[(e.get("class"), e.get("model"))] = e["to_level"]
    out[max(levels.values(), default=0)] += max(0.0, now_ms - t) / 1000.0
    return out


def spans_of(dir_):
    """(start, end) of every request of one bench report, ms from the run's start."""
    rep = load(os.path.join(dir_, "report.json"), {}) or {}
    return [(q["start_ms"], q["start_ms"] + (q.get("e2e_ms") or 0))
            for q in rep.get("requests", [])]


def step_row(dir_, cls, metrics, slo, duration_s, model=None, other_spans=()):
    rep = load(os.path.join(dir_, "report.json"), {})
    if not rep or not rep.get("summaries"):
        return None
    s = rep["summaries"][0]
    sent = s["sent"] or 1
    lab = {"class": cls}
    if model:
        lab["model"] = model

    def outcome(o):
        return metric_sum(metrics, "lifeline_slo_requests_total", outcome=o, **lab)

    # Refusals while the model was idle: a 429/503 sent when no other request to that model
    # was in flight, this client's or (two classes on one model) the other client's. Both
    # bench processes start together, so their clocks from the run's start line up to within
    # a few ms.
    reqs = rep.get("requests", [])
    spans = [(q["start_ms"], q["start_ms"] + (q.get("e2e_ms") or 0)) for q in reqs]
    spans += list(other_spans)
    idle_refused = 0
    for q in reqs:
        if q.get("status") not in (429, 503):
            continue
        t = q["start_ms"]
        if not any(a <= t <= b for a, b in spans if a != t):
            idle_refused += 1
    ttft = s["ttft_ms"]
    return {"idle_refused": idle_refused,
        "sent": s["sent"], "ok": s["ok"], "refused": s.get("refused", s["http_429"]),
        "failed": s.get("failed", s["errors"] - s["http_429"]),
        "ttft_p50": ttft.get("p50"), "ttft_p95": ttft.get("p95"), "ttft_p99": ttft.get("p99"),
        "ttft_max": ttft.get("max"), "e2e_p95": s["e2e_ms"].get("p95"),
        "goodput": s["goodput_rps"], "smooth": s.get("smooth_goodput_rps"),
        "shed_share": outcome("shed_429") / sent, "late_share": outcome("late_shed") / sent,
        "routed_share": outcome("routed") / sent, "truncated_share": outcome("truncated") / sent,
        "levels_s": level_seconds(slo, duration_s),
    }


def fmt(v, f="%.0f"):
    return "-" if v is None else f % v


def main():
    results, workloads, factors = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
    run = {}
    for line in open(os.path.join(results, "run.txt")):
        if "=" in line:
            k, v = line.strip().split("=", 1)
            run[k] = v
    duration_s = float(run.get("duration_s", 20))
    out = []
    verdicts = []
    summary = {"run": run, "workloads": {}}

    def emit(line=""):
        print(line)
        out.append(line)

    emit("Run: " + "; ".join(f"{k}={v}" for k, v in run.items()))
    alone = None
    if "two-models" in workloads:
        d = os.path.join(results, "two-models", "light-alone")
        alone = step_row(d, "interactive", open(os.path.join(d, "metrics.txt")).read()
                         if os.path.exists(os.path.join(d, "metrics.txt")) else "",
                         load(os.path.join(d, "slo.json"), {}), duration_s, "light")
    for w in workloads:
        emit(f"\n## {w}\n")
        emit("| rate | req/s | sent | TTFT P50 | P95 | P99 | max | e2e P95 | goodput | smooth "
             "| shed | late | routed | truncated | s at level 0/1/2/3/4 | recovery s |")
        emit("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | ---: | --- | ---: |")
        rows = []
        for f in factors:
            d = os.path.join(results, w, "x" + f)
            if not os.path.isdir(d):
                continue
            metrics = open(os.path.join(d, "metrics.txt")).read() if os.path.exists(
                os.path.join(d, "metrics.txt")) else ""
            slo = load(os.path.join(d, "slo.json"), {})
            rec = open(os.path.join(d, "recovery_s.txt")).read().strip() if os.path.exists(
                os.path.join(d, "recovery_s.txt")) else "-"
            rate = open(os.path.join(d, "rate.txt")).read().strip()
            parts = [("interactive", d, None)]
            if w == "two-classes":
                parts = [("interactive", os.path.join(d, "interactive"), None),
                         ("customer-service", os.path.join(d, "customer-service"), None)]
            elif w == "two-models":
                parts = [("interactive", os.path.join(d, "heavy"), "heavy"),
                         ("interactive", os.path.join(d, "light"), "light")]
            for cls, pd, model in parts:
                # Two classes share one model: each part's idleness counts the other's requests.
                others = []
                if w == "two-classes":
                    for _, od, _ in parts:
                        if od != pd:
                            others += spans_of(od)
                r = step_row(pd, cls, metrics, slo, duration_s, model, others)
                if r is None:
                    continue
                label = f"{f}x" + (f" {cls}" if w == "two-classes" else "") + (
                    f" {model}" if model else "")
                r.update({"factor": float(f), "rate": rate, "label": label, "class": cls,
                          "model": model, "recovery_s": rec})
                rows.append(r)
                lv = "/".join("%.0f" % x for x in r["levels_s"])
                emit(f"| {label} | {rate} | {r['sent']} | {fmt(r['ttft_p50'])} | {fmt(r['ttft_p95'])} "
                     f"| {fmt(r['ttft_p99'])} | {fmt(r['ttft_max'])} | {fmt(r['e2e_p95'])} "
                     f"| {r['goodput']:.2f} | {fmt(r['smooth'], '%.2f')} | {100 * r['shed_share']:.0f} % "
                     f"| {100 * r['late_share']:.0f} % | {100 * r['routed_share']:.0f} % "
                     f"| {100 * r['truncated_share']:.0f} % | {lv} | {rec} |")
        summary["workloads"][w] = rows
        # Targets.
        for r in rows:
            if w == "two-models" and r["model"] == "light":
                continue  # judged by isolation below
            b = BUDGET_MS.get(r["class"], 387.0)
            for name, val, lim in (("TTFT P95 <= budget", r["ttft_p95"], b),
                                   ("TTFT P99 <= 1.5x budget", r["ttft_p99"], 1.5 * b),
                                   ("TTFT max <= 3x budget", r["ttft_max"], 3 * b)):
                if val is None:
                    continue
                verdicts.append((w, r["label"], name, val <= lim, f"{val:.0f} vs {lim:.0f} ms"))
            verdicts.append((w, r["label"], "no refusal while idle", r["idle_refused"] == 0,
                             f"{r['idle_refused']} of {r['refused']} refusals with nothing else in flight"))
            try:
                rec = float(r["recovery_s"])
                verdicts.append((w, r["label"], "back to normal <= 5 s", rec <= 5.0, f"{rec:.1f} s"))
            except ValueError:
                verdicts.append((w, r["label"], "back to normal <= 5 s", False, r["recovery_s"]))
        main_rows = [r for r in rows if not (w == "two-models" and r["model"] == "light")]
        by_class = {}
        for r in main_rows:
            by_class.setdefault(r["class"], []).append(r)
        for cls, rs in by_class.items():
            best = max((r["goodput"] for r in rs), default=0)
            top = [r for r in rs if r["factor"] == max(x["factor"] for x in rs)]
            if best > 0 and top and top[0]["factor"] >= 4:
                verdicts.append((w, top[0]["label"], "goodput at 4x >= 90 % of best",
                                 top[0]["goodput"] >= 0.9 * best,
                                 f"{top[0]['goodput']:.2f} vs best {best:.2f} req/s"))
        if w == "two-models" and alone:
            emit(f"\nlight alone at 0.5x its capacity: TTFT P95 {fmt(alone['ttft_p95'])} ms, "
                 f"shed {100 * alone['shed_share']:.0f} %")
            for r in rows:
                if r["model"] != "light":
                    continue
                p95_ok = (alone["ttft_p95"] and r["ttft_p95"] is not None and
                          r["ttft_p95"] <= 1.2 * alone["ttft_p95"])
                shed_ok = r["shed_share"] <= alone["shed_share"] * 1.2 + 0.01
                verdicts.append((w, r["label"], "light's P95 within 20 % of alone", bool(p95_ok),
                                 f"{fmt(r['ttft_p95'])} vs {fmt(alone['ttft_p95'])} ms"))
                verdicts.append((w, r["label"], "light's shed rate within 20 % of alone", shed_ok,
                                 f"{100 * r['shed_share']:.1f} % vs {100 * alone['shed_share']:.1f} %"))
    emit("\n## Targets\n")
    emit("| workload | step | target | met | figure |")
    emit("| --- | --- | --- | --- | --- |")
    for w, label, name, ok, fig in verdicts:
        emit(f"| {w} | {label} | {name} | {'yes' if ok else 'MISSED'} | {fig} |")
    met = sum(1 for v in verdicts if v[3])
    emit(f"\n{met} of {len(verdicts)} targets met.")
    summary["targets"] = [{"workload": w, "step": l, "target": n, "met": ok, "figure": fig}
                          for w, l, n, ok, fig in verdicts]
    with open(os.path.join(results, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(results, "summary.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"Reports: {results}/<workload>/x<factor>/..., summary: {results}/summary.{{md,json}}")


if __name__ == "__main__":
    main()
