#!/bin/bash
# Session 19's first H200 call (harness 0.3.10: the fp8 comparison skips the chunks whose codes
# and scales are the reference's bit for bit): bench/fp8_compare.py on the GPU at two sizes, then
# the 30-operator submission over the full v1 suite twice back to back (bench/full_suite_walltime.py
# with the Triton baseline's kernels), each against the other and against session 18's second run
# on 0.3.9 (bench/compare_runs.py). Packed into $OUT/session19a.tgz.
#   BUDGET=585 bash bench/h200_session/session19a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-585}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
timeout 60 python3 bench/fp8_compare.py --device cuda > $OUT/fp8-compare.txt 2>&1
mark "fp8_compare default rc=$?"; cat $OUT/fp8-compare.txt
timeout 60 python3 bench/fp8_compare.py --device cuda --tokens 1048576 --hidden 4096 > $OUT/fp8-compare-large.txt 2>&1
mark "fp8_compare large rc=$?"; cat $OUT/fp8-compare-large.txt
BEFORE=results/2026-12-03-h200-session18/call2/full-30-2.json
for run in 1 2; do
  S=$(date +%s)
  timeout --kill-after=10 $(( $(left) - 12 )) python3 bench/full_suite_walltime.py --suite atrex-bench-v1 \
    --device cuda --kernels examples/bundles/triton-baseline --out $OUT/full-30-$run.json \
    --log-dir $OUT/full-30-$run-logs > $OUT/full-30-$run.txt 2>&1
  mark "30-operator submission $run rc=$? wall $(( $(date +%s) - S )) s"
  python3 bench/where_time_goes.py --results $OUT/full-30-$run.json > $OUT/full-30-$run-phases.txt 2>&1
  tail -2 $OUT/full-30-$run-phases.txt
  python3 bench/compare_runs.py $BEFORE $OUT/full-30-$run.json > $OUT/compare-$run-vs-s18.txt 2>&1
  head -3 $OUT/compare-$run-vs-s18.txt
done
python3 bench/compare_runs.py $OUT/full-30-1.json $OUT/full-30-2.json > $OUT/compare.txt 2>&1; head -3 $OUT/compare.txt
tar czf $ROOT_OUT/session19a.tgz -C $OUT .
