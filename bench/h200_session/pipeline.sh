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
source "$(dirname "$0")/common.sh"
lane0() {
  step triton-run1 0 420 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda --out $O/triton-v1-run1.json --log-dir $P/logs/run1
  step gpu-tests 0 330 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu tests/evaluator -q -rs --junitxml=$O/gpu-tests.xml
  step gpu-tests-traces 0 90 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/traces -m gpu tests/traces/test_gpu_recording.py -q -rs
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
