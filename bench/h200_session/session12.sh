#!/bin/bash
# Session 12's first H200 call (session 11 had no device time left for it), most important first within $BUDGET seconds: children
# forked from the fork server against exec'd ones (three operators, full shapes); the
# verdict runs' GPU tests (the planted out-of-bounds read caught, the Triton baseline clean)
# under harness 0.3.1's sanitizer pass; the CUDA fallback monitor's tests (one failed in the
# previous call, unnamed); that pass's cost on the Triton bundle over v1; the other GPU tests.
source "$(dirname "${BASH_SOURCE[0]}")/head.sh"
# The fork server (evaluator/forkserver.py) on CUDA, first: two operators' full shapes with
# children forked and exec'd. Should the forked run not pass, the rest runs exec'd.
for FS in 1 0; do
  ATREX_FORK_SERVER=$FS timeout 150 python3 -m evaluator run examples/bundles/triton-baseline \
    --suite atrex-bench-v1 --device cuda --operators rms_norm,silu_and_mul,l2_norm \
    --sanitizer-tools none --log-dir /tmp/fork-$FS-logs --out /tmp/fork-$FS.json > /tmp/fork-$FS.log 2>&1
  echo "fork server $FS rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/machine.txt
done
python3 - > $OUT/fork-server.txt 2>&1 <<'PY'
import json
for mode in ("1", "0"):
    try:
        r = json.load(open(f"/tmp/fork-{mode}.json"))
    except Exception as exc:
        print(mode, "no results", exc); continue
    for e in r["operators"]:
        st = [s["status"] for s in e["shapes"]]
        print(f"fork={mode} {e['operator']:14s} pass {st.count('pass')}/{len(st)} wall {e.get('wall_s')} "
              f"ahead {e.get('ahead_s')} phases {e.get('phases_s')}")
    print(f"fork={mode} run wall {r.get('wall_s')} aggregate {r.get('scores', {}).get('aggregate')}")
PY
cat $OUT/fork-server.txt
if ! grep -q "fork=1 rms_norm .*pass \([0-9]*\)/\1 " $OUT/fork-server.txt; then
  echo "forked children did not pass: the rest runs exec'd" | tee -a $OUT/machine.txt
  tail -30 /tmp/fork-1.log >> $OUT/fork-server.txt; tail -30 /tmp/fork-1-logs/rms_norm.log >> $OUT/fork-server.txt 2>/dev/null
  export ATREX_FORK_SERVER=0
else
  export ATREX_FORK_SERVER=1  # the rest with forked CUDA children too
fi
PYTEST="python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu"
timeout --kill-after=5 130 $PYTEST -q -rA tests/evaluator/test_verdict_runs.py \
  > $OUT/gpu-verdict-runs.log 2>&1
mark "verdict runs rc=$?"
timeout --kill-after=5 100 $PYTEST -v --tb=short -rA tests/evaluator/test_fallback_cuda.py \
  > $OUT/gpu-tests-fallback-cuda.log 2>&1
mark "fallback_cuda tests rc=$?"
timeout --kill-after=5 $(( $(left) - 60 )) python3 bench/sanitizer_cost.py --suite atrex-bench-v1 \
  --log-dir /tmp/sanitizer-logs --out $OUT/sanitizer-cost.json > $OUT/sanitizer-cost.log 2>&1
mark "sanitizer bench rc=$?"
timeout --kill-after=5 $(( $(left) - 10 )) $PYTEST -v --tb=short -rA tests/evaluator \
  --deselect tests/evaluator/test_verdict_runs.py --deselect tests/evaluator/test_fallback_cuda.py \
  > $OUT/gpu-tests.log 2>&1
mark "gpu tests rc=$?"
tail -3 $OUT/gpu-verdict-runs.log; tail -12 $OUT/sanitizer-cost.log; grep -h -E "FAILED|ERROR" $OUT/gpu-tests*.log | tail -20; tail -3 $OUT/gpu-tests.log
