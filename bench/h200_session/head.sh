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
# The GPU tests as the session scripts run them (one process, no Django, `-m gpu`).
PYTEST="python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu -q --tb=short -rA"
# Every GPU test of tests/evaluator into $OUT/gpu-tests.log, in what is left of $BUDGET, if
# that is more than 230 s (the suite takes about 220 s on the H200).
all_gpu_tests() {
  if [ $(left) -gt 230 ]; then
    timeout --kill-after=5 $(( $(left) - 10 )) $PYTEST tests/evaluator > $OUT/gpu-tests.log 2>&1
    mark "gpu tests rc=$?"; grep -h -E "^FAILED|^ERROR" $OUT/gpu-tests.log | tail; tail -1 $OUT/gpu-tests.log
  else
    mark "gpu tests not run: $(left) s left"
  fi
}
