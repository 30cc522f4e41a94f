#!/bin/bash
# Session 18's first H200 call (harness 0.3.8): does starting two operators' children ahead
# (ATREX_START_AHEAD_DEPTH=2) cut the 30-operator submission's child start-up? On one
# machine: depth 2, depth 1, then depth 2 again where the budget allows (the two depth-2
# runs give the repeatability; bench/compare_runs.py). Each run keeps its children's logs
# (--log-dir), whose "start-up steps" lines show the fork server's Triton hash (the
# "triton key" step, now paid once in the server). Packed into $OUT/session18a.tgz.
#   BUDGET=580 bash bench/h200_session/session18a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-580}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
run30() {  # name depth
  if [ "$(left)" -lt 180 ]; then mark "$1 skipped: $(left) s left"; return; fi
  S=$(date +%s)
  ATREX_START_AHEAD_DEPTH=$2 timeout --kill-after=10 $(( $(left) - 8 )) python3 bench/full_suite_walltime.py \
    --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
    --out $OUT/$1.json --log-dir $OUT/$1-logs > $OUT/$1.txt 2>&1
  mark "$1 (depth $2) rc=$? wall $(( $(date +%s) - S )) s"
}
run30 depth2-a 2
run30 depth1 1
run30 depth2-b 2
for f in depth1 depth2-b; do
  [ -f $OUT/$f.json ] && python3 bench/compare_runs.py $OUT/depth2-a.json $OUT/$f.json > $OUT/compare-$f.txt 2>&1 \
    && head -4 $OUT/compare-$f.txt
done
for f in depth2-a depth1 depth2-b; do
  [ -f $OUT/$f.json ] && python3 bench/where_time_goes.py --results $OUT/$f.json > $OUT/$f-phases.txt 2>&1
done
grep -rh "start-up steps" $OUT/*-logs 2>/dev/null | head -40 > $OUT/startup-steps.txt
tar czf $ROOT_OUT/session18a.tgz -C $OUT .
