#!/bin/bash
# Session 20's first H200 call: what a revised kernel's Triton compiles cost a round and what
# compiling the previous round's specialisations ahead, on several threads, saves
# (bench/compile_ahead.py: rms_norm, then two more operators), and agent rounds whose
# kernel changes every round as they are now (bench/agent_round.py --vary), for the
# before. Packed into $OUT/session20a.tgz.
#   BUDGET=540 bash bench/h200_session/session20a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; export OUT=$(mktemp -d); BUDGET=${BUDGET:-540}
source "$HERE/head.sh"
grep "^host" $OUT/machine.txt
python3 - > $OUT/triton-api.txt 2>&1 <<'PY'
import inspect, triton
from triton.runtime import jit
print("triton", triton.__version__)
print("knobs post-compile hook:", hasattr(getattr(triton, "knobs", None), "runtime") and hasattr(triton.knobs.runtime, "jit_post_compile_hook"))
print(inspect.getsource(jit.JITFunction.preload))
PY
head -3 $OUT/triton-api.txt
timeout 200 python3 bench/compile_ahead.py --device cuda --operator rms_norm --threads 1,2,4,8,16 \
  --json $OUT/compile-ahead-rms_norm.json > $OUT/compile-ahead-rms_norm.txt 2>&1
mark "compile ahead rms_norm rc=$?"; cat $OUT/compile-ahead-rms_norm.txt | tail -8
for op in per_token_group_quant_fp8 fused_add_rms_norm; do
  [ $(left) -gt 250 ] || break
  timeout 100 python3 bench/compile_ahead.py --device cuda --operator $op --threads 1,8 \
    --json $OUT/compile-ahead-$op.json > $OUT/compile-ahead-$op.txt 2>&1
  mark "compile ahead $op rc=$?"; tail -4 $OUT/compile-ahead-$op.txt
done
if [ $(left) -gt 120 ]; then
  timeout --kill-after=5 $(( $(left) - 15 )) python3 bench/agent_round.py --device cuda \
    --suite atrex-bench-v1 --operators rms_norm --rounds 4 --agent-s 1 --vary \
    --json $OUT/rounds-vary.json --keep $OUT/rounds-vary > $OUT/rounds-vary.txt 2>&1
  mark "agent rounds --vary rc=$?"; tail -4 $OUT/rounds-vary.txt
fi
tar czf $ROOT_OUT/session20a.tgz -C $OUT .
