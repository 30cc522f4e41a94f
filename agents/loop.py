"""The measure-revise loop of one agent campaign, with no Django in it.

For each operator: round 1 sends the task (operator, interface, reference source, public
shapes, hardware, DSL, budget left); the agent answers with kernel source; the source is
evaluated on the public shapes only, without the compute-sanitizer pass, with fewer
correctness trials and a lighter timing rule (``ROUND_OPTIONS``: a round's figures are
feedback, never published), the eager baseline timed once per shape for the campaign
(``campaign_timings_options``), by the campaign's evaluator server (``python -m evaluator
serve``) or a ``python -m evaluator run`` per round, through ``submissions.evaluation``; the
figures go back with the next round. The best correct, non-fallback kernel per operator
is kept. The site's campaign service and the GPU driver
(``examples/agents/tile_search/campaign.py``) both run this.

Hidden shapes, seeds and reference outputs never reach the agent: the task lists public
shapes only, the evaluator runs with a fresh secret seed each round, and the feedback
carries statuses, errors and timings, never tensors.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.errors import UserError
from submissions.evaluation import EvaluatorJob, EvaluatorSession, run_evaluator

from .protocol import PROTOCOL, AgentClient, AgentError, KernelAnswer, Usage

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "evaluator" / "operators"
# An answer that breaks the protocol this way ends the operator's line: asking again
# cannot help (the agent is down, refuses us, or sits somewhere the portal will not call).
FATAL_CODES = frozenset(
    {
        "agent:timeout",
        "agent:unreachable",
        "agent:http-5xx",
        "agent:http-4xx",
        "agent:redirect",
        "agent:unsafe-address",
        "agent:bad-url",
    }
)
SHAPE_FEEDBACK_FIELDS = (
    "shape_id",
    "status",
    "error",
    "time_ms",
    "roofline_fraction",
    "own_kernel_share",
    "speedup",
)


@dataclass(frozen=True)
class CampaignSpec:
    """What a campaign asks for: the same for every operator of it."""

    key: str
    operators: list[str]
    rounds: int
    dsl: str
    hardware: dict[str, Any]
    suite_definition: dict[str, Any]
    shape_set: str
    seconds_per_call: float
    max_response_bytes: int


@dataclass
class RoundRecord:
    """One round of one operator: what the agent answered and what it measured."""

    operator: str
    number: int
    status: str  # "evaluated" or "agent_error"
    source: str = ""
    notes: str = ""
    error_code: str = ""
    error_message: str = ""
    feedback: dict[str, Any] = field(default_factory=dict)
    score: float | None = None
    all_pass: bool = False
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    agent_s: float = 0.0
    eval_s: float = 0.0
    kept: bool = False

    @property
    def eligible(self) -> bool:
        """Correct and no fallback on every public shape: may be kept."""
        return self.status == "evaluated" and self.all_pass


Evaluate = Callable[[str, str, int], dict[str, Any]]
ROUND_OPTIONS = (
    "--visibility", "public",
    "--sanitizer-tools", "none",
    "--trials", "2",
    "--min-reps", "5",
    "--target-rel-se", "0.01",
)  # fmt: skip
"""The evaluator options of every round, the round measurement policy in one place:
public shapes only; no compute-sanitizer pass (a verdict check of the kept kernels' full
evaluation, which runs it; on a GPU it would add two sanitized children's start-up, about
10 s, to each round; docs/decisions.md); 2 correctness trials per shape instead of the
operator's count (3 for most), and at least 5 timed calls until the median's standard
error is under 1 % of it, instead of 10 and 0.5 %. A round's figures steer the agent's next
revision; the kept kernels are evaluated again on the whole suite with the full policy,
and only that evaluation is published. The results say so (``environment.measurement``,
kind ``round``, ``evaluator.measurement_policy``), the feedback too (``measurement``), and
the board refuses a result of that kind."""
ROUND_MEASUREMENT_NOTE = (
    "Round figures: measured with fewer correctness trials and a lighter timing rule than a "
    "full evaluation, to turn rounds quickly. The kept kernel is evaluated again on the whole "
    "suite, hidden shapes included, with the full policy; only that is published."
)


def campaign_timings_options(work_root: Path) -> list[str]:
    """The evaluator options of the campaign's eager reference timings: a cache of the
    campaign's own (``--reference-timings``, under its working folder, hidden from every
    child), so that its rounds time the eager baseline once per shape and reuse the
    figure (never timed again at random: a campaign's rounds are minutes apart). The
    cache's key holds the timing rule, so a round's figures never serve a full
    evaluation."""
    return [
        "--reference-timings", str(Path(work_root).resolve() / "reference-timings"),
        "--reference-timings-refresh", "0",
    ]  # fmt: skip


def public_shapes(suite_definition: dict[str, Any], operator: str, shape_set: str) -> list[dict]:
    """The public shapes of ``operator`` in ``shape_set``, as an agent sees them."""
    smoke = shape_set == "smoke"
    return [
        {
            "shape_id": str(shape["shape_id"]),
            "init_kwargs": shape.get("init_kwargs") or {},
            "input_kwargs": shape["input_kwargs"],
            "weight": shape.get("weight", 1.0),
            "w_flops": shape.get("w_flops") or {},
            "q_read": shape.get("q_read"),
            "q_write": shape.get("q_write"),
        }
        for shape in suite_definition["shapes"]
        if shape["operator"] == operator
        and shape.get("visibility", "public") == "public"
        and bool(shape.get("smoke", False)) == smoke
    ]


def reference_source(suite_definition: dict[str, Any], operator: str) -> str:
    """The reference's source text (read, never imported: the site does not import torch)."""
    uploaded = (suite_definition.get("operator_sources") or {}).get(operator)
    if uploaded and uploaded.get("reference.py"):
        return str(uploaded["reference.py"])
    path = REFERENCE_DIR / f"{operator}.py"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    return ""


def interface(operator: str, shapes: list[dict]) -> dict[str, Any]:
    """What the answer must define, in words and names."""
    init_names = sorted({name for shape in shapes for name in shape["init_kwargs"]})
    input_names = sorted({name for shape in shapes for name in shape["input_kwargs"]})
    return {
        "file": f"{operator}.py",
        "class": "Model",
        "init_kwargs": init_names,
        "input_kwargs": input_names,
        "contract": (
            f"One Python module ({operator}.py) defining class Model(torch.nn.Module) with the "
            "reference's __init__ and forward signatures and return structure. The evaluator "
            "builds Model(**init_kwargs) and calls forward(**inputs) with the tensors the "
            "reference's make_inputs(**input_kwargs) draws. Time spent in PyTorch's own "
            "kernels instead of yours counts as a fallback and scores 0."
        ),
    }


def task_payload(
    spec: CampaignSpec,
    *,
    operator: str,
    number: int,
    shapes: list[dict],
    reference: str,
    feedback: dict[str, Any] | None,
) -> dict[str, Any]:
    """The body of one ``POST /kernel`` (schema ``KernelTask`` in docs/agent-protocol.yaml)."""
    return {
        "protocol": PROTOCOL,
        "campaign": spec.key,
        "operator": operator,
        "round": number,
        "dsl": spec.dsl,
        "budget": {
            "rounds_total": spec.rounds,
            "rounds_left": spec.rounds - number + 1,
            "seconds_per_call": spec.seconds_per_call,
            "response_bytes": spec.max_response_bytes,
        },
        "hardware": spec.hardware,
        "interface": interface(operator, shapes),
        "reference_source": reference,
        "public_shapes": shapes,
        "feedback": feedback,
    }


def feedback_from_results(results: dict[str, Any], operator: str) -> dict[str, Any]:
    """Figures of one evaluated round, as the agent gets them with the next round."""
    error = results.get("error")
    if error:
        return {"status": "rejected", "error": error.get("message", ""), "score": 0.0, "shapes": []}
    entry = next(
        (op for op in results.get("operators") or [] if op.get("operator") == operator), None
    )
    if entry is None:
        return {"status": "missing", "error": "No result for the operator.", "score": 0.0}
    return {
        "status": entry.get("status", ""),
        "error": entry.get("error") or "",
        "score": entry.get("score", 0.0),
        "shapes": [
            {name: shape.get(name) for name in SHAPE_FEEDBACK_FIELDS}
            for shape in entry.get("shapes") or []
        ],
        "measurement": measurement_feedback(results),
    }


def measurement_feedback(results: dict[str, Any]) -> dict[str, Any]:
    """The policy the round was measured with (``environment.measurement`` of its
    results: kind, trials, timing rule), and what that means for its figures."""
    measured = dict((results.get("environment") or {}).get("measurement") or {})
    kind = str(measured.get("kind") or "unknown")
    return {
        "kind": kind,
        "trials": measured.get("trials"),
        "min_reps": measured.get("min_reps"),
        "target_rel_se": measured.get("target_rel_se"),
        "note": ROUND_MEASUREMENT_NOTE if kind == "round" else "",
    }


def _all_pass(feedback: dict[str, Any]) -> bool:
    shapes = feedback.get("shapes") or []
    return bool(shapes) and all(shape.get("status") == "pass" for shape in shapes)


def run_operator(
    spec: CampaignSpec,
    *,
    operator: str,
    client: AgentClient,
    evaluate: Evaluate,
    on_round: Callable[[RoundRecord], None] = lambda record: None,
    first_round: int = 1,
    feedback: dict[str, Any] | None = None,
) -> list[RoundRecord]:
    """Run the rounds of one operator; every record (the kept one marked) in order.

    ``first_round`` and ``feedback`` resume a line that a worker lost mid-way.
    """
    shapes = public_shapes(spec.suite_definition, operator, spec.shape_set)
    reference = reference_source(spec.suite_definition, operator)
    records: list[RoundRecord] = []
    for number in range(first_round, spec.rounds + 1):
        task = task_payload(
            spec,
            operator=operator,
            number=number,
            shapes=shapes,
            reference=reference,
            feedback=feedback,
        )
        started = time.monotonic()
        try:
            answer: KernelAnswer = client.request_kernel(
                task=task, idempotency_key=f"{spec.key}:{operator}:{number}"
            )
        except (AgentError, UserError) as error:
            record = RoundRecord(
                operator=operator,
                number=number,
                status="agent_error",
                error_code=error.code,
                error_message=error.message,
                agent_s=time.monotonic() - started,
            )
            records.append(record)
            on_round(record)
            if error.code in FATAL_CODES:
                break
            feedback = {
                "status": "rejected",
                "error": f"[{error.code}] {error.message}",
                "score": 0.0,
                "shapes": [],
            }
            continue
        agent_s = time.monotonic() - started
        started = time.monotonic()
        results = evaluate(operator, answer.source, number)
        feedback = feedback_from_results(results, operator)
        record = RoundRecord(
            operator=operator,
            number=number,
            status="evaluated",
            source=answer.source,
            notes=answer.notes,
            feedback=feedback,
            score=float(feedback.get("score") or 0.0),
            all_pass=_all_pass(feedback),
            usage=answer.usage,
            attempts=answer.attempts,
            agent_s=agent_s,
            eval_s=time.monotonic() - started,
        )
        records.append(record)
        on_round(record)
    return records


def best_round(records: list[RoundRecord]) -> RoundRecord | None:
    """The kept round: the highest score among eligible rounds, the earliest on a tie."""
    best = None
    for record in records:
        if record.eligible and (best is None or (record.score or 0.0) > (best.score or 0.0)):
            best = record
    return best


class CampaignEvaluator:
    """The ``Evaluate`` of one campaign: ``evaluator(operator, source, number)`` runs one
    round's source on the operator's public shapes, in its own folder under ``work_root``,
    and returns the results document. Warm (the default), every round goes to one
    evaluator server kept for the campaign (``submissions.evaluation.EvaluatorSession``,
    ``evaluator.serve``: the runner and the next round's sandboxed child start ahead, each
    round still in a fresh child); cold, each round starts ``python -m evaluator run``.
    ``close`` (or ``with``) stops the server: the campaign's owner closes it at its end."""

    def __init__(
        self,
        *,
        suite_definition: dict[str, Any],
        hardware_slug: str,
        device: str,
        shape_set: str,
        work_root: Path,
        timeout_s: float,
        python: str = "",
        extra_args: list[str] | None = None,
        sandbox_args: list[str] | None = None,
        on_progress: Callable[[dict], None] | None = None,
        warm: bool = True,
    ) -> None:
        self.suite_definition = suite_definition
        self.hardware_slug = hardware_slug
        self.device = device
        self.work_root = Path(work_root)
        self.timeout_s = timeout_s
        self.python = python
        self.sandbox_args = sandbox_args
        self.on_progress = on_progress
        self.round_args = [
            *ROUND_OPTIONS,
            *campaign_timings_options(self.work_root),
            "--shapes",
            shape_set,
            *(extra_args or []),
        ]
        self.session = (
            EvaluatorSession(
                suite_definition=suite_definition,
                hardware_slug=hardware_slug,
                device=device,
                work_dir=self.work_root / "evaluator-server",
                python=python,
                sandbox_args=sandbox_args,
                extra_args=self.round_args,
            )
            if warm
            else None
        )

    def __call__(self, operator: str, source: str, number: int) -> dict[str, Any]:
        folder = self.work_root / operator / f"round-{number}"
        bundle = folder / "bundle"
        bundle.mkdir(parents=True, exist_ok=True)
        (bundle / f"{operator}.py").write_text(source, encoding="utf-8")
        job = EvaluatorJob(
            bundle_path=bundle,
            suite_definition=self.suite_definition,
            hardware_slug=self.hardware_slug,
            device=self.device,
            work_dir=folder / "work",
            timeout_s=self.timeout_s,
            python=self.python,
            sandbox_args=self.sandbox_args,
            extra_args=["--operators", operator, *self.round_args],
        )
        if self.session is not None:
            outcome = self.session.run(job, operators=[operator], on_progress=self.on_progress)
        else:
            outcome = run_evaluator(job, on_progress=self.on_progress)
        return outcome.results or {}

    def close(self) -> None:
        """Stop the campaign's evaluator server, if one runs."""
        if self.session is not None:
            self.session.close()

    def __enter__(self) -> CampaignEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


evaluator_for = CampaignEvaluator
"""The campaign's ``Evaluate`` (close it at the campaign's end): each round's source through
the evaluator on the operator's public shapes, in its own folder under ``work_root``.
``sandbox_args`` None uses the site's sandbox options (Django settings); a caller without
Django passes its own (``[]``: the evaluator's defaults). ``on_progress`` gets the
evaluator's progress events and a heartbeat at each poll. ``warm`` False starts ``python -m
evaluator run`` each round."""


def toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML)."""
    return json.dumps(str(text), ensure_ascii=True)


def bundle_zip(kept: dict[str, str], metadata: dict[str, str]) -> bytes:
    """The kept kernels as a bundle: ``<operator>.py`` each, and an ``atrex.toml``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for operator, source in sorted(kept.items()):
            archive.writestr(f"{operator}.py", source)
        lines = [f"{key} = {toml_string(value)}" for key, value in metadata.items() if value]
        archive.writestr("atrex.toml", "\n".join(lines) + "\n")
    return buffer.getvalue()
