"""Export / import of the whole memory, and the reindex endpoint, against real workers.

The round trip fills one worker (memories with updates and deletes, a branch
and a branch of that branch, a snapshot), exports it, imports the file into a
fresh worker, and checks that every read answers the same there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, RunningWorker, start_worker

USER = "portability-user"


# --- helpers -----------------------------------------------------------------------


def export_text(worker: RunningWorker) -> str:
    request = urllib.request.Request(f"{worker.url}/api/v1/export")
    request.add_header("Authorization", f"Bearer {worker.token}")
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers["Content-Type"].startswith("application/x-ndjson")
        return response.read().decode("utf-8")


def import_text(worker: RunningWorker, text: str) -> tuple[int, dict]:
    return worker.request(
        "POST", "/api/v1/import", raw=text.encode("utf-8"), headers={"Content-Type": "application/x-ndjson"}
    )


def lines_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def rows_of(text: str) -> list[dict]:
    """The row lines, for comparing two exports (the header's timestamp differs)."""
    return [line for line in lines_of(text) if line["type"] == "row"]


def add(worker: RunningWorker, text: str, branch: str = "main") -> str:
    body = {"content": text, "infer": False, "user_id": USER, "branch": branch, "metadata": {"topic": "port"}}
    return worker.post("/api/v1/memories", body)["results"][0]["id"]


def create_branch(worker: RunningWorker, name: str, parent: str) -> None:
    worker.post("/api/v1/branches", {"name": name, "parent": parent}, expect=201)


def create_snapshot(worker: RunningWorker, label: str, branch: str) -> None:
    status, body = worker.request("POST", "/api/v1/snapshots", {"label": label, "branch": branch})
    assert status in (200, 201), (status, body)


def fill(worker: RunningWorker) -> dict:
    """A memory with history on three branches; returns what the reads are asked about."""
    ids = [add(worker, f"main memory {n}: the build uses tool number {n}") for n in range(6)]
    worker.request("PUT", f"/api/v1/memories/{ids[0]}", {"text": "main memory 0: the build now uses ninja"})
    worker.request("DELETE", f"/api/v1/memories/{ids[1]}")
    create_snapshot(worker, "before-experiment", "main")
    worker.request("PUT", f"/api/v1/memories/{ids[2]}", {"text": "main memory 2: rewritten after the snapshot"})
    create_branch(worker, "experiment", "main")
    ids.append(add(worker, "experiment only: try the cache in redis", branch="experiment"))
    worker.request("PUT", f"/api/v1/memories/{ids[3]}?branch=experiment", {"text": "experiment changed memory 3"})
    worker.request("DELETE", f"/api/v1/memories/{ids[4]}?branch=experiment")
    create_branch(worker, "experiment/child", "experiment")
    ids.append(add(worker, "grandchild note <b>not bold</b> & \"quoted\" 漢字", branch="experiment/child"))
    add(worker, "main moves on after the fork")
    merge = {"target": "main", "strategy": "cherry_pick", "items": [ids[6]]}
    worker.post("/api/v1/branches/experiment/merge", merge)
    # A fact of medium confidence waits for approval: a row in `approvals`.
    fact = {"text": "The staging database is on port 5433", "confidence": 0.8, "subject": "staging db port"}
    status, stored = worker.request("POST", "/api/v1/facts", fact)
    assert status < 300 and stored.get("approval_id"), (status, stored)
    for n in range(2):  # captured tool uses: observations, a session, FTS rows
        worker.post("/api/v1/events", tool_use_event_payload(n), expect=202)
    worker.wait_idle()
    return {"ids": ids, "branches": ["main", "experiment", "experiment/child"], "as_of": ["before-experiment", "3", "9"]}


def tool_use_event_payload(n: int) -> dict:
    from tests.conftest import tool_use_event

    return tool_use_event("portability-session", n, cwd="/tmp/portability-project")


def every_read(worker: RunningWorker, plan: dict) -> dict:
    """What the worker answers to every read the round trip must preserve."""
    answers: dict = {}
    for branch in plan["branches"]:
        for as_of in [None, *plan["as_of"]]:
            suffix = f"&as_of={as_of}" if as_of else ""
            answers[("list", branch, as_of)] = worker.request(
                "GET", f"/api/v1/memories?user_id={USER}&branch={branch}{suffix}"
            )
            answers[("timeline", branch, as_of)] = worker.request("GET", f"/api/v1/timeline?branch={branch}{suffix}")
            for record_id in plan["ids"]:
                answers[("get", branch, as_of, record_id)] = worker.request(
                    "GET", f"/api/v1/memories/{record_id}?branch={branch}{suffix}"
                )
                answers[("history", branch, as_of, record_id)] = worker.request(
                    "GET", f"/api/v1/memories/{record_id}/history?branch={branch}{suffix}"
                )
        answers[("keyword", branch)] = worker.request(
            "POST", "/api/v1/memories/search", {"query": "memory build", "mode": "keyword", "branch": branch, "top_k": 20}
        )
    for path in ("/api/v1/sessions", "/api/v1/branches", "/api/v1/snapshots", "/api/v1/merges",
                 "/api/v1/approvals?status=all", "/api/v1/facts?status=active,pending"):  # fmt: skip
        answers[path] = worker.request("GET", path)
    for fact in answers["/api/v1/facts?status=active,pending"][1]["results"]:
        fact.pop("effective_confidence")  # decays with the clock between the two workers' reads
    return answers


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """One source worker for the module, filled once: (worker, plan, its export)."""
    source = start_worker(tmp_path_factory.mktemp("source") / "data")
    try:
        plan = fill(source)
        yield source, plan, export_text(source)
    finally:
        source.stop()


@pytest.fixture
def target(tmp_path: Path):
    """A fresh, empty worker to import into."""
    running = start_worker(tmp_path / "target")
    yield running
    running.stop()


# --- the round trip ------------------------------------------------------------------


def test_round_trip_answers_every_read_the_same(filled, target):
    source, plan, text = filled
    before = every_read(source, plan)
    assert before[("list", "experiment/child", None)][0] == 200
    assert before[("get", "main", None, plan["ids"][1])][0] == 404  # deleted on main
    assert len(before[("history", "main", None, plan["ids"][0])][1]["results"]) == 2

    lines = lines_of(text)
    header, end = lines[0], lines[-1]
    assert header["type"] == "header" and header["format"] == "memory-anchor-export"
    assert end == {"type": "end", "rows": len(lines) - 2}
    tables = set(header["tables"])
    assert {"records", "branches", "snapshots", "sessions", "approvals", "conflicts", "merges"} <= tables
    assert not tables & {"inbox", "pending_vectors", "schema_migrations", "records_fts", "records_fts_data"}
    records = [line["row"] for line in lines if line["type"] == "row" and line["table"] == "records"]
    assert [r["seq"] for r in records] == sorted(r["seq"] for r in records)
    assert header["head_seq"] == records[-1]["seq"]

    status, result = import_text(target, text)
    assert status == 200, result
    assert result["imported"]["records"] == len(records)
    assert result["imported"]["branches"] == 3
    assert result["imported"]["merges"] == 1 and result["imported"]["approvals"] == 1
    assert result["queued_for_embedding"] > 0
    target.wait_idle()  # the vector queue the import filled drains

    after = every_read(target, plan)
    assert after.keys() == before.keys()
    for key in before:
        assert after[key] == before[key], key
    # What was exported comes back out unchanged: the same rows, keys and seqs.
    assert rows_of(export_text(target)) == rows_of(text)
    # The sequence goes on from the imported head: a new write gets the next seq.
    new_id = add(target, "written after the import")
    assert target.get(f"/api/v1/memories/{new_id}")["seq"] == header["head_seq"] + 1
    # Dense search works on the rebuilt vector index.
    hits = target.post("/api/v1/memories/search", {"query": "build uses ninja", "mode": "vector", "top_k": 3})
    assert plan["ids"][0] in [h["id"] for h in hits["results"]]


def test_bad_files_are_refused_whole_then_the_cli_imports(filled, target, tmp_path: Path):
    source, plan, text = filled
    lines = text.splitlines()

    def refused(body_text: str, expect: str, status: int = 400, code: str = "invalid_export") -> None:
        answer, body = import_text(target, body_text)
        assert answer == status, body
        assert body["error"]["code"] == code, body
        assert expect in body["error"]["message"], body

    def untouched() -> None:
        # All or nothing: the target is still empty after every refusal.
        assert target.get("/api/v1/status")["records"] == {}

    refused("\n".join([*lines[:3], "{not json", *lines[3:]]) + "\n", "line 4: not valid JSON")
    untouched()
    refused("\n".join(lines[:-1]) + "\n", "truncated")
    refused("", "empty")
    refused('{"type": "row", "table": "records", "row": {}}\n', "line 1: not a Memory Anchor export")
    record_line = next(n for n, line in enumerate(lines) if '"table": "records"' in line)

    def with_record(change: dict, duplicate: bool = False) -> str:
        row = json.loads(lines[record_line])
        row["row"].update(change)
        middle = [lines[record_line], json.dumps(row)] if duplicate else [json.dumps(row)]
        return "\n".join([*lines[:record_line], *middle, *lines[record_line + 1 :]]) + "\n"

    refused(with_record({"no_such_column": 1}), f"line {record_line + 1}: table 'records' has no column(s)")
    refused(with_record({"op": "edit"}), f"line {record_line + 1}: op")
    refused(with_record({"data": "[1, 2]"}), "records.data must be the text of a JSON object")
    refused(with_record({}, duplicate=True), f"line {record_line + 2}: cannot insert into records: UNIQUE constraint")
    refused(with_record({"branch": "nowhere"}), "unknown branch(es): nowhere")
    newer = json.loads(lines[0])
    newer["migrations"].append("9999_from_the_future")
    refused("\n".join([json.dumps(newer), *lines[1:]]) + "\n", "9999_from_the_future", code="incompatible_export")
    untouched()

    out = tmp_path / "memory.jsonl"

    def cli(worker: RunningWorker, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(worker.data_dir), *args],
            cwd=ROOT, env=worker.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    done = cli(source, "export", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert rows_of(out.read_text()) == rows_of(text)
    assert rows_of(cli(source, "export").stdout) == rows_of(text)

    done = cli(target, "import", str(out))
    assert done.returncode == 0, done.stderr
    record_count = sum(1 for r in rows_of(text) if r["table"] == "records")
    assert f"records {record_count}" in done.stdout, done.stdout
    listed = target.get(f"/api/v1/memories?user_id={USER}")
    assert listed == source.get(f"/api/v1/memories?user_id={USER}")

    # Now the target holds records: a second import is refused and changes nothing.
    refused(text, "empty data dir", status=409, code="not_empty")
    again = cli(target, "import", str(out))
    assert again.returncode == 1 and "already holds" in again.stderr
    assert target.get(f"/api/v1/memories?user_id={USER}") == listed
    missing = cli(target, "import", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_reindex_rebuilds_the_vector_index(filled):
    source, plan, _text = filled
    expected = sum(1 for r in rows_of(_text) if r["table"] == "records" and r["row"]["op"] == "put" and r["row"]["text"])
    result = source.post("/api/v1/admin/reindex", {})
    assert result["indexed"] == expected and result["seconds"] >= 0
    assert source.get("/api/v1/status")["pending_vectors"] == 0
    hits = source.post("/api/v1/memories/search", {"query": "build uses ninja", "mode": "vector", "top_k": 3})
    assert plan["ids"][0] in [h["id"] for h in hits["results"]]
