#!/bin/bash
# Session 22's first H200 call (harness 0.3.13 as landed, its first whole runs): the 30-operator
# submission over the full v1 suite twice back to back on a freshly started machine (the first
# run is the machine's first: nothing read before it), each against the other and against
# session 19's last run on 0.3.11 (bench/compare_runs.py), then the 14-operator Triton bundle
# over v1 against session 19's. Packed into $OUT/session22a.tgz.
#   BUDGET=585 bash bench/h200_session/session22a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-585}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
BEFORE=results/2026-12-03-h200-session19/call4/full-30-4.json
for run in 1 2; do
  S=$(date +%s)
  timeout --kill-after=10 $(( $(left) - 12 )) python3 bench/full_suite_walltime.py --suite atrex-bench-v1 \
    --device cuda --kernels examples/bundles/triton-baseline --out $OUT/full-30-$run.json \
    --log-dir $OUT/full-30-$run-logs > $OUT/full-30-$run.txt 2>&1
  mark "30-operator submission $run rc=$? wall $(( $(date +%s) - S )) s"
  python3 bench/where_time_goes.py --results $OUT/full-30-$run.json > $OUT/full-30-$run-phases.txt 2>&1
  tail -2 $OUT/full-30-$run-phases.txt
  python3 bench/compare_runs.py $BEFORE $OUT/full-30-$run.json > $OUT/compare-$run-vs-s19.txt 2>&1
  head -3 $OUT/compare-$run-vs-s19.txt
done
python3 bench/compare_runs.py $OUT/full-30-1.json $OUT/full-30-2.json > $OUT/compare.txt 2>&1; head -3 $OUT/compare.txt
if [ $(left) -gt 110 ]; then
  S=$(date +%s)
  timeout --kill-after=5 $(( $(left) - 8 )) python3 -m evaluator run examples/bundles/triton-baseline \
    --suite atrex-bench-v1 --device cuda --out $OUT/triton-14.json > $OUT/triton-14.txt 2>&1
  mark "Triton bundle rc=$? wall $(( $(date +%s) - S )) s"
  python3 bench/where_time_goes.py --results $OUT/triton-14.json > $OUT/triton-14-phases.txt 2>&1
  tail -1 $OUT/triton-14-phases.txt
  python3 bench/compare_runs.py results/2026-12-03-h200-session19/call2/triton-14.json $OUT/triton-14.json \
    > $OUT/compare-triton-vs-s19.txt 2>&1; head -3 $OUT/compare-triton-vs-s19.txt
else
  mark "Triton bundle not run: $(left) s left"
fi
tar czf $ROOT_OUT/session22a.tgz -C $OUT .
