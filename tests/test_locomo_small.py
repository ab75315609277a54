"""LoCoMo retrieval: a quick recall check on a slice (regressions show), the full run marked slow.

The benchmark's store/search path is the public API's: these tests go through
a real worker over HTTP, exactly as `memory-anchor bench locomo` does.
"""

from __future__ import annotations

import argparse
import io
from contextlib import redirect_stdout

import pytest

from memory_anchor.bench import locomo
from tests.conftest import SHARED

DATA = SHARED / "bench" / "locomo-dev.json"

pytestmark = pytest.mark.skipif(not DATA.exists(), reason="LoCoMo dev file not present")


class _Client:
    """Adapts the test worker to the WorkerClient calls the benchmark makes."""

    def __init__(self, worker):
        self.worker = worker
        self.calls: list[tuple[str, dict]] = []

    def post(self, path: str, body: dict):
        self.calls.append((path, body))
        return self.worker.post(path, body)


def _slice(sessions: int = 4) -> locomo.Conversation:
    conv = locomo.load(DATA)[0]
    keep = {f"D{n}" for n in range(1, sessions + 1)}
    turns = tuple(t for t in conv.turns if t.dia_id.split(":")[0] in keep)
    questions = tuple(q for q in conv.questions if all(e.split(":")[0] in keep for e in q.evidence))
    return locomo.Conversation(conv.sample_id, turns, questions)


def test_loader_normalises_the_data():
    conversations = locomo.load(DATA)
    assert [c.sample_id for c in conversations] == ["conv-26", "conv-30", "conv-41"]
    first = conversations[0].turns[0]
    assert first.dia_id == "D1:1" and first.text.startswith("Caroline: ")
    assert first.timestamp.startswith("2023-05-08T13:56")
    assert locomo.normalise_dia_ids(["D8:6; D9:17", "D:11:26", "D1:3"]) == {"D8:6", "D9:17", "D11:26", "D1:3"}
    assert all(q.category in locomo.CATEGORIES for c in conversations for q in c.questions)


def test_recall_on_a_slice_through_the_api(worker):
    conv = _slice()
    assert len(conv.questions) >= 15
    client = _Client(worker)
    backend = locomo.ApiBackend(client)
    backend.store(conv)
    report = locomo.evaluate([conv], backend.search)
    hybrid = report["modes"]["hybrid"]["overall"]
    keyword = report["modes"]["keyword"]["overall"]
    dense = report["modes"]["vector"]["overall"]
    # Measured: on this slice (35 questions) hybrid R@10 0.93, BM25-only 0.70, dense-only 0.73.
    assert hybrid[10] >= 0.80, report
    assert hybrid[10] >= max(keyword[10], dense[10]), report
    assert hybrid[5] <= hybrid[10] <= hybrid[20]
    # The benchmark uses the public API only, and the default search sends no tuning knobs.
    paths = {path for path, _ in client.calls}
    assert paths == {"/api/v1/memories", "/api/v1/memories/search"}
    defaults = [b for p, b in client.calls if p.endswith("/search") and "mode" not in b]
    assert defaults and all(set(b) == {"query", "filters", "top_k"} for b in defaults)
    adds = [b for p, b in client.calls if p == "/api/v1/memories"]
    assert all(b["infer"] is False and b["metadata"].keys() == {"dia_id"} for b in adds)


def test_speaker_names_are_not_special(worker):
    """Renaming the speakers (in turns and questions alike) must not change recall much."""
    conv = _slice(2)
    renamed_turns = tuple(
        locomo.Turn(t.dia_id, t.text.replace("Caroline", "Zofia").replace("Melanie", "Ingrid").replace("Mel", "Ing"), t.timestamp)
        for t in conv.turns
    )
    renamed_qs = tuple(
        locomo.Question(q.text.replace("Caroline", "Zofia").replace("Melanie", "Ingrid"), q.evidence, q.category)
        for q in conv.questions
    )
    original = locomo.Conversation("orig", conv.turns, conv.questions)
    renamed = locomo.Conversation("renamed", renamed_turns, renamed_qs)
    backend = locomo.ApiBackend(_Client(worker))
    backend.store(original)
    backend.store(renamed)
    a = locomo.evaluate([original], backend.search, modes=("hybrid",))["modes"]["hybrid"]["overall"][10]
    b = locomo.evaluate([renamed], backend.search, modes=("hybrid",))["modes"]["hybrid"]["overall"][10]
    assert abs(a - b) <= 0.1, (a, b)


@pytest.mark.slow
def test_full_locomo_dev_benchmark(tmp_path):
    out = io.StringIO()
    with redirect_stdout(out):
        code = locomo.run(argparse.Namespace(data=DATA, work_dir=tmp_path, conversations=None, in_process=False))
    assert code == 0
    text = out.getvalue()
    print(text)
    assert "default (hybrid)" in text and "BM25 only" in text and "dense only" in text
