#!/bin/bash
# The H200 runs owed after session 4 (results/2026-12-01-h200-session4/README.md), in the
# order of what they prove; each step alone on its GPU(s). On nvidia-h200-x2 (GPUS=2) the
# scale-out pair runs too; on nvidia-h200 it is skipped.
#   1. the GPU tests with the session-4 timer (launch cover measured per call and grown,
#      convergence on the median's standard error) and start-ahead;
#   2. repeatability: the Triton bundle over v1 three times back to back on GPU 0,
#      start-ahead on, off, on (runs 5 and 7 the repeatability pair; 6 what start-ahead moves);
#   3. the stack on 1 then 2 GPUs, nothing beside (x2 only): the scale-out speed-up;
#   4. the torch.compile baseline over v1 with what is left of $LIMIT_TOTAL seconds, every
#      operator compiled first by 12 processes at once into one inductor cache.
# Launch: PIPELINE=next.sh GPUS=2 LIMIT_TOTAL=1500 bash bench/h200_session/start.sh 555,
# then bash bench/h200_session/poll.sh 555 within 30 s of each return.
source "$(dirname "$0")/common.sh"
LIMIT_TOTAL=${LIMIT_TOTAL:-1500}
step gpu-tests 0 330 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu tests/evaluator -q -rs --junitxml=$O/gpu-tests.xml
for i in 5 6 7; do
  flag=--start-ahead; [ $((i % 2)) = 0 ] && flag=--no-start-ahead
  step triton-run$i 0 330 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda $flag --out $O/triton-v1-run$i.json --log-dir $P/logs/run$i
done
python3 bench/compare_runs.py $O/triton-v1-run5.json $O/triton-v1-run7.json > $O/compare-run5-run7.txt 2>&1
python3 bench/compare_runs.py $O/triton-v1-run5.json $O/triton-v1-run6.json > $O/compare-run5-run6.txt 2>&1
if [ "${GPUS:-1}" = 2 ]; then
  step scaleout-1 0 330 python3 bench/gpu_scaleout.py --workers 1 --gpus 0 --suite $SUITE --timeout-s 310 --json $O/scaleout-1.json
  step scaleout-2 0,1 260 python3 bench/gpu_scaleout.py --workers 2 --gpus 0,1 --suite $SUITE --timeout-s 240 --history $O/triton-v1-run5.json --json $O/scaleout-2.json
fi
LEFT=$(( LIMIT_TOTAL - ($(date +%s) - T0) - 20 ))
if [ $LEFT -gt 60 ]; then
  step compile-baseline 0 $(( LEFT + 15 )) python3 bench/reference_baseline.py --mode compile --dynamic --precompile-jobs 12 --suite $SUITE --device cuda --hardware h200-sxm --operator-deadline-s 20 --deadline-s $LEFT --out $O/compile-baseline-v1.json
fi
echo "$(date -u +%T) pipeline done after $(( $(date +%s) - T0 )) s" >> $P/status
touch $P/done
