#!/bin/bash
# Session 4, first H200 call (one GPU, nothing beside it): where an operator child's
# start-up goes, before cutting it. The Triton bundle over v1; the child phases launch /
# harness / import / variants split what session 3 called ~10 s of start-up, and the run is
# one of a quiet pair for repeatability. Then, if GPU_TESTS=1, the GPU tests (the
# error-growth threshold is now 2x) and the trace recording test. Launch with
# PIPELINE=phases.sh start.sh.
source "$(dirname "$0")/common.sh"
step triton-run3 0 400 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda --out $O/triton-v1-run3.json --log-dir $P/logs/run3
if [ "${GPU_TESTS:-0}" = 1 ]; then
  step gpu-tests 0 330 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu tests/evaluator -q -rs --junitxml=$O/gpu-tests.xml
  step gpu-tests-traces 0 90 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/traces -m gpu tests/traces/test_gpu_recording.py -q -rs
fi
echo "$(date -u +%T) pipeline done after $(( $(date +%s) - T0 )) s" >> $P/status
touch $P/done
