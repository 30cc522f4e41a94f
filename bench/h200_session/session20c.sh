#!/bin/bash
# Session 20's third H200 call (harness 0.3.12, each fork's group loaded as soon as that fork
# is gone): the compile-ahead GPU tests, bench/compile_ahead.py on rms_norm (threads against
# forks, how long making the forks takes), and agent rounds whose kernel changes every round
# (bench/agent_round.py --vary). Packed into $OUT/session20c.tgz.
#   BUDGET=330 bash bench/h200_session/session20c.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-330}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
timeout 150 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu \
  -q --tb=short -rA tests/evaluator/test_compile_ahead_gpu.py > $OUT/gpu-compile-ahead.log 2>&1
mark "compile-ahead GPU tests rc=$?"; tail -1 $OUT/gpu-compile-ahead.log
timeout 120 python3 bench/compile_ahead.py --device cuda --operator rms_norm \
  --ways threads-8,forks-16,forks-16 --json $OUT/compile-ahead-rms_norm.json \
  > $OUT/compile-ahead-rms_norm.txt 2>&1
mark "compile ahead rms_norm rc=$?"; tail -4 $OUT/compile-ahead-rms_norm.txt
timeout --kill-after=5 $(( $(left) - 10 )) python3 bench/agent_round.py --device cuda \
  --suite atrex-bench-v1 --operators rms_norm --rounds 5 --agent-s 1 --vary \
  --json $OUT/rounds-vary.json --keep $OUT/rounds-vary > $OUT/rounds-vary.txt 2>&1
mark "agent rounds --vary rc=$?"; tail -3 $OUT/rounds-vary.txt
tar czf $ROOT_OUT/session20c.tgz -C $OUT .
