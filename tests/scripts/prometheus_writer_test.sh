#!/usr/bin/env bash
# One Prometheus writer: every /metrics family goes through base/prometheus.{h,cpp}
# (prom::Family / prom::Sample / prom::Labels, one escaping of label values). Flags any other
# source that writes the exposition format's "# HELP" / "# TYPE" lines itself.
#
# Usage: prometheus_writer_test.sh REPO_ROOT. Prints each offending line; exit 1 when any.
set -uo pipefail
cd "$1"
# Every module directory must be here: a renamed one would otherwise drop out of the check.
dirs=()
for d in app base engine text net scheduler api serving slo analysis modelgen economics bench; do
  if [ ! -d "$d" ]; then
    echo "FAIL: module directory '$d' is gone: update the list in $0"
    exit 1
  fi
  dirs+=("$d")
done
hits=$(grep -rnE --include='*.cpp' --include='*.h' '"# (HELP|TYPE) ' "${dirs[@]}" |
       grep -v '^base/prometheus\.' || true)
if [ -n "$hits" ]; then
  echo "Prometheus families written outside base/prometheus.cpp:"
  echo "$hits" | sed 's/^/  /'
  exit 1
fi
echo "ok: every Prometheus family goes through base/prometheus.cpp"
