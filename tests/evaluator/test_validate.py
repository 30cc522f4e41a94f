"""``validate_suite`` and ``python -m evaluator validate-suite``: a draft suite is checked
against the built-in operators, every problem is reported with its operator and shape."""

from __future__ import annotations

import copy
import json
import time
from dataclasses import replace
from typing import Any

import pytest

from evaluator import cli
from evaluator.operators import OPERATORS
from evaluator.suite import load_suite
from evaluator.validate import CPU_DRAW_LIMIT_BYTES, SCHEMA, validate_suite


@pytest.fixture
def draft() -> dict[str, Any]:
    """A draft of rms_norm alone: two published shapes and its smoke shapes, unsealed."""
    suite = load_suite("atrex-bench-v0.1").restrict(["rms_norm"])
    data = suite.to_dict()
    del data["content_hash"]
    published = [s for s in data["shapes"] if not s["smoke"]][:2]
    data["shapes"] = published + [s for s in data["shapes"] if s["smoke"]]
    return data


def _shape(data: dict[str, Any], shape_id: str) -> dict[str, Any]:
    return next(s for s in data["shapes"] if s["shape_id"] == shape_id)


def _messages(report: dict[str, Any], kind: str = "errors") -> list[str]:
    return [entry["message"] for entry in report[kind]]


def _only_error(report: dict[str, Any]) -> dict[str, Any]:
    assert report["ok"] is False
    assert len(report["errors"]) == 1, report["errors"]
    return report["errors"][0]


def test_a_clean_draft_is_ok(draft):
    report = validate_suite(draft)
    assert report["schema"] == SCHEMA and report["suite"] == "atrex-bench-v0.1"
    assert report["ok"] is True and report["errors"] == [] and report["warnings"] == []
    assert report["checked"] == len(draft["shapes"]) and report["skipped"] == 0
    assert report["hash"].startswith("sha256:")


def test_an_input_kwarg_the_reference_rejects_is_an_error_naming_it(draft):
    shape = _shape(draft, "smoke-1")
    shape["input_kwargs"]["hidden_sizee"] = shape["input_kwargs"].pop("hidden_size")
    error = _only_error(validate_suite(draft))
    assert (error["operator"], error["shape_id"]) == ("rms_norm", "smoke-1")
    assert "rms_norm/smoke-1" in error["message"]
    assert "hidden_sizee" in error["message"] and "input_kwargs" in error["message"]


def test_a_missing_input_kwarg_is_an_error_naming_it(draft):
    del _shape(draft, "smoke-0")["input_kwargs"]["token_count"]
    error = _only_error(validate_suite(draft))
    assert "rms_norm/smoke-0" in error["message"] and "token_count" in error["message"]


def test_an_init_kwarg_the_model_rejects_is_an_error(draft):
    _shape(draft, "smoke-0")["init_kwargs"] = {"epsilon": 1e-6}
    error = _only_error(validate_suite(draft))
    assert error["shape_id"] == "smoke-0"
    assert "init_kwargs" in error["message"] and "epsilon" in error["message"]


def test_a_negative_weight_is_an_error(draft):
    _shape(draft, "smoke-2")["weight"] = -1.0
    error = _only_error(validate_suite(draft))
    assert (error["operator"], error["shape_id"]) == ("rms_norm", "smoke-2")
    assert "rms_norm/smoke-2" in error["message"] and "weight -1.0" in error["message"]


@pytest.mark.parametrize("key", ["w_flops", "q_read", "q_write"])
def test_a_shape_without_w_or_q_is_an_error(draft, key):
    shape_id = draft["shapes"][0]["shape_id"]
    del draft["shapes"][0][key]
    error = _only_error(validate_suite(draft))
    assert (error["operator"], error["shape_id"]) == ("rms_norm", shape_id)
    assert f"'rms_norm'/'{shape_id}'" in error["message"] and key in error["message"]


def test_a_negative_q_is_an_error(draft):
    _shape(draft, "smoke-0")["q_write"] = -5
    error = _only_error(validate_suite(draft))
    assert "rms_norm/smoke-0" in error["message"] and "q_write = -5" in error["message"]


def test_work_that_disagrees_with_the_work_model_is_an_error_on_a_portal_shape(draft):
    shape = _shape(draft, "smoke-1")
    shape["q_read"] = int(shape["q_read"] * 1.05)
    shape["w_flops"] = {"bf16": shape["w_flops"]["bf16"] // 2}
    error = _only_error(validate_suite(draft))
    assert (error["operator"], error["shape_id"]) == ("rms_norm", "smoke-1")
    assert "rms_norm/smoke-1" in error["message"] and "work model" in error["message"]
    assert "q_read" in error["message"] and "w_flops['bf16']" in error["message"]


def test_work_within_one_percent_is_accepted(draft):
    shape = _shape(draft, "smoke-1")
    shape["q_read"] = int(shape["q_read"] * 1.009)
    assert validate_suite(draft)["ok"] is True


def test_work_that_disagrees_on_a_published_shape_is_only_a_warning(draft):
    published = draft["shapes"][0]
    published["q_write"] = published["q_write"] * 2
    report = validate_suite(draft)
    assert report["ok"] is True and report["errors"] == []
    [warning] = report["warnings"]
    assert warning["shape_id"] == published["shape_id"]
    assert "published" in warning["message"] and "q_write" in warning["message"]


def test_kwargs_repeated_in_init_and_input_must_agree():
    data = load_suite("atrex-bench-v1").restrict(["l2_norm"]).to_dict()
    shape = next(s for s in data["shapes"] if s["shape_id"] == "smoke-1")
    shape["init_kwargs"]["hidden_size"] = 512
    error = _only_error(validate_suite(data))
    assert "l2_norm/smoke-1" in error["message"] and "hidden_size" in error["message"]


def test_kwargs_that_make_inputs_refuses_are_an_error_even_on_meta():
    data = load_suite("atrex-bench-v1").restrict(["block_scaled_mm"]).to_dict()
    shape = next(s for s in data["shapes"] if s["shape_id"] == "smoke-0")
    shape["input_kwargs"]["k"] = 200  # not a multiple of group_k = 128
    report = validate_suite(data)
    errors = [e for e in report["errors"] if "make_inputs" in e["message"]]
    assert [e["shape_id"] for e in errors] == ["smoke-0"]
    assert "not a multiple" in errors[0]["message"]


def test_suite_level_problems_and_malformed_entries_are_all_reported(draft):
    draft["operators"][0]["importance"] = 0.5
    draft["shapes"].append({"operator": "rms_norm"})
    draft["shapes"].append(copy.deepcopy(_shape(draft, "smoke-0")))
    report = validate_suite(draft)
    text = " | ".join(_messages(report))
    assert "sums to 0.5" in text and "lacks key(s)" in text and "appears twice" in text


def test_operators_that_are_not_built_in_are_skipped_with_a_warning(draft):
    draft["operators"][0]["importance"] = 0.5
    draft["operators"].append({**draft["operators"][0], "slug": "my_uploaded_op"})
    draft["shapes"].append(
        {**_shape(draft, "smoke-0"), "operator": "my_uploaded_op", "input_kwargs": {"x": 1}}
    )
    report = validate_suite(draft)
    assert report["ok"] is True and report["skipped"] == 1
    [warning] = report["warnings"]
    assert warning["operator"] == "my_uploaded_op" and "skipped: not built in" in warning["message"]


def _meta_refusing(spec):
    """The operator, with a make_inputs that (like a data-dependent one) cannot run on meta."""

    def input_maker(*, device, generator, **kwargs):
        if device.type == "meta":
            raise NotImplementedError("data-dependent output size")
        return spec.input_maker(device=device, generator=generator, **kwargs)

    return replace(spec, input_maker=input_maker)


def test_meta_refusal_falls_back_to_the_cpu_for_small_shapes_only(draft, monkeypatch):
    monkeypatch.setitem(OPERATORS, "rms_norm", _meta_refusing(OPERATORS["rms_norm"]))
    assert validate_suite(draft)["warnings"] == []  # small: drawn on the CPU instead
    big = _shape(draft, "smoke-0")
    big["input_kwargs"]["token_count"] = CPU_DRAW_LIMIT_BYTES // (2 * 128) + 1
    work = OPERATORS["rms_norm"].work(big["init_kwargs"], big["input_kwargs"])
    big.update(w_flops=work.w_flops, q_read=work.q_read, q_write=work.q_write)
    report = validate_suite(draft)
    assert report["ok"] is True
    [warning] = report["warnings"]
    assert warning["shape_id"] == "smoke-0" and "not checked on meta" in warning["message"]


@pytest.mark.slow
def test_the_shipped_v1_suite_validates_without_errors_on_meta():
    started = time.perf_counter()
    report = validate_suite(load_suite("atrex-bench-v1"))
    elapsed = time.perf_counter() - started
    print(f"\nvalidate-suite atrex-bench-v1 on meta: {elapsed:.1f} s")
    assert report["ok"] is True and report["errors"] == []
    assert report["checked"] == 440 + 66 and report["skipped"] == 0
    # The work models reproduce every published shape's W/Q (draw-dependent ones from
    # their recorded draws), so nothing is flagged.
    assert report["warnings"] == []


# --- the command line ------------------------------------------------------------------


def test_cli_writes_the_report_and_exits_2_on_errors(tmp_path, draft, capsys):
    _shape(draft, "smoke-2")["weight"] = -3
    path = tmp_path / "draft.json"
    path.write_text(json.dumps(draft))
    out = tmp_path / "report.json"
    assert cli.main(["validate-suite", str(path), "--out", str(out)]) == 2
    report = json.loads(out.read_text())
    assert report["schema"] == SCHEMA and report["ok"] is False
    assert [e["shape_id"] for e in report["errors"]] == ["smoke-2"]
    assert "rms_norm/smoke-2" in capsys.readouterr().err


def test_cli_exits_0_and_prints_the_report_when_ok(tmp_path, draft, capsys):
    path = tmp_path / "draft.json"
    path.write_text(json.dumps(draft))
    assert cli.main(["validate-suite", str(path), "--device", "cpu"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["device"] == "cpu"


def test_cli_reports_an_unreadable_file_as_an_error(tmp_path, capsys):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert cli.main(["validate-suite", str(path)]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and "broken.json" in report["errors"][0]["message"]


def _layout(value: Any) -> Any:
    """A draw's tensors as (shape, dtype, strides), anything else as it is."""
    import torch

    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype, value.stride())
    if isinstance(value, dict):
        return {key: _layout(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_layout(item) for item in value)
    return value


@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_a_draw_on_meta_has_the_cpu_draws_shapes_dtypes_and_strides(operator):
    # What validate-suite checks on meta is what a CPU or GPU draw holds (the fp8 MoE's
    # generator skips its block quantisation on meta, where there are no values).
    import torch

    spec = OPERATORS[operator]
    smoke = load_suite("atrex-bench-v1").shapes_for(operator, "smoke")[0]

    def draw(device: str) -> Any:  # as validate-suite draws: a CPU generator (meta has none)
        generator = torch.Generator()
        generator.manual_seed(5)
        return spec.input_maker(
            device=torch.device(device), generator=generator, **smoke.input_kwargs
        )

    on_meta, on_cpu = draw("meta"), draw("cpu")
    assert all(v.device.type == "meta" for v in on_meta.values() if hasattr(v, "device"))
    assert _layout(on_meta) == _layout(on_cpu)
