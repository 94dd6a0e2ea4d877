#!/usr/bin/env bash
# One place maps outcomes to HTTP (api/errors.h): outside api/errors.cpp no source of
# the server picks a status code for an error. Modules say what happened (an ErrorKind, a
# slo::ShedCause, a route as a SubmitResult with routed set) and the table turns it into a
# status and a type.
# Flagged:
#   - ApiError{NNN, ...} and `.http_status = ...` (a status chosen by hand);
#   - an `http_status` field or parameter outside api/ (a module deciding HTTP);
#   - the old route pseudo-error code "slo_route".
# bench/ is a client (it records the status a server answered) and is not checked.
#
# Usage: error_map_test.sh REPO_ROOT. Prints each offending line; exit 1 when there is one.
set -uo pipefail
cd "$1"
dirs=(app base engine text net scheduler api serving slo analysis modelgen economics)
# Every module directory must be here: a renamed one would otherwise drop out of the check.
existing=()
for d in "${dirs[@]}"; do
  if [ ! -d "$d" ]; then
    echo "FAIL: module directory '$d' is gone: update the list in $0"
    exit 1
  fi
  existing+=("$d")
done
src() { grep -rnE --include='*.cpp' --include='*.h' "$@" "${existing[@]}"; }

bad=0
report() {
  [ -z "$2" ] && return
  echo "$1:"
  echo "$2" | sed 's/^/  /'
  bad=1
}
report "an ApiError built with a literal status (use api::MakeError with an ErrorKind)" \
  "$(src 'ApiError[[:space:]]*\{[[:space:]]*[0-9]')"
report "a status assigned by hand (only api/errors.cpp fills http_status)" \
  "$(src '\.http_status[[:space:]]*=[^=]' | grep -v '^api/errors\.cpp:')"
report "an http_status outside api/ (modules return kinds, the server picks statuses)" \
  "$(src -w 'http_status' | grep -v '^api/')"
report "the route pseudo-error (routing is SubmitRefusal::route)" "$(src 'slo_route')"
if [ $bad -ne 0 ]; then
  echo "FAIL: error statuses chosen outside api/errors.cpp"
  exit 1
fi
echo "ok: every error status comes from api/errors.cpp"
