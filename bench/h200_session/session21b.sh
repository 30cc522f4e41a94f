#!/bin/bash
# Session 21's second H200 call (harness 0.3.13: the float comparison reads the device once,
# the fallback report's module key and quick look cheaper, a round's checks rehearsed while
# its kernel compiles ahead): the comparison against 0.3.12's on the device
# (compare_diff.py, 0.3.12's tree in s21-before/), agent rounds whose kernel changes every
# round, 0.3.12 and 0.3.13 alternately on this machine, bench/round_profile.py, then every
# GPU test. Packed into $OUT/session21b.tgz.
#   BUDGET=560 bash bench/h200_session/session21b.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-560}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
timeout 90 python3 bench/h200_session/compare_diff.py --old s21-before --device cuda \
  --json $OUT/compare-diff.json > $OUT/compare-diff.txt 2>&1
mark "compare diff rc=$?"; cat $OUT/compare-diff.txt | head -8
ROUNDS="--device cuda --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 --vary"
for run in 1 2; do
  for tree in before after; do
    dir=.; [ $tree = before ] && dir=s21-before
    timeout --kill-after=5 90 python3 $dir/bench/agent_round.py $ROUNDS \
      --json $OUT/rounds-$tree-$run.json --keep $OUT/rounds-$tree-$run > $OUT/rounds-$tree-$run.txt 2>&1
    mark "rounds $tree $run rc=$?"; tail -1 $OUT/rounds-$tree-$run.txt
  done
done
timeout 100 python3 bench/round_profile.py --device cuda --operator rms_norm --passes 2 --top 60 \
  --json $OUT/round-profile.json > $OUT/round-profile.txt 2>&1
mark "round profile rc=$?"; grep "^pass\|^profiled" $OUT/round-profile.txt
all_gpu_tests
tar czf $ROOT_OUT/session21b.tgz -C $OUT .
