#!/bin/bash
# Session 14's second H200 call (issue 23), each part in its own folder under $OUT:
#   batching/  unified_attention's reference batched against its old per-sequence loop;
#   fp8/       the in-place fp8 quantisation against the old code, bit for bit;
#   concurrent/ the 30-operator submission over v1 at CONCURRENCY=4, the most expensive
#              operators first (v1-operator-costs.json: session 14 call 1's wall times, and
#              session 8's for unified_attention);
#   agentround/ warm agent rounds with the round policy, with what is left.
# BUDGET (s) is the whole call's.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOTAL=${BUDGET:-570}; START=$(date +%s); ROOT_OUT=$OUT
rest() { echo $(( TOTAL - ($(date +%s) - START) )); }
export ATREX_FORK_SERVER=${ATREX_FORK_SERVER:-1}
mkdir -p $ROOT_OUT/batching $ROOT_OUT/fp8 $ROOT_OUT/concurrent $ROOT_OUT/agentround
( export OUT=$ROOT_OUT/batching BUDGET=60; source "$HERE/head.sh"
  timeout --kill-after=5 55 python3 bench/attention_batching.py --device cuda --shape-set full \
    --shapes 3,9,11,12,13,17,19 --json $OUT/attention-batching.json > $OUT/attention-batching.txt 2>&1
  mark "attention batching rc=$?"; cat $OUT/attention-batching.txt )
( export OUT=$ROOT_OUT/fp8 BUDGET=50; source "$HERE/head.sh"
  timeout --kill-after=5 58 python3 bench/h200_session/fp8_quantise_check.py > $OUT/fp8.txt 2>&1
  mark "fp8 check rc=$?"; tail -15 $OUT/fp8.txt )
AGENT_S=120
( export OUT=$ROOT_OUT/concurrent; BUDGET=$(( $(rest) - AGENT_S )) \
  EXTRA="--operator-costs bench/h200_session/v1-operator-costs.json" bash "$HERE/concurrent.sh" )
( export OUT=$ROOT_OUT/agentround; BUDGET=$(( $(rest) - 5 )) bash "$HERE/agentround.sh" )
