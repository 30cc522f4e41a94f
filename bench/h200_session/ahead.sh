#!/bin/bash
# Session 4, second H200 call (one GPU, each step alone on it): the harness with the next
# operator's child started ahead (evaluator.runner.ChildStarter).
#   1. the Triton bundle over v1 again (run 4: against run 3 of phases.sh, repeatability
#      and the start-up saved; the children's [harness] log lines);
#   2. a submission implementing all 30 operators (each its PyTorch reference: every shape
#      a fallback, evaluated in full): the full-suite wall time per submission;
#   3. the torch.compile baseline over v1 with what is left of $LIMIT_TOTAL seconds.
# Launch with PIPELINE=ahead.sh LIMIT_TOTAL=760 start.sh.
source "$(dirname "$0")/common.sh"
LIMIT_TOTAL=${LIMIT_TOTAL:-760}
step triton-run4 0 330 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda --out $O/triton-v1-run4.json --log-dir $P/logs/run4
grep -h "\[harness\]" $P/logs/run4/*.log > $O/run4-harness.txt 2>&1
step full-suite-30 0 480 python3 bench/full_suite_walltime.py --suite $SUITE --device cuda --out $O/full-suite-30.json --log-dir $P/logs/full30
grep -h "\[harness\]" $P/logs/full30/*.log > $O/full30-harness.txt 2>&1
LEFT=$(( LIMIT_TOTAL - ($(date +%s) - T0) - 20 ))
if [ $LEFT -gt 60 ]; then
  step compile-baseline 0 $(( LEFT + 15 )) python3 bench/reference_baseline.py --mode compile --dynamic --suite $SUITE --device cuda --hardware h200-sxm --operator-deadline-s 12 --deadline-s $LEFT --out $O/compile-baseline-v1.json
fi
echo "$(date -u +%T) pipeline done after $(( $(date +%s) - T0 )) s" >> $P/status
touch $P/done
