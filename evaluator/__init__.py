"""Atrex-Bench evaluator: the benchmark harness.

Runs on a GPU node with only torch and triton installed; it never imports Django.
This package's ``__init__`` imports nothing, so that the light modules (bundle,
suite, hardware, roofline, scoring, errors) can be used by the web side without torch.
"""

HARNESS_VERSION = "0.2.3"
"""Results of different versions were measured differently. 0.2.0 (2026-12-01): each timed
call's launch cover checked and grown, convergence on the median's standard error, timed
calls far faster than watched ones made fallbacks, the next operator's child started ahead.
0.2.1 (2026-12-01): work outside the current stream is judged on the all-streams time less
the synchronise round trip (0.2.0 compared it raw, and on a busy host timed some honest
shapes ~100 us slow); on the CPU the own share by time is the median watched call's, not
the share of all calls' total (one call that lost the CPU no longer counts as own work),
and bounded by the share of time inside the bundle's own Triton kernel launches. The
reference module and every check's inputs are built afresh after the candidate's call; the
timed inputs' seeds come from os.urandom; global nn.Module hooks are tampering; the
submission's code gets no frame objects, object lists or ctypes; a time under 1 us or
faster than the roofline is refused. 0.2.2 (2026-12-01): refusals only, no change to how a
passing shape is measured: processes the submission starts (refused by the audit hook;
any other process below the child that is not a compiler fails the operator), a changed
PyTorch process-wide setting the reference also runs under (tampering), and code that
names the harness's or a library's file without being compiled from it (treated as the
submission's); with the submission's code on the stack only the harness's own frame users,
by identity, get frames. 0.2.3 (2026-12-01): a correct shape whose own-kernel share is
under the suite's threshold (a fallback, scored 0) is not timed (no time, speedup or
roofline fraction in its row); the GPU machine's compiler wrapper (``gcc-real``) counts as
a compiler; floating outputs are compared in chunks (same verdicts and figures, a bounded
share of memory: the largest block_scaled_mm output ran out of the H200's memory)."""
