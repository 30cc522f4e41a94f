"""The platform side of the agent protocol (``docs/agent-protocol.yaml``): signed requests,
bounded in time and bytes, retried with back-off, and the checks on each answer.

No Django here: the campaign driver for a GPU node (``examples/agents/tile_search``) uses
this module as it is. Each way an agent can misbehave raises an ``AgentError`` with a
stable code and a message the submission page shows as it is.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import math
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from evaluator.errors import UserError

from .ssrf import DEFAULT_PORTS, IPNetwork, pinned_connection, resolve_target

PROTOCOL = "atrex-agent/1"
TIMESTAMP_HEADER = "X-Atrex-Timestamp"
SIGNATURE_HEADER = "X-Atrex-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAY_WINDOW_S = 300
HEALTH_ROUTE = "health"
KERNEL_ROUTE = "kernel"
MAX_NOTES_CHARS = 4000


class AgentError(UserError):
    """The agent did not answer as the protocol asks (codes ``agent:*``)."""

    code = "agent:error"
    retryable = False


class AgentTimeout(AgentError):
    code = "agent:timeout"
    retryable = True


class AgentUnreachable(AgentError):
    code = "agent:unreachable"
    retryable = True


class AgentServerError(AgentError):
    code = "agent:http-5xx"
    retryable = True


class AgentClientError(AgentError):
    code = "agent:http-4xx"


class AgentRedirect(AgentError):
    code = "agent:redirect"


class AgentMalformed(AgentError):
    code = "agent:malformed-json"


class AgentTooLarge(AgentError):
    code = "agent:too-large"


class AgentWrongOperator(AgentError):
    code = "agent:wrong-operator"


class AgentEmptySource(AgentError):
    code = "agent:empty-source"


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """``v1=`` + hex HMAC-SHA256 of ``timestamp + "." + body`` under the shared secret."""
    mac = hmac.new(secret, timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def signature_valid(
    secret: bytes,
    *,
    timestamp: str,
    body: bytes,
    signature_header: str,
    now: float | None = None,
    window_s: float = REPLAY_WINDOW_S,
) -> bool:
    """What an agent checks: the signature matches and the timestamp is within the window."""
    try:
        sent = int(timestamp)
    except (TypeError, ValueError):
        return False
    current = time.time() if now is None else now
    if abs(current - sent) > window_s:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), signature_header or "")


@dataclass(frozen=True)
class Limits:
    """An endpoint's budgets for one call: seconds (connect to last byte), answer bytes."""

    seconds_per_call: float
    max_response_bytes: int
    retries: int = 2
    backoff_s: float = 1.0
    backoff_factor: float = 2.0


@dataclass(frozen=True)
class Usage:
    """What the agent reports it spent on one answer (all optional)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class KernelAnswer:
    """One accepted answer: the kernel source for the operator asked about."""

    operator: str
    source: str
    notes: str = ""
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    seconds: float = 0.0


@dataclass
class _Response:
    status: int
    body: bytes
    location: str = ""


class AgentClient:
    """Calls one agent endpoint. Each call: a fresh check and pin of the address, a fresh
    timestamp and signature, the same idempotency key on every retry."""

    def __init__(
        self,
        *,
        base_url: str,
        secret: bytes,
        limits: Limits,
        allowed_networks: Iterable[IPNetwork] = (),
        allowed_ports: Iterable[int] = DEFAULT_PORTS,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url
        self.secret = secret
        self.limits = limits
        self.allowed_networks = list(allowed_networks)
        self.allowed_ports = tuple(allowed_ports)
        self.clock = clock
        self.sleep = sleep

    def health(self) -> dict[str, Any]:
        """``GET <url>/health``: the agent's name and version; AgentError when it is not well."""
        response, _, _ = self._call("GET", HEALTH_ROUTE, b"", idempotency_key=None, retries=0)
        data = _json_object(response.body, what="health answer")
        if data.get("status") != "ok":
            raise AgentMalformed(
                f'The health route answered {data.get("status")!r}; it must answer "ok".'
            )
        return data

    def request_kernel(self, *, task: dict[str, Any], idempotency_key: str) -> KernelAnswer:
        """``POST <url>/kernel`` with one round's task; the checked answer."""
        body = json.dumps(task, sort_keys=True, separators=(",", ":")).encode("utf-8")
        response, attempts, seconds = self._call(
            "POST", KERNEL_ROUTE, body, idempotency_key=idempotency_key
        )
        answer = parse_kernel_answer(response.body, operator=task["operator"])
        return KernelAnswer(
            operator=answer.operator,
            source=answer.source,
            notes=answer.notes,
            usage=answer.usage,
            attempts=attempts,
            seconds=seconds,
        )

    def _call(
        self,
        method: str,
        route: str,
        body: bytes,
        *,
        idempotency_key: str | None,
        retries: int | None = None,
    ) -> tuple[_Response, int, float]:
        retries = self.limits.retries if retries is None else retries
        started = time.monotonic()
        delay = self.limits.backoff_s
        last: AgentError | None = None
        for attempt in range(1, retries + 2):
            try:
                response = self._send_once(method, route, body, idempotency_key)
            except AgentError as error:
                if not error.retryable:
                    raise
                last = error
            else:
                if 200 <= response.status < 300:
                    return response, attempt, time.monotonic() - started
                last = _status_error(response, self.limits.max_response_bytes)
                if not last.retryable:
                    raise last
            if attempt <= retries:
                self.sleep(delay)
                delay *= self.limits.backoff_factor
        assert last is not None
        if retries:
            last.message += f" (after {retries + 1} attempts)"
            last.args = (last.message,)
        raise last

    def _send_once(
        self, method: str, route: str, body: bytes, idempotency_key: str | None
    ) -> _Response:
        target = resolve_target(
            self.base_url,
            allowed_networks=self.allowed_networks,
            allowed_ports=self.allowed_ports,
        )
        timestamp = str(int(self.clock()))
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"atrex-portal ({PROTOCOL})",
            "X-Atrex-Protocol": PROTOCOL,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: signature(self.secret, timestamp, body),
            "Connection": "close",
        }
        if idempotency_key:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        budget = float(self.limits.seconds_per_call)
        deadline = time.monotonic() + budget
        connection = pinned_connection(target, timeout=budget)
        try:
            connection.request(method, target.path(route), body=body or None, headers=headers)
            raw = connection.getresponse()
            declared = raw.getheader("Content-Length")
            cap = self.limits.max_response_bytes
            if declared and declared.isdigit() and int(declared) > cap:
                raise AgentTooLarge(
                    f"The agent's answer is {int(declared):,} bytes; the endpoint's limit is "
                    f"{cap:,} bytes."
                )
            data = _read_capped(raw, cap=cap, deadline=deadline, budget=budget)
            return _Response(raw.status, data, raw.getheader("Location") or "")
        except TimeoutError as exc:
            raise AgentTimeout(
                f"The agent did not answer within {budget:g} s (the endpoint's limit per call)."
            ) from exc
        except ssl.SSLError as exc:
            raise AgentUnreachable(f"TLS with the agent failed: {exc}.") from exc
        except (ConnectionError, OSError, EOFError) as exc:
            raise AgentUnreachable(
                f"The agent at {target.url(route)} could not be reached: {exc}."
            ) from exc
        except http.client.HTTPException as exc:
            raise AgentMalformed(f"The agent's answer is not valid HTTP: {exc!r}.") from exc
        finally:
            connection.close()


def _read_capped(raw: Any, *, cap: int, deadline: float, budget: float) -> bytes:
    """Read at most ``cap`` bytes before the deadline (a slow drip of bytes is a timeout)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise AgentTimeout(
                f"The agent did not finish its answer within {budget:g} s (the endpoint's "
                "limit per call)."
            )
        chunk = raw.read1(64 * 1024) if hasattr(raw, "read1") else raw.read(64 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > cap:
            raise AgentTooLarge(
                f"The agent's answer is over the endpoint's limit of {cap:,} bytes."
            )
        chunks.append(chunk)


def _status_error(response: _Response, cap: int) -> AgentError:
    excerpt = response.body[:300].decode("utf-8", errors="replace").strip()
    detail = f": {excerpt}" if excerpt else ""
    if 300 <= response.status < 400:
        return AgentRedirect(
            f"The agent answered HTTP {response.status} (a redirect"
            f"{' to ' + response.location if response.location else ''}); the portal does not "
            "follow redirects. Register the final URL."
        )
    if response.status >= 500:
        return AgentServerError(f"The agent answered HTTP {response.status}{detail}")
    return AgentClientError(
        f"The agent refused the request with HTTP {response.status}{detail}"
        + (
            " (check the shared secret and the agent's clock)"
            if response.status in (401, 403)
            else ""
        )
    )


def _json_object(body: bytes, *, what: str) -> dict[str, Any]:
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        excerpt = body[:120].decode("utf-8", errors="replace")
        raise AgentMalformed(
            f"The agent's {what} is not valid JSON ({exc}); it began with {excerpt!r}."
        ) from exc
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise AgentMalformed(f"The agent's {what} must be a JSON object, not {kind}.")
    return data


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AgentMalformed(f"usage.{name} must be a whole number >= 0, not {value!r}.")
    return value


def parse_kernel_answer(body: bytes, *, operator: str) -> KernelAnswer:
    """Check one answer: a JSON object for ``operator`` with a non-empty ``source``."""
    data = _json_object(body, what="answer")
    answered = data.get("operator")
    if answered != operator:
        raise AgentWrongOperator(
            f"The agent answered for operator {answered!r}; the portal asked for {operator!r}."
        )
    source = data.get("source")
    if not isinstance(source, str):
        raise AgentEmptySource(
            f'The agent\'s answer has no kernel source ("source" is {type(source).__name__}).'
        )
    if not source.strip():
        raise AgentEmptySource("The agent's answer has an empty kernel source.")
    usage_data = data.get("usage") or {}
    if not isinstance(usage_data, dict):
        raise AgentMalformed('"usage" must be an object.')
    cost = usage_data.get("cost_usd")
    if cost is not None and (
        isinstance(cost, bool)
        or not isinstance(cost, int | float)
        or not math.isfinite(cost)
        or cost < 0
    ):
        raise AgentMalformed(f"usage.cost_usd must be a number >= 0, not {cost!r}.")
    notes = data.get("notes") or ""
    return KernelAnswer(
        operator=operator,
        source=source,
        notes=str(notes)[:MAX_NOTES_CHARS],
        usage=Usage(
            input_tokens=_count(usage_data.get("input_tokens"), "input_tokens"),
            output_tokens=_count(usage_data.get("output_tokens"), "output_tokens"),
            cost_usd=float(cost) if cost is not None else None,
        ),
    )
