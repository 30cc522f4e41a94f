#!/bin/bash
# Session 17's first H200 call (harness 0.3.8: code swaps recorded by the child's audit
# hook instead of every function's code read at each integrity check; the extension scan
# read only when a kernel needs it): rms_norm's 56 public v1 shapes in one process
# (bench/round_profile.py: two plain passes, then a fresh process whose first pass, the
# kernels loaded from Triton's cache, is profiled), agent rounds with each round's results
# kept, the 14-operator Triton bundle over the full v1 suite, then every GPU test. Packed
# into $OUT/session17a.tgz.
#   BUDGET=560 bash bench/h200_session/session17a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-560}
source "$HERE/head.sh"
timeout --kill-after=5 60 python3 bench/round_profile.py --device cuda --suite atrex-bench-v1 \
  --operator rms_norm --passes 2 --plain --json $OUT/round-profile.json > $OUT/round-profile.txt 2>&1
mark "round profile rc=$?"; grep -E "^rms_norm|^first|^pass" $OUT/round-profile.txt
timeout --kill-after=5 60 python3 bench/round_profile.py --device cuda --suite atrex-bench-v1 \
  --operator rms_norm --passes 1 --profile-first --top 50 > $OUT/first-profile.txt 2>&1
mark "first-pass profile rc=$?"; grep -E "^rms_norm|^first|^pass" $OUT/first-profile.txt
timeout --kill-after=5 80 python3 bench/agent_round.py --device cuda \
  --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 \
  --keep $OUT/rounds --json $OUT/agent-rounds.json > $OUT/agent-rounds.txt 2>&1
mark "agent rounds rc=$?"; grep -v '^\[' $OUT/agent-rounds.txt | tail -3
for f in $OUT/rounds/*.json; do python3 bench/where_time_goes.py --results $f | grep -E "^rms_norm"; done
( cd $OUT && tar czf rounds.tgz rounds && rm -rf rounds )
S=$(date +%s)
timeout --kill-after=5 200 python3 -m evaluator run examples/bundles/triton-baseline \
  --suite atrex-bench-v1 --device cuda --out $OUT/triton-bundle.json > $OUT/triton-bundle.txt 2>&1
mark "triton bundle rc=$? wall $(( $(date +%s) - S )) s"
python3 bench/where_time_goes.py --results $OUT/triton-bundle.json > $OUT/triton-bundle-phases.txt 2>&1
tail -3 $OUT/triton-bundle-phases.txt
timeout --kill-after=5 $(( $(left) - 8 )) python3 -m pytest -p no:django -p no:cacheprovider \
  --confcutdir=tests/evaluator -m gpu -q --tb=short -rA tests/evaluator > $OUT/gpu-tests.log 2>&1
mark "gpu tests rc=$?"; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -1 $OUT/gpu-tests.log
tar czf $ROOT_OUT/session17a.tgz -C $OUT .
