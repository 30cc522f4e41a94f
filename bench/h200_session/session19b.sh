#!/bin/bash
# Session 19's second H200 call (harness 0.3.11: a first call profiled for its device activity
# only goes without the profiler's external correlation), on a freshly started machine: how long the
# first read of torch's and the CUDA libraries' files takes (is a fresh machine's first run slow
# on its disk?), then the 30-operator submission over the full v1 suite a third time (against
# the first call's two runs), every GPU test, what the profiler's external correlation costs a
# device-only watched call (bench/profiler_cost.py's cuda_noext), and the 14-operator Triton
# bundle over v1 if the time allows. Packed into $OUT/session19b.tgz.
#   BUDGET=585 bash bench/h200_session/session19b.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-585}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
SITE=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
S=$(date +%s.%N)
BYTES=$(find $SITE/torch/lib $SITE/nvidia $SITE/triton -name '*.so*' -type f -print0 2>/dev/null \
  | xargs -0 cat 2>/dev/null | wc -c)
mark "first read of torch/nvidia/triton shared objects: $BYTES bytes in $(python3 -c "import time;print(round(time.time()-$S,1))") s"
S=$(date +%s)
timeout --kill-after=10 $(( $(left) - 230 )) python3 bench/full_suite_walltime.py --suite atrex-bench-v1 \
  --device cuda --kernels examples/bundles/triton-baseline --out $OUT/full-30-3.json \
  --log-dir $OUT/full-30-3-logs > $OUT/full-30-3.txt 2>&1
mark "30-operator submission 3 rc=$? wall $(( $(date +%s) - S )) s"
python3 bench/where_time_goes.py --results $OUT/full-30-3.json > $OUT/full-30-3-phases.txt 2>&1
tail -2 $OUT/full-30-3-phases.txt
timeout --kill-after=5 $(( $(left) - 8 )) python3 -m pytest -p no:django -p no:cacheprovider \
  --confcutdir=tests/evaluator -m gpu -q --tb=short -rA tests/evaluator > $OUT/gpu-tests.log 2>&1
mark "gpu tests rc=$?"; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -1 $OUT/gpu-tests.log
if [ $(left) -gt 200 ]; then
  timeout 90 python3 bench/profiler_cost.py --pairs gated_delta_rule_update:6 --repeats 2 \
    --json $OUT/profiler-cost.json > $OUT/profiler-cost.txt 2>&1
  mark "profiler cost rc=$?"; cat $OUT/profiler-cost.txt
fi
if [ $(left) -gt 130 ]; then
  S=$(date +%s)
  timeout --kill-after=5 $(( $(left) - 8 )) python3 -m evaluator run examples/bundles/triton-baseline \
    --suite atrex-bench-v1 --device cuda --out $OUT/triton-14.json > $OUT/triton-14.txt 2>&1
  mark "Triton bundle rc=$? wall $(( $(date +%s) - S )) s"
  python3 bench/where_time_goes.py --results $OUT/triton-14.json > $OUT/triton-14-phases.txt 2>&1
  tail -1 $OUT/triton-14-phases.txt
else
  mark "Triton bundle not run: $(left) s left"
fi
tar czf $ROOT_OUT/session19b.tgz -C $OUT .
