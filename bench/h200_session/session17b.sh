#!/bin/bash
# Session 17's second H200 call: why a round's child pays 0.1-0.2 s at each new Triton
# specialisation where a fresh process without a sandbox pays ~0.02 s. rms_norm's 56 public
# v1 shapes in one process (bench/round_profile.py): a pass that compiles; a fresh
# process's first pass from Triton's cache with the child's audit hooks (--confine), plain
# and profiled; then agent rounds with the server's log kept (its Triton cache lines).
# Packed into $OUT/session17b.tgz.
#   BUDGET=240 bash bench/h200_session/session17b.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-240}
source "$HERE/head.sh"
RP="python3 bench/round_profile.py --device cuda --suite atrex-bench-v1 --operator rms_norm"
timeout --kill-after=5 60 $RP --passes 1 --plain > $OUT/compile-pass.txt 2>&1
mark "compiling pass rc=$?"; grep -E "^first|^pass" $OUT/compile-pass.txt
timeout --kill-after=5 40 $RP --passes 1 --plain > $OUT/fresh-plain.txt 2>&1
mark "fresh, no hooks rc=$?"; grep -E "^first|^pass" $OUT/fresh-plain.txt
timeout --kill-after=5 40 $RP --passes 1 --plain --confine > $OUT/fresh-confine.txt 2>&1
mark "fresh, hooks rc=$?"; grep -E "^first|^pass" $OUT/fresh-confine.txt
timeout --kill-after=5 40 $RP --passes 0 --profile-first --confine --top 45 > $OUT/fresh-confine-profile.txt 2>&1
mark "fresh, hooks, profiled rc=$?"; grep -E "^first" $OUT/fresh-confine-profile.txt
timeout --kill-after=5 $(( $(left) - 5 )) python3 bench/agent_round.py --device cuda \
  --suite atrex-bench-v1 --operators rms_norm --rounds 3 --agent-s 1 \
  --keep $OUT/rounds --json $OUT/agent-rounds.json > $OUT/agent-rounds.txt 2>&1
mark "agent rounds rc=$?"; grep -v '^\[' $OUT/agent-rounds.txt | tail -6
grep -E "\[serve\]" $OUT/rounds/server.log | head -12
tar czf $ROOT_OUT/session17b.tgz -C $OUT .
