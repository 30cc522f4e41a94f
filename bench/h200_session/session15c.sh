#!/bin/bash
# Session 15's last H200 call (harness 0.3.6): the 30-operator submission over the full v1
# suite at CONCURRENCY=4 (most expensive first), then one operator at a time with the same
# seed if SECOND_NEEDS_S are left (bench/concurrency_compare.py), then every GPU test with
# what is left. Everything is packed into $OUT/session15c.tgz beside the summary files.
#   BUDGET=585 bash bench/h200_session/session15c.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOTAL=${BUDGET:-585}; START=$(date +%s); ROOT_OUT=$OUT; WORK=$(mktemp -d)
rest() { echo $(( TOTAL - ($(date +%s) - START) )); }
mkdir -p $WORK/concurrent $WORK/gpu
( export OUT=$WORK/concurrent; export BUDGET=$(( $(rest) - 222 )); source "$HERE/head.sh"
  export ATREX_SANDBOX_MORE_USERS=${ATREX_SANDBOX_MORE_USERS:-65531,65530,65529,65528,65527}
  timeout --kill-after=10 $(( $(left) - 3 )) python3 bench/concurrency_compare.py \
    --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
    --concurrency 4 --order K,1 --budget-s $(( $(left) - 8 )) --second-needs-s ${SECOND_NEEDS_S:-190} \
    --operator-costs bench/h200_session/v1-operator-costs.json \
    --keep $OUT/concurrent-results --json $OUT/concurrent-4.json > $OUT/concurrent-4.txt 2>&1
  mark "concurrency 4 (and 1) rc=$?"
  grep -E '^\{"concurrency"|N=|speedup|skipped|not finished|shapes  median' $OUT/concurrent-4.txt )
( export OUT=$WORK/gpu BUDGET=$(( $(rest) - 12 )); source "$HERE/head.sh"
  timeout --kill-after=5 $(( $(left) - 5 )) python3 -m pytest -p no:django -p no:cacheprovider \
    --confcutdir=tests/evaluator -m gpu -q --tb=short -rA tests/evaluator > $OUT/gpu-tests.log 2>&1
  mark "gpu tests rc=$?"; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -2 $OUT/gpu-tests.log )
cp $WORK/concurrent/concurrent-4.json $ROOT_OUT/ 2>/dev/null
tar czf $ROOT_OUT/session15c.tgz -C $WORK .
