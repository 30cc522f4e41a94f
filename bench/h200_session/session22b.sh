#!/bin/bash
# Session 22's second H200 call (harness 0.3.13 as landed): every GPU test (the exploit corpus
# among them), then agent rounds on rms_norm's public v1 shapes, the same source every round and
# a changed source every round (bench/agent_round.py). Packed into $OUT/session22b.tgz.
#   BUDGET=560 bash bench/h200_session/session22b.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-560}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
ROUNDS="--device cuda --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1"
for kind in same vary; do
  [ $(left) -gt 300 ] || break
  flag=; [ $kind = vary ] && flag=--vary
  timeout --kill-after=5 70 python3 bench/agent_round.py $ROUNDS $flag --json $OUT/rounds-$kind.json \
    --keep $OUT/rounds-$kind > $OUT/rounds-$kind.txt 2>&1
  mark "rounds $kind rc=$?"; tail -1 $OUT/rounds-$kind.txt
done
all_gpu_tests
tar czf $ROOT_OUT/session22b.tgz -C $OUT .
