#!/bin/bash
# Session 17's third H200 call (harness 0.3.8 with the campaign's Triton cache rehomed):
# agent rounds on rms_norm's 56 public v1 shapes with the same source every round (the
# cache's case) and with a changed source every round (--vary: each round compiles, as an
# agent's revision does), then the 30-operator submission over the full v1 suite
# (bench/full_suite_walltime.py, the Triton baseline's kernels). Packed into
# $OUT/session17c.tgz.
#   BUDGET=420 bash bench/h200_session/session17c.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-420}
source "$HERE/head.sh"
timeout --kill-after=5 75 python3 bench/agent_round.py --device cuda \
  --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 \
  --keep $OUT/rounds --json $OUT/agent-rounds.json > $OUT/agent-rounds.txt 2>&1
mark "agent rounds rc=$?"; grep -v '^\[' $OUT/agent-rounds.txt | tail -7
grep -E "\[serve\]" $OUT/rounds/server.log | head -8
for f in $OUT/rounds/*.json; do python3 bench/where_time_goes.py --results $f | grep -E "^rms_norm"; done
timeout --kill-after=5 70 python3 bench/agent_round.py --device cuda --vary \
  --suite atrex-bench-v1 --operators rms_norm --rounds 3 --agent-s 1 \
  --json $OUT/agent-rounds-vary.json > $OUT/agent-rounds-vary.txt 2>&1
mark "agent rounds, source changed every round rc=$?"; grep -v '^\[' $OUT/agent-rounds-vary.txt | tail -6
( cd $OUT && tar czf rounds.tgz rounds && rm -rf rounds )
S=$(date +%s)
timeout --kill-after=10 $(( $(left) - 10 )) python3 bench/full_suite_walltime.py --suite atrex-bench-v1 \
  --device cuda --kernels examples/bundles/triton-baseline --out $OUT/full-30.json > $OUT/full-30.txt 2>&1
mark "30-operator submission rc=$? wall $(( $(date +%s) - S )) s"; tail -4 $OUT/full-30.txt
tar czf $ROOT_OUT/session17c.tgz -C $OUT .
