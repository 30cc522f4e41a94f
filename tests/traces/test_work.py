"""W/Q of new shapes from the site's side: ``python -m evaluator work`` in a child process,
started by ``evaluator.launch`` with the configured evaluator interpreter."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from evaluator.operators import get_operator
from traces.work import WorkModelError, shapes_work


@pytest.fixture
def evaluator_python(settings, tmp_path):
    """Point ``ATREX["EVALUATOR_PYTHON"]`` at a shell script with the given body."""

    def use(body: str) -> Path:
        path = tmp_path / "fake-python"
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        settings.ATREX = {**settings.ATREX, "EVALUATOR_PYTHON": str(path)}
        return path

    return use


def test_new_shapes_get_the_work_models_figures():
    shapes = [{"token_count": 5, "hidden_size": 300}, {"token_count": 1, "hidden_size": 64}]
    items = [{"operator": "rms_norm", "init_kwargs": {}, "input_kwargs": shape} for shape in shapes]
    answer = shapes_work([*items, {"operator": "nope", "input_kwargs": {}}])
    for shape, figures in zip(shapes, answer, strict=False):
        work = get_operator("rms_norm").work({}, shape)
        assert figures["q_read"] == int(work.q_read) and figures["q_write"] == int(work.q_write)
        assert figures["w_flops"] == {k: int(v) for k, v in work.w_flops.items() if v}
    assert "not built into the evaluator" in answer[2]["error"]


def test_no_shapes_start_no_child(evaluator_python):
    evaluator_python("exit 1\n")
    assert shapes_work([]) == []


def test_a_failing_child_is_a_work_model_error_with_its_output(evaluator_python):
    evaluator_python('echo "no torch here" >&2\nexit 3\n')
    with pytest.raises(WorkModelError, match=r"failed \(exit 3\): no torch here"):
        shapes_work([{"operator": "rms_norm", "input_kwargs": {}}])


def test_an_answer_for_other_shapes_is_refused(evaluator_python):
    evaluator_python("cat > /dev/null\necho '[]'\n")
    with pytest.raises(WorkModelError, match="different number of shapes"):
        shapes_work([{"operator": "rms_norm", "input_kwargs": {}}])


def test_the_child_is_asked_for_the_work_subcommand(evaluator_python, tmp_path):
    seen = tmp_path / "argv"
    evaluator_python(f'echo "$*" > {seen}\ncat > /dev/null\necho \'[{{"error": "x"}}]\'\n')
    assert shapes_work([{"operator": "rms_norm", "input_kwargs": {}}]) == [{"error": "x"}]
    assert seen.read_text().strip() == "-m evaluator work"
