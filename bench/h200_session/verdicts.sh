#!/bin/bash
# Session 10 on one H200 (harness 0.3.0), most important first within $BUDGET seconds:
# the verdict runs' GPU tests (a planted out-of-bounds read caught by compute-sanitizer, the
# Triton baseline clean), the sanitizer pass's cost on the Triton bundle ($SAN_OPS: its
# operators, all shapes of v1), then the rest of the GPU tests. Everything lands in $OUT.
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
PYTEST="python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu -q -rA"
timeout --kill-after=5 $(( $(left) - 60 )) $PYTEST tests/evaluator/test_verdict_runs.py \
  --junitxml=$OUT/gpu-verdict-runs.xml > $OUT/gpu-verdict-runs.log 2>&1
mark "verdict runs rc=$?"
timeout --kill-after=5 $(( $(left) - 30 )) python3 bench/sanitizer_cost.py --suite atrex-bench-v1 \
  ${SAN_OPS:+--operators $SAN_OPS} --out $OUT/sanitizer-cost.json > $OUT/sanitizer-cost.log 2>&1
mark "sanitizer bench rc=$?"
if [ $(left) -gt 40 ]; then
  timeout --kill-after=5 $(( $(left) - 10 )) $PYTEST tests/evaluator \
    --deselect tests/evaluator/test_verdict_runs.py --junitxml=$OUT/gpu-tests.xml > $OUT/gpu-tests.log 2>&1
  mark "gpu tests rc=$?"
fi
tail -3 $OUT/gpu-verdict-runs.log; tail -8 $OUT/sanitizer-cost.log; tail -3 $OUT/gpu-tests.log
