#!/bin/bash
# Session 12's second H200 call (issue 23's figures): an agent campaign's rounds through the
# warm evaluator (one operator's public v1 shapes), then a submission implementing all 30
# operators (the Triton bundle's 14 kernels, the references for the other 16) over the whole
# v1 suite with children forked from the fork server, then cold rounds if time is left.
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
timeout 60 python3 bench/h200_session/launcher_probe.py > $OUT/launcher-probe.txt 2>&1
mark "launcher probe rc=$?"
timeout --kill-after=5 120 python3 bench/agent_round.py --device cuda --suite atrex-bench-v1 \
  --operators rms_norm --rounds 5 --agent-s 2 --json $OUT/agent-warm.json > $OUT/agent-warm.txt 2>&1
mark "agent warm rc=$?"
ATREX_FORK_SERVER=1 timeout --kill-after=5 $(( $(left) - 90 )) python3 bench/full_suite_walltime.py \
  --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
  --out /tmp/full30.json --log-dir /tmp/full30-logs > $OUT/full30.txt 2>&1
mark "full30 rc=$?"
cp /tmp/full30*.json $OUT/ 2>/dev/null
timeout --kill-after=5 $(( $(left) - 5 )) python3 bench/agent_round.py --device cuda --suite atrex-bench-v1 \
  --operators rms_norm --rounds 3 --cold --json $OUT/agent-cold.json > $OUT/agent-cold.txt 2>&1
mark "agent cold rc=$?"
cat $OUT/agent-warm.txt; tail -40 $OUT/full30.txt; cat $OUT/agent-cold.txt
