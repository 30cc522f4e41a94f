#!/bin/bash
# Session 16's third H200 call (harness 0.3.7: a shape's hooks and fallback report timed
# apart, the module scan remembered between a child's shapes): agent rounds on rms_norm's 56
# public v1 shapes with each round's results document kept (bench/agent_round.py --keep),
# the fallback monitor's and the exploit corpus's GPU tests, then two plain in-process
# passes of rms_norm (bench/round_profile.py --plain) with what is left. Packed into
# $OUT/session16c.tgz.
#   BUDGET=290 bash bench/h200_session/session16c.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-290}
source "$HERE/head.sh"
timeout --kill-after=5 75 python3 bench/agent_round.py --device cuda \
  --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 \
  --keep $OUT/rounds --json $OUT/agent-rounds.json > $OUT/agent-rounds.txt 2>&1
mark "agent rounds rc=$?"; grep -v '^\[' $OUT/agent-rounds.txt | tail -3
for f in $OUT/rounds/*.json; do python3 bench/where_time_goes.py --results $f | grep -E "^rms_norm"; done
timeout --kill-after=5 $(( $(left) - 45 )) python3 -m pytest -p no:django -p no:cacheprovider \
  --confcutdir=tests/evaluator -m gpu -q --tb=short -rA tests/evaluator/test_fallback_cuda.py \
  tests/evaluator/exploits/test_corpus.py > $OUT/gpu-tests.log 2>&1
mark "gpu tests rc=$?"; grep -h -E "FAILED|ERROR" $OUT/gpu-tests.log | tail; tail -1 $OUT/gpu-tests.log
timeout --kill-after=5 $(( $(left) - 3 )) python3 bench/round_profile.py --device cuda \
  --suite atrex-bench-v1 --operator rms_norm --passes 2 --plain --json $OUT/round-profile.json \
  > $OUT/round-profile.txt 2>&1
mark "round profile rc=$?"; grep -E "^pass" $OUT/round-profile.txt
tar czf $ROOT_OUT/session16c.tgz -C $OUT .
