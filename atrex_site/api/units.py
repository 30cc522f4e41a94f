"""What the API's numeric fields mean and in which unit, said once for every serializer
(the OpenAPI schema at /api/schema/ carries these as field descriptions).

Scores and rates are fractions from 0 to 1 at full precision; the pages show the same
figures as percentages with three significant figures (evaluator/figures.py)."""

ROOFLINE_FRACTION = (
    "Fraction of the hardware roofline, 0..1 (T_sol / T_measured; pages show it as a "
    "percentage, e.g. 0.0487 -> 4.87%)."
)
AGGREGATE = (
    "Aggregate score: importance-weighted mean of the operator scores, a fraction of the "
    "roofline 0..1 (pages show a percentage)."
)
AGGREGATE_CI = (
    "95% interval [low, high] of the aggregate from the timing spread of one run, fractions "
    "0..1 (null when unknown)."
)
OPERATOR_SCORE = "Operator score: weighted mean shape score, a fraction of the roofline 0..1."
REAL_PASS_RATE = "Share of all shapes that pass with the submission's own kernels, 0..1."
APPARENT_PASS_RATE = "Share of all shapes with a correct answer (fallbacks included), 0..1."
FALLBACK_RATE = "Share of all shapes answered by PyTorch instead of the submission, 0..1."
FAST_1 = "Share of all shapes that pass and beat PyTorch eager, 0..1."
SPEEDUP_EAGER = (
    "Geometric-mean speedup over PyTorch eager (T_eager / T_measured) over the passing "
    "shapes, a ratio (null when none)."
)
SHAPE_SPEEDUP = "T_eager / T_measured of this shape, a ratio (null when not timed)."
OWN_KERNEL_SHARE = "Share of the shape's device time spent in the submission's kernels, 0..1."
TIME_MS = "Median time of the timed calls, in milliseconds."
TIME_SPREAD_MS = "Standard error of the median time, in milliseconds."
REFERENCE_TIME_MS = (
    "Median time of the PyTorch eager baseline (the operator's idiomatic PyTorch, timed in "
    "the same evaluation; the accuracy-first reference before harness 0.3.4), in "
    "milliseconds: the speedup's denominator."
)
T_SOL_MS = "Speed-of-light time max(W/P, Q/B) on the hardware profile, in milliseconds."
SHAPE_WEIGHT = "The shape's weight within its operator (relative)."
IMPORTANCE = "The operator's importance, normalised to sum to 1 over the suite."
