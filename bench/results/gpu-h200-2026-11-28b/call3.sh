#!/usr/bin/env bash
# GPU call 3 (issue 36): the d512 step in a process of its own (steady state), then bench:gpu's steps with the pool's churn counted.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
QUICK=${QUICK:-}
export RLVR_TUNE_CACHE=$PWD/tmp-exp/tune PYTHONUNBUFFERED=1
echo "== step.bench start $(date -u +%T)"
timeout ${T0:-45} node dist/bench/step.bench.js --sizes ${SIZE:-medium} --warmup 2 --steps 5 2>&1 | grep -v '^Warning: maxDynamic' | tee $OUT/0-step-bench.txt
echo "== step.bench rc=${PIPESTATUS[0]} $(date -u +%T)"
echo "== gpu.bench start $(date -u +%T)"
timeout ${T1:-125} node dist/bench/gpu.bench.js $QUICK --tasks step --variants default,every-cut --rounds 3 --seconds ${S1:-55} 2>&1 | grep -v '^Warning: maxDynamic' | tee $OUT/1-step.txt
echo "== gpu.bench rc=${PIPESTATUS[0]} $(date -u +%T)"
