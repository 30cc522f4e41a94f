#!/bin/bash
# Operator-level concurrency on the H200 (issue 23): the 30-operator submission (the Triton
# baseline's 14 kernels, the references elsewhere) over the full v1 suite at CONCURRENCY
# (default 4) operators at once, then, if $BUDGET allows, one at a time for comparison with
# the same seed (bench/concurrency_compare.py: verdicts equal, per-shape figure differences).
# Needs root (the sandbox users: nobody, 65533, 65532 and ATREX_SANDBOX_MORE_USERS).
#   OUT=/tmp/out BUDGET=560 bash bench/h200_session/concurrent.sh
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
CONCURRENCY=${CONCURRENCY:-4}
# Users for CONCURRENCY children and the one started ahead, beside nobody/65533/65532.
export ATREX_SANDBOX_MORE_USERS=${ATREX_SANDBOX_MORE_USERS:-65531,65530,65529,65528,65527}
KEEP=$OUT/concurrent-results
# Budget: the concurrent run first (aimed at < 180 s); the one-at-a-time run (~330 s at
# harness 0.3.4) only if what is left covers it with room for the comparison.
LIMIT=$(( $(left) - 20 ))
timeout --kill-after=5 $LIMIT python3 bench/concurrency_compare.py --suite atrex-bench-v1 \
  --device cuda --kernels examples/bundles/triton-baseline --concurrency $CONCURRENCY \
  --only $CONCURRENCY --keep $KEEP --json $OUT/concurrent-$CONCURRENCY.json \
  > $OUT/concurrent-$CONCURRENCY.txt 2>&1
mark "concurrency $CONCURRENCY rc=$?"
tail -3 $OUT/concurrent-$CONCURRENCY.txt
if [ "$(left)" -gt 380 ]; then
  timeout --kill-after=5 $(( $(left) - 15 )) python3 bench/full_suite_walltime.py \
    --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
    --concurrency 1 --out $KEEP/results-1.json > $OUT/concurrent-1.txt 2>&1
  mark "concurrency 1 rc=$?"
  tail -25 $OUT/concurrent-1.txt
  if [ -f $KEEP/results-1.json ] && [ -f $KEEP/results-$CONCURRENCY.json ]; then
    python3 bench/compare_runs.py $KEEP/results-1.json $KEEP/results-$CONCURRENCY.json \
      > $OUT/compare-1-vs-$CONCURRENCY.txt 2>&1
    tail -20 $OUT/compare-1-vs-$CONCURRENCY.txt
  fi
else
  echo "one-at-a-time run skipped: $(left) s left" | tee -a $OUT/machine.txt
fi
