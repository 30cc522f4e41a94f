"""Verdicts: the one list of codes, the per-operator rule (a wrong answer on any shape zeroes
the operator, a loud failure loses only its shape), the signs of deception that hold a
submission, and the compute-sanitizer's report parsed (sample output in its documented
format; the sanitizer itself runs in the GPU tests)."""

from __future__ import annotations

import ast
import os
from dataclasses import replace
from pathlib import Path

import pytest

from evaluator import sanitizer, verdicts
from evaluator.hardware import get_profile
from evaluator.measure import unwatched_path_error
from evaluator.results import operator_entry, shape_entry
from evaluator.roofline import t_sol_seconds
from evaluator.scoring import operator_score, operator_verdict, summarize
from evaluator.suite import load_suite

REPO = Path(__file__).resolve().parents[2]
H200 = get_profile("h200-sxm")


def _shape(shape_id, status, *, fraction=None, codes=None, weight=1.0, error=None):
    entry = {
        "shape_id": shape_id,
        "weight": weight,
        "status": status,
        "roofline_fraction": fraction,
        "speedup": 2.0 if status == "pass" else None,
        "error": error,
    }
    if codes is not None:
        entry["codes"] = codes
    return entry


# --------------------------------------------------------------------------- the rule


def test_a_wrong_answer_on_one_shape_zeroes_the_whole_operator_and_names_the_shape():
    # rms_norm computing only the first half of the rows: right at the one-row shape.
    half_rows = [
        _shape("1-row", "pass", fraction=0.6, codes=[]),
        *(_shape(f"{n}-rows", "incorrect", codes=["wrong_result"]) for n in (3, 64, 512, 4096)),
    ]
    verdict = operator_verdict(half_rows)
    assert verdict["verdict"] == "incorrect"
    assert verdict["score"] == 0.0 == operator_score(half_rows)
    assert verdict["wrong_shapes"] == ["3-rows", "64-rows", "512-rows", "4096-rows"]
    assert (verdict["apparent_passes"], verdict["real_passes"]) == (1, 0)
    summary = summarize(operators=[{"operator": "rms_norm", "shapes": half_rows}],
                        importance={"rms_norm": 1.0})  # fmt: skip
    assert summary["aggregate"] == 0.0
    assert (summary["shapes_passed"], summary["shapes_passed_real"]) == (1, 0)
    assert summary["real_pass_rate"] == 0.0 and summary["apparent_pass_rate"] == 0.2
    assert summary["operators_incorrect"] == 1
    assert summary["geomean_speedup_eager"] is None and summary["fast_1"] == 0.0


@pytest.mark.parametrize(
    ("status", "code"),
    [("runtime_error", "exception"), ("runtime_error", "out_of_memory"),
     ("compile_error", "compile_error"), ("timeout", "timeout")],
)  # fmt: skip
def test_a_loud_failure_loses_only_its_own_shape(status, code):
    shapes = [_shape("a", "pass", fraction=0.5, codes=[]), _shape("b", status, codes=[code])]
    verdict = operator_verdict(shapes)
    assert verdict["verdict"] == "partial"
    assert verdict["score"] == pytest.approx(0.25)
    assert (verdict["apparent_passes"], verdict["real_passes"]) == (1, 1)
    assert verdict["wrong_shapes"] == []


def test_a_failed_validation_variant_or_a_memory_error_is_a_wrong_answer():
    # The child marks every shape incorrect with the variant's codes when a variant fails.
    variant = [_shape("a", "incorrect", codes=["variant_wrong", "exception"])]
    assert operator_verdict(variant)["verdict"] == "incorrect"
    # A memory error found by the sanitizer on the smallest shape.
    shapes = [_shape("a", "pass", fraction=0.9, codes=[]),
              _shape("b", "incorrect", codes=["memory_error"])]  # fmt: skip
    assert operator_verdict(shapes)["wrong_shapes"] == ["b"]
    assert operator_score(shapes) == 0.0


def test_the_verdicts_of_honest_operators():
    assert operator_verdict([_shape("a", "pass", fraction=0.5, codes=[])])["verdict"] == "pass"
    fallback = [_shape("a", "fallback", codes=["fallback"])]
    assert operator_verdict(fallback)["verdict"] == "fallback"
    missing = [_shape("a", "missing", codes=["missing"])]
    assert operator_verdict(missing)["verdict"] == "failed"


# --------------------------------------------------------------------------- holding


def test_any_sign_of_deception_holds_whatever_the_shapes_scored():
    # The side-stream bundle: caught on three shapes, behaving on two.
    operators = [
        {
            "operator": "rms_norm",
            "shapes": [
                _shape("0", "pass", fraction=0.4, codes=[]),
                _shape("1", "pass", fraction=0.4, codes=[]),
                _shape("2", "fallback", codes=["unwatched_path"], error="evidence A"),
                _shape("3", "runtime_error", codes=["above_roofline"], error="evidence B"),
                _shape("4", "runtime_error", codes=["above_roofline"], error="evidence C"),
            ],
        },
        {"operator": "silu_and_mul", "shapes": [_shape("0", "pass", fraction=0.5, codes=[])]},
    ]
    signals = verdicts.hold_signals(operators)
    assert [(s["operator"], s["shape_id"], s["code"]) for s in signals] == [
        ("rms_norm", "2", "unwatched_path"),
        ("rms_norm", "3", "above_roofline"),
        ("rms_norm", "4", "above_roofline"),
    ]
    assert [s["evidence"] for s in signals] == ["evidence A", "evidence B", "evidence C"]
    assert operator_verdict(operators[0]["shapes"])["verdict"] == "held"
    assert operator_verdict(operators[0]["shapes"])["hold_codes"] == [
        "unwatched_path",
        "above_roofline",
    ]
    assert "3 sign(s) of deception" in verdicts.hold_note(signals)


def test_holding_reads_codes_never_messages():
    worded = [_shape("0", "runtime_error", codes=["exception"],
                     error="held for review: the timed calls took another path")]  # fmt: skip
    assert verdicts.hold_signals([{"operator": "x", "shapes": worded}]) == []
    coded = [_shape("0", "runtime_error", codes=["tampering"], error="")]
    assert len(verdicts.hold_signals([{"operator": "x", "shapes": coded}])) == 1


def test_every_hold_code_is_a_documented_sign_and_unknown_codes_are_refused():
    assert verdicts.HOLD_CODES == {
        "tampering", "own_process", "unwatched_path", "timed_wrong", "above_roofline",
        "impossible_time", "outside_work",
    }  # fmt: skip
    assert not verdicts.HOLD_CODES & verdicts.WRONG_CODES
    with pytest.raises(ValueError, match="Unknown verdict code 'made_up'"):
        verdicts.merge(["fallback"], ["made_up"])
    assert verdicts.merge(["a_code"] * 0, ["fallback", "fallback"]) == ["fallback"]


def test_results_written_before_codes_get_codes_from_status_and_figures():
    assert verdicts.shape_codes({"status": "incorrect"}) == ["wrong_result"]
    assert verdicts.shape_codes({"status": "pass", "roofline_fraction": 0.7}) == []
    assert verdicts.shape_codes({"status": "pass", "roofline_fraction": 1.5}) == ["above_roofline"]
    assert verdicts.shape_codes({"status": "fallback"}) == ["fallback"]
    # Written codes win, even empty ones; but a pass faster than the roofline is never a
    # kernel's, whatever a document claims.
    assert verdicts.shape_codes({"status": "incorrect", "codes": []}) == []
    forged = {"status": "pass", "roofline_fraction": 5.0, "codes": []}
    assert verdicts.shape_codes(forged) == ["above_roofline"]


def test_every_code_the_harness_writes_is_in_the_list():
    """Scan the harness for the string codes it puts in ``codes`` (records, merge calls,
    ``fail``/``tampering`` calls): each must be one of ``evaluator.verdicts``."""
    found: set[str] = set()
    for path in sorted((REPO / "evaluator").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "codes":
                found |= _strings(node.value)
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "codes":
                        found |= _strings(value)
            if isinstance(node, ast.Call) and getattr(
                node.func, "attr", getattr(node.func, "id", "")
            ) in ("merge", "fail", "tampering"):
                found |= {a.value for a in node.args[2:3] if isinstance(a, ast.Constant)}
                for arg in node.args:
                    if isinstance(arg, ast.List):
                        found |= _strings(arg)
    assert found, "the scan found no codes: it no longer sees how the harness writes them"
    assert found <= verdicts.CODES, found - verdicts.CODES
    assert {"tampering", "timed_wrong", "outside_work", "above_roofline", "memory_error"} <= found


def _strings(node: ast.AST) -> set[str]:
    """The strings listed in ``[...]`` literals under ``node`` (codes are written as lists)."""
    return {
        item.value
        for lst in ast.walk(node)
        if isinstance(lst, ast.List)
        for item in lst.elts
        if isinstance(item, ast.Constant) and isinstance(item.value, str)
    }


# --------------------------------------------------------------------------- the harness


def test_shape_entries_carry_the_codes_of_what_the_harness_found():
    shape = load_suite("atrex-bench-v1").shapes_for("rms_norm")[0]
    t_sol = t_sol_seconds(
        w_flops=shape.w_flops, q_read=shape.q_read, q_write=shape.q_write, hardware=H200
    )

    def entry(**measured):
        return shape_entry(
            shape, status="pass", measurement={"own_kernel_share": 1.0, **measured},
            hardware=H200, threshold_own_share=0.8,
        )  # fmt: skip

    assert entry(time_s=t_sol / 0.5)["codes"] == []
    assert entry(time_s=t_sol / 0.5, own_kernel_share=0.1)["codes"] == ["fallback"]
    # The side-stream bundle on the H200: 201.7x faster timed than watched.
    unwatched = unwatched_path_error(
        shape.shape_id, "cuda", timed_s=t_sol / 0.5, watched_s=201.7 * t_sol / 0.5
    )
    switched = entry(time_s=t_sol / 0.5, unwatched_error=unwatched)
    assert (switched["status"], switched["codes"]) == ("fallback", ["unwatched_path"])
    # ... and 1.39x faster than the roofline.
    fast = entry(time_s=t_sol / 1.39)
    assert (fast["status"], fast["codes"]) == ("runtime_error", ["above_roofline"])
    assert "held for review" in fast["error"]  # the words are for people; the code decides
    tiny = shape_entry(
        replace(shape, q_read=1, q_write=1, w_flops={}), status="pass",
        measurement={"time_s": 1e-7, "own_kernel_share": 1.0},
        hardware=get_profile("cpu-dev"), threshold_own_share=0.8,
    )  # fmt: skip
    assert tiny["codes"] == ["impossible_time"]
    # A failing status without a more precise code gets its status's.
    loud = shape_entry(shape, status="timeout", hardware=H200, threshold_own_share=0.8)
    assert loud["codes"] == ["timeout"]
    child = shape_entry(
        shape, status="incorrect", measurement={"codes": ["outside_work"]},
        hardware=H200, threshold_own_share=0.8,
    )  # fmt: skip
    assert child["codes"] == ["outside_work"]


def test_operator_entries_carry_the_per_operator_verdict():
    shapes = [_shape("a", "pass", fraction=0.5, codes=[]),
              _shape("b", "incorrect", codes=["wrong_result"])]  # fmt: skip
    entry = operator_entry(
        operator="rms_norm", importance=1.0, status="ok", error=None,
        score=operator_score(shapes), warnings=[], shapes=shapes,
    )  # fmt: skip
    assert (entry["verdict"], entry["score"], entry["wrong_shapes"]) == ("incorrect", 0.0, ["b"])
    assert (entry["apparent_passes"], entry["real_passes"]) == (1, 0)


def test_the_printed_table_shows_verdicts_pass_counts_and_what_holds_the_submission():
    from evaluator.cli import results_table

    shapes = [_shape("a", "pass", fraction=0.5, codes=[]),
              _shape("b", "incorrect", codes=["wrong_result"])]  # fmt: skip
    caught = [_shape("a", "pass", fraction=0.5, codes=[]),
              _shape("b", "fallback", codes=["unwatched_path"])]  # fmt: skip
    operators = [
        {"operator": "rms_norm", "status": "ok", "score": 0.0, "shapes": shapes},
        {"operator": "silu_and_mul", "status": "ok", "score": 0.25, "shapes": caught},
    ]
    results = {
        "operators": operators,
        "scores": summarize(operators=operators, importance={"rms_norm": 1, "silu_and_mul": 1}),
    }
    lines = results_table(results).splitlines()
    assert lines[1].split()[:4] == ["rms_norm", "incorrect", "0%", "1/0"]
    assert lines[2].split()[:4] == ["silu_and_mul", "held", "25.0%", "1/1"]
    assert "passing shapes: 2 apparent (per shape), 1 real (per operator) of 4" in lines[4]
    assert lines[-2].startswith("held for review: 1 sign(s)")
    assert lines[-1].split()[:3] == ["silu_and_mul", "b:", "unwatched_path"]


# --------------------------------------------------------------------------- the sanitizer

MEMCHECK_OUT_OF_BOUNDS = """\
========= COMPUTE-SANITIZER
[harness] start-up steps (s): imports 2.10, device 0.31
========= Invalid __global__ read of size 4 bytes
=========     at _oob_kernel+0x1d0 in /tmp/bundle/rms_norm.py:14
=========     by thread (63,0,0) in block (2,0,0)
=========     Address 0x7f3e5a000400 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3e5a000200 of size 512 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f2c3b] in libcuda.so.1
=========
========= Invalid __global__ read of size 4 bytes
=========     at _oob_kernel+0x1d0 in /tmp/bundle/rms_norm.py:14
=========     by thread (62,0,0) in block (2,0,0)
=========     Address 0x7f3e5a0003fc is out of bounds
=========
candidate print: ========= not a report, no prefix at the start
========= ERROR SUMMARY: 64 errors
"""
MEMCHECK_CLEAN = """\
========= COMPUTE-SANITIZER
hello from the candidate
========= ERROR SUMMARY: 0 errors
"""
RACECHECK_ANALYSIS = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at _reduce_kernel+0x2a0 in reduce.py:21
=========     and Read access at _reduce_kernel+0x300 in reduce.py:23 [1024 hazards]
=========
========= Warning: Race reported between Read access at k+0x10 in a.py:3
=========     and Read access at k+0x20 in a.py:4 [8 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
RACECHECK_HAZARD = """\
========= ERROR: Potential WAW hazard detected at __shared__ 0x0 in block (0,0,0) :
=========     Write Thread (31,0,0) at 0x000000f0 in race.cu:9:kernel(void)
=========     Write Thread (0,0,0) at 0x000000f0 in race.cu:9:kernel(void)
=========     Current Value : 31, Incoming Value : 0
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
INITCHECK = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at _kernel+0x70 in /tmp/bundle/silu_and_mul.py:9
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f1c2c000000
=========
========= ERROR SUMMARY: 1 error
"""


def test_an_out_of_bounds_read_is_parsed_with_its_first_report():
    report = sanitizer.parse_report(MEMCHECK_OUT_OF_BOUNDS, "memcheck")
    assert not report.clean and report.errors == 64
    assert [f.kind for f in report.findings] == ["out_of_bounds", "out_of_bounds"]
    first = report.findings[0]
    assert first.headline == "Invalid __global__ read of size 4 bytes"
    assert first.details[2] == "Address 0x7f3e5a000400 is out of bounds"
    error = report.first_error("smoke-0")
    assert error.startswith(
        "shape smoke-0: compute-sanitizer (memcheck) found an out-of-bounds memory access"
    )
    assert "(64 error(s))" in error and "by thread (63,0,0) in block (2,0,0)" in error
    assert "1 bytes after the nearest allocation" in error
    assert "(62,0,0)" not in error  # the first report only
    assert "not a report" not in error  # the candidate's own output is not the sanitizer's


def test_a_clean_run_and_a_run_that_never_summarised():
    assert sanitizer.parse_report(MEMCHECK_CLEAN).clean
    assert sanitizer.parse_report(MEMCHECK_CLEAN).first_error("x") is None
    assert sanitizer.parse_report("").errors is None  # no summary: the run did not end
    counted = sanitizer.parse_report("========= ERROR SUMMARY: 3 errors\n")
    assert "counted 3 error(s)" in counted.first_error("x")


def test_races_are_errors_and_racecheck_warnings_are_not():
    report = sanitizer.parse_report(RACECHECK_ANALYSIS, "racecheck")
    assert [f.kind for f in report.findings] == ["race"] and report.errors == 1
    assert "a shared-memory data race" in report.first_error("s")
    assert "and Read access at _reduce_kernel+0x300" in report.first_error("s")
    hazard = sanitizer.parse_report(RACECHECK_HAZARD, "racecheck")
    assert hazard.findings[0].headline.startswith("ERROR: Potential WAW hazard")
    assert hazard.errors == 1


# The report racecheck wrote on the H200 (session 15) for a cuBLAS GEMM that PyTorch ran.
NVJET = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_bias_TNT"
RACECHECK_CUBLAS = (
    f"========= Error: Race reported between Read access at {NVJET}+0xb00\n"
    f"=========     and Write access at {NVJET}+0x2aa0 [256 hazards]\n"
    "=========\n"
)


def test_a_race_inside_library_kernels_only_is_not_the_submissions():
    own = ["_epilogue_kernel (ABCDEFGH)"]
    library = sanitizer.parse_report(RACECHECK_CUBLAS, "racecheck")
    (finding,) = library.findings
    assert sanitizer.race_kernels(finding) == [NVJET, NVJET]
    kept, dropped = sanitizer.without_library_races(library, own, None)
    assert kept.clean and kept.first_error("s") is None and dropped == [finding]
    # Its own kernel in the report, or a kernel of that name it compiled: the submission's.
    mixed = RACECHECK_CUBLAS.replace(f"Write access at {NVJET}", "Write access at _epilogue_kernel")
    assert (
        sanitizer.without_library_races(sanitizer.parse_report(mixed, "racecheck"), own, None)[1]
        == []
    )
    named = [f"{NVJET} (12345678)"]
    assert not sanitizer.without_library_races(library, named, None)[0].clean
    # Where what the submission ran cannot be told, every race is its.
    assert not sanitizer.without_library_races(library, own, "native code")[0].clean
    assert not sanitizer.without_library_races(library, [], None)[0].clean
    # A race in a kernel of no known library, and memcheck's reports: never dropped.
    ours = sanitizer.parse_report(RACECHECK_ANALYSIS, "racecheck")
    assert sanitizer.without_library_races(ours, own, None)[1] == []
    oob = sanitizer.parse_report(
        "========= Invalid __global__ read of size 4 bytes\n"
        "=========     at nvjet_sm90_tst_64x8+0x10\n",
        "memcheck",
    )
    assert sanitizer.without_library_races(oob, own, None)[1] == []


def test_uninitialised_reads_are_parsed():
    report = sanitizer.parse_report(INITCHECK, "initcheck")
    assert [f.kind for f in report.findings] == ["uninitialised"]
    assert "a read of uninitialised memory" in report.first_error("s")


def test_the_sanitizer_wrapper_tools_and_smallest_shape():
    wrapper = sanitizer.command("/usr/local/cuda/bin/compute-sanitizer", "racecheck")
    assert wrapper[:3] == ["/usr/local/cuda/bin/compute-sanitizer", "--tool", "racecheck"]
    assert "--racecheck-report" in wrapper
    assert "--leak-check" in sanitizer.command("cs", "memcheck")
    with pytest.raises(ValueError, match="Unknown sanitizer tool"):
        sanitizer.command("cs", "synccheck")
    assert sanitizer.parse_tools(None) == ("memcheck", "racecheck")
    assert sanitizer.parse_tools("none") == ()
    assert sanitizer.parse_tools("memcheck,initcheck") == ("memcheck", "initcheck")
    with pytest.raises(ValueError, match="memcheckk"):
        sanitizer.parse_tools("memcheckk")
    shapes = load_suite("atrex-bench-v1").shapes_for("rms_norm")
    small = sanitizer.smallest_shape(shapes)
    assert small.q_read + small.q_write == min(s.q_read + s.q_write for s in shapes)
    assert sanitizer.find_sanitizer({"PATH": "/nonexistent"}) in (
        None,
        *(f"{d}/compute-sanitizer" for d in sanitizer.CANDIDATE_PATHS),
    )


def _report(kernel: str) -> str:
    return (
        "========= Invalid __global__ read of size 4 bytes\n"
        f"=========     at {kernel}+0x10 in {kernel}.py:3\n"
        "=========     by thread (0,0,0) in block (0,0,0)\n"
        "=========\n"
    )


def test_reports_are_blamed_by_their_place_in_the_log():
    banner = "========= COMPUTE-SANITIZER\n"
    first, second = _report("_first_kernel"), _report("_second_kernel")
    log = (banner + first + second + "========= ERROR SUMMARY: 2 errors\n").encode()
    a_start, b_start = len(banner), len(banner) + len(first)
    windows = [sanitizer.Window("a", a_start, b_start), sanitizer.Window("b", b_start, None)]
    reports, before = sanitizer.attribute(log, windows, "memcheck")
    assert "_first_kernel" in reports["a"].first_error("s0")
    assert "_second_kernel" not in reports["a"].first_error("s0")
    assert "at _second_kernel" in reports["b"].first_error("s1")
    # The exit's summary counts the whole process: it is no operator's error count.
    assert reports["b"].errors == 1 and before.clean
    # A boundary taken in the middle of a line gives the line to the window it ends in.
    middle = b_start + 10
    reports, _ = sanitizer.attribute(
        log, [sanitizer.Window("a", a_start, middle), sanitizer.Window("b", middle, None)]
    )
    assert len(reports["a"].findings) == 2 and len(reports["b"].findings) == 0
    # A window with no known end runs to the end of the log: both reports are its.
    reports, _ = sanitizer.attribute(
        log, [sanitizer.Window("a", a_start, None), sanitizer.Window("b", b_start, None)]
    )
    assert len(reports["a"].findings) == 2 and len(reports["b"].findings) == 1
    # Before the first operator started (the harness's start-up): blamed on none.
    reports, before = sanitizer.attribute(log, [sanitizer.Window("b", b_start, None)])
    assert "_first_kernel" in before.findings[0].text() and len(reports["b"].findings) == 1


def test_the_log_tap_reads_the_tools_pipe_without_waiting(tmp_path):
    tap = sanitizer.LogTap(tmp_path / "tool.log")
    assert tap.drain() == 0  # nothing written yet: no wait
    wrapper = sanitizer.command("cs", "memcheck", tap.write_fd)
    assert wrapper[wrapper.index("--log-file") + 1] == f"/proc/self/fd/{tap.write_fd}"
    # Reopened by path, as the tool does (the pipe is writable by whoever holds it).
    with open(f"/proc/self/fd/{tap.write_fd}", "w") as tool:
        tool.write(_report("_k"))
    assert tap.drain() == len(_report("_k"))
    tap.close()
    assert (tmp_path / "tool.log").read_text() == _report("_k") and tap.ended


# --------------------------------------------------------------------------- racecheck's operators


def _compiled(cache: Path, name: str, shared: int, ptx: str | None) -> Path:
    """A compiled kernel as Triton lays it out in a cache: <key>/<name>.json (its metadata,
    with the bytes of shared memory it is launched with) beside <name>.ptx."""
    folder = cache / f"KEY{name.upper()}"
    folder.mkdir(parents=True)
    (folder / f"{name}.json").write_text(f'{{"name": "{name}", "shared": {shared}}}')
    if ptx is not None:
        (folder / f"{name}.ptx").write_text(ptx)
    return folder


ELEMENTWISE_PTX = ".visible .entry k()\n{\n\tld.global.b32 %r1, [%rd1];\n\tret;\n}\n"
# Triton declares its shared memory even where a kernel uses none; the declaration alone
# is no use of it.
DECLARED_ONLY_PTX = ".extern .shared .align 16 .b8 global_smem[];\n" + ELEMENTWISE_PTX
# Inline assembly's own static shared memory, which the metadata's "shared" does not count.
INLINE_ASM_PTX = ELEMENTWISE_PTX.replace("\tret;", "\t.shared .align 4 .b8 scratch[64];\n\tret;")


def test_racecheck_is_skipped_only_where_every_compiled_kernel_uses_no_shared_memory(tmp_path):
    cache = tmp_path / "cache"
    _compiled(cache, "plain", 0, ELEMENTWISE_PTX)
    _compiled(cache, "declared", 0, DECLARED_ONLY_PTX)
    assert sanitizer.cache_kernels(cache) == {"plain (KEYPLAIN)": False,
                                              "declared (KEYDECLA)": False}  # fmt: skip
    needed, why = sanitizer.racecheck_reason(sanitizer.cache_kernels(cache), None)
    assert (needed, why) == (False, "none of its 2 compiled kernel(s) uses shared memory")
    # One kernel with shared memory, by the metadata or by its PTX, is enough to check.
    _compiled(cache, "reduce", 32, None)
    _compiled(cache, "asm", 0, INLINE_ASM_PTX)
    kernels = sanitizer.cache_kernels(cache)
    assert kernels["reduce (KEYREDUC)"] and kernels["asm (KEYASM)"]
    needed, why = sanitizer.racecheck_reason(kernels, None)
    assert needed and why == "shared memory in asm (KEYASM), reduce (KEYREDUC)"
    # Nothing compiled (PyTorch only, the interpreter, no cache at all): cannot tell.
    assert sanitizer.racecheck_reason(sanitizer.cache_kernels(tmp_path / "none"), None) == (
        True,
        "cannot tell: no compiled Triton kernel in its cache",
    )
    # Code the cache does not list (native code in the bundle): cannot tell either.
    needed, why = sanitizer.racecheck_reason({"plain": False}, "the bundle holds native code")
    assert needed and why == "cannot tell: the bundle holds native code"


def test_a_child_cannot_hide_a_kernel_behind_a_link_or_a_file_that_is_not_triton_s(tmp_path):
    cache = tmp_path / "cache"
    folder = _compiled(cache, "plain", 0, ELEMENTWISE_PTX)
    # Metadata that is not a compiled kernel's, and a link the runner must not follow.
    (folder / "notes.json").write_text('{"shared": "none"}')
    outside = tmp_path / "outside.json"
    outside.write_text('{"name": "linked", "shared": 64}')
    (folder / "linked.json").symlink_to(outside)
    elsewhere = _compiled(tmp_path / "elsewhere", "hidden", 64, None)
    (cache / "KEYLINK").symlink_to(elsewhere, target_is_directory=True)
    assert sanitizer.cache_kernels(cache) == {"plain (KEYPLAIN)": False}


def test_native_code_in_a_bundle_means_racecheck_cannot_be_skipped(tmp_path):
    assert sanitizer.native_code(REPO / "examples" / "bundles" / "triton-baseline") is None
    cases = {
        "so": ("lib/kernels.so", b"\x7fELF"),
        "inline": ("op.py", b"from torch.utils.cpp_extension import load_inline\n"),
        "cupy": ("op.py", b"import numpy\nimport cupy as cp\n"),
        "dynamic": ("op.py", b"mod = __import__('cu' + 'da')\n"),
    }
    for label, (name, content) in cases.items():
        bundle = tmp_path / label
        (bundle / name).parent.mkdir(parents=True)
        (bundle / name).write_bytes(content)
        assert sanitizer.native_code(bundle) is not None, label
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "op.py").write_text("import torch\nimport triton\n# cuda kernels, written in Triton\n")
    assert sanitizer.native_code(plain) is None


TRITON_KERNELS = """
import sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)

@triton.jit
def row_sum(x, y, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    v = tl.load(x + tl.program_id(0) * n + i, mask=i < n, other=0.0)
    tl.store(y + tl.program_id(0), tl.sum(v, axis=0))

signature = {"x": "*fp32", "y": "*fp32", "n": "i32", "BLOCK": "constexpr"}
for kernel in (scale, row_sum):
    source = ASTSource(fn=kernel, signature=signature, constexprs={"BLOCK": 1024})
    triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
"""


@pytest.mark.slow
def test_the_shared_memory_of_real_triton_kernels_is_read_from_their_cache(tmp_path):
    import subprocess
    import sys

    # Compiled for the H200 (sm_90) on this machine: Triton needs no GPU to compile.
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "0"}
    program = tmp_path / "kernels.py"  # Triton reads a kernel's source from its file
    program.write_text(TRITON_KERNELS)
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, str(program)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"Triton cannot compile for sm_90 here: {done.stderr[-300:]}")
    kernels = sanitizer.cache_kernels(tmp_path / "cache")
    by_name = {label.split(" ")[0]: uses for label, uses in kernels.items()}
    assert by_name == {"scale": False, "row_sum": True}


def test_a_copied_triton_cache_finds_its_kernels_without_the_original(tmp_path, monkeypatch):
    from triton.runtime.cache import FileCacheManager

    from evaluator.sandbox import Sandbox, SandboxPolicy

    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path, privileged=False)
    origin = sandbox.cache_folder("rms_norm")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(origin))
    written = FileCacheManager("KEY")
    group = {name: written.put(b"data", name) for name in ("k.json", "k.cubin")}
    written.put_group("k.json", group)
    copy = sandbox._cache("sanitizer-memcheck-1", ["rms_norm"], None, None)
    assert copy is not None
    # The origin gone (or unreadable to the copy's user): Triton still finds the kernel in
    # the copy. A copy that named the origin's files would make it compile again.
    origin.rename(tmp_path / "moved")
    monkeypatch.setenv("TRITON_CACHE_DIR", copy)
    found = FileCacheManager("KEY").get_group("k.json")
    assert found is not None and set(found) == {"k.json", "k.cubin"}
    assert all(path.startswith(copy + os.sep) for path in found.values())
