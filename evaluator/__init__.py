"""Atrex-Bench evaluator: the benchmark harness (history: docs/evaluator-changelog.md).

Runs on a GPU node with only torch and triton installed; it never imports Django. The
package is in two halves. The web-safe modules (``WEB_SAFE_MODULES``) import without
torch, so the site can read suites, bundles, hardware, scores and results with them, and
start the harness with ``evaluator.launch``; every other module is the harness proper and
may import torch, so the site runs it only in a child process (``python -m evaluator``).
``tests/evaluator/test_web_safe.py`` holds the split: every module the web imports is
listed here, and each listed module imports where torch cannot be imported.
"""

HARNESS_VERSION = "0.3.14"
"""Results of different versions were measured differently (docs/evaluator-changelog.md)."""

WEB_SAFE_MODULES = frozenset(
    {
        "evaluator",
        "evaluator.bundle",
        "evaluator.code_origin",
        "evaluator.elf_symbols",
        "evaluator.environment",
        "evaluator.errors",
        "evaluator.figures",
        "evaluator.fallback_report",
        "evaluator.frames",
        "evaluator.hardware",
        "evaluator.launch",
        "evaluator.measurement_policy",
        "evaluator.reference_docs",
        "evaluator.results",
        "evaluator.roofline",
        "evaluator.scoring",
        "evaluator.static_scan",
        "evaluator.suite",
        "evaluator.upstream",
        "evaluator.validate",
        "evaluator.verdicts",
    }
)
"""Modules that import without torch (the standard library and each other only; torch,
where one needs it, is imported inside the function that does); the only ones the web
side may import."""
