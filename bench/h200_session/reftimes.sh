#!/bin/bash
# The eager reference timings' cache on the H200: two runs of the Triton bundle over v1, the
# first fills the cache, the second reads it (t_reference and the speedups compared).
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
export ATREX_FORK_SERVER=${ATREX_FORK_SERVER:-1}
rm -rf /tmp/rt
for i in 1 2; do
  timeout --kill-after=5 200 python3 bench/where_time_goes.py --suite atrex-bench-v1 --device cuda \
    --bundle examples/bundles/triton-baseline --reference-timings /tmp/rt \
    --json $OUT/where-rt-$i.json --results-out /tmp/results-rt-$i.json > $OUT/where-rt-$i.txt 2>&1
  mark "reference timings run $i rc=$?"
done
python3 bench/compare_runs.py /tmp/results-rt-1.json /tmp/results-rt-2.json > $OUT/compare-rt.txt 2>&1
tail -20 $OUT/compare-rt.txt
