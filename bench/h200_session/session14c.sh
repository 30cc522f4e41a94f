#!/bin/bash
# Session 14's third H200 call: the 30-operator submission over v1 at CONCURRENCY=4 again
# (most expensive first; the second run of call 2's, for run-to-run agreement), every GPU test
# on the merged tree (concurrency, counted time, the fork server on by default), then the
# unified_attention batching against its per-sequence loop. Everything is packed into
# $OUT/session14c.tgz (a call brings back only a few files) beside a summary.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOTAL=${BUDGET:-480}; START=$(date +%s); ROOT_OUT=$OUT; WORK=$(mktemp -d)
rest() { echo $(( TOTAL - ($(date +%s) - START) )); }
mkdir -p $WORK/concurrent $WORK/gpu $WORK/batching
( export OUT=$WORK/concurrent; BUDGET=200 \
  EXTRA="--operator-costs bench/h200_session/v1-operator-costs.json" bash "$HERE/concurrent.sh" )
( export OUT=$WORK/gpu BUDGET=$(( $(rest) - 50 )); source "$HERE/head.sh"
  export ATREX_FORK_SERVER=${ATREX_FORK_SERVER:-1}
  timeout --kill-after=5 $(( $(left) - 5 )) python3 -m pytest -p no:django -p no:cacheprovider \
    --confcutdir=tests/evaluator -m gpu -q --tb=short -rA tests/evaluator > $OUT/gpu-tests.log 2>&1
  mark "gpu tests rc=$?"; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -2 $OUT/gpu-tests.log )
( export OUT=$WORK/batching BUDGET=$(( $(rest) - 8 )); source "$HERE/head.sh"
  timeout --kill-after=5 $(( $(left) - 3 )) python3 bench/attention_batching.py --device cuda \
    --shape-set full --shapes 3,9,11,12,13,17,19 --json $OUT/attention-batching.json \
    > $OUT/attention-batching.txt 2>&1
  mark "attention batching rc=$?"; cat $OUT/attention-batching.txt )
tar czf $ROOT_OUT/session14c.tgz -C $WORK .
