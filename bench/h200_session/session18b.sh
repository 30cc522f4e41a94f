#!/bin/bash
# Session 18's second H200 call (harness 0.3.9: two children warm up ahead by default): the
# 30-operator submission over the full v1 suite twice back to back (bench/full_suite_walltime.py
# with the Triton baseline's kernels; bench/compare_runs.py for how far apart they are), then
# every GPU test in the time left. Packed into $OUT/session18b.tgz.
#   BUDGET=585 bash bench/h200_session/session18b.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-585}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
for run in 1 2; do
  S=$(date +%s)
  timeout --kill-after=10 $(( $(left) - 180 )) python3 bench/full_suite_walltime.py --suite atrex-bench-v1 \
    --device cuda --kernels examples/bundles/triton-baseline --out $OUT/full-30-$run.json \
    --log-dir $OUT/full-30-$run-logs > $OUT/full-30-$run.txt 2>&1
  mark "30-operator submission $run rc=$? wall $(( $(date +%s) - S )) s"
  python3 bench/where_time_goes.py --results $OUT/full-30-$run.json > $OUT/full-30-$run-phases.txt 2>&1
  tail -2 $OUT/full-30-$run-phases.txt
done
python3 bench/compare_runs.py $OUT/full-30-1.json $OUT/full-30-2.json > $OUT/compare.txt 2>&1; head -2 $OUT/compare.txt
timeout --kill-after=5 $(( $(left) - 8 )) python3 -m pytest -p no:django -p no:cacheprovider \
  --confcutdir=tests/evaluator -m gpu -q --tb=short -rA tests/evaluator > $OUT/gpu-tests.log 2>&1
mark "gpu tests rc=$?"; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -1 $OUT/gpu-tests.log
tar czf $ROOT_OUT/session18b.tgz -C $OUT .
