"""Atrex-Bench evaluator: the benchmark harness.

Runs on a GPU node with only torch and triton installed; it never imports Django.
This package's ``__init__`` imports nothing, so that the light modules (bundle,
suite, hardware, roofline, scoring, errors) can be used by the web side without torch.
"""

HARNESS_VERSION = "0.1.0"
