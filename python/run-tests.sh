#!/usr/bin/env bash
# The Python package's tests (python/tests): it reproduces the golden vectors of the TypeScript objectives, RCC and
# the verifier. Needs python3 with torch (Debian's python3-torch). Without torch the tests are skipped with a
# notice, except under CI=true, where that is a failure: the agreement must be checked in CI, not assumed.
set -euo pipefail
cd "$(dirname "$0")"
# $PYTHON if set; else the first of python3 on the PATH and Debian's own that imports torch (a pyenv or venv
# python3 may shadow the one apt installed python3-torch for).
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c 'import torch' >/dev/null 2>&1; then PY="$candidate"; break; fi
  done
  PY="${PY:-python3}"
fi
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  if [ "${CI:-}" = "true" ]; then
    echo "test:python: $PY cannot import torch (apt-get install python3-torch); CI=true, so this fails" >&2
    exit 1
  fi
  echo "test:python: skipped, $PY cannot import torch (apt-get install python3-torch)" >&2
  exit 0
fi
exec "$PY" -m unittest discover -s tests "$@"
