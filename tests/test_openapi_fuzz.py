"""The OpenAPI document, proven by a client no one here wrote: schemathesis (pinned) against a real worker.

It generates requests from the document for every operation and checks that the
worker never answers 5xx, answers only statuses the document lists, accepts every
request the document calls valid, and answers 405 with `Allow` to a method a route
does not support. The default suite runs the quick form (4 examples per operation, each
operation still held to every check); `-m slow` (`make test-slow`) runs 10 per operation.
Both are seeded, so a run is the same every time.

Every operation is held to all four checks: each constraint a handler enforces is in the
document. The worker holds one memory when the run starts, as a user's does; so an import,
which only an empty worker takes, is refused as the documented conflict (409) before the file
is read. No schema can say which files are exports (the header first, the end line's row
count), so whether an empty worker takes a fuzzed file is for tests/test_portability.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECKS = "not_a_server_error,status_code_conformance,positive_data_acceptance,unsupported_method"
# Examples per operation: schemathesis' own generation is most of the time (its CPU, not the worker's).
EXAMPLES_PER_OPERATION = [pytest.param(4, id="quick"), pytest.param(10, id="full", marks=pytest.mark.slow)]

ROOT = Path(__file__).resolve().parent.parent


def _refs(node, found):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            found.add(node["$ref"])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)
    return found


def test_every_reference_resolves_inside_the_document(shared_worker):
    doc = shared_worker.get("/api/v1/openapi.json")
    assert doc["openapi"] == "3.1.0"
    schemas = doc["components"]["schemas"]
    refs = _refs(doc, set())
    assert refs, "the document uses components"
    dangling = sorted(r for r in refs if not r.startswith("#/components/schemas/") or r.rsplit("/", 1)[1] not in schemas)
    assert not dangling, dangling
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)), "operationIds are unique"
    search = doc["paths"]["/v3/memories/search/"]["post"]
    assert search["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/Mem0SearchRequest")
    assert schemas["Mem0SearchRequest"]["properties"]["filters"]["$ref"] == "#/components/schemas/Filters"
    assert {"200", "400", "401", "404", "422", "500"} <= set(search["responses"])


def test_unsupported_methods_get_405_with_allow(shared_worker):
    status, body = shared_worker.request("PATCH", "/api/v1/memories/search", {})
    assert status == 405 and body["error"]["code"] == "method_not_allowed"
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{shared_worker.url}/v1/ping/", method="POST", data=b"{}")
    request.add_header("Authorization", f"Token {shared_worker.token}")
    try:
        urllib.request.urlopen(request, timeout=30)
    except urllib.error.HTTPError as exc:
        assert exc.code == 405 and "GET" in exc.headers["Allow"]
    else:
        raise AssertionError("POST /v1/ping/ must be refused")


def _schemathesis(worker, report: Path, examples: int, *args: str) -> dict:
    command = [
        str(Path(sys.executable).parent / "schemathesis"), "run", f"{worker.url}/api/v1/openapi.json",
        "-H", f"Authorization: Bearer {worker.token}", "--checks", CHECKS, "--phases", "fuzzing",
        "-n", str(examples), "--seed", "15", "--no-color", "--request-timeout", "60",
        "--report", "json", "--report-json-path", str(report), *args,
    ]  # fmt: skip
    # The hooks teach schemathesis the export file's media type (one JSON object a line).
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "openapi_fuzz_hooks", "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}"}
    # cwd: schemathesis keeps a crash cache in ./.schemathesis; not in the checkout.
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=report.parent, env=env)
    assert report.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(report.read_text())
    result["output"] = run.stdout
    return result


def _counts(result: dict) -> dict[str, int]:
    return {f["code"] + " " + f["title"]: f["count"] for f in result["failures"]}


@pytest.mark.both_backends
@pytest.mark.parametrize("examples", EXAMPLES_PER_OPERATION)
def test_schemathesis_finds_nothing(worker, tmp_path, examples):
    worker.post("/api/v1/memories", {"content": "The API is fuzzed with schemathesis", "infer": False})
    result = _schemathesis(worker, tmp_path / "strict.json", examples)
    counts = _counts(result)
    print(
        f"\nschemathesis {result['schemathesis_version']}: {result['operations']['tested']} operations, "
        f"{result['test_cases']['generated']} cases, failures: {counts or 'none'}"
    )
    assert result["operations"]["tested"] == result["operations"]["total"] >= 90, result["operations"]
    assert not result["errors"], result["errors"]
    assert not counts, result["output"][-6000:]
