#!/bin/bash
# Agent rounds on one H200 (issue 23: one operator's public shapes, correctness and timing,
# in under 5 s after the first): the Triton baseline's rms_norm, 5 rounds through the
# campaign's warm evaluator, the agent answering in 2 s, with the round measurement policy
# and the campaign's eager-timings cache (bench/agent_round.py). Then the CUDA fallback
# monitor's module scan per shape, before and after (bench/module_scan.py), and, if the
# budget allows, 3 of the same rounds measured as before (--full-policy --no-campaign-timings).
# Prints the tables; JSON and logs under $OUT. BUDGET (s) defaults to 150.
BUDGET=${BUDGET:-150}
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
ROUNDS="python3 bench/agent_round.py --device cuda --suite atrex-bench-v1 --operators rms_norm --rounds 5 --agent-s 2"
timeout --kill-after=5 $(( $(left) - 45 )) $ROUNDS --json $OUT/agent-rounds.json \
  > $OUT/agent-rounds.txt 2>&1
mark "agent rounds (round policy, campaign timings) rc=$?"
timeout --kill-after=5 30 python3 bench/module_scan.py --scans 20 > $OUT/module-scan.txt 2>&1
mark "module scan rc=$?"
if [ $(left) -gt 70 ]; then  # 3 rounds: round 1 and two more, as measured before (~55 s)
  timeout --kill-after=5 $(( $(left) - 5 )) ${ROUNDS/--rounds 5/--rounds 3} --full-policy --no-campaign-timings \
    --json $OUT/agent-rounds-full-policy.json > $OUT/agent-rounds-full-policy.txt 2>&1
  mark "agent rounds (full policy, no campaign timings) rc=$?"
fi
cat $OUT/machine.txt
for f in agent-rounds agent-rounds-full-policy; do
  [ -f $OUT/$f.txt ] && { echo "== $f"; grep -v '^\[' $OUT/$f.txt | tail -12; }
done
echo "== module scan"; cat $OUT/module-scan.txt
