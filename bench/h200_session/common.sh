# Sourced by each session script (pipeline.sh, phases.sh, ahead.sh, next.sh): the folders
# under /tmp/pipe, the environment, step() (one command on given GPUs under a time limit,
# its start, end and exit status in $P/status, its log's tail in $O), and machine.txt
# (GPUs, versions, the carried wheels).
P=/tmp/pipe; O=$P/out; mkdir -p $O $P/logs
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
step() {  # step NAME GPU TIMEOUT CMD...
  local name=$1 gpu=$2 limit=$3; shift 3
  local s=$(date +%s)
  echo "$(date -u +%T) start $name gpu=$gpu limit=$limit" >> $P/status
  CUDA_VISIBLE_DEVICES=$gpu timeout --kill-after=10 $limit "$@" > $P/logs/$name.log 2>&1
  local rc=$?
  echo "$(date -u +%T) end   $name rc=$rc took=$(( $(date +%s) - s ))s" >> $P/status
  tail -c 20000 $P/logs/$name.log > $O/$name.log
}
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv
  python3 -c 'import torch,triton,sys;print("torch",torch.__version__,"triton",triton.__version__,"python",sys.version.split()[0],"gpus",torch.cuda.device_count())'
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && echo wheels-ok
} > $O/machine.txt 2>&1
SUITE=atrex-bench-v1
