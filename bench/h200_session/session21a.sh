#!/bin/bash
# Session 21's first H200 call (harness 0.3.12 as landed): where a round's per-shape seconds
# go, function by function (bench/round_profile.py on rms_norm), agent rounds whose kernel
# changes every round (the before of this session's changes), then every GPU test on the
# final 0.3.12 tree (the memory-accounting change included). Packed into $OUT/session21a.tgz.
#   BUDGET=570 bash bench/h200_session/session21a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-570}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
timeout 120 python3 bench/round_profile.py --device cuda --operator rms_norm --passes 2 --top 60 \
  --json $OUT/round-profile.json > $OUT/round-profile.txt 2>&1
mark "round profile rc=$?"; grep -i "pass" $OUT/round-profile.txt | head -5
timeout --kill-after=5 100 python3 bench/agent_round.py --device cuda --suite atrex-bench-v1 \
  --operators rms_norm --rounds 4 --agent-s 1 --vary --json $OUT/rounds-vary.json \
  --keep $OUT/rounds-vary > $OUT/rounds-vary.txt 2>&1
mark "agent rounds --vary rc=$?"; tail -2 $OUT/rounds-vary.txt
all_gpu_tests
tar czf $ROOT_OUT/session21a.tgz -C $OUT .
