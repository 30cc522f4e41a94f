"""Hidden validation variants: correctness at inputs the published shapes leave out.

docs/decisions.md 6: besides the suite's shapes, a candidate is checked at each variant of its
operator (declared in ``evaluator.operators._variants``): rotary at non-zero positions,
several sequences, shuffled block tables, monotone gates. The checks are the
shapes' own (``evaluator.correctness.check_shape``: inputs from seeds derived from the
run's secret seed, poisoned memory, the candidate before the reference, hygiene and the
integrity guard after every call); nothing is timed and nothing is scored. A variant that
fails makes every shape of its operator ``incorrect``, with an error naming the variant.

The variants' inputs never leave the child: a record carries the variant's name, its
status and the error only. A run with ``--visibility public`` (an agent's rounds) runs
none (the runner does not ask for them), so an agent never sees one.

Heavy imports (torch) happen inside the functions: the runner imports nothing from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

VARIANT_SHAPE_PREFIX = "variant:"
"""Shape ids of variants in seeds and messages; a suite's shape ids never start with it."""


def variants_of(job: Mapping[str, Any]) -> tuple[Any, ...]:
    """The variants a child's job is checked at: none for a public run (the runner leaves
    ``validation_variants`` off) or an operator loaded from uploaded sources."""
    if not job.get("validation_variants") or job.get("operator_source"):
        return ()
    from evaluator.operators._variants import variants_for

    return variants_for(str(job["operator"]))


def variant_spec(spec: Any, variant: Any) -> Any:
    """The operator's spec whose input generator draws the variant's inputs: the operator's
    ``make_inputs``, then the variant's ``adjust`` on the same generator."""
    if variant.adjust is None:
        return spec
    base_maker = spec.input_maker
    adjust = variant.adjust

    def input_maker(*, device: Any, generator: Any, **input_kwargs: Any) -> dict[str, Any]:
        inputs = base_maker(device=device, generator=generator, **input_kwargs)
        return adjust(inputs, generator)

    return dataclasses.replace(spec, input_maker=input_maker)


def _named(message: str | None, shape_id: str, name: str) -> str:
    """A correctness message about ``shape <shape_id>`` rewritten to name the variant."""
    label = f"validation variant {name!r}"
    text = message or "failed"
    prefix = f"shape {shape_id}"
    if text.startswith(prefix):
        return label + text[len(prefix) :]
    return f"{label}: {text}"


def check_variant(
    *,
    spec: Any,
    variant: Any,
    model_class: Any,
    device: Any,
    run_seed: int,
    guard: Any = None,
) -> dict[str, Any]:
    """Check the candidate at one variant; a record ``{name, status, error}``.

    Status is ``pass``, ``incorrect`` or ``runtime_error``. Tampering seen by the
    ``guard`` (``evaluator.integrity.IntegrityGuard``) propagates as TamperingError, as it
    does for shapes: the whole operator fails.
    """
    import torch

    from evaluator.correctness import CandidateError, check_shape, fresh_reference
    from evaluator.integrity import OutsideWorkError, TamperingError, bound_checker
    from evaluator.measure import loud_code

    device = torch.device(device)
    name = variant.name
    shape_id = f"{VARIANT_SHAPE_PREFIX}{name}"
    record: dict[str, Any] = {"name": name, "status": "runtime_error", "error": None}
    init_kwargs = dict(variant.init_kwargs)
    try:
        spec.build_reference(init_kwargs)  # one that cannot be built fails here
        reference = fresh_reference(spec, init_kwargs, device)  # afresh for each check

        try:
            candidate = model_class(**init_kwargs)
            if isinstance(candidate, torch.nn.Module):
                candidate = candidate.to(device)
        except Exception as exc:
            raise CandidateError(
                f"shape {shape_id}: Model(...) failed: {type(exc).__name__}: {exc}"
            ) from exc
        correctness = check_shape(
            spec=variant_spec(spec, variant),
            reference=reference,
            candidate=candidate,
            shape_id=shape_id,
            input_kwargs=variant.input_kwargs,
            device=device,
            run_seed=run_seed,
            after_call=bound_checker(guard, f"after a call of validation variant {name!r}"),
        )
        if correctness.ok:
            record.update(status="pass", codes=[])
        else:
            record.update(
                status="incorrect",
                error=_named(correctness.error, shape_id, name),
                codes=["variant_wrong"],
            )
    except CandidateError as exc:
        record.update(
            error=_named(exc.message, shape_id, name),
            codes=["variant_wrong", loud_code(exc.__cause__ or exc)],
        )
    except OutsideWorkError as exc:
        record.update(
            status="incorrect",
            error=_named(exc.message, shape_id, name),
            codes=["variant_wrong", "outside_work"],
        )
    except TamperingError:
        raise
    except BaseException as exc:  # SystemExit or worse from the candidate: the variant fails
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, SystemExit):
            detail = f"the candidate called sys.exit({exc.code!r}) (SystemExit)"
        record.update(error=_named(detail, shape_id, name), codes=["variant_wrong", loud_code(exc)])
    return record


def failed_variant_codes(records: list[Mapping[str, Any]]) -> list[str]:
    """The verdict codes every shape gets when a variant failed (the first failure's; a
    failure there, wrong or loud, makes the operator incorrect: a loud one cannot be told
    from a dodge), or [] when every variant passed."""
    for record in records:
        if record.get("status") != "pass":
            return list(record.get("codes") or ["variant_wrong"])
    return []


def failed_variant_error(records: list[Mapping[str, Any]]) -> str | None:
    """The error every shape gets when a variant failed (the first failure), or None."""
    for record in records:
        if record.get("status") != "pass":
            return str(record.get("error") or f"validation variant {record.get('name')!r} failed")
    return None
