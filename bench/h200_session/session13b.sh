#!/bin/bash
# Session 13's second H200 call: the eager reference timings' cache (two runs of the Triton
# bundle over v1, the first fills it, the second reads it: t_reference and the speedups
# compared), the verdict runs' GPU tests and the other GPU tests.
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
export ATREX_FORK_SERVER=${ATREX_FORK_SERVER:-1}
PYTEST="python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu"
# The test that failed in session13.sh (harness 0.3.2: the harness's own copy read as tampering).
timeout --kill-after=5 90 $PYTEST -v --tb=short -rA tests/evaluator/test_fallback_cuda.py \
  -k test_runner_marks_fallbacks > $OUT/gpu-tests-fallback-runner.log 2>&1
mark "fallback runner test rc=$?"
rm -rf /tmp/rt
for i in 1 2; do
  timeout --kill-after=5 200 python3 bench/where_time_goes.py --suite atrex-bench-v1 --device cuda \
    --bundle examples/bundles/triton-baseline --reference-timings /tmp/rt \
    --json $OUT/where-rt-$i.json --results-out /tmp/results-rt-$i.json > $OUT/where-rt-$i.txt 2>&1
  mark "reference timings run $i rc=$?"
done
python3 bench/compare_runs.py /tmp/results-rt-1.json /tmp/results-rt-2.json > $OUT/compare-rt.txt 2>&1
timeout --kill-after=5 130 $PYTEST -q -rA tests/evaluator/test_verdict_runs.py > $OUT/gpu-verdict-runs.log 2>&1
mark "verdict runs rc=$?"
timeout --kill-after=5 $(( $(left) - 10 )) $PYTEST -v --tb=short -rA tests/evaluator \
  --deselect tests/evaluator/test_verdict_runs.py --deselect tests/evaluator/test_fallback_cuda.py \
  > $OUT/gpu-tests.log 2>&1
mark "gpu tests rc=$?"
tail -3 $OUT/gpu-tests-fallback-runner.log; tail -20 $OUT/compare-rt.txt; tail -3 $OUT/gpu-verdict-runs.log; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -3 $OUT/gpu-tests.log
