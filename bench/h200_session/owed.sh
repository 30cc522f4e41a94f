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
source "$(dirname "$0")/common.sh"
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
