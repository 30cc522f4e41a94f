#!/bin/bash
# The H200 runs owed after session 3 (see results/2026-12-01-h200/README.md), on the device
# tool's nvidia-h200-x2 kind, in an order that keeps each measurement quiet:
#   1. the stack on 1 GPU, then on 2 (nothing beside either): the scale-out speed-up;
#   2. the Triton bundle over v1 twice at once, one run per GPU, nothing else running
#      (repeatability; the new phases_s say where each child's ~10 s of start-up goes);
#   3. the torch.compile baseline over v1, operators split over both GPUs, each operator
#      capped so that one slow compilation cannot starve the rest.
# Launch as pipeline.sh is launched: PIPELINE=owed.sh bash bench/h200_session/start.sh 545,
# then bash bench/h200_session/poll.sh 550 within 30 s of each return (about 21 minutes in
# all, plus the machine's start; carry .whl, the site's wheels for Python 3.12).
P=/tmp/pipe; O=$P/out; mkdir -p $O $P/logs
cd "$(dirname "$0")/../.."
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
step scaleout-1 0 400 python3 bench/gpu_scaleout.py --workers 1 --gpus 0 --suite $SUITE --timeout-s 380 --json $O/scaleout-1.json
step scaleout-2 0,1 260 python3 bench/gpu_scaleout.py --workers 2 --gpus 0,1 --suite $SUITE --timeout-s 240 --history results/2026-12-01-h200/triton-v1-run1.json --json $O/scaleout-2.json
step triton-run3 0 400 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda --out $O/triton-v1-run3.json --log-dir $P/logs/run3 &
step triton-run4 1 400 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda --out $O/triton-v1-run4.json --log-dir $P/logs/run4 &
wait
OPS=$(python3 -c "from evaluator.suite import load_suite; ops=load_suite('$SUITE').operator_slugs(); print(','.join(ops[0::2])+' '+','.join(ops[1::2]))")
set -- $OPS
step compile-a 0 400 python3 bench/reference_baseline.py --mode compile --dynamic --suite $SUITE --operators $1 --operator-deadline-s 25 --deadline-s 380 --out $O/compile-baseline-v1-a.json &
step compile-b 1 400 python3 bench/reference_baseline.py --mode compile --dynamic --suite $SUITE --operators $2 --operator-deadline-s 25 --deadline-s 380 --out $O/compile-baseline-v1-b.json &
wait
echo "$(date -u +%T) pipeline done after $(( $(date +%s) - T0 )) s" >> $P/status
touch $P/done
