#!/bin/bash
# Session 17's fourth H200 call (harness 0.3.8): the host's speed (machine.txt, and the
# in-process passes of bench/round_profile.py, comparable with calls a and b), then the
# 30-operator submission over the full v1 suite twice back to back
# (bench/full_suite_walltime.py with the Triton baseline's kernels) and how far apart the
# two are (bench/compare_runs.py). Packed into $OUT/session17d.tgz.
#   BUDGET=500 bash bench/h200_session/session17d.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-500}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
timeout --kill-after=5 50 python3 bench/round_profile.py --device cuda --suite atrex-bench-v1 \
  --operator rms_norm --passes 2 --plain > $OUT/round-profile.txt 2>&1
mark "round profile rc=$?"; grep -E "^pass" $OUT/round-profile.txt
for run in 1 2; do
  S=$(date +%s)
  timeout --kill-after=10 $(( $(left) - 8 )) python3 bench/full_suite_walltime.py --suite atrex-bench-v1 \
    --device cuda --kernels examples/bundles/triton-baseline --out $OUT/full-30-$run.json > $OUT/full-30-$run.txt 2>&1
  mark "30-operator submission $run rc=$? wall $(( $(date +%s) - S )) s"
done
python3 bench/compare_runs.py $OUT/full-30-1.json $OUT/full-30-2.json > $OUT/compare.txt 2>&1; head -4 $OUT/compare.txt
tar czf $ROOT_OUT/session17d.tgz -C $OUT .
