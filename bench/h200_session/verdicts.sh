#!/bin/bash
# Session 10 on one H200 (harness 0.3.0): the GPU tests with the verdict rules and the
# sanitizer on, then the Triton bundle over v1 with the compute-sanitizer pass (its cost, its
# verdicts, the run's results for bench/compare_runs.py against session 9's run 11), then
# where the time goes on three Triton kernels. Everything lands in $OUT (at most 8 files).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  python3 -c 'import torch,triton,sys;print("torch",torch.__version__,"triton",triton.__version__,"python",sys.version.split()[0])'
  command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer; git log -1 --format=%H 2>/dev/null
} > $OUT/machine.txt 2>&1
left() { echo $(( ${BUDGET:-575} - ($(date +%s) - T0) )); }
timeout --kill-after=5 ${GPU_TESTS_S:-$(( $(left) - 300 ))} python3 -m pytest -p no:django -p no:cacheprovider \
  --confcutdir=tests/evaluator -m gpu tests/evaluator -q -rA --junitxml=$OUT/gpu-tests.xml \
  > $OUT/gpu-tests.log 2>&1
echo "gpu tests rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/machine.txt
timeout --kill-after=5 $(( $(left) - 20 )) python3 bench/sanitizer_cost.py --suite atrex-bench-v1 \
  --out $OUT/sanitizer-cost.json --results-out $OUT/triton-v1-run12.json > $OUT/sanitizer-cost.log 2>&1
echo "sanitizer bench rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/machine.txt
if [ $(left) -gt 60 ]; then
  timeout $(( $(left) - 10 )) python3 bench/where_time_goes.py --suite atrex-bench-v1 --device cuda \
    --kernels examples/bundles/triton-baseline --operators rms_norm,silu_and_mul,layer_norm \
    --json $OUT/where-after.json > $OUT/where-after.log 2>&1
  echo "where rc=$? at $(( $(date +%s) - T0 )) s" | tee -a $OUT/machine.txt
fi
tail -3 $OUT/gpu-tests.log; tail -8 $OUT/sanitizer-cost.log
