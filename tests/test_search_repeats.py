"""A search returns each memory once: the same text said again is counted on one hit, and many hits of
one kind and title (ten downloads) show two, the first counting the rest; scores never rise down the list."""

from __future__ import annotations

BOOKS = ["Being You", "Surfing Uncertainty", "The Denial of Death", "Existential Psychotherapy", "Behave"]


def test_repeats_are_counted_not_shown(worker, tmp_path) -> None:
    project = str(tmp_path / "library")
    for book in BOOKS:
        worker.post("/api/v1/observations", {"type": "change", "summary": "annas: download", "project": project,
                                             "raw_input": f'{{"title": "{book}", "format": "epub"}}'}, expect=201)  # fmt: skip
    for _ in range(3):
        worker.post("/api/v1/observations", {"type": "note", "project": project,
                                             "summary": "The books still to download are listed in download-queue.md"}, expect=201)  # fmt: skip
    worker.wait_idle()
    hits = worker.post("/api/v1/memories/search", {"query": "which books were downloaded and which are left?", "top_k": 10,
                                                   "filters": {"project": project}})["results"]  # fmt: skip
    downloads = [h for h in hits if h["title"] == "annas: download"]
    assert len(downloads) == 2 and downloads[0]["similar"] == len(BOOKS) - 2 and "similar" not in downloads[1]
    queue = [h for h in hits if "download-queue.md" in h["memory"]]
    assert len(queue) == 1 and queue[0]["count"] == 3
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
