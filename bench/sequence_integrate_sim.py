"""Sequence-then-integrate, simulated on real PostgreSQL, against today's single chain lock.

    $ .venv/bin/python bench/sequence_integrate_sim.py                  # 1,3,6 x 8,32, 2 rounds
    $ .venv/bin/python bench/sequence_integrate_sim.py --procs 3 --threads 16 --rounds 1 \
          --modes seq-thread --abort-every 200 --kill-integrator 3:2

Bench-only prototype of docs/scaling.md. Modes, each at the same processes x threads, in
the same run on the same throwaway server, interleaved (the order flips every round):

- ``lock``: today's store (bench/writers_bench.py's writer: ``AuditStore.append``, group
  commit, the ``audit_chain_lock()`` row lock, the chain guard).
- ``seq-group``: no chain lock. A process's group leader takes ``nextval`` for its batch
  from a PostgreSQL SEQUENCE, fills and hashes each body (the real ``prepare`` and body
  template), signs ``sha256(body)`` with the process's record key and commits payloads and
  events in one transaction; one transaction in flight per process, as today.
- ``seq-thread``: the same, but every thread commits its own event on its own connection.
- ``lock-raw``: seq-group's writer, trigger and tables, but positions from a lock held to
  COMMIT (``pg_advisory_xact_lock``, then the head): the lock alone, with the client code
  identical to seq-group's (not in the default ``--modes``).

Writers insert into ``sim.events`` (seq PRIMARY KEY, body, body_hash, signature); a row
trigger does the chain guard's per-row work that does not need the head (body hash, body
columns, payload references); payloads go to the real ``payloads`` table with its content
trigger. One integrator process links the contiguous committed prefix (``sim.links``:
hash = sha256(prev ‖ body_hash)), extends an RFC 6962 Merkle frontier, and commits a signed
checkpoint (size, root, chain head) every ``--checkpoint-s``. A seq that stays missing for
``--grace-s`` after a later one was reserved (its writer died after ``nextval``) gets a
void row signed by the integrator; the PRIMARY KEY makes the writer's late insert or the
void win, never both (``--races`` plays the three orders out). ``--abort-every N`` rolls
back every Nth writer transaction after taking its seqs; the writer then voids its own
seqs at once, signed by its record key (``--no-release``: it leaves the holes, as a writer
that died would). ``--kill-integrator AT:DOWN`` kills the integrator AT seconds into the
window and starts a new one DOWN seconds later (it resumes from its committed state).
``--integrate-after`` starts the integrator only when the writers are done: its capacity
on a backlog.

Checked after each seq run: seqs 1..M each exactly one event or void, every committed seq
a writer reported is an event, every body hashes to its body_hash, every signature checks
against the writer's (or integrator's) key, the links recompute, and the last checkpoint's
size and root are those of the whole log. Reported: writer events/s and latency, and the
integration lag (integrator commit minus the row's insert time) p50/p99/max.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import writers_bench as wb  # noqa: E402

from audit.canonical import canonical_bytes  # noqa: E402
from audit.proofs.merkle import tree_head  # noqa: E402
from audit.store._group import GroupCommitter  # noqa: E402
from audit.store._prepare import Prepared, prepare  # noqa: E402
from audit.store.chain import GENESIS, canonical_time  # noqa: E402
from audit.store.models import EventKind  # noqa: E402
from audit.store.signing import Signer, TrustedKeys  # noqa: E402

INTEGRATOR_KEY = "ee" * 32

SCHEMA = """
CREATE SCHEMA sim;
CREATE SEQUENCE sim.seq;
CREATE TABLE sim.events (
  seq bigint PRIMARY KEY,
  event_id text NOT NULL UNIQUE,
  request_id text NOT NULL,
  kind text NOT NULL,
  written_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  body bytea NOT NULL,
  body_hash text NOT NULL,
  signature text NOT NULL,
  key_id text NOT NULL
);
CREATE TABLE sim.links (seq bigint PRIMARY KEY, prev_hash text NOT NULL, hash text NOT NULL);
CREATE TABLE sim.checkpoints (
  size bigint PRIMARY KEY, root text NOT NULL, chain_head text NOT NULL,
  frontier text NOT NULL, signature text NOT NULL, made_at timestamptz NOT NULL
);
CREATE FUNCTION sim.events_guard() RETURNS trigger LANGUAGE plpgsql AS $g$
DECLARE b jsonb; ref text;
BEGIN
  IF NEW.body_hash IS DISTINCT FROM 'sha256:' || encode(sha256(NEW.body), 'hex') THEN
    RAISE EXCEPTION 'sim: body_hash of seq % is not sha256(body)', NEW.seq;
  END IF;
  b := convert_from(NEW.body, 'UTF8')::jsonb;
  IF b->'seq' IS DISTINCT FROM to_jsonb(NEW.seq) OR b->'event_id' IS DISTINCT FROM
     to_jsonb(NEW.event_id) OR b->'request_id' IS DISTINCT FROM to_jsonb(NEW.request_id)
     OR b->'kind' IS DISTINCT FROM to_jsonb(NEW.kind) THEN
    RAISE EXCEPTION 'sim: columns of seq % differ from its body', NEW.seq;
  END IF;
  IF jsonb_typeof(b->'payloads') = 'object' THEN
    FOR ref IN SELECT value FROM jsonb_each_text(b->'payloads') LOOP
      PERFORM 1 FROM public.payloads p WHERE p.digest = ref
        AND p.digest = 'sha256:' || encode(sha256(p.content), 'hex');
      IF NOT FOUND THEN RAISE EXCEPTION 'sim: seq % references a missing payload', NEW.seq;
      END IF;
    END LOOP;
  END IF;
  RETURN NEW;
END $g$;
CREATE TRIGGER events_guard BEFORE INSERT ON sim.events
  FOR EACH ROW EXECUTE FUNCTION sim.events_guard();
"""

EVENT_SQL = (
    "INSERT INTO sim.events (seq, event_id, request_id, kind, body, body_hash, signature, "
    "key_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
PAYLOAD_SQL = (
    "INSERT INTO payloads (digest, size, content) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- writers --------------------------------------------------------------------------------


class Aborted(Exception):
    """A transaction this writer rolled back on purpose after taking its seqs."""


class SeqWriter:
    """Commits prepared events with seqs from the SEQUENCE: no lock anywhere."""

    def __init__(
        self, dsn: str, signer: Signer, abort_every: int, *, release: bool, chain_lock: bool
    ) -> None:
        self.dsn, self.signer, self.abort_every = dsn, signer, abort_every
        self.releases = release
        self.chain_lock = chain_lock
        self.durability = canonical_bytes("fsync")
        self._count = 0
        self._lock = threading.Lock()

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.dsn, options="-c synchronous_commit=on")

    def commit(self, conn: Any, batch: list[Prepared]) -> list[int]:
        with self._lock:
            self._count += 1
            abort = self.abort_every > 0 and self._count % self.abort_every == 0
        seqs: list[int] = []
        try:
            if self.chain_lock:
                # lock-raw: the same writer, but positions from a lock held to COMMIT
                conn.execute("SELECT pg_advisory_xact_lock(42)")
                head = conn.execute("SELECT coalesce(max(seq), 0) FROM sim.events").fetchone()
                taken = list(range(head[0] + 1, head[0] + 1 + len(batch)))
            else:
                taken = [
                    r[0]
                    for r in conn.execute(
                        "SELECT nextval('sim.seq') FROM generate_series(1, %s)", (len(batch),)
                    ).fetchall()
                ]
            seqs = [] if self.chain_lock else taken  # only reserved seqs need voiding
            seqs_all = taken
            fixed = canonical_time(datetime.now(UTC))
            events, payloads = [], {}
            for seq, item in zip(seqs_all, batch, strict=True):
                body = item.body.fill(self.durability, fixed, seq)
                body_hash = sha(body)
                signature = self.signer.sign(body_hash)  # outside any lock
                d = item.draft
                key_id = self.signer.key_id
                events.append(
                    (
                        seq,
                        item.event_id,
                        d.request_id,
                        d.kind.value,
                        body,
                        body_hash,
                        signature,
                        key_id,
                    )
                )
                for r in item.payload_rows:
                    payloads[r["digest"]] = (r["digest"], r["size"], r["content"])
            with conn.cursor() as cur:
                cur.executemany(PAYLOAD_SQL, list(payloads.values()))
                cur.executemany(EVENT_SQL, events)
            if abort:
                raise Aborted
            conn.commit()
        except BaseException:
            conn.rollback()
            self.release(conn, seqs)
            raise
        return seqs_all

    def release(self, conn: Any, seqs: list[int]) -> None:
        """After a rollback, void the seqs this writer reserved, signed by its own key, so
        the integrator need not wait out its grace (only a writer that died leaves a hole
        for that). Best effort: if this fails too, the integrator's grace covers it."""
        if not seqs or not self.releases:
            return
        try:
            with conn.cursor() as cur:
                cur.executemany(
                    EVENT_SQL + " ON CONFLICT (seq) DO NOTHING",
                    [void_row(s, self.signer, "rolled back") for s in seqs],
                )
            conn.commit()
        except Exception:  # best effort, see above
            conn.rollback()


def child(args: argparse.Namespace) -> None:
    """A writer process of a seq mode; reports like writers_bench's writer."""
    signer = Signer.from_text(args.key)
    writer = SeqWriter(
        args.dsn,
        signer,
        args.abort_every,
        release=not args.no_release,
        chain_lock=args.mode == "lock-raw",
    )
    tag = f"p{args.index}"
    seqs: list[int] = []
    latencies: list[float] = []
    aborted = 0
    lock = threading.Lock()
    counter = iter(range(10**9))
    shared = writer.connect()
    # An abort fails its whole batch (no retry alone): the gateway fails those calls closed.
    group: GroupCommitter[Prepared, int] = GroupCommitter(
        lambda batch: writer.commit(shared, batch), retry_alone=lambda _exc: False
    )
    for kind in (EventKind.REQUEST, EventKind.RESPONSE):
        seqs.extend(writer.commit(shared, [prepare(wb.draft(tag, -1, kind))]))
    conns = [writer.connect() for _ in range(args.threads)] if args.mode == "seq-thread" else []
    Path(args.ready).write_text("ready")
    while not Path(args.go).exists():
        time.sleep(0.005)
    start_at = float(Path(args.go).read_text())
    stop_at = start_at + args.seconds
    while time.time() < start_at - wb.WARM_UP_S:
        time.sleep(0.001)

    def work(t: int) -> None:
        nonlocal aborted
        mine_seq: list[int] = []
        mine_lat: list[float] = []
        lost = 0
        while (now := time.time()) < stop_at:
            n = next(counter)
            for kind in (EventKind.REQUEST, EventKind.RESPONSE):
                t0 = time.perf_counter()
                item = prepare(wb.draft(tag, n, kind))
                try:
                    got = writer.commit(conns[t], [item])[0] if conns else group.submit(item)
                except Aborted:
                    lost += 1  # the gateway would fail this call closed; the pair ends
                    break
                if now >= start_at:
                    mine_lat.append(time.perf_counter() - t0)
                mine_seq.append(got)
        with lock:
            seqs.extend(mine_seq)
            latencies.extend(mine_lat)
            aborted += lost

    workers = [threading.Thread(target=work, args=(t,)) for t in range(args.threads)]
    for w in workers:
        w.start()
    while time.time() < start_at:
        time.sleep(0.001)
    cpu0, batches0 = os.times(), group.batches
    while time.time() < stop_at:
        time.sleep(0.005)
    cpu1 = os.times()
    batches = group.batches - batches0
    for w in workers:
        w.join()
    measured = len(latencies)
    out = {
        "index": args.index,
        "public_key": signer.public_key,
        "seqs": seqs,
        "measured": measured,
        "batches": batches if not conns else measured,
        "aborted": aborted,
        "cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 2),
        "latencies": [round(x * 1000, 3) for x in latencies],
        "lock": [],
    }
    Path(args.out).write_text(json.dumps(out))


# -- the integrator -------------------------------------------------------------------------


def leaf(link_hash: str) -> bytes:
    """RFC 6962 leaf of an event: H(0x00 || the raw bytes of its linked hash)."""
    return hashlib.sha256(b"\x00" + bytes.fromhex(link_hash.removeprefix("sha256:"))).digest()


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


class Frontier:
    """The RFC 6962 tree's right edge: one (size, hash) per perfect subtree, largest first."""

    def __init__(self, stack: list[tuple[int, bytes]] | None = None) -> None:
        self.stack = stack or []

    def push(self, leaf_hash: bytes) -> None:
        stack = self.stack
        stack.append((1, leaf_hash))
        while len(stack) >= 2 and stack[-1][0] == stack[-2][0]:
            (n, right), (_, left) = stack.pop(), stack.pop()
            stack.append((2 * n, node(left, right)))

    def root(self) -> bytes:
        if not self.stack:
            return hashlib.sha256(b"").digest()
        acc = self.stack[-1][1]
        for _, h in reversed(self.stack[:-1]):
            acc = node(h, acc)
        return acc

    def text(self) -> str:
        return json.dumps([[n, h.hex()] for n, h in self.stack])

    @classmethod
    def of(cls, text: str) -> Frontier:
        return cls([(n, bytes.fromhex(h)) for n, h in json.loads(text)])


def void_row(seq: int, signer: Signer, reason: str) -> tuple[Any, ...]:
    event_id = f"void-{seq}"
    body = canonical_bytes(
        {
            "event_id": event_id,
            "format": 2,
            "kind": "void",
            "reason": reason,
            "request_id": event_id,
            "seq": seq,
            "v": 1,
        }
    )
    body_hash = sha(body)
    return (seq, event_id, event_id, "void", body, body_hash, signer.sign(body_hash), signer.key_id)


def integrator(args: argparse.Namespace) -> None:
    """Link the committed prefix, extend the tree, checkpoint; resume from committed state."""
    import psycopg

    signer = Signer.from_text(INTEGRATOR_KEY)
    conn = psycopg.connect(args.dsn)
    row = conn.execute(
        "SELECT size, chain_head, frontier FROM sim.checkpoints ORDER BY size DESC LIMIT 1"
    ).fetchone()
    size, head, frontier = (
        (row[0], row[1], Frontier.of(row[2])) if row else (0, GENESIS, Frontier())
    )
    # Links committed after the last checkpoint are recomputed into the frontier.
    for seq, link in conn.execute(
        "SELECT seq, hash FROM sim.links WHERE seq > %s ORDER BY seq",
        (size,),
    ).fetchall():
        assert seq == size + 1
        frontier.push(leaf(link))
        size, head = seq, link
    conn.commit()
    lags: list[float] = []
    voids, checkpoints, busy = 0, 0, 0.0
    last_cp = time.time()
    stall: tuple[float, int] | None = None  # (since, every seq <= this was reserved before)
    stop = Path(args.stop)
    while True:
        t0 = time.perf_counter()
        rows = conn.execute(
            "SELECT seq, body_hash, extract(epoch FROM written_at)::float8 FROM sim.events "
            "WHERE seq > %s ORDER BY seq LIMIT 20000",
            (size,),
        ).fetchall()
        reserved = conn.execute("SELECT last_value, is_called FROM sim.seq").fetchone()
        conn.commit()
        assert reserved is not None
        last_reserved = reserved[0] if reserved[1] else 0
        prefix = []
        for r in rows:
            if r[0] != size + 1 + len(prefix):
                break
            prefix.append(r)
        if not prefix:
            if last_reserved > size:  # a hole at size + 1: in flight, or rolled back
                now = time.time()
                if stall is None:
                    bound = rows[0][0] - 1 if rows else last_reserved
                    stall = (now, bound)
                elif now - stall[0] >= args.grace_s:
                    # Every seq up to the bound was reserved before the stall was seen, so
                    # its writer had the whole grace to commit: void what is still missing.
                    with conn.cursor() as cur:
                        cur.executemany(
                            EVENT_SQL + " ON CONFLICT (seq) DO NOTHING",
                            [
                                void_row(s, signer, f"not committed within {args.grace_s} s")
                                for s in range(size + 1, stall[1] + 1)
                            ],
                        )
                        voids += cur.rowcount if cur.rowcount > 0 else 0
                    conn.commit()
                    stall = None
                    continue
            elif stop.exists():
                break
            time.sleep(0.02)
            continue
        stall = None
        links = []
        for seq, body_hash, _written in prefix:
            link = sha((head + body_hash).encode())
            frontier.push(leaf(link))  # the leaf is the linked hash, as audit.proofs.merkle's
            links.append((seq, head, link))
            head = link
        size = prefix[-1][0]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO sim.links (seq, prev_hash, hash) VALUES (%s, %s, %s)", links
            )
            if time.time() - last_cp >= args.checkpoint_s or stop.exists():
                checkpoint(cur, signer, size, head, frontier)
                checkpoints += 1
                last_cp = time.time()
        conn.commit()
        done = time.time()
        lags.extend(done - r[2] for r in prefix)
        busy += time.perf_counter() - t0
    with conn.cursor() as cur:  # the final state, so the parent can check the whole log
        if not cur.execute("SELECT 1 FROM sim.checkpoints WHERE size = %s", (size,)).fetchone():
            checkpoint(cur, signer, size, head, frontier)
            checkpoints += 1
    conn.commit()
    cpu = os.times()
    Path(args.out).write_text(
        json.dumps(
            {
                "integrated": len(lags),
                "size": size,
                "voids": voids,
                "checkpoints": checkpoints,
                "busy_s": round(busy, 2),
                "cpu_s": round(cpu.user + cpu.system, 2),
                "lags": [round(x * 1000, 1) for x in lags],
            }
        )
    )


def checkpoint(cur: Any, signer: Signer, size: int, head: str, frontier: Frontier) -> None:
    root = frontier.root().hex()
    note = f"sim\n{size}\n{root}\n{head}\n"
    cur.execute(
        "INSERT INTO sim.checkpoints VALUES (%s, %s, %s, %s, %s, now())",
        (size, root, head, frontier.text(), signer.sign(sha(note.encode()))),
    )


# -- the void races, played out deterministically ---------------------------------------------


def races(dsn: str) -> dict[str, str]:
    """The three orders of a writer's row and a void at the same seq, on real PostgreSQL:
    the primary key must let exactly one of them be stored, and a writer that loses must get
    an error (its gateway fails the call closed)."""
    import psycopg

    writer_key, integ_key = Signer.from_text("ab" * 32), Signer.from_text(INTEGRATOR_KEY)
    sql_void = EVENT_SQL + " ON CONFLICT (seq) DO NOTHING"

    def writer_row(conn: Any, seq: int) -> None:
        item = prepare(wb.draft("race", seq, EventKind.REQUEST))
        body = item.body.fill(canonical_bytes("fsync"), canonical_time(datetime.now(UTC)), seq)
        for r in item.payload_rows:
            conn.execute(PAYLOAD_SQL, (r["digest"], r["size"], r["content"]))
        digest, kid = sha(body), writer_key.key_id
        row = (seq, item.event_id, item.draft.request_id, "request", body, digest)
        conn.execute(EVENT_SQL, (*row, writer_key.sign(digest), kid))

    def void_in_thread(seq: int, out: dict[str, Any]) -> threading.Thread:
        def run() -> None:
            with psycopg.connect(dsn, autocommit=True) as c:
                out["rows"] = c.execute(sql_void, void_row(seq, integ_key, "race")).rowcount

        t = threading.Thread(target=run)
        t.start()
        return t

    def stored(seq: int) -> str:
        with psycopg.connect(dsn) as c:
            row = c.execute("SELECT kind FROM sim.events WHERE seq = %s", (seq,)).fetchone()
        return "nothing" if row is None else str(row[0])

    found: dict[str, str] = {}
    with psycopg.connect(dsn) as a:
        # 1. the writer's row is in flight when the void comes: the void waits, then yields
        seq = a.execute("SELECT nextval('sim.seq')").fetchone()[0]  # type: ignore[index]
        writer_row(a, seq)
        out: dict[str, Any] = {}
        t = void_in_thread(seq, out)
        time.sleep(0.5)
        waited = t.is_alive()
        a.commit()
        t.join()
        assert waited and out["rows"] == 0 and stored(seq) == "request", (waited, out)
        found["in flight, then commits"] = "void waited, then did nothing; the event stays"
        # 2. the same, but the writer rolls back: the void waits, then is stored
        seq = a.execute("SELECT nextval('sim.seq')").fetchone()[0]  # type: ignore[index]
        writer_row(a, seq)
        out = {}
        t = void_in_thread(seq, out)
        time.sleep(0.5)
        waited = t.is_alive()
        a.rollback()
        t.join()
        assert waited and out["rows"] == 1 and stored(seq) == "void", (waited, out)
        found["in flight, then rolls back"] = "void waited, then was stored"
        # 3. the void is committed first: the late writer's insert fails
        seq = a.execute("SELECT nextval('sim.seq')").fetchone()[0]  # type: ignore[index]
        a.commit()
        out = {}
        void_in_thread(seq, out).join()
        try:
            writer_row(a, seq)
            a.commit()
            raise AssertionError("a writer's row was stored over a void")
        except psycopg.errors.UniqueViolation:
            a.rollback()
        assert out["rows"] == 1 and stored(seq) == "void"
        found["void first, writer later"] = "the writer's INSERT failed: unique violation"
    return found


# -- the parent -----------------------------------------------------------------------------


def check_sim(dsn: str, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Every seq once (event or void), all hashes, signatures, links and the last root."""
    import psycopg

    keys = TrustedKeys.of(
        [r["public_key"] for r in reports] + [Signer.from_text(INTEGRATOR_KEY).public_key]
    )
    committed = sorted(s for r in reports for s in r["seqs"])
    leaves: list[bytes] = []
    head, n, voids = GENESIS, 0, 0
    with psycopg.connect(dsn) as conn:
        links = dict(
            (s, (p, h)) for s, p, h in conn.execute("SELECT seq, prev_hash, hash FROM sim.links")
        )
        events = set()
        for seq, kind, body, body_hash, sig, kid in conn.execute(
            "SELECT seq, kind, body, body_hash, signature, key_id FROM sim.events ORDER BY seq"
        ):
            n += 1
            if seq != n:
                raise AssertionError(f"seq {n} is missing (found {seq})")
            if sha(bytes(body)) != body_hash:
                raise AssertionError(f"seq {seq}: body does not hash to body_hash")
            problem = keys.check(kid, sig, body_hash)
            if problem is not None:
                raise AssertionError(f"seq {seq}: signature: {problem}")
            if kind == "void":
                voids += 1
            else:
                events.add(seq)
            link = sha((head + body_hash).encode())
            leaves.append(leaf(link))
            if links.get(seq) != (head, link):
                raise AssertionError(f"seq {seq}: link missing or wrong")
            head = link
        last = conn.execute(
            "SELECT size, root, chain_head FROM sim.checkpoints ORDER BY size DESC LIMIT 1"
        ).fetchone()
    if committed != sorted(events) or len(committed) != len(set(committed)):
        raise AssertionError("the committed seqs the writers saw are not the stored events")
    # The root is recomputed by the store's own RFC 6962 code, not the integrator's frontier.
    if last is None or tuple(last) != (n, tree_head(leaves).root.hex(), head):
        raise AssertionError(f"the last checkpoint {last} is not the log's ({n})")
    return {"events": n - voids, "voids": voids, "ok": True}


def run_seq_point(
    args: argparse.Namespace,
    server: Any,
    mode: str,
    procs: int,
    threads: int,
    work: Path,
) -> dict[str, Any]:
    import psycopg

    url, dsn, db = wb.fresh_postgres(server)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
    stop = work / "integrator-stop"
    stop.unlink(missing_ok=True)
    me = Path(__file__).resolve()

    def start_integrator(n: int) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, str(me), "--integrator", "--dsn", dsn, "--stop", str(stop)]
        cmd += ["--out", str(work / f"integrator-{n}.json")]
        cmd += ["--grace-s", str(args.grace_s), "--checkpoint-s", str(args.checkpoint_s)]
        return subprocess.Popen(cmd)

    # --integrate-after: the integrator starts once the writers are done, so its capacity is
    # measured on a backlog (big batches) rather than at the writers' arrival rate.
    integ = None if args.integrate_after else start_integrator(0)
    restarted: list[subprocess.Popen[bytes]] = []
    killer = None
    if args.kill_integrator:
        at, down = (float(x) for x in args.kill_integrator.split(":"))

        go = work / "go"  # written by writers_bench.spawn_writers: the window's start
        go.unlink(missing_ok=True)

        def kill_and_restart() -> None:
            while True:
                try:
                    start_at = float(go.read_text())
                    break
                except (FileNotFoundError, ValueError):
                    time.sleep(0.01)
            time.sleep(max(0.0, start_at + at - time.time()))
            assert integ is not None
            integ.send_signal(signal.SIGKILL)
            time.sleep(down)
            restarted.append(start_integrator(1))

        killer = threading.Thread(target=kill_and_restart, daemon=True)
        killer.start()
    extra = ["--mode", mode, "--dsn", dsn, "--abort-every", str(args.abort_every)]
    extra += ["--no-release"] if args.no_release else []
    figures, reports = wb.run_point(
        me, url, "fsync", procs, threads, args.seconds, work, dsn, db, extra
    )
    if killer is not None:
        killer.join()
    stop.write_text("stop")
    if integ is None:
        integ = start_integrator(0)
    finals = [integ, *restarted]
    for p in finals:
        p.wait(timeout=300)
    runs = [
        json.loads((work / f"integrator-{i}.json").read_text())
        for i in range(len(finals))
        if (work / f"integrator-{i}.json").exists()
    ]
    lags = [x for r in runs for x in r["lags"]]
    for i in range(len(finals)):
        (work / f"integrator-{i}.json").unlink(missing_ok=True)
    figures["integration"] = {
        "lag_p50_ms": wb.pct(lags, 0.5),
        "lag_p99_ms": wb.pct(lags, 0.99),
        "lag_max_ms": max(lags, default=0),
        "voids": sum(r["voids"] for r in runs),
        "checkpoints": sum(r["checkpoints"] for r in runs),
        # events linked per second of the integrator's busy time: its capacity
        "capacity_per_s": round(
            sum(r["integrated"] for r in runs) / max(0.01, sum(r["busy_s"] for r in runs))
        ),
        "cpu_s": round(sum(r["cpu_s"] for r in runs), 1),
        "aborted_calls": sum(r.get("aborted", 0) for r in reports),
    }
    figures["check"] = check_sim(dsn, reports)
    return figures


def show(mode: str, rnd: int, f: dict[str, Any]) -> None:
    integ = f.get("integration")
    wb.show(f"{mode} r{rnd}", f)
    if integ:
        print(f"{'':18} integration {json.dumps(integ)} check {json.dumps(f['check'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="1,3,6")
    parser.add_argument("--threads", default="8,32")
    parser.add_argument("--modes", default="lock,seq-group,seq-thread")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--abort-every", type=int, default=0)
    parser.add_argument(
        "--no-release", action="store_true", help="aborting writers leave their holes"
    )
    parser.add_argument("--kill-integrator", default="", help="AT:DOWN seconds")
    parser.add_argument("--grace-s", type=float, default=1.0)
    parser.add_argument("--integrate-after", action="store_true", help="integrate a backlog")
    parser.add_argument("--races", action="store_true", help="only the three void races")
    parser.add_argument("--checkpoint-s", type=float, default=2.0)
    parser.add_argument("--integrator", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("url", "key", "ready", "go", "out", "dsn", "stop", "mode", "durability"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.integrator:
        integrator(args)
        return
    if args.child:
        args.threads = int(args.threads)
        child(args)
        return
    if args.races:
        import psycopg

        with wb.postgres_server() as server:
            _url, dsn, _db = wb.fresh_postgres(server)
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(SCHEMA)
            for case, outcome in races(dsn).items():
                print(f"{case}: {outcome}")
        return
    points = [(int(p), int(t)) for p in args.procs.split(",") for t in args.threads.split(",")]
    modes = args.modes.split(",")
    work = Path(tempfile.mkdtemp(prefix="seq-sim-"))
    results: dict[str, Any] = {"machine": f"{os.cpu_count()} cores", "runs": [], "args": vars(args)}
    print(f"load {wb.load_triplet()}", flush=True)
    script = ROOT / "bench" / "writers_bench.py"
    try:
        with wb.postgres_server(max_connections=400) as server:
            for rnd in range(args.rounds):
                for procs, threads in points if rnd % 2 == 0 else points[::-1]:
                    for mode in modes if rnd % 2 == 0 else modes[::-1]:
                        if mode == "lock":
                            url, dsn, db = wb.fresh_postgres(server)
                            f, reports = wb.run_point(
                                script, url, "fsync", procs, threads, args.seconds, work, dsn, db
                            )
                            f["check"] = wb.check_log(url, reports)
                        else:
                            f = run_seq_point(args, server, mode, procs, threads, work)
                        f["mode"], f["round"] = mode, rnd
                        results["runs"].append(f)
                        show(mode, rnd, f)
    finally:
        for path in work.iterdir():
            path.unlink()
        work.rmdir()
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    target = out / f"seq-sim-{int(time.time())}.json"
    target.write_text(json.dumps(results, indent=2, default=str))
    print(f"written {target.relative_to(ROOT)}")
    by: dict[tuple[int, int, str], list[int]] = {}
    for f in results["runs"]:
        by.setdefault((f["procs"], f["threads"], f["mode"]), []).append(f["events_per_s"])
    for key, values in sorted(by.items()):
        print(key, values, round(statistics.mean(values)))


if __name__ == "__main__":
    main()
