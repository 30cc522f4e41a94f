#!/bin/bash
# Operator-level concurrency on the H200 (issue 23): the 30-operator submission (the Triton
# baseline's 14 kernels, the references elsewhere) over the full v1 suite at CONCURRENCY
# (default 4) operators at once, then, if $BUDGET allows, one at a time with the same seed
# for comparison (bench/concurrency_compare.py: wall time per phase, the windows' figures,
# verdicts equal, per-shape figure differences). Runs as root (the sandbox users: nobody,
# 65533, 65532 and ATREX_SANDBOX_MORE_USERS).
#   OUT=/tmp/out BUDGET=560 bash bench/h200_session/concurrent.sh
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
CONCURRENCY=${CONCURRENCY:-4}
# A user for each of the CONCURRENCY children, the one started ahead and the sanitizer's.
export ATREX_SANDBOX_MORE_USERS=${ATREX_SANDBOX_MORE_USERS:-65531,65530,65529,65528,65527}
# The one-at-a-time run (~330 s at harness 0.3.4) starts only if 360 s are left after the
# concurrent one; both are stopped at the budget.
timeout --kill-after=10 $(( $(left) - 5 )) python3 bench/concurrency_compare.py \
  --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
  --concurrency $CONCURRENCY --order K,1 --budget-s $(( $(left) - 15 )) --second-needs-s 360 \
  --keep $OUT/concurrent-results ${EXTRA:-} --json $OUT/concurrent-$CONCURRENCY.json \
  > $OUT/concurrent-$CONCURRENCY.txt 2>&1
mark "concurrency $CONCURRENCY (and 1) rc=$?"
grep -E '^\{"concurrency"|N=|speedup|skipped|not finished|shapes  median' \
  $OUT/concurrent-$CONCURRENCY.txt
