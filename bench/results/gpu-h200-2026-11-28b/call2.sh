#!/usr/bin/env bash
# GPU call (issue 36), session 2026-11-28 second call: new defaults (scopes per read), 3 steps a round, f16 kt and no robustness.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
QUICK=${QUICK:-}
export RLVR_TUNE_CACHE=$PWD/tmp-exp/tune PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,pstate --format=csv > $OUT/smi.txt 2>&1
run() { local name=$1 t=$2; shift 2; echo "== $name start $(date -u +%T)"; timeout $t node dist/bench/gpu.bench.js $QUICK "$@" 2>&1 | grep -v '^Warning: maxDynamic' | tee $OUT/$name.txt; echo "== $name rc=${PIPESTATUS[0]} $(date -u +%T)"; cp tmp-exp/tune/native*.json $OUT/ 2>/dev/null; }
run 1-step ${T1:-150} --tasks step --variants base,default,every-cut --rounds 3 --seconds ${S1:-100}
run 2-lora ${T2:-190} --tasks lora --rounds 3 --seconds ${S2:-90}
run 3-f16 ${T3:-110} --tasks f16 --variants base,fast --rounds 2 --seconds 30
