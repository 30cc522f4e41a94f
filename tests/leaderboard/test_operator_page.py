"""The operator page: what it computes, the reference source (highlighted), dtypes, shape
arguments with weights and W/Q, the correctness policy without hidden values, the best
result per shape and the score distribution, all consistent with the board."""

from __future__ import annotations

import ast
import html as html_lib
import json
import re

import pytest
from django.conf import settings
from django.urls import reverse

from catalogue.models import HardwareProfile, Shape
from evaluator import figures, reference_docs
from evaluator.figures import significant
from leaderboard import selectors
from submissions.models import EvaluationRun, ShapeResult
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db

CPU = {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"}


def _page(client, slug: str, params=CPU) -> str:
    response = client.get(reverse("leaderboard:operator", args=[slug]), params)
    assert response.status_code == 200
    return response.content.decode()


def _section(html: str, marker: str) -> str:
    return html.split(marker, 1)[1].split("</table>", 1)[0]


def _text(fragment: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.fixture
def rows(catalogue, user):
    """Two ranked rows (fast beats middle on silu_and_mul, middle wins rms_norm) and a
    baseline that beats both on silu_and_mul: it is not ranked, so never "best"."""
    fast = publish_row(
        owner=user,
        suite=catalogue,
        title="fast",
        fraction={"rms_norm": 0.2, "silu_and_mul": 0.9, "fused_add_rms_norm": 0.9},
    )
    middle = publish_row(
        owner=UserFactory(),  # another submitter: the board's default view shows both
        suite=catalogue,
        title="middle",
        fraction={"rms_norm": 0.8, "silu_and_mul": 0.3, "fused_add_rms_norm": 0.3},
    )
    base = publish_row(owner=user, suite=catalogue, title="eager", fraction=0.95, is_baseline=True)
    return {"fast": fast, "middle": middle, "base": base}


def test_without_ranked_submissions_the_page_never_names_a_best(client, catalogue, user):
    # Only a baseline: the old page named it "best by" and then said "No published
    # submission yet"; now both parts agree that nothing ranked exists.
    publish_row(owner=user, suite=catalogue, title="eager", fraction=0.5, is_baseline=True)
    html = _page(client, "rms_norm")
    shapes = _section(html, 'id="shape-table"')
    assert ">eager</a>" not in shapes and "no ranked submission yet" in shapes
    assert 'id="no-ranked"' in html and 'id="distribution-figure"' not in html
    assert 'id="baseline-table"' in html  # the baseline is shown, apart and unranked


def test_best_per_shape_is_the_best_ranked_result(client, catalogue, rows):
    html = _page(client, "silu_and_mul")
    shapes = _section(html, 'id="shape-table"')
    body = shapes.split("<tbody>", 1)[1]
    cells = re.findall(r"<tr><th scope=\"row\">([^<]+)</th>(.*?)</tr>", body, flags=re.S)
    expected = {
        shape.shape_id: max(
            (
                r
                for r in ShapeResult.objects.filter(
                    operator="silu_and_mul", shape_id=shape.shape_id, status="pass"
                )
                if not r.run.submission.is_baseline
            ),
            key=lambda r: r.roofline_fraction,
        )
        for shape in Shape.objects.filter(
            suite_version=catalogue, operator__slug="silu_and_mul", smoke=True
        )
    }
    assert {shape_id for shape_id, _ in cells} == set(expected)
    for shape_id, cell in cells:
        best = expected[shape_id]
        assert f">{best.run.submission.title}</a>" in cell and ">eager</a>" not in cell
        assert re.search(r"\b90(\.0)?%", _text(cell))  # % of roofline, not a bare fraction


def test_every_shape_shows_arguments_weight_and_work(client, catalogue):
    html = _page(client, "rms_norm", {"suite": catalogue.slug, "hardware": "h200-sxm"})
    shapes = _section(html, 'id="shape-table"').split("<tbody>", 1)[1]
    records = Shape.objects.filter(suite_version=catalogue, operator__slug="rms_norm", smoke=False)
    assert records.exists()
    rows = dict(re.findall(r"<tr><th scope=\"row\">([^<]+)</th>(.*?)</tr>", shapes, flags=re.S))
    assert set(rows) == {shape.shape_id for shape in records}
    for shape in records:
        text = _text(rows[shape.shape_id])
        for key, value in {**shape.init_kwargs, **shape.input_kwargs}.items():
            assert f"{key}={json.dumps(value)}" in text
        for dtype, flops in shape.w_flops.items():
            assert f"{dtype}: {figures.si(flops, 'FLOP')}" in text
        assert figures.si(shape.q_read, "B") in text and figures.si(shape.q_write, "B") in text
        assert significant(shape.weight) in text
    assert "W/Q (FLOP/byte)" in html and "Weight" in html


def test_source_documentation_dtypes_and_policy_are_shown(client, catalogue):
    html = _page(client, "rms_norm")
    source = reference_docs.reference_source("rms_norm")
    assert source is not None
    # What it computes: the module's documentation, not the suite's one-line provenance.
    description = _text(html.split('id="operator-description"', 1)[1].split("</div>", 1)[0])
    assert "RMSNorm over the last axis" in description and "Departures from upstream" in description
    # Reference and input generator, highlighted on the server (Pygments token classes).
    section = html.split('id="source-section"', 1)[1].split("</section>", 1)[0]
    assert 'id="source-model"' in section and 'id="source-inputs"' in section
    assert '<div class="source">' in section and '<span class="k">class</span>' in section
    assert "def forward" in _text(section) and "def make_inputs" in _text(section)
    assert "randn_bf16" in _text(section.split('id="source-helpers"', 1)[1])
    # Dtypes of inputs and outputs.
    inputs = _text(_section(html, 'id="input-dtypes"'))
    assert "x" in inputs and "weight" in inputs and "bfloat16" in inputs
    # The policy: this operator's tolerances in words, and the definition it comes from.
    policy = _text(html.split('id="policy-section"', 1)[1].split("</section>", 1)[0])
    assert "rtol = 2^-6" in policy and "atol = 0.001·max|reference|" in policy
    assert "secret seed (never published)" in policy and "BF16_POLICY" in policy
    assert "no hidden validation variants" in policy


def _hidden_variants() -> dict[str, list[str]]:
    """Operator -> the telling strings of its hidden validation variants (each name's literal
    text, the functions rewriting their inputs), read from ``_variants.py`` with ``ast`` (its
    import would load torch, seconds of this test)."""
    tree = ast.parse((reference_docs.OPERATORS_DIR / "_variants.py").read_text())
    tuples: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found = []
            for call in ast.walk(node.value):
                if not (
                    isinstance(call, ast.Call)
                    and getattr(call.func, "id", "") == "ValidationVariant"
                ):
                    continue
                for keyword in call.keywords:
                    if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                        found.append(keyword.value.value)
                    elif keyword.arg == "name" and isinstance(keyword.value, ast.JoinedStr):
                        first = keyword.value.values[0]
                        assert isinstance(first, ast.Constant)
                        found.append(first.value.strip())
                    elif keyword.arg == "adjust" and isinstance(keyword.value, ast.Name):
                        found.append(keyword.value.id)
            tuples[node.targets[0].id] = found
    registry = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "VARIANTS"
    )
    assert isinstance(registry, ast.Dict)
    return {
        key.value: tuples[value.id]
        for key, value in zip(registry.keys, registry.values, strict=True)
        if isinstance(key, ast.Constant) and isinstance(value, ast.Name)
    }


def test_no_secret_or_hidden_validation_value_is_printed(client, catalogue, rows):
    from catalogue.services import suite_version_import
    from evaluator.suite import load_suite

    VARIANTS = _hidden_variants()
    shown = ["fused_qkv_rope", "paged_attention_decode", "unified_attention"]

    secret_seed = 7_346_192_058_331_177
    EvaluationRun.objects.update(seed=secret_seed)
    # Operators with variants, in a suite of their own (v1 restricted: a quick import).
    v1 = suite_version_import(suite=load_suite("atrex-bench-v1").restrict(shown))
    v1.status = v1.Status.PUBLISHED
    v1.save(update_fields=["status"])
    secrets = [str(secret_seed), settings.SECRET_KEY]
    secrets += [
        value
        for value in settings.ATREX.values()
        if isinstance(value, str) and len(value) > 8 and "KEY" in str(value).upper()
    ]
    pages = {"rms_norm": _page(client, "rms_norm")}
    for slug in shown:
        pages[slug] = _page(client, slug, {"suite": v1.slug, "hardware": "cpu-dev"})
    for slug, page in pages.items():
        text = html_lib.unescape(page)
        for secret in secrets:
            assert secret not in text, f"{slug} shows a secret"
        for telling in VARIANTS.get(slug, ()):
            assert telling not in text, f"{slug} shows a hidden variant: {telling}"
        if slug in VARIANTS:
            assert "checked at hidden validation variants" in text
            assert "Their inputs are not published." in text


def test_distribution_agrees_with_the_board(client, catalogue, rows):
    html = _page(client, "rms_norm")
    table = _section(html, 'id="score-table"').split("<tbody>", 1)[1]
    listed = re.findall(
        r'<td class="num">(=?\d+)</td><th scope="row"><a href="[^"]+">([^<]+)</a></th>'
        r'<td class="num">([^<]+)</td>',
        table,
    )
    cpu = HardwareProfile.objects.get(slug="cpu-dev")
    expected = [
        (row.rank_label, row.score.submission.title)
        for row in selectors.board(suite=catalogue, hardware=cpu).rows
        if not row.baseline
    ]
    assert [(rank, title) for rank, title, _ in listed] == expected
    scores = {title: value for _, title, value in listed}
    assert {title: value.rstrip("%").removesuffix(".0") for title, value in scores.items()} == {
        "fast": "20",
        "middle": "80",
    }
    assert ">eager</a>" not in table  # baselines are listed apart, unranked
    figure = re.search(r'id="distribution-figure" type="application/json">(.*?)</script>', html)
    assert figure is not None
    points = json.loads(figure.group(1))["data"][0]
    assert points["x"] == pytest.approx([20.0, 80.0])
    assert [text.split(" ", 1)[0] for text in points["text"]] == ["#" + r for r, _ in expected]


def test_highlighted_source_is_built_once_per_harness_version(client, catalogue):
    from leaderboard.views import _reference_page

    _reference_page.cache_clear()
    _page(client, "rms_norm")
    _page(client, "rms_norm")
    info = _reference_page.cache_info()
    assert (info.misses, info.hits) == (1, 1)


def test_no_operator_reference_shows_a_hidden_variant():
    """Every text the page takes from the evaluator, for every operator with variants."""
    from leaderboard.views import _reference_page

    variants = _hidden_variants()
    assert len(variants) >= 5 and all(variants.values())
    for slug, telling in variants.items():
        page = _reference_page(slug, "test")
        assert page is not None
        texts = [*page["docstring"], page["checker_notes"], str(page["module"])]
        texts += [str(block["html"]) for key in ("helpers", "policy") for block in page[key]]
        texts += [str(page[key]["html"]) for key in ("reference", "inputs")]
        text = html_lib.unescape(re.sub(r"<[^>]+>", "", "\n".join(texts)))
        assert "def make_inputs" in text and "class Model" in text
        for item in telling:
            assert item not in text, f"{slug} shows a hidden variant: {item}"
        assert page["facts"]["validation_variants"] is True


def test_documentation_paragraphs_reflow_and_stay_escaped():
    from leaderboard.views import _doc_paragraph

    text = "``x`` is <b>bold</b>? **no**: a\nwrapped line\n* an item\n    indented"
    assert str(_doc_paragraph(text)) == (
        "<code>x</code> is &lt;b&gt;bold&lt;/b&gt;? <strong>no</strong>: a wrapped line"
        "<br>* an item<br>indented"
    )


def test_a_long_argument_is_abbreviated_with_its_whole_value_one_click_away():
    from leaderboard.views import _arguments

    plain, abbreviated = _arguments({"seq_lens": list(range(1, 301)), "block_size": 16})
    assert plain == {"text": "block_size=16", "full": None}
    assert abbreviated["text"] == "seq_lens=[1, 2, 3, …] (300 values, sum 45150)"
    assert abbreviated["full"] == "seq_lens=" + json.dumps(list(range(1, 301)))
