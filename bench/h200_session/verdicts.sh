#!/bin/bash
# Session 10 on one H200 (harness 0.3.0), most important first within $BUDGET seconds:
# the verdict runs' GPU tests (a planted out-of-bounds read caught by compute-sanitizer, the
# Triton baseline clean), the sanitizer pass's cost on the Triton bundle ($SAN_OPS: its
# operators, all shapes of v1), then the rest of the GPU tests. Everything lands in $OUT.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - T0) )); }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  python3 -c 'import torch,triton,sys;print("torch",torch.__version__,"triton",triton.__version__,"python",sys.version.split()[0])'
  command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer
} > $OUT/machine.txt 2>&1
PYTEST="python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu -q -rA"
timeout --kill-after=5 $(( $(left) - 60 )) $PYTEST tests/evaluator/test_verdict_runs.py \
  --junitxml=$OUT/gpu-verdict-runs.xml > $OUT/gpu-verdict-runs.log 2>&1
echo "verdict runs rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/machine.txt
timeout --kill-after=5 $(( $(left) - 30 )) python3 bench/sanitizer_cost.py --suite atrex-bench-v1 \
  ${SAN_OPS:+--operators $SAN_OPS} --out $OUT/sanitizer-cost.json > $OUT/sanitizer-cost.log 2>&1
echo "sanitizer bench rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/machine.txt
if [ $(left) -gt 40 ]; then
  timeout --kill-after=5 $(( $(left) - 10 )) $PYTEST tests/evaluator \
    --deselect tests/evaluator/test_verdict_runs.py --junitxml=$OUT/gpu-tests.xml > $OUT/gpu-tests.log 2>&1
  echo "gpu tests rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/machine.txt
fi
tail -3 $OUT/gpu-verdict-runs.log; tail -8 $OUT/sanitizer-cost.log; tail -3 $OUT/gpu-tests.log
