#!/bin/bash
# Session 22's third H200 call: what the reference pool (evaluator/reference_pool.py, off by
# default) would save on the H200: per operator, its two shapes of the v1 full set with the
# smallest outputs, the reference as a correctness trial runs it against a pooled trial's
# fetch (bench/reference_pool.py's calls table), every operator. Packed into $OUT/session22c.tgz.
#   BUDGET=260 bash bench/h200_session/session22c.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-260}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
OPS=$(python3 -c 'from evaluator.suite import load_suite;print(",".join(sorted({s.operator for s in load_suite("atrex-bench-v1").shapes})))')
timeout --kill-after=5 $(( $(left) - 10 )) python3 bench/reference_pool.py --device cuda \
  --suite atrex-bench-v1 --shape-set full --operators $OPS --max-shapes 2 --repeats 5 \
  --json $OUT/pool-h200.json > $OUT/pool-h200.txt 2>&1
mark "reference pool calls rc=$?"; tail -64 $OUT/pool-h200.txt
tar czf $ROOT_OUT/session22c.tgz -C $OUT .
