#!/bin/bash
# Session 16's third H200 call: agent rounds on rms_norm's 56 public v1 shapes with each
# round's results document kept (bench/agent_round.py --keep; the shapes' "hooks" and
# "fb_report" timed apart since this change), two plain in-process passes of rms_norm
# (bench/round_profile.py --plain), then, if 140 s are left, the 14-operator Triton bundle
# over the full v1 suite (python -m evaluator run). Packed into $OUT/session16c.tgz.
#   BUDGET=250 bash bench/h200_session/session16c.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-250}
source "$HERE/head.sh"
timeout --kill-after=5 75 python3 bench/agent_round.py --device cuda \
  --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 \
  --keep $OUT/rounds --json $OUT/agent-rounds.json > $OUT/agent-rounds.txt 2>&1
mark "agent rounds rc=$?"; grep -v '^\[' $OUT/agent-rounds.txt | tail -3
for f in $OUT/rounds/*.json; do python3 bench/where_time_goes.py --results $f | grep -E "^rms_norm"; done
timeout --kill-after=5 40 python3 bench/round_profile.py --device cuda \
  --suite atrex-bench-v1 --operator rms_norm --passes 2 --plain --json $OUT/round-profile.json \
  > $OUT/round-profile.txt 2>&1
mark "round profile rc=$?"; grep -E "^pass" $OUT/round-profile.txt
if [ $(left) -gt 140 ]; then  # the 14-operator bundle took 118 s on 0.3.2 (session 13)
  timeout --kill-after=5 $(( $(left) - 5 )) python3 -m evaluator run examples/bundles/triton-baseline \
    --suite atrex-bench-v1 --device cuda --out $OUT/triton-bundle.json > $OUT/triton-bundle.log 2>&1
  mark "triton bundle rc=$?"
  python3 bench/where_time_goes.py --results $OUT/triton-bundle.json > $OUT/triton-bundle-where.txt 2>&1
  tail -3 $OUT/triton-bundle-where.txt
fi
tar czf $ROOT_OUT/session16c.tgz -C $OUT .
