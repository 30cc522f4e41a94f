#!/bin/bash
# Session 21's fourth H200 call (harness 0.3.13 final: one compiling fork builds each distinct
# launcher): the compile-ahead GPU tests, then agent rounds whose kernel changes every
# round, 0.3.13 and 0.3.12 (s21-before/) alternately on this machine. Packed into
# $OUT/session21d.tgz.
#   BUDGET=210 bash bench/h200_session/session21d.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-210}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
timeout 90 $PYTEST tests/evaluator/test_compile_ahead_gpu.py > $OUT/gpu-compile-ahead.log 2>&1
mark "compile-ahead GPU tests rc=$?"; tail -1 $OUT/gpu-compile-ahead.log
ROUNDS="--device cuda --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 --vary"
for run in 1 2; do
  for tree in after before; do
    [ $(left) -gt 40 ] || break 2
    dir=.; [ $tree = before ] && dir=s21-before
    timeout --kill-after=5 $(( $(left) - 5 < 70 ? $(left) - 5 : 70 )) python3 $dir/bench/agent_round.py $ROUNDS \
      --json $OUT/rounds-$tree-$run.json --keep $OUT/rounds-$tree-$run > $OUT/rounds-$tree-$run.txt 2>&1
    mark "rounds $tree $run rc=$?"; tail -1 $OUT/rounds-$tree-$run.txt
  done
done
tar czf $ROOT_OUT/session21d.tgz -C $OUT .
