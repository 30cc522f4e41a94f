#!/bin/bash
# The H200 runs of a session (results/2026-12-02-h200-session8/README.md has the last), in
# the order of what they prove; each step alone on its GPU(s). On nvidia-h200-x2 (GPUS=2)
# the scale-out pair runs too; on nvidia-h200 it is skipped.
#   1. the GPU tests (session 8: 33 of 33 with harness 0.2.3);
#   2. (RUNS=1) repeatability: the Triton bundle over v1 twice back to back on GPU 0,
#      start-ahead on (files named run5 and run7; met in session 6, 0.5 %); run 6,
#      start-ahead off, last and only with OFF_RUN=1;
#   3. the stack on 1 then 2 GPUs, nothing beside (x2 only): the scale-out speed-up;
#   3b. (FULL30=1, the default) the wall time of a 30-operator submission: the Triton
#      bundle's 14 kernels and the references for the other 16 (bench/full_suite_walltime.py),
#      within FULL30_S seconds (default 600, the goal). Session 8 (0.2.3, fallbacks not
#      timed): all 30 in 571 s. The evaluator's checkpoint keeps a cut run;
#   3c. (DOBENCH=1, the default) the harness's timer against triton.testing.do_bench on the
#      largest memory-bound shape of each of the Triton bundle's operators, plain and on the
#      call captured in a CUDA graph (session 8: all 11 large shapes within 2.25 % of the
#      graph figure);
#   4. the torch.compile baseline over v1 with what is left of $LIMIT_TOTAL seconds, every
#      operator compiled first by 12 processes at once into one inductor cache (for
#      $PRECOMPILE_S seconds, default half of what is left); with COMPILE_OPERATORS=a,b only
#      those, to be joined with the earlier parts by bench/merge_baselines.py (shape by
#      shape). Sessions 5-7 timed 315 shapes (22 operators in full,
#      results/2026-12-01-h200-session7/compile-baseline-v1-merged.json); session 8:
#      paged_attention_decode and unified_attention do not compile within 80 s a shape; in
#      part (minutes of compilation a shape):
#      attention_forward, chunk_delta_rule_output, chunk_gated_delta_rule_state,
#      gated_delta_rule_update, mla_decode_attention, per_token_group_quant_fp8 (inductor's
#      fp8 code does not build on triton 3.6).
#      OP_DEADLINE (default 20 s) caps each operator; a shape's compilation is stopped at
#      twice that from the operator's start.
# Launch: PIPELINE=next.sh GPUS=1 RUNS=0 LIMIT_TOTAL=1500 bash bench/h200_session/start.sh 540,
# then bash bench/h200_session/poll.sh 555 within 30 s of each return; a pipeline that must
# be replaced is stopped by bench/h200_session/stop.sh.
source "$(dirname "$0")/common.sh"
LIMIT_TOTAL=${LIMIT_TOTAL:-1500}
step gpu-tests 0 330 python3 -m pytest -p no:django -p no:cacheprovider --confcutdir=tests/evaluator -m gpu tests/evaluator -q -rs --junitxml=$O/gpu-tests.xml
# Runs 5 and 7 (start-ahead on) back to back: the repeatability pair. Run 6 (start-ahead off)
# only with OFF_RUN=1, after the compile baseline (it shows what start-ahead moves).
triton_run() {  # triton_run N FLAG
  step triton-run$1 0 330 python3 -m evaluator run examples/bundles/triton-baseline --suite $SUITE --device cuda $2 --out $O/triton-v1-run$1.json --log-dir $P/logs/run$1
}
if [ "${RUNS:-1}" = 1 ]; then
  triton_run 5 --start-ahead
  triton_run 7 --start-ahead
  python3 bench/compare_runs.py $O/triton-v1-run5.json $O/triton-v1-run7.json > $O/compare-run5-run7.txt 2>&1
fi
if [ "${GPUS:-1}" = 2 ]; then
  step scaleout-1 0 330 python3 bench/gpu_scaleout.py --workers 1 --gpus 0 --suite $SUITE --timeout-s 310 --json $O/scaleout-1.json
  step scaleout-2 0,1 260 python3 bench/gpu_scaleout.py --workers 2 --gpus 0,1 --suite $SUITE --timeout-s 240 --history $O/triton-v1-run5.json --json $O/scaleout-2.json
fi
if [ "${FULL30:-1}" = 1 ]; then  # a 30-operator submission: 14 Triton kernels, 16 references
  step full30 0 ${FULL30_S:-600} python3 bench/full_suite_walltime.py --suite $SUITE --device cuda --kernels examples/bundles/triton-baseline --out $O/full30-mixed.json --log-dir $P/logs/full30
fi
if [ "${DOBENCH:-1}" = 1 ]; then  # the timer against do_bench, largest memory-bound shapes
  step dobench 0 300 python3 bench/do_bench_agreement.py examples/bundles/triton-baseline --suite $SUITE --per-operator 1 --out $O/do-bench-agreement.json
fi
LEFT=$(( LIMIT_TOTAL - ($(date +%s) - T0) - 20 ))
if [ $LEFT -gt 60 ]; then
  step compile-baseline 0 $(( LEFT + 15 )) python3 bench/reference_baseline.py --mode compile --dynamic --precompile-jobs 12 --suite $SUITE --device cuda --hardware h200-sxm --operator-deadline-s ${OP_DEADLINE:-20} --deadline-s $LEFT ${PRECOMPILE_S:+--precompile-deadline-s $PRECOMPILE_S} ${COMPILE_OPERATORS:+--operators $COMPILE_OPERATORS} --out $O/compile-baseline-v1.json
fi
if [ "${OFF_RUN:-0}" = 1 ] && [ $(( LIMIT_TOTAL - ($(date +%s) - T0) )) -gt 300 ]; then
  triton_run 6 --no-start-ahead
  python3 bench/compare_runs.py $O/triton-v1-run5.json $O/triton-v1-run6.json > $O/compare-run5-run6.txt 2>&1
fi
echo "$(date -u +%T) pipeline done after $(( $(date +%s) - T0 )) s" >> $P/status
touch $P/done
