"""Fuzzing the event path: no input can stop capture.

Hypothesis generates hook payloads for every event kind, each valid or broken
one way (a field of the wrong type, a missing field, huge strings, invalid
UTF-8, NUL bytes, lone surrogates, line separators, deep nesting, torn or
non-object bodies), and posts them in batches, from several threads at once,
to one real worker. Every batch holds every breakage (cycled, in a shuffled order),
so a small run already tries each one many times; examples are derandomized, so a run
is the same every time. After every batch a valid event must become an observation
within seconds (the pipeline never stalls). At the end, every event the worker
acknowledged is processed or quarantined (nothing is lost) and the worker is
healthy. The spool, which hooks write when the worker is away, gets the same
treatment with torn and malformed lines.

The default suite runs the quick form (720 HTTP events, 240 spool lines); `-m slow`
(`make test-slow`) the full one (2,160 events, 600 lines). Run with `-s` to see the tally.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from memory_anchor.core import paths
from memory_anchor.hookkit import spool as hook_spool
from memory_anchor.hookkit.fields import FIELD_TYPES, MAX_DEPTH, SESSION_ID_FIELDS, json_type, session_id_problem
from memory_anchor.schemas.events import EVENT_ID_HEADER, HOOK_EVENTS
from tests.conftest import tool_use_event, wait_for
from memory_anchor.worker.capture.inbox import dedup_key

# A real worker shrinks badly (each try is a batch of HTTP posts), so no shrinking:
# a failure reports the event that broke an invariant as it was generated.
BATCH_SIZE = 60  # each of the 14 breakages 4 or 5 times a batch
SPOOL_LINES = 40  # each of the 10 kinds of spool line 4 times a batch
# How many batches: the quick form in the default suite, the full one under `-m slow`.
BATCHES = [pytest.param(12, id="quick"), pytest.param(36, id="full", marks=pytest.mark.slow)]
SPOOL_BATCHES = [pytest.param(6, id="quick"), pytest.param(15, id="full", marks=pytest.mark.slow)]
NO_CAP = 1 << 40  # the spool test appends without the hooks' size cap

ODD = ["\x00", "\u2028", "\u2029", "\x85", "\ud800", "\udfff", "\ufeff", "\u202e", "\U0001f600", "\x1b[31m", "\r", "\n"]
odd_text = st.lists(st.sampled_from(ODD) | st.text(max_size=8), max_size=8).map("".join)
huge_text = st.integers(20_000, 400_000).map(lambda n: ("line of output with token=ghp_" + "a" * 36 + "\n") * (n // 70))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | odd_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_text, inner, max_size=3),
    max_leaves=6,
)

BREAKAGES = ["none", "wrong_type", "missing", "huge", "nul", "surrogate", "separators", "deep_ok", "deep",
             "extra", "bad_utf8", "torn", "not_object", "no_kind"]  # fmt: skip


def valid_payload(kind: str, session_id: str, n: int) -> dict:
    """What Claude Code sends for `kind` (see shared/docs/claude-code-e2e.md)."""
    if kind == "PostToolUse":
        return tool_use_event(session_id, n, cwd="/tmp/fuzz-project")
    extra = {
        "SessionStart": {"source": "startup"},
        "UserPromptSubmit": {"prompt": f"fuzz prompt {n}", "permission_mode": "default"},
        "PreCompact": {"trigger": "auto", "custom_instructions": None},
        "Stop": {"stop_hook_active": False, "last_assistant_message": "done"},
        "SessionEnd": {"reason": "other"},
    }[kind]
    return {"session_id": session_id, "transcript_path": f"/tmp/.claude/projects/x/{session_id}.jsonl",
            "cwd": "/tmp/fuzz-project", "hook_event_name": kind, **extra}  # fmt: skip


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def every_kind_in_turn(strategy, kinds: list[str], size: int):
    """`size` draws of `strategy(kind)`, the kinds taken in turn, then shuffled: each batch holds every kind."""
    return st.tuples(*(strategy(kinds[n % len(kinds)]) for n in range(size))).flatmap(st.permutations)


@st.composite
def hook_events(draw, breakage: str) -> tuple[str, bytes, str]:
    """(breakage, body, expected outcome: 'accept', 'refuse' or 'either')."""
    kind = draw(st.sampled_from(HOOK_EVENTS))
    payload = valid_payload(kind, f"fuzz-{draw(st.integers(0, 30))}", draw(st.uuids()).int)
    strings = [k for k, v in payload.items() if isinstance(v, str) and k != "hook_event_name"]
    expect = "accept"
    if breakage == "wrong_type":
        field = draw(st.sampled_from(sorted(FIELD_TYPES[kind].keys() - {"hook_event_name"})))
        payload[field] = draw(json_values)
        allowed = FIELD_TYPES[kind][field]
        kind_of = json_type(payload[field])
        ok = kind_of in allowed or (kind_of == "integer" and "number" in allowed)
        deep = isinstance(payload[field], (list, dict)) and len(json.dumps(payload[field])) > 10**6
        bad_id = field in SESSION_ID_FIELDS and isinstance(payload[field], str) and session_id_problem(payload[field])
        expect = "accept" if ok and not deep and not bad_id else "refuse"
    elif breakage == "missing":
        for field in draw(st.lists(st.sampled_from(sorted(payload.keys() - {"hook_event_name"})), unique=True)):
            del payload[field]
    elif breakage == "huge" and strings:
        field = draw(st.sampled_from(strings))
        payload[field] = draw(huge_text)
        expect = "refuse" if field in SESSION_ID_FIELDS else "accept"  # an id is bounded; other text is cut
    elif breakage in ("nul", "surrogate", "separators") and strings:
        char = {"nul": "\x00", "surrogate": draw(st.sampled_from(["\ud800", "\udfff"])), "separators": "\u2028\x85\u2029"}[breakage]
        field = draw(st.sampled_from(strings))
        payload[field] = char + payload[field] + char
        if breakage == "nul" and field in SESSION_ID_FIELDS:
            expect = "refuse"  # a control character in an id is refused; in other text it is kept
    elif breakage == "extra":
        payload[draw(odd_text.filter(lambda k: k not in FIELD_TYPES[kind]))] = draw(json_values)
    elif breakage == "no_kind":
        del payload["hook_event_name"]
        expect = "refuse"
    body = json.dumps(payload, ensure_ascii=draw(st.booleans()) or breakage == "surrogate").encode("utf-8", "surrogatepass")
    if breakage in ("deep_ok", "deep"):
        depth = draw(st.integers(1, MAX_DEPTH - 1)) if breakage == "deep_ok" else draw(st.integers(MAX_DEPTH + 1, 100_000))
        body = body[:-1] + b', "nested_thing": ' + nested(depth).encode() + b"}"
        expect = "accept" if breakage == "deep_ok" else "refuse"
    elif breakage == "bad_utf8":
        cut = draw(st.integers(1, len(body) - 2))
        bad = draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\x80\x80"]))
        body = body[:cut] + bad + body[cut:]
        # An encoded surrogate (CESU-8) is read leniently, then scrubbed before storage: either outcome is fine.
        expect = "either" if bad == b"\xed\xa0\x80" else "refuse"
    elif breakage == "torn":
        body = body[: draw(st.integers(0, len(body) - 1))]
        expect = "refuse"
    elif breakage == "not_object":
        body = json.dumps(draw(st.lists(json_values, max_size=3) | st.integers() | odd_text)).encode("utf-8", "surrogatepass")
        expect = "refuse"
    return breakage, body, expect


class Poster:
    """One keep-alive connection per thread, as a busy machine's hooks would hit the worker."""

    def __init__(self, worker):
        self.worker = worker
        self.local = threading.local()

    def post(self, body: bytes) -> tuple[int, dict]:
        headers = {"Authorization": f"Bearer {self.worker.token}", "Content-Type": "application/json",
                   EVENT_ID_HEADER: str(uuid.uuid4())}  # as a hook sends it: each post is its own event  # fmt: skip
        for attempt in range(2):
            conn = getattr(self.local, "conn", None) or http.client.HTTPConnection("127.0.0.1", self.worker.port, timeout=120)
            self.local.conn = conn
            try:
                conn.request("POST", "/api/v1/events", body, headers)
                response = conn.getresponse()
                data = response.read()
                return response.status, json.loads(data) if data else {}
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def inbox_statuses(worker, ids: list[int]) -> Counter:
    with sqlite3.connect(f"file:{paths.database_path(worker.data_dir)}?mode=ro", uri=True) as conn:
        found = Counter()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = conn.execute(f"SELECT status FROM inbox WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            found.update(row[0] for row in rows)
    found["missing"] = len(ids) - sum(found.values())
    return found


def canary_flows(worker, name: str) -> None:
    """A valid event sent now becomes an observation within seconds: the pipeline is not stalled."""
    worker.post("/api/v1/events", tool_use_event(name, 0, cwd="/tmp/fuzz-canary"), expect=202)
    wait_for(lambda: worker.get(f"/api/v1/observations?session_id={name}")["total"] == 1, timeout=90,
             what=f"{name} observed")  # fmt: skip


@pytest.mark.timeout(900)  # a busy machine; a stall fails the canary's wait long before this
@pytest.mark.parametrize("batch_count", BATCHES)
def test_no_generated_event_can_stop_capture(shared_worker, batch_count):
    worker, poster = shared_worker, Poster(shared_worker)
    tally, accepted, by_breakage = Counter(), set(), Counter()
    batches = iter(range(10**6))

    @settings(max_examples=batch_count, deadline=None, database=None, phases=[Phase.generate], derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])  # fmt: skip
    @given(every_kind_in_turn(hook_events, BREAKAGES, BATCH_SIZE))
    def one_batch(events):
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda e: poster.post(e[1]), events))
        for (breakage, body, expect), (status, answer) in zip(events, answers):
            tally["generated"] += 1
            by_breakage[breakage] += 1
            assert status < 500, (breakage, body[:300], status, answer)
            if expect == "accept":
                assert status == 202, (breakage, body[:300], status, answer)
            elif expect == "refuse":
                assert 400 <= status < 500, (breakage, body[:300], status, answer)
                assert answer["error"]["message"], answer
            if status == 202:
                accepted.add(answer["id"])
            else:
                tally["refused"] += 1
        canary_flows(worker, f"fuzz-canary-{next(batches)}")

    one_batch()
    worker.wait_idle(timeout=300)
    statuses = inbox_statuses(worker, sorted(accepted))
    assert statuses["missing"] == 0 and not statuses.get("pending"), statuses
    tally["accepted (distinct)"] = len(accepted)
    tally["processed"] = statuses["done"]
    tally["quarantined"] = statuses["quarantined"]
    assert statuses["done"] + statuses["quarantined"] == len(accepted), "nothing acknowledged is lost"
    assert tally["generated"] == batch_count * BATCH_SIZE
    assert min(by_breakage[b] for b in BREAKAGES) >= batch_count * (BATCH_SIZE // len(BREAKAGES)), by_breakage
    assert worker.process.poll() is None and worker.get("/api/health", token=None)["status"] == "ok"
    print(f"\nfuzz (HTTP): {dict(tally)}\nby breakage: {dict(sorted(by_breakage.items()))}")


SPOOL_LINE_KINDS = ["valid", "valid_odd", "torn", "garbage", "not_object", "no_payload", "payload_not_object",
                    "wrong_type", "bad_utf8", "blank"]  # fmt: skip


@st.composite
def spool_lines(draw, kind: str) -> tuple[str, bytes]:
    """(kind of line, line bytes without its newline): valid entries and every way a line can be broken."""
    n = draw(st.uuids()).int
    event = valid_payload(draw(st.sampled_from(HOOK_EVENTS)), "spool-fuzz", n)
    entry = {"id": f"spool-fuzz-{n}", "received_at": draw(st.floats(0, 2e9) | st.just(None)), "branch": None,
             "agent_id": None, "payload": event}  # fmt: skip
    if kind == "valid_odd":
        string_fields = [k for k, v in event.items() if isinstance(v, str) and k not in ("hook_event_name", *SESSION_ID_FIELDS)]
        event[draw(st.sampled_from(string_fields))] = "\u2028 \x85 \x00 \u2029" + draw(odd_text).replace("\ud800", "").replace("\udfff", "")
        entry["received_at"] = draw(st.sampled_from(["yesterday", [1], True, None]))
    elif kind == "no_payload":
        del entry["payload"]
    elif kind == "payload_not_object":
        entry["payload"] = draw(st.lists(json_values, max_size=2) | odd_text)
    elif kind == "wrong_type":
        event["cwd"] = draw(st.lists(st.integers(), min_size=1) | st.integers() | st.dictionaries(st.text(), st.none(), min_size=1))
    line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if kind == "torn":
        line = line[: draw(st.integers(1, len(line) - 1))]
    elif kind == "garbage":
        line = b"\x00" + draw(st.binary(max_size=40)).replace(b"\n", b" ")
    elif kind == "not_object":
        line = json.dumps(draw(st.lists(st.integers(), max_size=3) | st.integers())).encode()
    elif kind == "bad_utf8":
        cut = draw(st.integers(1, len(line) - 1))
        line = line[:cut] + b"\xff\xfe" + line[cut:]
    elif kind == "blank":
        line = b"   "
    return kind, line


@pytest.mark.timeout(900)
@pytest.mark.parametrize("batch_count", SPOOL_BATCHES)
def test_torn_and_malformed_spool_lines_are_kept_aside_and_the_rest_ingested(shared_worker, batch_count):
    worker = shared_worker
    spool, rejected = paths.spool_path(worker.data_dir), worker.data_dir / "spool.rejected.jsonl"
    tally, valid_keys = Counter(), []

    @settings(max_examples=batch_count, deadline=None, database=None, phases=[Phase.generate], derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(every_kind_in_turn(spool_lines, SPOOL_LINE_KINDS, SPOOL_LINES))
    def one_spool(lines):
        before = len(rejected.read_bytes().split(b"\n")) - 1 if rejected.exists() else 0
        # Appended as hooks append (under the spool's shared lock, so the worker never takes the
        # file half-written); the torn lines are torn in the data itself.
        hook_spool.append(str(spool), b"\n".join(line for _, line in lines) + b"\n", cap=NO_CAP)
        # Ingested on request at once, rather than waiting out the pipeline's next pass (up to
        # a second per batch); that pass may still take the file first: either way, once.
        worker.post("/api/v1/spool/ingest", {})
        ingested = lambda: not spool.exists() and not list(spool.parent.glob(f"{spool.name}.*.ingesting"))  # noqa: E731
        wait_for(ingested, timeout=90, what="spool ingested")
        after = len(rejected.read_bytes().split(b"\n")) - 1 if rejected.exists() else 0
        kinds = Counter(kind for kind, _ in lines)
        must_reject = sum(kinds[k] for k in ("torn", "garbage", "not_object", "no_payload", "payload_not_object", "wrong_type"))
        non_blank = len(lines) - kinds["blank"]
        assert must_reject <= after - before <= non_blank - kinds["valid"] - kinds["valid_odd"], (kinds, after - before)
        tally.update(kinds)
        tally["rejected"] += after - before
        entries = [json.loads(line) for kind, line in lines if kind in ("valid", "valid_odd")]
        valid_keys.extend(dedup_key(entry["payload"], entry["id"]) for entry in entries)

    one_spool()
    worker.wait_idle(timeout=300)
    with sqlite3.connect(f"file:{paths.database_path(worker.data_dir)}?mode=ro", uri=True) as conn:
        stored = dict(conn.execute("SELECT dedup_key, status FROM inbox").fetchall())
    for key in valid_keys:
        assert stored.get(key) in ("done", "quarantined"), (key, "a valid spooled event is not lost")
    assert sum(tally[kind] for kind in SPOOL_LINE_KINDS) == batch_count * SPOOL_LINES
    tally["valid ingested"] = len(set(valid_keys))
    tally["quarantined"] = sum(1 for key in set(valid_keys) if stored[key] == "quarantined")
    assert worker.process.poll() is None and worker.get("/api/health", token=None)["status"] == "ok"
    canary_flows(worker, "fuzz-canary-spool")
    print(f"\nfuzz (spool): {dict(tally)}")
