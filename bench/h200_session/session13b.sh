#!/bin/bash
# Session 13's second H200 call: the fallback runner test that failed under 0.3.2, the
# verdict runs' GPU tests and the other GPU tests (the exploit corpus on CUDA among them).
# The reference-timing cache's two runs moved to reftimes.sh.
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
export ATREX_FORK_SERVER=${ATREX_FORK_SERVER:-1}
PYTEST="python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu"
# The test that failed in session13.sh (harness 0.3.2: the harness's own copy read as tampering).
timeout --kill-after=5 90 $PYTEST -v --tb=short -rA tests/evaluator/test_fallback_cuda.py \
  -k test_runner_marks_fallbacks > $OUT/gpu-tests-fallback-runner.log 2>&1
mark "fallback runner test rc=$?"
timeout --kill-after=5 130 $PYTEST -q -rA tests/evaluator/test_verdict_runs.py > $OUT/gpu-verdict-runs.log 2>&1
mark "verdict runs rc=$?"
timeout --kill-after=5 $(( $(left) - 10 )) $PYTEST -v --tb=short -rA tests/evaluator \
  --deselect tests/evaluator/test_verdict_runs.py --deselect tests/evaluator/test_fallback_cuda.py \
  > $OUT/gpu-tests.log 2>&1
mark "gpu tests rc=$?"
tail -3 $OUT/gpu-tests-fallback-runner.log; tail -3 $OUT/gpu-verdict-runs.log; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -3 $OUT/gpu-tests.log
