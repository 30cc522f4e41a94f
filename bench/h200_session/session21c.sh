#!/bin/bash
# Session 21's third H200 call (harness 0.3.13 with the compiling forks building the kernels'
# launchers too): the compile-ahead GPU tests, the float comparison against 0.3.12's on the
# device (compare_diff.py, 0.3.12's tree in s21-before/), then agent rounds whose kernel
# changes every round, 0.3.12 and 0.3.13 alternately on this machine. Packed into
# $OUT/session21c.tgz.
#   BUDGET=420 bash bench/h200_session/session21c.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-420}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
timeout 150 $PYTEST tests/evaluator/test_compile_ahead_gpu.py > $OUT/gpu-compile-ahead.log 2>&1
mark "compile-ahead GPU tests rc=$?"; tail -1 $OUT/gpu-compile-ahead.log
timeout 60 python3 bench/h200_session/compare_diff.py --old s21-before --device cuda \
  --json $OUT/compare-diff.json > $OUT/compare-diff.txt 2>&1
mark "compare diff rc=$?"; head -8 $OUT/compare-diff.txt
ROUNDS="--device cuda --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 --vary"
for run in 1 2 3; do
  for tree in after before; do
    [ $(left) -gt 45 ] || break 2
    dir=.; [ $tree = before ] && dir=s21-before
    timeout --kill-after=5 $(( $(left) - 8 < 80 ? $(left) - 8 : 80 )) python3 $dir/bench/agent_round.py $ROUNDS \
      --json $OUT/rounds-$tree-$run.json --keep $OUT/rounds-$tree-$run > $OUT/rounds-$tree-$run.txt 2>&1
    mark "rounds $tree $run rc=$?"; tail -1 $OUT/rounds-$tree-$run.txt
  done
done
tar czf $ROOT_OUT/session21c.tgz -C $OUT .
