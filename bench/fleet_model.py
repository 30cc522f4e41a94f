"""A model of N GPU workers evaluating submissions: where the GPUs, the broker, the
database or the site worker become the limit.

Driven by figures, none invented here:

* GPU time per shape, from the H200 runs: the eager reference's median time and
  repetitions at all 440 shapes of atrex-bench v1 (``results/2026-11-29-h200/``), and the
  two full v1 evaluator runs of the Triton baseline of 2026-12-01
  (``results/2026-12-01-h200-session4/``, 225 shapes, 162 s and 198 s in their shapes),
  which calibrate the fixed cost of a shape (inputs, correctness trials, profiler pass, JIT,
  the timer's repetitions beyond the modelled ten).
* The broker's and the database's cost per operation, measured by this script with real
  calls on loopback: Celery messages published, fetched and acknowledged through kombu on
  Redis (database 8 by default, the test slot 7 one), and the writes one shard makes on a
  scratch PostgreSQL database that the script creates and drops. Redis commands per
  message are counted on a private redis-server the script starts and stops.

A submission is split into ``--shards`` shards (default 30: one per operator), operators
grouped longest first onto the least loaded shard, as the site's planner does. Within a
shard the evaluator runs one child per operator and starts the next one ahead, so a shard
pays one cold child start (``--operator-start-s``) and then ``--ahead-start-s`` per further
operator (both measured on the H200, ``results/2026-12-01-h200-session4/``). Each GPU worker
takes one shard at a time from its hardware's queue: the broker delivers it, the worker
marks the run taken (1 write), the GPU runs the operator's shapes (one progress write per
shape, not waited for), the worker stores the shard's results (one transaction) and
acknowledges the message. When a submission's last shard is stored, a site worker merges and
publishes it (one transaction). The database and the broker are modelled as servers with P
parallel slots (P measured: concurrent throughput over one connection's) holding each
operation for its measured latency.

    python bench/fleet_model.py [--redis redis://127.0.0.1:6379/8] [--speedup 1.0]
        [--shards 30] [--operator-start-s 10.2] [--ahead-start-s 0.3] [--hours 6]
        [--workers 1,2,4,8,16,32,64] [--measured RESULTS.json]

With ``--measured`` the GPU costs are a measured whole submission's instead of the model's:
each operator's wall time less its child's start, a shard's cold start as that run's time
outside its operators plus its first child's start, and the mean start of its later
children (e.g. the 30-operator submission of ``bench/full_suite_walltime.py`` on the H200).

Prints the calibration, the measured overheads and, per N: submissions/hour at
saturation, GPU utilisation, queue wait and latency at 70 % load, broker operations/s,
database writes/s, the utilisation of each resource and which one limits first.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results" / "2026-11-29-h200"
sys.path.insert(0, str(REPO))  # a script, run from anywhere: the repository's packages

from submissions.planning import shard_plan  # noqa: E402 - pure Python, no Django

# From the evaluator (evaluator/timing.py, evaluator/operators/base.py): at least 10
# timed calls after 2 warm-ups, for the candidate and for the reference; 3 correctness
# trials. Each timed call also flushes L2 (256 MB written) and queues a ~200 us spin.
MIN_REPS = 10
WARMUP = 2
TRIALS = 3
PER_CALL_OVERHEAD_S = 256e6 / 4.27e12 + 200e-6
SHARD_TASK = "submissions.evaluate_shard"  # a name only: nothing consumes these messages
CALIBRATION = REPO / "results" / "2026-12-01-h200-session4"


# --------------------------------------------------------------------------- GPU costs


@dataclass(frozen=True)
class Calibration:
    fixed_per_shape_s: float
    runs: list[tuple[float, float]]  # (time in shapes, GPU calls) of each calibration run


def _calls_seconds(candidate_s: float, reference_s: float, reps: int) -> float:
    """GPU time of one shape's calls: correctness trials, warm-ups and timed calls of the
    candidate and of the reference."""
    reps = max(MIN_REPS, reps)
    candidate = (TRIALS + WARMUP + reps) * (candidate_s + PER_CALL_OVERHEAD_S)
    reference = (TRIALS + WARMUP + reps) * (reference_s + PER_CALL_OVERHEAD_S)
    return candidate + reference


def calibrate() -> Calibration:
    """The fixed cost of a shape: the time the evaluator's children spent in their shapes
    (results.json ``phases_s``) less the modelled calls, over the two full v1 runs of the
    Triton bundle on the H200 of 2026-12-01 (225 shapes each)."""
    fixed, runs = [], []
    for name in ("triton-v1-run3.json", "triton-v1-run4.json"):
        run = json.loads((CALIBRATION / name).read_text())
        operators = [op for op in run["operators"] if op.get("wall_s") is not None]
        shapes = [s for op in operators for s in op["shapes"]]
        calls = sum(
            _calls_seconds(s["time_ms"] / 1e3, s["reference_time_ms"] / 1e3, s["reps"])
            for s in shapes
        )
        in_shapes = sum(op["phases_s"]["shapes"] for op in operators)
        fixed.append((in_shapes - calls) / len(shapes))
        runs.append((in_shapes, calls))
    return Calibration(fixed_per_shape_s=statistics.mean(fixed), runs=runs)


def operator_costs(calibration: Calibration, *, speedup: float) -> dict[str, tuple[float, int]]:
    """GPU seconds (its shapes, without the child's start) and shape count of each operator
    of atrex-bench v1 for one submission whose kernels run ``speedup`` times faster than
    the eager reference."""
    baseline = json.loads((RESULTS / "reference-baseline-v1-h200.json").read_text())
    costs = {}
    for op in baseline["operators"]:
        seconds = 0.0
        for shape in op["shapes"]:
            reference_s = shape["time_ms"] / 1e3
            seconds += calibration.fixed_per_shape_s + _calls_seconds(
                reference_s / speedup, reference_s, shape["reps"]
            )
        costs[op["operator"]] = (seconds, len(op["shapes"]))
    return costs


@dataclass(frozen=True)
class MeasuredRun:
    """A whole evaluator run on the GPU, read back as the model's costs."""

    costs: dict[str, tuple[float, int]]  # operator: (seconds outside its child's start, shapes)
    first_start_s: float  # the run's time outside its operators, with the first child's start
    ahead_start_s: float  # the mean start of a later operator's child (started ahead)
    wall_s: float
    harness: str


def measured_costs(path: Path) -> MeasuredRun:
    """Operator costs from a measured results.json of a whole submission (one run, one
    shard): each operator's wall less its child's start, the run's own time outside its
    operators plus the first child's start as a shard's cold start, and the mean start of
    the later children (started ahead; some wait for theirs). One shard of every operator
    then costs the run's wall exactly."""
    run = json.loads(path.read_text())
    operators = [op for op in run["operators"] if op.get("wall_s") is not None]
    if not operators:
        raise SystemExit(f"{path}: no operator with a wall time (an unfinished run?)")
    starts = [float((op.get("phases_s") or {}).get("start", 0.0)) for op in operators]
    costs = {
        op["operator"]: (float(op["wall_s"]) - start, len(op["shapes"]))
        for op, start in zip(operators, starts, strict=True)
    }
    wall = float(run["wall_s"])
    first = wall - sum(float(op["wall_s"]) for op in operators) + starts[0]
    later = starts[1:]
    return MeasuredRun(
        costs=costs,
        first_start_s=first,
        ahead_start_s=statistics.mean(later) if later else 0.0,
        wall_s=wall,
        harness=str((run.get("environment") or {}).get("harness_version", "?")),
    )


def group_shards(
    costs: dict[str, tuple[float, int]], *, shards: int, first_start_s: float, ahead_start_s: float
) -> list[tuple[float, int, list[str]]]:
    """The operators grouped into at most ``shards`` shards by the site's planner
    (``submissions.planning.shard_plan``), each shard's operators longest first; each
    shard's GPU seconds hold one cold child start and a started-ahead one for each further
    operator. (seconds, shapes, operators) per shard."""
    longest_first = sorted(costs, key=lambda name: -costs[name][0])
    plan = shard_plan(
        operators=longest_first, costs={name: costs[name][0] for name in costs}, count=shards
    )
    return [
        (
            first_start_s
            + (len(names) - 1) * ahead_start_s
            + sum(costs[name][0] for name in names),
            sum(costs[name][1] for name in names),
            names,
        )
        for names in plan
    ]


# --------------------------------------------------------------------------- broker


@dataclass(frozen=True)
class Service:
    """A server measured on loopback: one operation's latency and its parallelism."""

    latency_s: float  # one client, one operation
    parallel: float  # aggregate throughput with several clients / one client's
    detail: str = ""

    @property
    def capacity_per_s(self) -> float:
        return self.parallel / self.latency_s


def _kombu_round_trips(url: str, count: int, queue: str) -> float:
    """Seconds per message: publish a Celery task message, fetch it, acknowledge it."""
    from celery import Celery

    app = Celery("fleet-model", broker=url, set_as_current=False)
    app.conf.broker_connection_retry_on_startup = False
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        producer = app.amqp.Producer(channel)
        started = time.perf_counter()
        for index in range(count):
            app.send_task(
                "submissions.evaluate_shard", args=[index], queue=queue, producer=producer
            )
            message = None
            while message is None:
                message = channel.basic_get(queue, no_ack=False)
            channel.basic_ack(message.delivery_tag)
        elapsed = time.perf_counter() - started
        channel.queue_delete(queue)
    return elapsed / count


def measure_broker(url: str, *, count: int = 300, clients: int = 4) -> Service:
    """Publish + fetch + ack of one message on the real Redis, alone and with clients."""
    host = socket.gethostname()
    # The median of batches: the machine is shared, a batch can be unlucky.
    single = statistics.median(
        _kombu_round_trips(url, count // 6, f"fleet-model.{host}.{os.getpid()}") for _ in range(6)
    )
    results: list[float] = []

    def client(index: int) -> None:
        results.append(_kombu_round_trips(url, count, f"fleet-model.{os.getpid()}.{index}"))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    aggregate = clients * count / (time.perf_counter() - started)
    return Service(
        latency_s=single,
        parallel=max(1.0, aggregate * single),
        detail=f"{count} messages alone, {clients}x{count} in {clients} threads",
    )


def redis_commands_per_message(count: int = 100) -> float | None:
    """Redis commands one message costs (publish, fetch, ack), counted on a private
    redis-server (the shared one serves others: its counters move on their own)."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    import redis

    with tempfile.TemporaryDirectory(prefix="fleet-model-redis-") as scratch:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", scratch],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            client = redis.Redis(port=port)
            for _ in range(50):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.1)
            url = f"redis://127.0.0.1:{port}/0"
            _kombu_round_trips(url, 10, "warm-up")  # connection set-up, bindings
            before = _command_total(client)
            _kombu_round_trips(url, count, "counted")
            after = _command_total(client)
        finally:
            server.terminate()
            server.wait(timeout=10)
    return (after - before) / count


def _command_total(client) -> int:
    stats = client.info("commandstats")
    return sum(entry["calls"] for name, entry in stats.items() if name != "cmdstat_info")


# --------------------------------------------------------------------------- database


@dataclass(frozen=True)
class DatabaseFigures:
    write: Service  # one autocommitted single-row UPDATE (take, progress, heartbeat)
    store_base_s: float  # a shard's results transaction: base + per shape row
    store_per_shape_s: float
    merge_s: float  # a submission's merge and publish (site worker)


SCHEMA_SQL = """
CREATE TABLE run (id bigserial PRIMARY KEY, status varchar(12), worker varchar(200),
  heartbeat_at timestamptz, shapes_done int DEFAULT 0, shapes_total int DEFAULT 0,
  results jsonb);
CREATE TABLE operator_result (id bigserial PRIMARY KEY, run_id bigint REFERENCES run(id),
  operator varchar(60), status varchar(20), score double precision,
  importance double precision, error text, warnings jsonb, UNIQUE (run_id, operator));
CREATE TABLE shape_result (id bigserial PRIMARY KEY, run_id bigint REFERENCES run(id),
  operator varchar(60), shape_id varchar(40), status varchar(20), weight double precision,
  time_ms double precision, time_spread_ms double precision, reps int,
  reference_time_ms double precision, t_sol_ms double precision,
  roofline_fraction double precision, speedup double precision,
  own_kernel_share double precision, max_abs_error double precision, error text);
CREATE INDEX ON shape_result (run_id);
CREATE TABLE status_change (id bigserial PRIMARY KEY, run_id bigint, to_status varchar(20),
  at timestamptz DEFAULT now());
CREATE TABLE score (id bigserial PRIMARY KEY, run_id bigint, aggregate double precision,
  operators jsonb, at timestamptz DEFAULT now());
"""


def _store_shard(cursor, run_id: int, operator: str, shapes: int) -> None:
    """The writes of one shard's results, as the worker makes them (one transaction)."""
    cursor.execute("DELETE FROM shape_result WHERE run_id=%s AND operator=%s", (run_id, operator))
    cursor.execute(
        "INSERT INTO operator_result (run_id, operator, status, score, importance, error,"
        " warnings) VALUES (%s, %s, 'ok', 0.4, 0.03, '', '[]')",
        (run_id, operator),
    )
    rows = [
        (run_id, operator, str(i), "pass", 1.0, 0.1, 0.001, 25, 0.3, 0.05, 0.5, 3.0, 1.0, 0.0, "")
        for i in range(shapes)
    ]
    placeholders = ",".join(["(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"] * len(rows))
    cursor.execute(
        "INSERT INTO shape_result (run_id, operator, shape_id, status, weight, time_ms,"
        " time_spread_ms, reps, reference_time_ms, t_sol_ms, roofline_fraction, speedup,"
        " own_kernel_share, max_abs_error, error) VALUES " + placeholders,  # noqa: S608
        [value for row in rows for value in row],
    )
    cursor.execute(
        "UPDATE run SET shapes_done = shapes_done + %s, heartbeat_at = now() WHERE id=%s",
        (shapes, run_id),
    )


def measure_scoring(repeats: int = 20) -> float:
    """Seconds the merge spends computing a submission's scores (evaluator.scoring) over
    440 shapes, in this process (the site worker's CPU)."""
    from evaluator.scoring import summarize

    baseline = json.loads((RESULTS / "reference-baseline-v1-h200.json").read_text())
    operators = [
        {
            "operator": op["operator"],
            "shapes": [{**shape, "speedup": 1.0} for shape in op["shapes"]],
        }
        for op in baseline["operators"]
    ]
    importance = {op["operator"]: 1 / len(operators) for op in operators}
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        summarize(operators=operators, importance=importance)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def measure_database(admin_dsn: str, *, writes: int = 400, clients: int = 4) -> DatabaseFigures:
    """Create a scratch database, time the writes a shard and a submission make, drop it."""
    import psycopg

    name = f"atrex_fleet_model_{os.getpid()}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = psycopg.conninfo.make_conninfo(admin_dsn, dbname=name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SCHEMA_SQL)
            run_ids = [
                conn.execute(
                    "INSERT INTO run (status, shapes_total) VALUES ('running', 440) RETURNING id"
                ).fetchone()[0]
                for _ in range(clients + 1)
            ]
            update = (
                "UPDATE run SET heartbeat_at = now(), shapes_done = shapes_done + 1"
                " WHERE id=%s AND status='running'"
            )
            for _ in range(20):
                conn.execute(update, (run_ids[0],))
            # The median of batches: the machine is shared, a batch can be unlucky.
            batches = []
            for _ in range(8):
                started = time.perf_counter()
                for _ in range(writes // 8):
                    conn.execute(update, (run_ids[0],))
                batches.append((time.perf_counter() - started) / (writes // 8))
            write_latency = statistics.median(batches)

            store: dict[int, float] = {}
            for shapes in (4, 15, 56):
                samples = []
                for repeat in range(15):
                    started = time.perf_counter()
                    with conn.transaction():
                        _store_shard(conn.cursor(), run_ids[0], f"op{shapes}-{repeat}", shapes)
                    samples.append(time.perf_counter() - started)
                store[shapes] = statistics.median(samples)
            per_shape = (store[56] - store[4]) / (56 - 4)
            base = store[4] - 4 * per_shape

            merge = []
            for _ in range(10):
                started = time.perf_counter()
                with conn.transaction():
                    rows = conn.execute(
                        "SELECT operator, shape_id, status, weight, roofline_fraction FROM"
                        " shape_result WHERE run_id=%s",
                        (run_ids[0],),
                    ).fetchall()
                    conn.execute(
                        "INSERT INTO score (run_id, aggregate, operators) VALUES (%s, %s, %s)",
                        (run_ids[0], 0.1, json.dumps({"rows": len(rows)})),
                    )
                    for status in ("scoring", "published"):
                        conn.execute("UPDATE run SET status=%s WHERE id=%s", (status, run_ids[1]))
                        conn.execute(
                            "INSERT INTO status_change (run_id, to_status) VALUES (%s, %s)",
                            (run_ids[1], status),
                        )
                merge.append(time.perf_counter() - started)

        done = [0] * clients

        def client(index: int) -> None:
            with psycopg.connect(dsn, autocommit=True) as own:
                for _ in range(writes):
                    own.execute(update, (run_ids[index + 1],))
                    done[index] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        aggregate = sum(done) / (time.perf_counter() - started)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return DatabaseFigures(
        write=Service(
            latency_s=write_latency,
            parallel=max(1.0, aggregate * write_latency),
            detail=f"{writes} writes alone, {clients}x{writes} in {clients} connections",
        ),
        store_base_s=max(base, 0.0),
        store_per_shape_s=max(per_shape, 0.0),
        merge_s=statistics.median(merge),
    )


# --------------------------------------------------------------------------- simulation


class Resource:
    """A FIFO server with ``slots`` parallel slots (fractional slots are rounded up)."""

    def __init__(self, slots: float) -> None:
        self.slots = max(1, math.ceil(slots))
        self.free_at = [0.0] * self.slots  # a heap of when each slot is next free
        self.busy_s = 0.0
        self.ops = 0

    def serve(self, at: float, seconds: float, ops: int = 1) -> float:
        """Start at or after ``at`` on the earliest free slot; return when it ends."""
        start = max(at, heapq.heappop(self.free_at))
        end = start + seconds
        heapq.heappush(self.free_at, end)
        self.busy_s += seconds
        self.ops += ops
        return end

    def utilisation(self, horizon: float) -> float:
        return self.busy_s / (self.slots * horizon)


@dataclass
class Outcome:
    workers: int
    submissions_done: int
    per_hour: float
    gpu_utilisation: float
    broker_ops_per_s: float
    db_writes_per_s: float
    broker_utilisation: float
    db_utilisation: float
    site_utilisation: float
    wait_s: list[float] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Overheads:
    broker: Service
    commands_per_message: float
    database: DatabaseFigures
    site_workers: int
    scoring_s: float  # the merge's CPU time on the site worker, besides its database time
    heartbeat_s: float  # fleet registry heartbeat of each worker
    run_heartbeat_s: float  # a running run's heartbeat (the reaper's liveness signal)


def simulate(
    *,
    workers: int,
    shards: list[tuple[float, int]],
    overheads: Overheads,
    arrivals_per_s: float | None,
    horizon_s: float,
    seed: int = 1,
) -> Outcome:
    """Discrete-event simulation. ``arrivals_per_s`` None: a backlog that never empties
    (saturation); otherwise Poisson arrivals at that rate."""
    rng = random.Random(seed)
    broker = Resource(overheads.broker.parallel)
    database = Resource(overheads.database.write.parallel)
    site = Resource(overheads.site_workers)
    db, message_s = overheads.database, overheads.broker.latency_s
    # Longest shard first: the tail of a submission is its longest operator.
    order = sorted(shards, key=lambda s: -s[0])
    queue: deque[tuple[int, float, int]] = deque()  # (submission, gpu seconds, shapes)
    arrived: dict[int, float] = {}
    first_start: dict[int, float] = {}
    remaining: dict[int, int] = {}
    outcome = Outcome(workers, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    gpu_busy = 0.0
    free_workers = list(range(workers))
    events: list[tuple[float, int, str, tuple]] = []
    counter = 0

    def push(at: float, kind: str, data: tuple = ()) -> None:
        nonlocal counter
        counter += 1
        heapq.heappush(events, (at, counter, kind, data))

    def submit(at: float, index: int) -> None:
        arrived[index] = at
        remaining[index] = len(order)
        # Create the runs and move the submission to queued, then publish every shard.
        database.serve(at, db.write.latency_s * 4, ops=4)
        for seconds, shapes in order:
            broker.serve(at, message_s / 2, ops=1)
            queue.append((index, seconds, shapes))

    backlog = arrivals_per_s is None
    next_index = 0
    if backlog:
        for _ in range(workers * 2):
            submit(0.0, next_index)
            next_index += 1
    else:
        push(rng.expovariate(arrivals_per_s), "arrive")
    push(0.0, "dispatch")
    beat_every = min(overheads.heartbeat_s, overheads.run_heartbeat_s)
    push(beat_every, "beats")

    while events:
        now, _, kind, data = heapq.heappop(events)
        if now > horizon_s:
            break
        if kind == "arrive":
            submit(now, next_index)
            next_index += 1
            push(now + rng.expovariate(arrivals_per_s), "arrive")
            push(now, "dispatch")
        elif kind == "beats":
            # Each worker's registry heartbeat and its running run's heartbeat.
            beats = workers * (
                beat_every / overheads.heartbeat_s + beat_every / overheads.run_heartbeat_s
            )
            database.serve(now, db.write.latency_s * beats, ops=round(beats))
            push(now + beat_every, "beats")
        elif kind == "progress":
            database.serve(now, db.write.latency_s)
        elif kind == "dispatch":
            while free_workers and queue:
                worker = free_workers.pop()
                index, seconds, shapes = queue.popleft()
                delivered = broker.serve(now, message_s / 2, ops=1)  # fetch
                taken = database.serve(delivered, db.write.latency_s)  # take the run
                first_start.setdefault(index, taken)
                gpu_busy += max(0.0, min(taken + seconds, horizon_s) - taken)
                # One progress write per shape, spread over the shard, not waited for.
                for k in range(shapes):
                    push(taken + seconds * (k + 1) / shapes, "progress")
                push(taken + seconds, "shard_done", (worker, index, shapes))
            if backlog and len(queue) < workers * len(order):
                submit(now, next_index)
                next_index += 1
        elif kind == "shard_done":
            worker, index, shapes = data
            stored = database.serve(now, db.store_base_s + db.store_per_shape_s * shapes, ops=3 + 1)
            acked = broker.serve(stored, 0.0, ops=0)  # ack rides with the next fetch
            free_workers.append(worker)
            push(acked, "dispatch")
            remaining[index] -= 1
            if remaining[index] == 0:
                merged = site.serve(acked, db.merge_s + overheads.scoring_s)
                database.serve(acked, db.merge_s, ops=6)
                outcome.submissions_done += 1
                outcome.wait_s.append(first_start[index] - arrived[index])
                outcome.latency_s.append(merged - arrived[index])

    horizon = min(now, horizon_s)
    outcome.per_hour = outcome.submissions_done / horizon * 3600
    outcome.gpu_utilisation = min(1.0, gpu_busy / (workers * horizon))
    # Redis commands: the measured count per message over the messages handled.
    messages = broker.ops / 2
    outcome.broker_ops_per_s = messages * overheads.commands_per_message / horizon
    outcome.db_writes_per_s = database.ops / horizon
    outcome.broker_utilisation = broker.utilisation(horizon)
    outcome.db_utilisation = database.utilisation(horizon)
    outcome.site_utilisation = site.utilisation(horizon)
    return outcome


# --------------------------------------------------------------------------- report


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/8")
    parser.add_argument(
        "--postgres", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )
    parser.add_argument("--speedup", type=float, default=1.0,
                        help="candidate kernels' speed over eager (default 1)")  # fmt: skip
    parser.add_argument(
        "--measured",
        type=Path,
        default=None,
        help="a results.json of a whole submission measured on the GPU: its operators' times "
        "and child starts replace the modelled ones (--speedup, --operator-start-s and "
        "--ahead-start-s do not apply)",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=30,
        help="shards per submission (default 30: one per operator)",
    )
    parser.add_argument("--operator-start-s", type=float, default=10.2,
                        help="a shard's first operator child's time outside its shapes "
                        "(sandbox, python, torch, CUDA context, profiler, the candidate's "
                        "import, exit): 10.2 s, the first child of the H200 run "
                        "results/2026-12-01-h200-session4/triton-v1-run4.json")  # fmt: skip
    parser.add_argument("--ahead-start-s", type=float, default=0.3,
                        help="a later operator's child, started ahead, outside its shapes: "
                        "0.3 s, the median of the 13 others in that run")  # fmt: skip
    parser.add_argument("--workers", default="1,2,4,8,16,32,64")
    parser.add_argument("--hours", type=float, default=6.0, help="simulated time per case")
    parser.add_argument("--load", type=float, default=0.7, help="offered load of the wait runs")
    parser.add_argument("--site-workers", type=int, default=2)
    args = parser.parse_args(argv)

    calibration = calibrate()
    measured = measured_costs(args.measured) if args.measured else None
    if measured:
        costs = measured.costs
        args.operator_start_s, args.ahead_start_s = measured.first_start_s, measured.ahead_start_s
    else:
        costs = operator_costs(calibration, speedup=args.speedup)
    grouped = group_shards(
        costs, shards=args.shards, first_start_s=args.operator_start_s,
        ahead_start_s=args.ahead_start_s,
    )  # fmt: skip
    shards = [(seconds, count) for seconds, count, _ in grouped]
    gpu_seconds = sum(seconds for seconds, _ in shards)
    longest_shard = max(grouped, key=lambda shard: shard[0])
    names = longest_shard[2]
    label = names[0] if len(names) == 1 else f"{len(names)} operators, {names[0]} the longest"
    longest = (label, (longest_shard[0], longest_shard[1]))
    print(
        f"fleet_model on {socket.gethostname()} ({os.cpu_count()} CPUs), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print("GPU cost of one submission on atrex-bench v1 (30 operators, 440 shapes, H200)")
    if measured:
        print(
            f"  measured: {args.measured} (harness {measured.harness}), {measured.wall_s:.1f} s"
            f" in one shard; {sum(count for _, count in costs.values())} shapes"
        )
    else:
        for in_shapes, calls in calibration.runs:
            print(
                f"  calibration run: {in_shapes:.1f} s in shapes, of which GPU calls {calls:.1f} s"
            )
        print(
            f"  fixed cost per shape {calibration.fixed_per_shape_s:.3f} s;"
            f" candidate {args.speedup:g}x eager"
        )
    print(
        f"  child start: {args.operator_start_s:.2f} s for a shard's first operator (with the"
        f" run's own time outside its operators), {args.ahead_start_s:.2f} s for each started ahead"
    )
    print(
        f"  one submission: {gpu_seconds:.0f} GPU-s ({_minutes(gpu_seconds)} min) in "
        f"{len(shards)} shards; longest shard {longest[0]} {longest[1][0]:.0f} s"
    )

    print("\nMeasured on loopback")
    broker = measure_broker(args.redis)
    commands = redis_commands_per_message() or float("nan")
    database = measure_database(args.postgres)
    scoring_s = measure_scoring()
    print(
        f"  broker (Redis {args.redis}): publish+fetch+ack {broker.latency_s * 1e3:.3f} ms a"
        f" message alone; {broker.parallel:.1f}x with 4 clients -> "
        f"{broker.capacity_per_s:.0f} messages/s; {commands:.1f} Redis commands a message"
    )
    print(
        f"  database (PostgreSQL): one write {database.write.latency_s * 1e3:.3f} ms alone; "
        f"{database.write.parallel:.1f}x with 4 connections -> "
        f"{database.write.capacity_per_s:.0f} writes/s"
    )
    print(
        f"  shard results transaction {database.store_base_s * 1e3:.2f} ms"
        f" + {database.store_per_shape_s * 1e3:.3f} ms a shape; merge and publish of a"
        f" submission {database.merge_s * 1e3:.2f} ms in the database,"
        f" + {scoring_s * 1e3:.2f} ms of scoring (evaluator.scoring, 440 shapes) on the site worker"
    )
    overheads = Overheads(
        broker=broker,
        commands_per_message=commands,
        database=database,
        site_workers=args.site_workers,
        scoring_s=scoring_s,
        heartbeat_s=30.0,
        run_heartbeat_s=10.0,
    )

    horizon = args.hours * 3600
    print(
        f"\nN GPU workers, {args.hours:g} h simulated each; saturation: an endless backlog;"
        f" wait/latency: Poisson arrivals at {args.load:.0%} of that N's saturated rate"
    )
    header = (
        f"{'N':>3} {'subs/h':>7} {'GPU util':>8} {'wait p50':>8} {'wait p95':>8} "
        f"{'latency p50':>11} {'broker ops/s':>12} {'DB writes/s':>11} {'broker util':>11} "
        f"{'DB util':>8} {'site util':>9}  limit"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for workers in [int(n) for n in args.workers.split(",")]:
        saturated = simulate(
            workers=workers, shards=shards, overheads=overheads, arrivals_per_s=None,
            horizon_s=horizon,
        )  # fmt: skip
        loaded = simulate(
            workers=workers, shards=shards, overheads=overheads,
            arrivals_per_s=args.load * saturated.per_hour / 3600, horizon_s=horizon * 2,
        )  # fmt: skip
        shares = {
            "GPUs": saturated.gpu_utilisation,
            "broker": saturated.broker_utilisation,
            "database": saturated.db_utilisation,
            "site worker": saturated.site_utilisation,
        }
        limit = max(shares, key=shares.get)
        rows.append((workers, saturated, shares))
        print(
            f"{workers:>3} {saturated.per_hour:>7.1f} {saturated.gpu_utilisation:>8.1%} "
            f"{_minutes(_percentile(loaded.wait_s, 0.5)):>6} m "
            f"{_minutes(_percentile(loaded.wait_s, 0.95)):>6} m "
            f"{_minutes(_percentile(loaded.latency_s, 0.5)):>9} m "
            f"{saturated.broker_ops_per_s:>12.2f} {saturated.db_writes_per_s:>11.2f} "
            f"{saturated.broker_utilisation:>11.3%} {saturated.db_utilisation:>8.3%} "
            f"{saturated.site_utilisation:>9.3%}  {limit}"
        )

    print("\nWhere each resource would reach 100 % (linear in N from the largest case)")
    workers, saturated, shares = rows[-1]
    for name in ("broker", "database", "site worker"):
        share = shares[name]
        where = f"N = {workers / share:,.0f}" if share > 0 else "never"
        print(f"  {name:<12} {where}")
    single = longest[1][0] + (0.0 if measured else calibration.fixed_per_shape_s)
    print(
        f"  one submission's latency on an empty fleet cannot drop under its longest shard"
        f" ({longest[0]}, {single / 60:.1f} min) whatever N: split large operators by shape"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
