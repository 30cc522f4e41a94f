#!/bin/bash
# Session 20's second H200 call (harness 0.3.12: a campaign round compiles its previous
# round's Triton specialisations ahead, in forks): the compile-ahead GPU tests, then
# bench/compile_ahead.py (threads against forks) on rms_norm and two more operators, agent
# rounds whose kernel changes every round (bench/agent_round.py --vary: the goal's case) and
# with the same source, and every GPU test if the time allows. Packed into
# $OUT/session20b.tgz.
#   BUDGET=585 bash bench/h200_session/session20b.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-585}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
timeout 200 $PYTEST tests/evaluator/test_compile_ahead_gpu.py > $OUT/gpu-compile-ahead.log 2>&1
mark "compile-ahead GPU tests rc=$?"; tail -1 $OUT/gpu-compile-ahead.log
timeout 150 python3 bench/compile_ahead.py --device cuda --operator rms_norm \
  --ways threads-8,forks-16,forks-16 --json $OUT/compile-ahead-rms_norm.json \
  > $OUT/compile-ahead-rms_norm.txt 2>&1
mark "compile ahead rms_norm rc=$?"; tail -4 $OUT/compile-ahead-rms_norm.txt
timeout --kill-after=5 100 python3 bench/agent_round.py --device cuda --suite atrex-bench-v1 \
  --operators rms_norm --rounds 5 --agent-s 1 --vary --json $OUT/rounds-vary.json \
  --keep $OUT/rounds-vary > $OUT/rounds-vary.txt 2>&1
mark "agent rounds --vary rc=$?"; tail -3 $OUT/rounds-vary.txt
grep -h "compile_ahead\|Triton cache" $OUT/rounds-vary/server.log | tail -3
timeout --kill-after=5 80 python3 bench/agent_round.py --device cuda --suite atrex-bench-v1 \
  --operators rms_norm --rounds 4 --agent-s 1 --json $OUT/rounds-same.json \
  > $OUT/rounds-same.txt 2>&1
mark "agent rounds same source rc=$?"; tail -2 $OUT/rounds-same.txt
for op in fused_add_rms_norm per_token_group_quant_fp8; do
  [ $(left) -gt 300 ] || break
  timeout 80 python3 bench/compile_ahead.py --device cuda --operator $op --ways threads-8,forks-16 \
    --json $OUT/compile-ahead-$op.json > $OUT/compile-ahead-$op.txt 2>&1
  mark "compile ahead $op rc=$?"; tail -3 $OUT/compile-ahead-$op.txt
done
all_gpu_tests
tar czf $ROOT_OUT/session20b.tgz -C $OUT .
