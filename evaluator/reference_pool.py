"""A per-worker pool of secret seeds with their reference outputs, computed ahead.

Every correctness trial of every shape used to run the reference; its output depends only
on (operator, shape, input seed) and this worker's versions. The pool keeps, per (suite
version, operator, shape), ``entries`` random seeds (``secrets``, never derived from
anything a submission sees) with the reference's output for each, computed on this worker
by ``python -m evaluator pool fill`` (ahead, when a suite is published) or by the runner at
a shape's first use (``fill_plan`` in a harness-user process of its own: no candidate
code). A run draws distinct live entries for a shape's trials; the child generates the
candidate's inputs from the entry's seed as it does from a derived one, and after the
candidate's call asks the runner for the stored output, which the runner streams on a pipe
of its own (``ReferenceServer``): the answer does not exist in the child while the
candidate runs, as before. ``fresh_trials`` of each shape's trials (default 1, at a random
position) still draw a one-off seed and compute the reference: a table of outputs learnt
from earlier runs cannot answer that trial (docs/architecture.md, The reference pool, gives
the argument).

Secrecy and hygiene:

* the folder is 0700, owned by the harness user, and hidden from every child by the
  sandbox (``evaluator.runner`` adds it to the policy's hidden paths);
* each entry is used at most ``uses`` times (counted when handed to a job, whether or not
  the child asked for it), then retired and its file removed; a shape with fewer than
  ``low_water`` live entries is topped up to ``entries`` before its next run;
* entries live under a key of the harness, torch and triton versions, the device and the
  operators' source: a pool written by other versions is never read;
* each entry's SHA-256 is stored beside it and checked by the child on load; a missing or
  corrupt entry is recomputed, and the shape's record says so (``reference_pool``).

Budget: a shape whose output exceeds ``entry_max_bytes``, or whose entries would take the
pool over ``max_bytes``, is not pooled (its index says why).

The runner's side (planning, drawing, serving) is stdlib only; the torch side (encoding,
decoding, filling, the child's client) imports torch inside its functions.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ENTRIES_PER_SHAPE = 64
USES_PER_ENTRY = 8
LOW_WATER = 32
FRESH_TRIALS = 1
MAX_BYTES = 16 * 1024**3
ENTRY_MAX_BYTES = 16 * 1024**2
MIN_SAVING_S = 0.001
FETCH_BYTES_PER_S = 4e8
"""Defaults; docs/architecture.md (The reference pool) gives the reasoning and the v1 suite's
figures. A fetch moved 0.48 GB/s at 62-240 MiB on the H200's host and 0.3-0.5 GB/s on
the 2-core CPU machine (the pipe and the SHA-256): the estimate is below both."""

INDEX = "index.json"
LOCK = "index.lock"
HEADER_LIMIT = 1 << 20
_SEED_BITS = 62


# --------------------------------------------------------------------------- settings, key


@dataclass(frozen=True)
class PoolSettings:
    """Where the pool lives and its sizes (see the module docstring)."""

    directory: str
    entries: int = ENTRIES_PER_SHAPE
    uses: int = USES_PER_ENTRY
    low_water: int = LOW_WATER
    fresh_trials: int = FRESH_TRIALS
    max_bytes: int = MAX_BYTES
    entry_max_bytes: int = ENTRY_MAX_BYTES
    fill: bool = True
    """Fill a shape at its first use (before its operator's child); else run it unpooled."""
    min_saving_s: float = MIN_SAVING_S
    fetch_bytes_per_s: float = FETCH_BYTES_PER_S
    """A shape is pooled only where its reference call (timed by the fill) takes longer than
    fetching its output is expected to (``min_saving_s`` plus its bytes at
    ``fetch_bytes_per_s``): a small, quick reference is cheaper to recompute."""

    def __post_init__(self) -> None:
        if not self.directory:
            raise ValueError("the reference pool needs a folder (--reference-pool DIR)")
        if self.entries < 1 or self.uses < 1 or self.fresh_trials < 0:
            raise ValueError(
                "the reference pool needs entries >= 1, uses >= 1 and fresh trials >= 0"
            )
        if not 0 < self.low_water <= self.entries:
            raise ValueError("the pool's low-water mark must be between 1 and its entries")

    def to_dict(self) -> dict[str, Any]:
        """The sizes, for the environment digest (the folder itself is not named)."""
        data = asdict(self)
        del data["directory"]
        return data


def operators_digest() -> str:
    """SHA-256 over the built-in operators' source files (references and input makers)."""
    folder = Path(__file__).resolve().parent / "operators"
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def pool_key(environment: Mapping[str, Any]) -> dict[str, Any]:
    """What a stored output depends on besides its shape and seed (``environment`` is
    ``evaluator.environment.collect_environment``'s block)."""
    return {
        "harness_version": environment.get("harness_version"),
        "torch": environment.get("torch"),
        "triton": environment.get("triton"),
        "python": environment.get("python"),
        "device": str(environment.get("device", "")).split(":")[0],
        "device_name": environment.get("device_name"),
        "operators": operators_digest(),
    }


def short_digest(value: Any, chars: int = 16) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:chars]


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]


def shape_folder_name(shape_id: str, init_kwargs: Any, input_kwargs: Any) -> str:
    """The shape's folder: its id and a digest of its kwargs (a changed shape is new)."""
    return f"{safe_name(shape_id)}-{short_digest([init_kwargs, input_kwargs], 12)}"


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock file (an exclusive ``flock``) while the block runs."""
    with open(folder / LOCK, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_index(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"entries": {}}
    return (
        data
        if isinstance(data, dict) and isinstance(data.get("entries"), dict)
        else {"entries": {}}
    )


def _write_index(folder: Path, data: Mapping[str, Any]) -> None:
    temporary = folder / f".{INDEX}.{os.getpid()}"
    temporary.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    os.replace(temporary, folder / INDEX)


def private_folder(path: Path, what: str = "the reference pool folder") -> None:
    """Create ``path`` (and parents) 0700; refuse one another user owns or others can read."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if info.st_uid != os.geteuid():
        raise PermissionError(
            f"{what} {path} belongs to uid {info.st_uid}, not to the "
            "harness's user: give it a folder of its own"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


# --------------------------------------------------------------------------- the runner's side


@dataclass
class PoolShape:
    """A shape to plan for: what the runner knows of it (no torch)."""

    operator: str
    shape_id: str
    init_kwargs: Mapping[str, Any]
    input_kwargs: Mapping[str, Any]
    q_write: int = 0


class ReferencePool:
    """The pool of one worker under one version key (stdlib only: the runner's side)."""

    def __init__(self, settings: PoolSettings, *, environment: Mapping[str, Any]) -> None:
        self.settings = settings
        self.environment = dict(environment)
        self.key = pool_key(environment)
        self.top = Path(settings.directory)
        self.root = self.top / short_digest(self.key)

    def open(self) -> ReferencePool:
        """Create the folders (0700) and write the key beside the entries."""
        private_folder(self.top)
        private_folder(self.root)
        key_file = self.root / "key.json"
        if not key_file.exists():
            key_file.write_text(json.dumps(self.key, sort_keys=True, indent=1), encoding="utf-8")
        return self

    def folder(self, suite_hash: str, shape: PoolShape) -> Path:
        """The shape's folder (not created)."""
        suite_part = safe_name(suite_hash.removeprefix("sha256:")[:16])
        name = shape_folder_name(shape.shape_id, shape.init_kwargs, shape.input_kwargs)
        return self.root / suite_part / safe_name(shape.operator) / name

    def state(self, suite_hash: str, shape: PoolShape) -> dict[str, Any]:
        """The shape's index: ``entries`` (id: seed, sha256, nbytes, uses), ``trials``,
        ``not_pooled`` (why, when the fill refused it)."""
        return _read_index(self.folder(suite_hash, shape))

    def live(self, suite_hash: str, shape: PoolShape) -> int:
        """How many entries of the shape can still be drawn."""
        entries = self.state(suite_hash, shape)["entries"]
        return sum(1 for e in entries.values() if e.get("uses", 0) < self.settings.uses)

    def used_bytes(self) -> int:
        """Bytes of every live entry under this key."""
        total = 0
        for index in self.root.glob(f"*/*/*/{INDEX}"):
            for entry in _read_index(index.parent)["entries"].values():
                total += int(entry.get("nbytes", 0))
        return total

    def needs_fill(self, suite_hash: str, shapes: Sequence[PoolShape]) -> list[PoolShape]:
        """The shapes to fill before a run: under the low-water mark, not refused before,
        and small enough by their work model's written bytes (the fill checks the real
        output's size)."""
        wanted = []
        for shape in shapes:
            if shape.q_write and shape.q_write > self.settings.entry_max_bytes:
                continue
            state = self.state(suite_hash, shape)
            if state.get("not_pooled"):
                continue
            if self.live(suite_hash, shape) < self.settings.low_water:
                wanted.append(shape)
        return wanted

    def draw(self, suite_hash: str, shape: PoolShape) -> list[dict[str, Any] | None] | None:
        """The trial plan of one shape for one job: per trial ``{"entry", "seed"}`` or None
        (a fresh trial), or None when the shape is not pooled or has too few live entries.

        Entries are distinct and drawn at random among the live ones; each counts as used
        now. An entry used for the last time is marked retired (its file goes in
        ``release``, once the child is done with it).
        """
        folder = self.folder(suite_hash, shape)
        if not (folder / INDEX).exists():
            return None
        settings = self.settings
        with locked(folder):
            data = _read_index(folder)
            trials = int(data.get("trials") or 0)
            pooled = trials - min(settings.fresh_trials, trials)
            live = [k for k, e in data["entries"].items() if e.get("uses", 0) < settings.uses]
            if (
                data.get("not_pooled")
                or pooled <= 0
                or len(live) < max(pooled, min(settings.low_water, settings.entries))
            ):
                return None
            chosen = secrets.SystemRandom().sample(live, pooled)
            for entry_id in chosen:
                data["entries"][entry_id]["uses"] = data["entries"][entry_id].get("uses", 0) + 1
            _write_index(folder, data)
        plan: list[dict[str, Any] | None] = [
            {"entry": entry_id, "seed": data["entries"][entry_id]["seed"]} for entry_id in chosen
        ]
        for _ in range(trials - pooled):
            plan.insert(secrets.randbelow(len(plan) + 1), None)
        return plan

    def server(self, suite_hash: str, plans: Mapping[str, tuple[PoolShape, Sequence[Any]]]):
        """A ReferenceServer for one job's plans (shape id: (shape, trial plan))."""
        allowed: dict[tuple[str, str], tuple[Path, dict[str, Any]]] = {}
        for shape_id, (shape, plan) in plans.items():
            folder = self.folder(suite_hash, shape)
            entries = _read_index(folder)["entries"]
            for slot in plan:
                if slot is not None and slot["entry"] in entries:
                    meta = entries[slot["entry"]]
                    allowed[(shape_id, slot["entry"])] = (folder / f"{slot['entry']}.bin", meta)
        return ReferenceServer(allowed)

    def release(self, suite_hash: str, shapes: Sequence[PoolShape]) -> int:
        """Remove the retired entries of ``shapes`` (their last job is done); how many."""
        removed = 0
        for shape in shapes:
            folder = self.folder(suite_hash, shape)
            if not (folder / INDEX).exists():
                continue
            with locked(folder):
                data = _read_index(folder)
                for entry_id in [
                    k for k, e in data["entries"].items() if e.get("uses", 0) >= self.settings.uses
                ]:
                    del data["entries"][entry_id]
                    (folder / f"{entry_id}.bin").unlink(missing_ok=True)
                    removed += 1
                _write_index(folder, data)
        return removed


class ReferenceServer:
    """Streams stored outputs to one child on its reference pipe, each at most once, and
    only those its job was given (the child asks in a signed frame after a call)."""

    def __init__(self, allowed: Mapping[tuple[str, str], tuple[Path, dict[str, Any]]]) -> None:
        self.allowed = dict(allowed)
        self.served: set[tuple[str, str]] = set()

    def serve(self, fd: int, message: Mapping[str, Any]) -> None:
        """Answer one ``reference_request`` (``shape_id``, ``entry``) on ``fd``: a header
        frame (JSON: ``ok``, ``reason``, ``sha256``, ``structure``, ``nbytes``), then the
        entry's bytes. A refused or unreadable entry gets ``ok: false`` and its reason."""
        key = (str(message.get("shape_id")), str(message.get("entry")))
        header: dict[str, Any] = {"entry": key[1], "ok": False}
        handle = None
        if key not in self.allowed:
            header["reason"] = "the entry was not given to this job"
        elif key in self.served:
            header["reason"] = "the entry was served once already"
        else:
            self.served.add(key)
            path, meta = self.allowed[key]
            try:
                handle = open(path, "rb")  # noqa: SIM115 - closed below
                size = os.fstat(handle.fileno()).st_size
            except OSError as exc:
                header["reason"] = f"the stored output cannot be read ({exc.strerror})"
            else:
                header.update(
                    ok=True,
                    sha256=meta.get("sha256"),
                    structure=meta.get("structure"),
                    nbytes=size,
                )
        try:
            payload = json.dumps(header).encode()
            _write_all(fd, len(payload).to_bytes(4, "big") + payload)
            if handle is not None:
                offset, size = 0, header["nbytes"]
                while offset < size:
                    sent = os.sendfile(fd, handle.fileno(), offset, size - offset)
                    if sent == 0:
                        break
                    offset += sent
        except (BrokenPipeError, OSError):
            pass  # the child is gone; its exit tells the rest
        finally:
            if handle is not None:
                handle.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def plan_file(
    suite_hash: str, shapes: Sequence[PoolShape], settings: PoolSettings, device: str
) -> dict[str, Any]:
    """The fill request the runner hands to ``python -m evaluator pool fill --plan``."""
    return {
        "suite_hash": suite_hash,
        "device": device,
        "settings": asdict(settings),
        "shapes": [asdict(shape) for shape in shapes],
    }


# --------------------------------------------------------------------------- the torch side

_DTYPES = (
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64",
    "int32", "int16", "int8", "uint8", "bool",
)  # fmt: skip


def encode_output(output: Any) -> tuple[dict[str, Any], bytes]:
    """(structure, bytes) of a reference output: a tensor, or a dict, tuple or list of
    tensors and JSON values; every tensor stored contiguous, on the host."""
    import torch

    chunks: list[bytes] = []
    offset = 0

    def leaf(value: Any) -> dict[str, Any]:
        nonlocal offset
        if type(value) is torch.Tensor:
            dtype = str(value.dtype).removeprefix("torch.")
            if dtype not in _DTYPES:
                raise ValueError(f"a reference output of dtype {dtype} cannot be pooled")
            data = value.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
            chunks.append(data)
            item = {"dtype": dtype, "shape": list(value.shape), "offset": offset, "size": len(data)}
            offset += len(data)
            return item
        json.dumps(value)  # raises for what JSON cannot hold
        return {"value": value}

    if isinstance(output, Mapping):
        keys = list(output)
        if not all(isinstance(k, str) for k in keys):
            raise ValueError("a reference output dict must have string keys to be pooled")
        structure = {"kind": "dict", "keys": keys, "leaves": [leaf(output[k]) for k in keys]}
    elif isinstance(output, list | tuple):
        kind = "tuple" if isinstance(output, tuple) else "list"
        structure = {"kind": kind, "leaves": [leaf(v) for v in output]}
    else:
        structure = {"kind": "single", "leaves": [leaf(output)]}
    if any(isinstance(v, Mapping | list | tuple) for v in structure_values(structure)):
        raise ValueError("a nested reference output cannot be pooled")
    return structure, b"".join(chunks)


def structure_values(structure: Mapping[str, Any]) -> list[Any]:
    """The JSON values among a structure's leaves."""
    return [leaf["value"] for leaf in structure["leaves"] if "value" in leaf]


def decode_output(structure: Mapping[str, Any], payload: bytes | bytearray, device: Any) -> Any:
    """The output ``encode_output`` stored, with its tensors on ``device``."""
    import torch

    buffer = memoryview(payload)

    def leaf(item: Mapping[str, Any]) -> Any:
        if "value" in item:
            return item["value"]
        dtype = getattr(torch, item["dtype"])
        size = int(item["size"])
        if size == 0:
            return torch.empty(item["shape"], dtype=dtype, device=device)
        raw = torch.frombuffer(buffer[item["offset"] : item["offset"] + size], dtype=torch.uint8)
        return raw.view(dtype).reshape(item["shape"]).to(device)

    values = [leaf(item) for item in structure["leaves"]]
    kind = structure["kind"]
    if kind == "dict":
        return dict(zip(structure["keys"], values, strict=True))
    if kind == "tuple":
        return tuple(values)
    if kind == "list":
        return values
    return values[0]


def _reference_output(spec: Any, shape: PoolShape, seed: int, device: Any) -> Any:
    """The reference's output at one seed, computed as a correctness trial does."""
    import torch

    from evaluator.correctness import clone_inputs

    with torch.inference_mode():
        inputs = spec.make_inputs(device=device, seed=seed, **dict(shape.input_kwargs))
        model = spec.build_reference(dict(shape.init_kwargs)).to(device)
        output = model(**clone_inputs(inputs))
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)
    return output


def fill_plan(plan: Mapping[str, Any], *, environment: Mapping[str, Any]) -> dict[str, Any]:
    """Fill the plan's shapes up to ``entries`` live entries each (in this process, the
    harness's user, no candidate code); a report: entries written, shapes refused and why,
    seconds, bytes."""
    import torch

    from evaluator.operators import get_operator

    settings = PoolSettings(**plan["settings"])
    pool = ReferencePool(settings, environment=environment).open()
    suite_hash = str(plan["suite_hash"])
    device = torch.device(plan["device"])
    started = time.perf_counter()
    budget_used = pool.used_bytes()
    report: dict[str, Any] = {"written": 0, "refused": {}, "bytes": 0, "shapes": 0}
    for raw in plan["shapes"]:
        shape = PoolShape(**raw)
        folder = pool.folder(suite_hash, shape)
        private_folder(folder)
        try:
            spec = get_operator(shape.operator)
        except Exception as exc:  # an uploaded operator: not pooled (its sources vary)
            report["refused"][shape.shape_id] = f"{type(exc).__name__}: {exc}"
            continue
        with locked(folder):
            data = _read_index(folder)
            if data.get("not_pooled"):
                continue
            data["trials"] = spec.policy.trials
            data["shape"] = {"operator": shape.operator, "shape_id": shape.shape_id}
            live = {k: e for k, e in data["entries"].items() if e.get("uses", 0) < settings.uses}
            call_times: list[float] = []
            written_here: set[str] = set()
            while len(live) < settings.entries:
                seed = secrets.randbits(_SEED_BITS)
                call_started = time.perf_counter()
                try:
                    output = _reference_output(spec, shape, seed, device)
                    call_s = time.perf_counter() - call_started
                    structure, payload = encode_output(output)
                except ValueError as exc:
                    data["not_pooled"] = str(exc)
                    break
                del output
                call_times.append(call_s)
                if "reference_s" not in data and (len(call_times) == 3 or len(live) >= 2):
                    # The quicker of two calls after the shape's first (which warms up).
                    call_s = min(call_times[1:]) if len(call_times) > 1 else call_s
                    data["reference_s"] = call_s
                    fetch_s = settings.min_saving_s + len(payload) / settings.fetch_bytes_per_s
                    if call_s < fetch_s:
                        data["not_pooled"] = (
                            f"its reference takes {call_s * 1e3:.3g} ms, under the "
                            f"{fetch_s * 1e3:.3g} ms a stored output is expected to take"
                        )
                        for entry_id, entry in list(data["entries"].items()):
                            (folder / f"{entry_id}.bin").unlink(missing_ok=True)
                            if entry_id in written_here:
                                report["written"] -= 1
                                report["bytes"] -= entry["nbytes"]
                                budget_used -= entry["nbytes"]
                        data["entries"] = {}
                        break
                if len(payload) > settings.entry_max_bytes:
                    data["not_pooled"] = (
                        f"its output ({len(payload)} bytes) is over the pool's entry limit "
                        f"({settings.entry_max_bytes} bytes)"
                    )
                    break
                needed = len(payload) * (settings.entries - len(live))
                if budget_used + needed > settings.max_bytes and not live:
                    data["not_pooled"] = (
                        f"its {settings.entries} entries ({needed} bytes) would take the pool "
                        f"over its limit ({settings.max_bytes} bytes)"
                    )
                    break
                if budget_used + len(payload) > settings.max_bytes:
                    break
                entry_id = secrets.token_hex(8)
                temporary = folder / f".{entry_id}.tmp"
                temporary.write_bytes(payload)
                os.chmod(temporary, 0o600)
                os.replace(temporary, folder / f"{entry_id}.bin")
                entry = {
                    "seed": seed,
                    "sha256": hashlib.sha256(payload).hexdigest(),
                    "nbytes": len(payload),
                    "structure": structure,
                    "uses": 0,
                }
                data["entries"][entry_id] = live[entry_id] = entry
                written_here.add(entry_id)
                budget_used += len(payload)
                report["written"] += 1
                report["bytes"] += len(payload)
            if data.get("not_pooled"):
                report["refused"][f"{shape.operator}/{shape.shape_id}"] = data["not_pooled"]
            _write_index(folder, data)
            report["shapes"] += 1
    report["seconds"] = round(time.perf_counter() - started, 3)
    return report


def clear(directory: str | os.PathLike[str]) -> None:
    """Remove a pool folder and everything in it (an admin's reset)."""
    shutil.rmtree(directory, ignore_errors=True)


# --------------------------------------------------------------------------- the child's side


class PoolClient:
    """The child's end: asks the runner for a stored output after a call, reads and checks
    it. ``request`` sends the signed frame; ``fd`` is the reference pipe."""

    __slots__ = ("_fd", "_request")

    def __init__(self, fd: int, request: Callable[[Mapping[str, Any]], None]) -> None:
        self._fd = fd
        self._request = request

    def fetch(self, shape_id: str, entry: str, device: Any) -> tuple[Any, str | None]:
        """(output, None), or (None, why) when the entry is missing, refused or corrupt:
        the caller computes the reference instead."""
        self._request({"event": "reference_request", "shape_id": shape_id, "entry": entry})
        size = int.from_bytes(_read_exact(self._fd, 4), "big")
        if size > HEADER_LIMIT:
            raise OSError("the reference pipe sent a header over its limit")
        header = json.loads(_read_exact(self._fd, size))
        if not header.get("ok"):
            return None, str(header.get("reason") or "refused")
        payload = _read_exact(self._fd, int(header["nbytes"]))
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            return None, f"entry {entry} failed its SHA-256 check (corrupt or changed)"
        try:
            return decode_output(header["structure"], payload, device), None
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            return None, f"entry {entry} cannot be decoded ({type(exc).__name__}: {exc})"


def _read_exact(fd: int, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise OSError("the reference pipe closed early")
        got += n
    return buffer
