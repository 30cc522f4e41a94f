# Sourced by the one-call session scripts (verdicts.sh, session12.sh, session12b.sh): the
# repository root, the environment, T0, left() (the seconds of $BUDGET left), mark() (a step's
# exit status and time, into $OUT/machine.txt) and $OUT/machine.txt's head (GPU, versions,
# harness version, compute-sanitizer).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - T0) )); }
mark() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $OUT/machine.txt; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  python3 -c 'import torch,triton,sys;print("torch",torch.__version__,"triton",triton.__version__,"python",sys.version.split()[0])'
  grep -h "HARNESS_VERSION =" evaluator/*.py
  command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer
  # The host, whose speed moves every host-bound figure (launches, checks, compiles):
  # machines of this kind differ between calls.
  echo "host: $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
  python3 -c 'import time;s=time.perf_counter();sum(i*i for i in range(10**7));print("host: 1e7 squares summed in Python",round(time.perf_counter()-s,3),"s")'
} > $OUT/machine.txt 2>&1
