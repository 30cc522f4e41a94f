#!/bin/bash
# Session 13's first H200 call (harness 0.3.2), most important first within $BUDGET seconds:
# the CUDA fallback monitor's tests (the launchers read without activity types, the
# annotated_torch fixture, fallbacks decided on the first call), the sanitizer pass's cost
# with its tools started ahead and run at once (--baseline: a run without it beside), warm agent rounds without the sanitizer,
# then the 30-operator submission over v1 with the rest of the time. Session 13's second
# call: session13b.sh (reference-timing cache, verdict runs, the other GPU tests).
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
export ATREX_FORK_SERVER=${ATREX_FORK_SERVER:-1}
PYTEST="python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu"
timeout --kill-after=5 150 $PYTEST -v --tb=short -rA tests/evaluator/test_fallback_cuda.py \
  > $OUT/gpu-tests-fallback-cuda.log 2>&1
mark "fallback_cuda tests rc=$?"
timeout --kill-after=5 300 python3 bench/sanitizer_cost.py --suite atrex-bench-v1 --baseline \
  --log-dir /tmp/sanitizer-logs --out $OUT/sanitizer-cost.json > $OUT/sanitizer-cost.log 2>&1
mark "sanitizer bench rc=$?"
timeout --kill-after=5 110 python3 bench/agent_round.py --device cuda --suite atrex-bench-v1 \
  --operators rms_norm --rounds 5 --agent-s 2 --json $OUT/agent-warm.json > $OUT/agent-warm.txt 2>&1
mark "agent warm rc=$?"
timeout --kill-after=5 $(( $(left) - 10 )) python3 bench/full_suite_walltime.py \
  --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
  --out /tmp/full30.json --log-dir /tmp/full30-logs > $OUT/full30.txt 2>&1
mark "full30 rc=$?"
cp /tmp/full30*.json $OUT/ 2>/dev/null
grep -h -E "PASSED|FAILED|ERROR" $OUT/gpu-tests-fallback-cuda.log | tail -30; tail -32 $OUT/sanitizer-cost.log
cat $OUT/agent-warm.txt; tail -30 $OUT/full30.txt
