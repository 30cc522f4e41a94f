"""Writes for agent endpoints and campaigns.

A campaign is a submission of kind ``agent`` that stays ``received`` while the portal asks
the agent for kernels (the campaign has its own status); its kept kernels then become the
submission's bundle, which goes through the same validation, queue, evaluation (hidden
shapes and a fresh secret seed included) and scoring as any uploaded bundle.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from atrex_site.celery import app as celery_app
from catalogue import selectors as catalogue_selectors
from catalogue.models import HardwareProfile, SuiteVersion
from evaluator.errors import AtrexError, PlatformError, UserError
from submissions import services as submission_services
from submissions.models import StatusChange, Submission

from . import loop
from .models import AgentEndpoint, AllowedNetwork, Campaign, CampaignRound
from .protocol import AgentClient, AgentError, Limits
from .shared_secret import secret_decrypt, secret_encrypt, secret_generate
from .ssrf import IPNetwork, parse_networks, resolve_target

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

CAMPAIGN_TASK = "agents.run_campaign"
HEALTH_TIMEOUT_S = 10.0
SubmissionStatus = Submission.Status


def allowed_networks() -> list[IPNetwork]:
    """Networks an admin allowed (the admin's list, and the settings' list for deployments)."""
    entries = list(AllowedNetwork.objects.values_list("network", flat=True))
    entries += list(settings.ATREX.get("AGENT_ALLOWED_NETWORKS") or [])
    return parse_networks(entries)


def allowed_ports() -> tuple[int, ...]:
    return tuple(int(port) for port in settings.ATREX["AGENT_ALLOWED_PORTS"])


def url_check(*, url: str) -> None:
    """Refuse a URL the portal would not call (AgentURLError / UnsafeAddressError)."""
    resolve_target(url, allowed_networks=allowed_networks(), allowed_ports=allowed_ports())


def known_operators() -> list[str]:
    """Operator slugs of the published suite versions, in first-seen order."""
    slugs: dict[str, None] = {}
    for version in catalogue_selectors.suite_versions_published():
        for operator in version.definition.get("operators", []):
            slugs.setdefault(operator["slug"], None)
    return list(slugs)


@dataclass(frozen=True)
class EndpointFields:
    name: str
    url: str
    model_name: str = ""
    agent_version: str = ""
    dsl: str = "triton"
    rounds_per_operator: int = 4
    seconds_per_call: int = 120
    max_response_bytes: int = 256 * 1024
    operators: tuple[str, ...] = ()


def endpoint_register(*, owner: User, fields: EndpointFields) -> tuple[AgentEndpoint, str]:
    """Record an endpoint with a new shared secret; the secret is returned once, here."""
    url_check(url=fields.url)
    known = set(known_operators())
    unknown = [slug for slug in fields.operators if slug not in known]
    if unknown:
        raise UserError(
            f"Unknown operator(s): {', '.join(unknown)}. Known: {', '.join(sorted(known))}.",
            code="agent:unknown-operator",
        )
    secret = secret_generate()
    endpoint = AgentEndpoint.objects.create(
        owner=owner,
        name=fields.name.strip(),
        url=fields.url.strip(),
        secret_encrypted=secret_encrypt(secret),
        secret_hint=secret[-4:],
        model_name=fields.model_name.strip(),
        agent_version=fields.agent_version.strip(),
        dsl=fields.dsl.strip() or "triton",
        rounds_per_operator=fields.rounds_per_operator,
        seconds_per_call=fields.seconds_per_call,
        max_response_bytes=fields.max_response_bytes,
        operators=list(dict.fromkeys(fields.operators)),
    )
    return endpoint, secret


def endpoint_secret_rotate(*, endpoint: AgentEndpoint) -> str:
    """A new secret for the endpoint (the old one stops working at once); returned once."""
    secret = secret_generate()
    endpoint.secret_encrypted = secret_encrypt(secret)
    endpoint.secret_hint = secret[-4:]
    endpoint.save(update_fields=["secret_encrypted", "secret_hint"])
    return secret


def endpoint_client(
    *, endpoint: AgentEndpoint, plan: dict | None = None, health: bool = False
) -> AgentClient:
    plan = plan or {}
    seconds = float(plan.get("seconds_per_call", endpoint.seconds_per_call))
    return AgentClient(
        base_url=plan.get("url", endpoint.url),
        secret=secret_decrypt(endpoint.secret_encrypted),
        limits=Limits(
            seconds_per_call=min(seconds, HEALTH_TIMEOUT_S) if health else seconds,
            max_response_bytes=int(plan.get("max_response_bytes", endpoint.max_response_bytes)),
            retries=settings.ATREX["AGENT_RETRIES"],
            backoff_s=settings.ATREX["AGENT_BACKOFF_S"],
        ),
        allowed_networks=allowed_networks(),
        allowed_ports=allowed_ports(),
    )


def endpoint_check(*, endpoint: AgentEndpoint) -> tuple[bool, str]:
    """Call the agent's health route once; record and return (ok, what it said)."""
    try:
        data = endpoint_client(endpoint=endpoint, health=True).health()
    except AtrexError as error:
        ok, message = False, f"[{error.code}] {error.message}"
    else:
        ok = True
        described = " ".join(str(data.get(key) or "") for key in ("name", "version")).strip()
        message = f"The agent answered: ok{' (' + described + ')' if described else ''}."
    AgentEndpoint.objects.filter(pk=endpoint.pk).update(
        last_checked_at=timezone.now(), last_check_ok=ok, last_check_message=message
    )
    return ok, message


def _plan(endpoint: AgentEndpoint, suite_version: SuiteVersion) -> dict:
    suite_operators = [op["slug"] for op in suite_version.definition["operators"]]
    wanted = endpoint.operators or suite_operators
    operators = [slug for slug in suite_operators if slug in wanted]
    if not operators:
        raise UserError(
            f"None of the endpoint's operators ({', '.join(endpoint.operators)}) is in "
            f"{suite_version}; it holds: {', '.join(suite_operators)}.",
            code="agent:no-operators",
        )
    return {
        "url": endpoint.url,
        "operators": operators,
        "rounds_per_operator": endpoint.rounds_per_operator,
        "seconds_per_call": endpoint.seconds_per_call,
        "max_response_bytes": endpoint.max_response_bytes,
        "dsl": endpoint.dsl,
    }


def campaign_start(
    *,
    owner: User,
    endpoint: AgentEndpoint,
    title: str = "",
    visibility: str = Submission.Visibility.PUBLIC,
    suite_version: SuiteVersion | None = None,
    hardware: HardwareProfile | None = None,
) -> Submission:
    """A submission of kind agent and its campaign, sent to the hardware's queue on commit."""
    suite_version = suite_version or catalogue_selectors.suite_version_default()
    hardware = hardware or catalogue_selectors.hardware_default()
    if suite_version is None or hardware is None:
        raise PlatformError("No published suite or hardware profile: run `manage.py seed_suite`.")
    plan = _plan(endpoint, suite_version)
    with transaction.atomic():
        submission = Submission.objects.create(
            owner=owner,
            title=(title or f"{endpoint.name} (agent)").strip()[:200],
            kind=Submission.Kind.AGENT,
            visibility=visibility,
            suite_version=suite_version,
            hardware=hardware,
            dsl=endpoint.dsl,
            model_name=endpoint.model_name,
            agent_name=endpoint.name,
            agent_version=endpoint.agent_version,
        )
        StatusChange.objects.create(
            submission=submission,
            to_status=SubmissionStatus.RECEIVED,
            note=f"agent campaign: {len(plan['operators'])} operator(s), "
            f"up to {plan['rounds_per_operator']} round(s) each",
        )
        campaign = Campaign.objects.create(submission=submission, endpoint=endpoint, plan=plan)
        transaction.on_commit(lambda: campaign_dispatch(campaign=campaign))
    return submission


def campaign_dispatch(*, campaign: Campaign) -> None:
    """Send the campaign's id to its hardware's evaluation queue."""
    celery_app.send_task(
        CAMPAIGN_TASK, args=[campaign.pk], queue=campaign.submission.hardware.queue
    )


def _save_round(campaign: Campaign, record: loop.RoundRecord) -> None:
    usage = record.usage
    CampaignRound.objects.update_or_create(
        campaign=campaign,
        operator=record.operator,
        number=record.number,
        defaults={
            "status": record.status,
            "source": record.source,
            "notes": record.notes,
            "error_code": record.error_code,
            "error_message": record.error_message,
            "feedback": record.feedback,
            "score": record.score,
            "all_pass": record.all_pass,
            "attempts": record.attempts,
            "agent_s": record.agent_s,
            "eval_s": record.eval_s,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cost_usd": usage.cost_usd,
        },
    )
    Campaign.objects.filter(pk=campaign.pk).update(
        heartbeat_at=timezone.now(), rounds_used=campaign.rounds.count()
    )


def _spec(campaign: Campaign) -> loop.CampaignSpec:
    submission = campaign.submission
    hardware = submission.hardware
    device = settings.ATREX["WORKER_DEVICE"]
    return loop.CampaignSpec(
        key=str(campaign.key),
        operators=list(campaign.plan["operators"]),
        rounds=int(campaign.plan["rounds_per_operator"]),
        dsl=campaign.plan.get("dsl", ""),
        hardware={
            "slug": hardware.slug,
            "name": hardware.name,
            "peak_flops": hardware.peak_flops,
            "hbm_bytes_per_s": hardware.hbm_bytes_per_s,
        },
        suite_definition=submission.suite_version.definition,
        shape_set="smoke" if device == "cpu" else "full",
        seconds_per_call=float(campaign.plan["seconds_per_call"]),
        max_response_bytes=int(campaign.plan["max_response_bytes"]),
    )


def _heartbeat(campaign: Campaign) -> Callable[[dict | None], None]:
    """Record that this worker still runs the campaign (at most once per interval)."""
    interval = float(settings.ATREX["HEARTBEAT_INTERVAL_S"])
    last = [0.0]

    def beat(event: dict | None = None) -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.RUNNING).update(
                heartbeat_at=timezone.now()
            )

    return beat


def campaign_stale_after(campaign: Campaign) -> timedelta:
    """How long a running campaign may go without a heartbeat before its worker counts as
    lost: the site's stale limit, or longer than one agent call with all its retries (no
    heartbeat is written while the portal waits for the agent)."""
    attempts = settings.ATREX["AGENT_RETRIES"] + 1
    backoff = settings.ATREX["AGENT_BACKOFF_S"] * (2**attempts)
    call = float(campaign.plan.get("seconds_per_call", 0)) * attempts + backoff
    return timedelta(seconds=max(float(settings.ATREX["HEARTBEAT_STALE_S"]), call + 60.0))


def _evaluator(campaign: Campaign, spec: loop.CampaignSpec) -> loop.CampaignEvaluator:
    """The campaign's evaluator (its server kept warm across rounds; closed at the end)."""
    budget = settings.ATREX.get("TIME_BUDGET_S")
    return loop.evaluator_for(
        suite_definition=spec.suite_definition,
        hardware_slug=spec.hardware["slug"],
        device=settings.ATREX["WORKER_DEVICE"],
        shape_set=spec.shape_set,
        work_root=settings.ATREX["RUNS_DIR"] / f"campaign-{campaign.pk}",
        timeout_s=settings.ATREX["EVALUATION_TIMEOUT_S"],
        python=settings.ATREX["EVALUATOR_PYTHON"],
        extra_args=["--time-budget-s", str(budget)] if budget else [],
        on_progress=_heartbeat(campaign),
    )


def _records(campaign: Campaign, operator: str) -> list[loop.RoundRecord]:
    return [
        loop.RoundRecord(
            operator=row.operator,
            number=row.number,
            status=row.status,
            source=row.source,
            feedback=row.feedback,
            score=row.score,
            all_pass=row.all_pass,
            error_code=row.error_code,
        )
        for row in campaign.rounds.filter(operator=operator).order_by("number")
    ]


def _take(campaign: Campaign) -> bool:
    """Start a queued campaign, or take over a running one whose worker was lost (its
    message came back and no heartbeat came for ``campaign_stale_after``). Compare-and-set:
    one worker only."""
    now = timezone.now()
    if Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.QUEUED).update(
        status=Campaign.Status.RUNNING, started_at=now, heartbeat_at=now
    ):
        return True
    if campaign.status != Campaign.Status.RUNNING:
        return False
    if campaign.heartbeat_at and campaign.heartbeat_at >= now - campaign_stale_after(campaign):
        return False
    taken = Campaign.objects.filter(
        pk=campaign.pk, status=Campaign.Status.RUNNING, heartbeat_at=campaign.heartbeat_at
    ).update(heartbeat_at=now)
    if taken:
        logger.warning("campaign %s lost its worker: taken over, stored rounds kept", campaign.pk)
    return bool(taken)


def _resume_point(campaign: Campaign, operator: str) -> tuple[int, dict | None] | None:
    """Where an operator's line continues (first round, feedback), None when it is done."""
    last = campaign.rounds.filter(operator=operator).order_by("-number").first()
    if last is None:
        return 1, None
    if last.number >= int(campaign.plan["rounds_per_operator"]):
        return None
    if last.status == CampaignRound.Status.EVALUATED:
        return last.number + 1, last.feedback
    if last.error_code in loop.FATAL_CODES:
        return None
    error = f"[{last.error_code}] {last.error_message}"
    return last.number + 1, {"status": "rejected", "error": error, "score": 0.0, "shapes": []}


def campaign_execute(*, campaign_id: int) -> Campaign | None:
    """Run a queued campaign's rounds, then submit its kept kernels as the bundle.

    Idempotent: a campaign that is neither queued nor abandoned by a lost worker is left
    alone. Rounds are stored as they end, so a campaign taken over after a lost worker
    continues where it stopped (a round asked again carries the same idempotency key).
    """
    campaign = (
        Campaign.objects.select_related(
            "endpoint", "submission", "submission__suite_version", "submission__hardware"
        )
        .filter(pk=campaign_id)
        .first()
    )
    if campaign is None:
        logger.warning("campaign %s does not exist: message dropped", campaign_id)
        return None
    if not _take(campaign):
        logger.info("campaign %s is %s and held: nothing to do", campaign.pk, campaign.status)
        return campaign
    campaign.refresh_from_db()
    # The evaluator server does not outlive the rounds, whatever ends them.
    stack = contextlib.ExitStack()
    try:
        spec = _spec(campaign)
        client = endpoint_client(endpoint=campaign.endpoint, plan=campaign.plan)
        evaluate = stack.enter_context(_evaluator(campaign, spec))
        kept: dict[str, loop.RoundRecord] = {}
        for operator in spec.operators:
            resume = _resume_point(campaign, operator)
            if resume is not None:
                loop.run_operator(
                    spec,
                    operator=operator,
                    client=client,
                    evaluate=evaluate,
                    on_round=lambda record: _save_round(campaign, record),
                    first_round=resume[0],
                    feedback=resume[1],
                )
            best = loop.best_round(_records(campaign, operator))
            if best is not None:
                kept[operator] = best
                campaign.rounds.filter(operator=operator, number=best.number).update(kept=True)
    except Exception as exc:  # noqa: BLE001 - the campaign must end with a reason, whatever broke
        logger.exception("campaign %s failed on the platform side", campaign.pk)
        error = (
            exc
            if isinstance(exc, PlatformError)
            else PlatformError(f"{type(exc).__name__}: {exc}", code="platform:campaign-error")
        )
        _campaign_end(campaign, failure=error)
        return campaign
    finally:
        stack.close()
    if not kept:
        _campaign_end(campaign, failure=_no_kernel_error(campaign))
        return campaign
    _campaign_end(campaign)
    _submit_kept(campaign, kept)
    return campaign


def _no_kernel_error(campaign: Campaign) -> UserError:
    lines = []
    for operator in campaign.plan["operators"]:
        last = campaign.rounds.filter(operator=operator).order_by("-number").first()
        if last is None:
            lines.append(f"{operator}: no round ran.")
        elif last.status == CampaignRound.Status.AGENT_ERROR:
            lines.append(
                f"{operator}: round {last.number} [{last.error_code}] {last.error_message}"
            )
        else:
            statuses = sorted({s.get("status") for s in last.feedback.get("shapes") or []} - {None})
            lines.append(
                f"{operator}: no round passed every public shape without fallback "
                f"(last round {last.number}: {', '.join(statuses) or last.feedback.get('status')})."
            )
    return AgentError(
        "The agent produced no correct, non-fallback kernel, so there is nothing to rank.\n"
        + "\n".join(lines),
        code="agent:no-kernel",
    )


def _campaign_end(campaign: Campaign, *, failure: AtrexError | None = None) -> None:
    totals = campaign.rounds.aggregate(
        input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), cost=Sum("cost_usd")
    )
    cost = Decimal(str(round(totals["cost"], 4))) if totals["cost"] is not None else None
    finished = timezone.now()
    Campaign.objects.filter(pk=campaign.pk).update(
        status=Campaign.Status.FAILED if failure else Campaign.Status.FINISHED,
        finished_at=finished,
        wall_s=(finished - (campaign.started_at or finished)).total_seconds(),
        rounds_used=campaign.rounds.count(),
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        cost_usd=cost,
        error_code=failure.code if failure else "",
        error_message=failure.message if failure else "",
    )
    campaign.refresh_from_db()
    submission = campaign.submission
    if cost is not None:
        Submission.objects.filter(pk=submission.pk).update(cost_usd=round(cost, 2))
    if failure is None:
        return
    # received -> validating -> rejected (the agent's doing) or failed (the platform's).
    submission_services.submission_transition(
        submission=submission,
        from_status=SubmissionStatus.RECEIVED,
        to_status=SubmissionStatus.VALIDATING,
        note="agent campaign ended",
    )
    submission_services.submission_transition(
        submission=submission,
        from_status=SubmissionStatus.VALIDATING,
        to_status=(
            SubmissionStatus.FAILED
            if isinstance(failure, PlatformError)
            else SubmissionStatus.REJECTED
        ),
        error=failure,
        note=failure.code,
    )


def _submit_kept(campaign: Campaign, kept: dict[str, loop.RoundRecord]) -> None:
    """The kept kernels as a zip on the submission; then the ordinary validate-and-queue."""
    submission = campaign.submission
    endpoint = campaign.endpoint
    rounds = ", ".join(f"{op} round {record.number}" for op, record in sorted(kept.items()))
    archive = loop.bundle_zip(
        {operator: record.source for operator, record in kept.items()},
        {
            "title": submission.title,
            "dsl": submission.dsl,
            "model": submission.model_name,
            "agent": endpoint.name,
            "notes": f"Kept by the portal from agent campaign {campaign.key}: {rounds}.",
        },
    )
    name = f"agent-campaign-{campaign.pk}.zip"
    submission.upload.save(name, ContentFile(archive, name=name), save=False)
    submission.upload_name = name
    submission.upload_size = len(archive)
    submission.upload_sha256 = hashlib.sha256(archive).hexdigest()
    submission.save(update_fields=["upload", "upload_name", "upload_size", "upload_sha256"])
    submission_services.submission_validate(submission=submission)
