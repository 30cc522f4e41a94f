#!/bin/bash
# Session 16's first H200 call (harness 0.3.6 with `file`/`uname` allowed below a child):
# the sanitizer's out-of-bounds GPU test (test_verdict_runs.py) first, then the 30-operator
# submission over the full v1 suite at CONCURRENCY=4 and one operator at a time with the same
# seed (bench/concurrency_compare.py --order K,1), then the other GPU tests with what is left.
# Everything is packed into $OUT/session16a.tgz.
#   BUDGET=585 bash bench/h200_session/session16a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOTAL=${BUDGET:-585}; START=$(date +%s); ROOT_OUT=$OUT; WORK=$(mktemp -d)
rest() { echo $(( TOTAL - ($(date +%s) - START) )); }
mkdir -p $WORK/verdicts $WORK/concurrent $WORK/gpu
( export OUT=$WORK/verdicts BUDGET=$(( $(rest) - 360 )); source "$HERE/head.sh"
  timeout --kill-after=5 $(( $(left) - 3 )) python3 -m pytest -p no:django -p no:cacheprovider \
    --confcutdir=tests/evaluator -m gpu -q --tb=short -rA tests/evaluator/test_verdict_runs.py \
    > $OUT/gpu-tests.log 2>&1
  mark "verdict runs rc=$?"; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -1 $OUT/gpu-tests.log )
( export OUT=$WORK/concurrent; export BUDGET=$(( $(rest) - 8 )); source "$HERE/head.sh"
  export ATREX_SANDBOX_MORE_USERS=${ATREX_SANDBOX_MORE_USERS:-65531,65530,65529,65528,65527}
  timeout --kill-after=10 $(( $(left) - 3 )) python3 bench/concurrency_compare.py \
    --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
    --concurrency 4 --order K,1 --budget-s $(( $(left) - 8 )) --second-needs-s ${SECOND_NEEDS_S:-185} \
    --operator-costs bench/h200_session/v1-operator-costs.json \
    --keep $OUT/concurrent-results --json $OUT/concurrent-4.json > $OUT/concurrent-4.txt 2>&1
  mark "concurrency 4 and 1 rc=$?"
  grep -E '^\{"concurrency"|N=|speedup|skipped|not finished|shapes  median' $OUT/concurrent-4.txt )
cp $WORK/concurrent/concurrent-4.json $ROOT_OUT/ 2>/dev/null
tar czf $ROOT_OUT/session16a.tgz -C $WORK .
