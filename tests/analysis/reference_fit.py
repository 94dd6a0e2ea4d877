#!/usr/bin/env python3
"""Independent reference fits for `lifeline analyze` (python3 standard library only).

  reference_fit.py threshold FILE.csv   -> {"candidate_ms": ..., "lr_statistic": ...}
  reference_fit.py ctr FILE.csv         -> {"c0": ..., "a": ...}

threshold: brute force over every cut between 1 ms latency bins (no coarse grid), each cut
fitted to convergence by its own Newton iteration (Gauss-Jordan solve); the same model as
docs/analysis.md (logit p = a_left or a_right + b1 v + b2 v^2 with v = clamp((t - mean) / sd,
-4, 4), a jump in the direction the no-break trend rises from the 5th to the 95th latency
percentile) and the same admissible cuts (each side >= max(30, 1 % of the sessions) and >= 5 of each
outcome). The cut is reported as the midpoint of the gap between the last bin left of it and
the first bin right of it.

ctr: maximum likelihood of clicked ~ Bernoulli(c0 exp(-a t)) by Newton's method on
(log c0, a).
"""
import csv
import json
import math
import sys


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def features(i, k, v, jump):
    if jump:
        right = i >= k
        return [0.0 if right else 1.0, 1.0 if right else 0.0, v, v * v]
    return [1.0, v, v * v]


def newton(bins, k, params, jump):
    """Maximises the log-likelihood of (a_left, a_right, b1, b2) (jump) or (a, b1, b2)."""
    x = list(params)
    for _ in range(200):
        n_p = len(x)
        g = [0.0] * n_p
        h = [[0.0] * n_p for _ in range(n_p)]
        ll = 0.0
        for i, (v, n, y) in enumerate(bins):
            feats = features(i, k, v, jump)
            eta = sum(a * b for a, b in zip(x, feats))
            p = 1.0 / (1.0 + math.exp(-eta))
            ll += y * eta - n * (max(eta, 0.0) + math.log1p(math.exp(-abs(eta))))
            r = y - n * p
            w = n * p * (1 - p)
            for a in range(n_p):
                g[a] += r * feats[a]
                for b in range(n_p):
                    h[a][b] += w * feats[a] * feats[b]
        step = solve(h, g)
        x = [xi + si for xi, si in zip(x, step)]
        if sum(abs(s) for s in step) < 1e-10:
            break
    return x, ll


def solve(h, g):
    n = len(g)
    m = [row[:] + [g[i]] for i, row in enumerate(h)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                for j in range(c, n + 1):
                    m[r][j] -= f * m[c][j]
    return [m[i][n] / m[i][i] for i in range(n)]


def loglik(bins, k, x, jump):
    ll = 0.0
    for i, (v, n, y) in enumerate(bins):
        eta = sum(a * b for a, b in zip(x, features(i, k, v, jump)))
        ll += y * eta - n * (max(eta, 0.0) + math.log1p(math.exp(-abs(eta))))
    return ll


def threshold(rows):
    lat = [float(r["latency_ms"]) for r in rows]
    mean = sum(lat) / len(lat)
    sd = math.sqrt(sum((t - mean) ** 2 for t in lat) / len(lat))
    agg = {}
    for r in rows:
        t = float(r["latency_ms"])
        key = math.floor(t)
        s = agg.setdefault(key, [0.0, 0, 0])
        s[0] += t
        s[1] += 1
        s[2] += int(r["abandoned"])
    keys = sorted(agg)
    bins = [(min(4.0, max(-4.0, (agg[k][0] / agg[k][1] - mean) / sd)), agg[k][1], agg[k][2])
            for k in keys]
    n_all = sum(b[1] for b in bins)
    y_all = sum(b[2] for b in bins)
    p0 = y_all / n_all
    start = math.log(p0 / (1 - p0))
    line, _ = newton(bins, 0, [start, 0.0, 0.0], False)
    line_ll = loglik(bins, 0, line, False)
    seen, v05, v95 = 0, None, None
    for v, n, _ in bins:
        seen += n
        if v05 is None and seen >= 0.05 * n_all:
            v05 = v
        if seen >= 0.95 * n_all:
            v95 = v
            break
    rise = line[1] * (v95 - v05) + line[2] * (v95 * v95 - v05 * v05)
    direction = 1 if rise >= 0 else -1
    min_n = max(30, 0.01 * n_all)
    best = None
    n_left = y_left = 0
    for k in range(1, len(bins)):
        n_left += bins[k - 1][1]
        y_left += bins[k - 1][2]
        n_right, y_right = n_all - n_left, y_all - y_left
        if n_left < min_n or n_right < min_n:
            continue
        if min(y_left, n_left - y_left, y_right, n_right - y_right) < 5:
            continue
        x, _ = newton(bins, k, [start, start, 0.0, 0.0], True)
        if direction * (x[1] - x[0]) <= 0:
            continue
        ll = loglik(bins, k, x, True)
        if best is None or ll > best[0]:
            best = (ll, k)
    k = best[1]
    cut = ((keys[k - 1] + 1) + keys[k]) / 2.0
    return {"candidate_ms": cut, "lr_statistic": 2 * (best[0] - line_ll)}


def ctr(rows):
    t = [float(r["latency_ms"]) / 1000.0 for r in rows]
    y = [int(r["clicked"]) for r in rows]
    x = [math.log(sum(y) / len(y)), 0.0]
    for _ in range(200):
        g = [0.0, 0.0]
        h = [[0.0, 0.0], [0.0, 0.0]]
        for ti, yi in zip(t, y):
            eta = x[0] - x[1] * ti
            feats = [1.0, -ti]
            if yi:
                d, d2 = 1.0, 0.0
            else:
                e = math.exp(eta)
                d, d2 = -e / (1 - e), -e / (1 - e) ** 2
            for a in range(2):
                g[a] += d * feats[a]
                for b in range(2):
                    h[a][b] -= d2 * feats[a] * feats[b]
        step = solve(h, g)
        x = [x[0] + step[0], x[1] + step[1]]
        if abs(step[0]) + abs(step[1]) < 1e-12:
            break
    return {"c0": math.exp(x[0]), "a": x[1] / 1000.0}


def main():
    mode, path = sys.argv[1], sys.argv[2]
    rows = read(path)
    print(json.dumps(threshold(rows) if mode == "threshold" else ctr(rows)))


if __name__ == "__main__":
    main()
