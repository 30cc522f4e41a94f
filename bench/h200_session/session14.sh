#!/bin/bash
# Session 14's first H200 call (harness 0.3.4: the speedup over eager divides by the idiomatic
# baseline, timed in each evaluation), within $BUDGET seconds: every GPU test (the exploit
# corpus on CUDA with slow_baseline, the verdict runs, the fallback monitor's tests), then the
# 30-operator submission over v1 at today's concurrency of 1: issue 23's "before" figure, and
# every shape's eager_timed (baseline, or reference where the baseline failed, with a warning).
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
export ATREX_FORK_SERVER=${ATREX_FORK_SERVER:-1}
PYTEST="python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu"
timeout --kill-after=5 250 $PYTEST -q --tb=short -rA tests/evaluator > $OUT/gpu-tests.log 2>&1
mark "gpu tests rc=$?"
timeout --kill-after=5 $(( $(left) - 15 )) python3 bench/full_suite_walltime.py \
  --suite atrex-bench-v1 --device cuda --kernels examples/bundles/triton-baseline \
  --out /tmp/full30.json --log-dir /tmp/full30-logs > $OUT/full30.txt 2>&1
mark "full30 rc=$?"
cp /tmp/full30*.json $OUT/ 2>/dev/null
python3 - <<'PY' > $OUT/eager-timed.txt 2>&1
import collections, glob, json
for path in sorted(glob.glob("/tmp/full30*.json")):
    data = json.load(open(path))
    counts, warnings = collections.Counter(), []
    for op in data.get("operators", []):
        for shape in op.get("shapes", []):
            counts[(op.get("operator"), shape.get("eager_timed"))] += 1
        warnings += [w for w in op.get("warnings", []) if "baseline" in str(w)]
    print(path, dict(collections.Counter(k[1] for k in counts.elements())))
    for (name, kind), n in sorted(counts.items(), key=str):
        if kind != "baseline":
            print("  not baseline:", name, kind, n)
    print("  baseline warnings:", len(warnings), warnings[:5])
PY
grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -3 $OUT/gpu-tests.log
tail -40 $OUT/full30.txt; cat $OUT/eager-timed.txt
