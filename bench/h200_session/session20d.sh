#!/bin/bash
# Session 20's fourth H200 call: agent rounds whose kernel changes every round
# (bench/agent_round.py --vary), without compiling ahead (ATREX_COMPILE_AHEAD=0: harness
# 0.3.11's rounds) and with it, on one machine, one after the other. Packed into
# $OUT/session20d.tgz.
#   BUDGET=270 bash bench/h200_session/session20d.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-270}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
for setting in 0 1 0 1; do
  [ $(left) -gt 60 ] || break
  N=$(ls $OUT | grep -c "^rounds-vary-")
  ATREX_COMPILE_AHEAD=$setting timeout --kill-after=5 $(( $(left) - 5 )) python3 bench/agent_round.py \
    --device cuda --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 --vary \
    --json $OUT/rounds-vary-$N-ahead$setting.json > $OUT/rounds-vary-$N-ahead$setting.txt 2>&1
  mark "agent rounds --vary, compile ahead $setting rc=$?"; tail -1 $OUT/rounds-vary-$N-ahead$setting.txt
done
tar czf $ROOT_OUT/session20d.tgz -C $OUT .
