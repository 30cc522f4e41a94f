#!/bin/bash
# One orchestrated H200 session on the device tool's nvidia-h200-x2 kind (2 GPUs): two GPU
# lanes (the Triton bundle over v1 twice, the GPU tests, the eager baseline, the example
# agent's campaign), then the torch.compile baseline beside the stack on 1 GPU, then the
# stack on both GPUs. Each step has its own time limit; the lanes are cut at 720 s.
#
#   run: bash bench/h200_session/start.sh 545   (carry .whl: the site's wheels for Python 3.12)
#   then, within 30 s of each return:  bash bench/h200_session/poll.sh 550
#
# start.sh runs this detached (setsid), so it outlives one call while the machine stays
# warm; poll.sh waits, then hands back $OUT/pipe.tar.gz (status, logs, JSON under out/).
# Used on 2026-12-01: results/2026-12-01-h200/.
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
lane0() {
  step triton-run1 0 420 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda --out $O/triton-v1-run1.json --log-dir $P/logs/run1
  step gpu-tests 0 330 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu tests/evaluator -q -rs --junitxml=$O/gpu-tests.xml
  step gpu-tests-traces 0 90 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/traces -m gpu tests/traces -q -rs
  step eager-baseline 0 200 python3 bench/reference_baseline.py --mode eager --suite $SUITE --device cuda --hardware h200-sxm --deadline-s 180 --out $O/eager-baseline-v1.json
}
lane1() {
  step campaign 1 330 python3 -m examples.agents.tile_search.campaign --device cuda --operators rms_norm,silu_and_mul,fused_add_rms_norm --rounds 4 --time-budget-s 0.1 --final --out $O/campaign.json --work-dir /tmp/atrex-campaign
  step triton-run2 1 420 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda --out $O/triton-v1-run2.json --log-dir $P/logs/run2
}
lane0 & L0=$!
lane1 & L1=$!
# Stage 2 starts when both lanes are done, or 12 min in at the latest.
while kill -0 $L0 2>/dev/null || kill -0 $L1 2>/dev/null; do
  [ $(( $(date +%s) - T0 )) -gt 720 ] && { echo "$(date -u +%T) lanes cut at 720 s" >> $P/status; pkill -f 'evaluator run|pytest|reference_baseline|campaign' ; sleep 5; break; }
  sleep 5
done
step compile-baseline 1 390 python3 bench/reference_baseline.py --mode compile --suite $SUITE --device cuda --hardware h200-sxm --deadline-s 370 --out $O/compile-baseline-v1.json &
step scaleout-1 0 390 python3 bench/gpu_scaleout.py --workers 1 --gpus 0 --suite $SUITE --timeout-s 370 --json $O/scaleout-1.json
wait
step scaleout-2 0,1 270 python3 bench/gpu_scaleout.py --workers 2 --gpus 0,1 --suite $SUITE --timeout-s 250 --json $O/scaleout-2.json
echo "$(date -u +%T) pipeline done after $(( $(date +%s) - T0 )) s" >> $P/status
touch $P/done
