#!/bin/bash
# Session 23's H200 call (harness 0.3.14: its change is CPU-only, the second look): the
# 14-operator Triton bundle over the full v1 suite against session 22's 0.3.13 run
# (bench/compare_runs.py), then every GPU test (the exploit corpus among them). Packed into
# $OUT/session23a.tgz.
#   BUDGET=570 bash bench/h200_session/session23a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-570}
source "$HERE/head.sh"
grep "^host\|HARNESS" $OUT/machine.txt
S=$(date +%s)
timeout --kill-after=5 150 python3 -m evaluator run examples/bundles/triton-baseline \
  --suite atrex-bench-v1 --device cuda --out $OUT/triton-14.json > $OUT/triton-14.txt 2>&1
mark "Triton bundle rc=$? wall $(( $(date +%s) - S )) s"
python3 bench/where_time_goes.py --results $OUT/triton-14.json > $OUT/triton-14-phases.txt 2>&1
tail -1 $OUT/triton-14-phases.txt
python3 bench/compare_runs.py results/2026-12-04-h200-session22/call1/triton-14.json \
  $OUT/triton-14.json > $OUT/compare-triton-vs-s22.txt 2>&1; head -3 $OUT/compare-triton-vs-s22.txt
python3 - $OUT/triton-14.json <<'PY' | tee -a $OUT/machine.txt
import json, sys
shapes = [s for o in json.load(open(sys.argv[1]))["operators"] for s in o["shapes"]]
print("shapes", len(shapes), "second looks", sum("second_look" in s for s in shapes),
      "statuses", sorted({s["status"] for s in shapes}))
PY
all_gpu_tests
tar czf $ROOT_OUT/session23a.tgz -C $OUT .
