"""`memory-anchor bench scale` runs end to end (tiny n) and prints every figure it promises."""

from __future__ import annotations

import argparse
import io
from contextlib import redirect_stdout

import pytest

from memory_anchor.bench import scale


def _run(tmp_path, n: int, queries: int, idle_wait: float = 0) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert scale.run(argparse.Namespace(n=n, queries=queries, work_dir=tmp_path, idle_wait=idle_wait)) == 0
    return out.getvalue()


def test_scale_bench_prints_all_figures(tmp_path, monkeypatch):
    # The smallest run that still writes every project twice and opens the branches half-way (10 batches).
    monkeypatch.setattr(scale, "BATCH", 25)
    text = _run(tmp_path, 250, 5)
    for label in ("ingest", "search no filters, main", "search project+user, main",
                  "search project+user, branch", "search no filters, branch", "worker RSS", "disk"):  # fmt: skip
        assert label in text, text
    assert "250 stored" in text


def test_synthetic_text_is_varied():
    import random

    rng = random.Random(0)
    texts = {scale.memory_text(rng, n, "alice") for n in range(2000)}
    assert len(texts) > 1900  # realistic text, not one sentence repeated


@pytest.mark.slow
def test_scale_100k(tmp_path):
    print(_run(tmp_path, 100_000, 300, idle_wait=12))
