#!/bin/bash
# Session 16's second H200 call: where a round's host seconds go (bench/round_profile.py on
# rms_norm's 56 public v1 shapes), agent rounds (agentround.sh), a second 30-operator run at
# CONCURRENCY=4 (repeatability against the first call's), then every GPU test with what is
# left. Everything is packed into $OUT/session16b.tgz.
#   BUDGET=585 bash bench/h200_session/session16b.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOTAL=${BUDGET:-585}; START=$(date +%s); ROOT_OUT=$OUT; WORK=$(mktemp -d)
rest() { echo $(( TOTAL - ($(date +%s) - START) )); }
mkdir -p $WORK/profile $WORK/agentround $WORK/concurrent $WORK/gpu
( export OUT=$WORK/profile BUDGET=75; source "$HERE/head.sh"
  timeout --kill-after=5 $(( $(left) - 3 )) python3 bench/round_profile.py --device cuda \
    --suite atrex-bench-v1 --operator rms_norm --passes 2 --top 45 --json $OUT/round-profile.json \
    > $OUT/round-profile.txt 2>&1
  mark "round profile rc=$?"; grep -E "^rms_norm|^pass|^profiled" $OUT/round-profile.txt )
( export OUT=$WORK/agentround BUDGET=100; bash "$HERE/agentround.sh" > $WORK/agentround/out.txt 2>&1
  grep -A3 "^round 1 (mean)" $WORK/agentround/out.txt | head -3 )
( export OUT=$WORK/concurrent; export BUDGET=$(( $(rest) - 230 )); source "$HERE/head.sh"
  export ATREX_SANDBOX_MORE_USERS=${ATREX_SANDBOX_MORE_USERS:-65531,65530,65529,65528,65527}
  timeout --kill-after=10 $(( $(left) - 3 )) python3 bench/concurrency_compare.py \
    --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
    --concurrency 4 --only 4 --operator-costs bench/h200_session/v1-operator-costs.json \
    --keep $OUT/concurrent-results --json $OUT/concurrent-4.json > $OUT/concurrent-4.txt 2>&1
  mark "concurrency 4 rc=$?"; grep -E '^\{"concurrency"' $OUT/concurrent-4.txt )
( export OUT=$WORK/gpu BUDGET=$(( $(rest) - 8 )); source "$HERE/head.sh"
  timeout --kill-after=5 $(( $(left) - 5 )) python3 -m pytest -p no:django -p no:cacheprovider \
    --confcutdir=tests/evaluator -m gpu -q --tb=short -rA tests/evaluator > $OUT/gpu-tests.log 2>&1
  mark "gpu tests rc=$?"; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -1 $OUT/gpu-tests.log )
tar czf $ROOT_OUT/session16b.tgz -C $WORK .
