"""The submission page's results: a per-operator summary whose verdict tells the truth, the
per-shape rows grouped by operator with their arguments and weight, the status filter
without JavaScript, operators missing from the bundle folded into one line, and the
environment as a definition list. Rows are imported results (no worker)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from catalogue.models import HardwareProfile, Shape
from evaluator.scoring import verdict_of
from submissions import selectors
from submissions.result_import import submission_import_results
from submissions.result_tables import environment_items, operator_verdict
from tests.leaderboard.results_factory import smoke_results

pytestmark = pytest.mark.django_db

WRONG = "max abs error 3.5 at [0, 7] (atol 0.0156, rtol 0.0156)"
ENVIRONMENT = {
    "device": "cuda",
    "device_name": "NVIDIA H200",
    "driver": "580.159.04",
    "torch": "2.11.0",
    "clocks_start": {"sm_mhz": 345.0, "mem_mhz": 3201.0, "max_sm_mhz": 1980.0},
    "sandbox": {
        "mode": "best-effort",
        "active": ["network", "rlimits"],
        "missing": {"gpu_isolation": "CUDA_VISIBLE_DEVICES does not name exactly one GPU"},
        "limits": {"cpu_time_s": 3600},
    },
}


def _publish(owner, suite, report, title="kernels"):
    return submission_import_results(
        owner=owner,
        report=report,
        suite_version=suite,
        hardware=HardwareProfile.objects.get(slug="cpu-dev"),
        title=title,
        provenance_note="made by the tests",
        is_baseline=False,
    )


def _report(suite, *, statuses=None, missing=(), environment=None):
    """Smoke results where ``statuses`` maps (operator, shape id) to a failing status (with
    an error) and the operators of ``missing`` are not in the bundle; the evaluator still
    calls every operator that ran "ok", as it does today."""
    report = smoke_results(suite, fraction=0.5)
    for entry in report["operators"]:
        if entry["operator"] in missing:
            entry.update(status="missing", error=f"the bundle has no {entry['operator']}.py")
            for shape in entry["shapes"]:
                shape.update(status="missing", error=entry["error"], time_ms=None)
            continue
        for shape in entry["shapes"]:
            status = (statuses or {}).get((entry["operator"], shape["shape_id"]))
            if status:
                shape.update(status=status, error=WRONG if status == "incorrect" else "boom")
    report["environment"] = environment or ENVIRONMENT
    return report


def _page(client, submission, query="") -> str:
    response = client.get(reverse("submissions:detail", args=[submission.pk]) + query)
    assert response.status_code == 200
    return response.content.decode()


def _summary_row(html: str, operator: str) -> str:
    table = html.split('id="operator-table"', 1)[1].split("</table>", 1)[0]
    return re.search(rf'<tr data-operator="{operator}">(.*?)</tr>', table, re.S).group(1)


def _group(html: str, operator: str) -> str:
    return html.split(f'id="shapes-{operator}"', 1)[1].split("</details>", 1)[0]


def _rows(group_html: str) -> list[str]:
    return re.findall(r"<tr data-group=[^>]*>", group_html)


ALL_INCORRECT = {("rms_norm", f"smoke-{i}"): "incorrect" for i in range(3)}


def test_an_operator_incorrect_on_every_shape_is_not_ok_and_shows_its_first_error(
    client, catalogue, user
):
    html = _page(client, _publish(user, catalogue, _report(catalogue, statuses=ALL_INCORRECT)))
    row = _summary_row(html, "rms_norm")
    assert 'class="status status-incorrect"' in row and ">pass<" not in row
    # pass, incorrect, fallback, error, missing
    counts = re.findall(r'<td class="num[^"]*">(\d+)</td>', row)[:5]
    assert counts == ["0", "3", "0", "0", "0"]
    assert "shape smoke-0:" in row and "max abs error 3.5 at [0, 7]" in row
    assert ">pass<" in _summary_row(html, "silu_and_mul")  # every shape passed


def test_one_crashed_shape_makes_the_operator_partial_not_pass(client, catalogue, user):
    report = _report(catalogue, statuses={("silu_and_mul", "smoke-1"): "runtime_error"})
    row = _summary_row(_page(client, _publish(user, catalogue, report)), "silu_and_mul")
    assert ">partial<" in row and "shape smoke-1:" in row and "boom" in row


def test_verdicts_follow_the_shapes_unless_the_scoring_reported_one():
    def verdict(reported=None, **counts):
        return operator_verdict(reported=reported, counts=counts)

    assert verdict(**{"pass": 4}) == "pass"
    assert verdict(**{"pass": 3, "incorrect": 1}) == "incorrect"
    assert verdict(**{"incorrect": 4}) == "incorrect"
    assert verdict(**{"pass": 3, "fallback": 1}) == "partial"
    assert verdict(**{"pass": 3, "missing": 1}) == "partial"
    assert verdict(**{"fallback": 2, "error": 2}) == "fallback"
    assert verdict(**{"error": 4}) == "failed"
    assert verdict(**{"missing": 4}) == "missing"
    assert verdict(reported="incorrect", **{"pass": 4}) == "incorrect"
    # One rule: the scoring's (evaluator.scoring.verdict_of), codes included; the page's
    # one word of its own is "missing", where the scoring says "failed".
    assert operator_verdict(reported=None, counts={"pass": 4}, wrong=True) == "incorrect"
    assert operator_verdict(reported=None, counts={"pass": 4}, held=True) == "held"
    for counts in ({"pass": 2, "error": 1}, {"fallback": 1, "missing": 2}, {"error": 3}):
        assert verdict(**counts) == verdict_of(counts=counts)
    assert verdict_of(counts={"missing": 4}) == "failed" and verdict(missing=4) == "missing"


def test_a_verdict_stored_with_the_results_is_shown_as_it_is(client, catalogue, user):
    # A failed validation variant: every shape passed at its scored arguments, and carries
    # the code that makes the operator incorrect (the scoring stores the verdict).
    report = _report(catalogue)
    for entry in report["operators"]:
        for shape in entry["shapes"]:
            shape["codes"] = ["variant_wrong"] if entry["operator"] == "rms_norm" else []
    submission = _publish(user, catalogue, report)
    row = _summary_row(_page(client, submission), "rms_norm")
    assert 'class="status status-incorrect"' in row
    # A run stored without verdicts: the page derives the same word from the codes, by
    # the scoring's rule (evaluator.scoring.verdict_of).
    run = submission.runs.get()
    run.operator_results.update(verdict="")
    for entry in run.results["operators"]:
        entry.pop("verdict", None)
    run.save(update_fields=["results"])
    Score = type(submission.score)
    Score.objects.filter(submission=submission).update(operator_verdicts={})
    row = _summary_row(_page(client, submission), "rms_norm")
    assert 'class="status status-incorrect"' in row and ">pass<" not in row


def test_a_wrong_answer_on_a_hidden_shape_is_counted_for_every_reader(client, catalogue, user):
    Shape.objects.filter(
        suite_version=catalogue, operator__slug="rms_norm", shape_id="smoke-2"
    ).update(visibility=Shape.Visibility.HIDDEN)
    report = _report(catalogue, statuses={("rms_norm", "smoke-2"): "incorrect"})
    html = _page(client, _publish(user, catalogue, report))
    assert ">incorrect<" in _summary_row(html, "rms_norm")
    group = _group(html, "rms_norm")
    assert len(_rows(group)) == 2 and "1 hidden shape of this operator is scored" in group
    assert WRONG not in html  # the hidden shape's error would describe it


def test_shapes_are_grouped_by_operator_with_their_arguments_and_weight(client, catalogue, user):
    html = _page(client, _publish(user, catalogue, _report(catalogue)))
    groups = re.findall(r'<details class="shape-group" id="shapes-([a-z_]+)"', html)
    assert groups == ["rms_norm", "silu_and_mul", "fused_add_rms_norm"]  # by importance
    rms = _group(html, "rms_norm")
    assert len(_rows(rms)) == 3 and "silu" not in rms
    # smoke-1 of rms_norm: token_count 37, hidden_size 1152, eps from the constructor.
    assert '<abbr title="token_count">T</abbr>=37' in rms
    assert '<abbr title="hidden_size">H</abbr>=1152' in rms and "eps=0.000001" in rms
    assert "shape=[37, 512]" in _group(html, "silu_and_mul")
    assert rms.count('title="weight 1.00">33.3%</td>') == 3  # three shapes of equal weight


def test_the_status_filter_works_from_the_query_string(client, catalogue, user):
    submission = _publish(
        user, catalogue, _report(catalogue, statuses={("rms_norm", "smoke-1"): "incorrect"})
    )
    html = _page(client, submission, "?status=incorrect")
    rms = _group(html, "rms_norm")
    assert rms.startswith(' data-operator="rms_norm" open>')
    assert _rows(rms) == [
        '<tr data-group="pass" hidden>',
        '<tr data-group="incorrect">',
        '<tr data-group="pass" hidden>',
    ]
    assert 'data-operator="silu_and_mul" hidden>' in html  # nothing of it matches
    assert re.search(r'href="\?status=incorrect#shapes"[^>]*aria-current="true"', html)
    assert 'id="filter-empty" hidden' in html
    unfiltered = _group(_page(client, submission), "rms_norm")
    assert unfiltered.startswith(' data-operator="rms_norm">') and " hidden>" not in unfiltered
    bad = _page(client, submission, "?status=wrong")
    assert "There is no status “wrong”: showing every shape" in bad
    assert "pass, incorrect, fallback, error, missing" in bad


def test_operators_missing_from_the_bundle_are_folded_into_one_line(client, catalogue, user):
    report = _report(catalogue, missing=("silu_and_mul", "fused_add_rms_norm"))
    report["operators"][2]["verdict"] = "failed"  # the scoring's word for it: still folded
    html = _page(client, _publish(user, catalogue, report))
    assert 'id="shapes-silu_and_mul"' not in html and 'id="shapes-fused_add_rms_norm"' not in html
    assert "the bundle has no" not in html  # no row per missing shape
    fold = html.split('id="missing-operators"', 1)[1].split("</tr>", 1)[0]
    assert "2 operators" in fold and ">6</td>" in fold  # six shapes
    assert "<code>silu_and_mul</code>" in fold and "<code>fused_add_rms_norm</code>" in fold
    line = html.split('id="missing-shapes"', 1)[1].split("</p>", 1)[0]
    assert "6 shapes of 2 operators not in the bundle, each scored 0" in line
    assert 'href="?status=missing#shapes"' in html and "missing (6)" in html
    headline = html.split('id="headline"', 1)[1].split("</p>", 1)[0]
    assert "1 of 3 operators pass every shape" in headline


def test_the_environment_is_a_definition_list_in_words(client, catalogue, user):
    html = _page(client, _publish(user, catalogue, _report(catalogue)))
    section = html.split('id="environment-list"', 1)[1].split("</section>", 1)[0]
    assert "<dt>Device</dt><dd>NVIDIA H200" in section
    assert "<dt>Clocks at the start</dt><dd>SM 345 MHz (max 1980) · memory 3201 MHz" in section
    assert "best-effort · active: network, rlimits · missing: gpu_isolation (" in section
    assert "{" not in section and "[" not in section  # no Python dict or list shown raw
    labels = [item.label for item in environment_items({"torch": "2.11", "new_thing": 3})]
    assert labels == ["PyTorch", "New thing"]  # unknown keys still shown, in words


NO_SHARED = "none of its 3 compiled kernel(s) uses shared memory"
SANITIZER = {
    "executable": "/usr/local/cuda/bin/compute-sanitizer",
    "pass_s": 2.301,
    "concurrent": 2,
    "tools": {
        "memcheck": {"operators": ["rms_norm", "l2_norm"], "seconds": 2.3, "failed": ["l2_norm"],
                     "per_operator_s": {"rms_norm": 0.1}, "children": [{"seconds": 2.2}]},
        "racecheck": {"operators": ["rms_norm"], "seconds": 2.1, "failed": [],
                      "skipped": {"silu_and_mul": NO_SHARED},
                      "reasons": {"rms_norm": "shared memory in _rms_norm_kernel"}},
    },
}  # fmt: skip


def test_the_sanitizer_pass_and_the_start_ahead_depth_read_as_one_line_each():
    items = {item.label: item for item in environment_items(
        {"start_ahead": True, "start_ahead_depth": 2, "sanitizer": SANITIZER}
    )}  # fmt: skip
    assert list(items) == ["Started ahead of their turn", "Memory checks (compute-sanitizer)"]
    assert items["Started ahead of their turn"].value == "the next 2 operators' children"
    checks = items["Memory checks (compute-sanitizer)"]
    assert checks.value == (
        "memcheck on 2 operators, failed: l2_norm; racecheck on 1 operator · 2.30 s"
    )
    details = {item.label: item.value for item in checks.details}
    assert details["racecheck"] == (
        "operators: rms_norm · 2.10 s · failed: — · not run on: silu_and_mul (none of its 3 "
        "compiled kernel(s) uses shared memory)"
    )
    assert details["Executable"] == "/usr/local/cuda/bin/compute-sanitizer"
    assert "children" not in " ".join(details.values())  # the bookkeeping stays in the file
    clean = {**SANITIZER, "tools": {"memcheck": {**SANITIZER["tools"]["memcheck"], "failed": []}}}
    (line,) = environment_items({"sanitizer": clean})
    assert line.value == "memcheck on 2 operators · no memory error · 2.30 s"
    (missing,) = environment_items({"sanitizer": {"missing": "compute-sanitizer was not found"}})
    assert missing.value == "not run: compute-sanitizer was not found"
    (one,) = environment_items({"start_ahead": True})  # before harness 0.3.8: one ahead
    assert one.value == "the next operator's child"
    (off,) = environment_items({"start_ahead": False, "start_ahead_depth": 2})
    assert off.value == "no"


def test_imported_results_say_where_they_were_measured_and_that_nothing_was_uploaded(
    client, catalogue, user
):
    submission = _publish(user, catalogue, _report(catalogue))
    submission.notes = "Measured on an NVIDIA H200 <b>by hand</b>.\nSecond line."
    submission.save(update_fields=["notes"])
    html = _page(client, submission)
    notes = html.split('id="notes">', 1)[1].split("</p>", 1)[0]
    assert notes == "Measured on an NVIDIA H200 &lt;b&gt;by hand&lt;/b&gt;.<br>Second line."
    assert 'id="no-upload"' in html and "0\xa0bytes" not in html and "0 bytes" not in html


def test_the_score_leads_the_page(client, catalogue, user):
    html = _page(client, _publish(user, catalogue, _report(catalogue)))
    assert html.index('id="headline-score"') < html.index('id="status-box"')
    headline = re.search(r'id="headline-score">([^<]+)<', html).group(1)
    assert headline == re.search(r'id="aggregate">([^<]+)<', html).group(1)
    assert headline.startswith(("0.5", "50"))  # the aggregate, however it is written


def test_the_counts_come_from_the_rows_when_a_run_has_no_results_document(catalogue, user):
    submission = _publish(user, catalogue, _report(catalogue, statuses=ALL_INCORRECT))
    run = submission.runs.get()

    def summaries():
        tables = selectors.submission_result_tables(
            submission=submission,
            run=run,
            score=None,
            operator_results=list(run.operator_results.all()),
            shape_results=list(run.shape_results.all()),
            status_filter="",
        )
        return [(op.operator, op.verdict, op.counts) for op in tables.operators]

    from_document = summaries()
    run.results = None
    assert summaries() == from_document
    assert ("rms_norm", "incorrect") in [(op, verdict) for op, verdict, _ in from_document]


def test_a_traceback_is_summarised_by_its_exception(client, catalogue, user):
    report = _report(catalogue)
    shape = report["operators"][0]["shapes"][0]
    shape.update(
        status="runtime_error",
        error='Traceback (most recent call last):\n  File "k.py", line 3, in forward\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered\n",
    )
    html = _page(client, _publish(user, catalogue, report))
    row = _summary_row(html, report["operators"][0]["operator"])
    assert ">RuntimeError: CUDA error: an illegal memory access was encountered</code>" in row
