"""The indexer embeds each text once: what sessions repeat costs no second run of the model.

An import of 107 real sessions embedded the same texts again and again (the same file
read in every session, the same command run, a summary rewritten at Stop and at
SessionEnd): a third of its texts, and embedding is most of an import's cost.
The real model runs here; it is only watched, to count which texts reach it.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from memory_anchor.core import paths
from memory_anchor.worker.index.embeddings import Embedder
from memory_anchor.worker.index.indexer import RECENT_TEXTS, REPLY_MAX_TOKENS, Indexer, embedding_text
from memory_anchor.worker.index.chroma_store import ChromaStore
from memory_anchor.worker.index.vectors import Vectors
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import Records

PROJECT = "/home/dev/shop"


class WatchedEmbedder(Embedder):
    """The real model, counting the texts it is given."""

    def __init__(self):
        super().__init__()
        self.texts: list[str] = []
        self.kept: list[bool] = []  # each call's keep_arena
        self.released = 0

    def embed(self, texts, **options):
        self.texts += list(texts)
        self.kept.append(bool(options.get("keep_arena")))
        return super().embed(texts, **options)

    def release_arena(self):
        self.released += 1
        super().release_arena()


@pytest.fixture(scope="module")
def embedder():
    return WatchedEmbedder()


@pytest.fixture
def store(tmp_path, embedder):
    db = Database(paths.database_path(tmp_path))
    vectors = Vectors(paths.chroma_path(tmp_path))
    embedder.texts.clear()
    yield db, vectors, Indexer(db, vectors, embedder)
    vectors.close()
    db.close()


def prompt(db, title: str, rest: str, session: str) -> dict:
    """A prompt of the user's, a kind that is embedded by its text."""
    with db.transaction() as conn:
        return Records.put(conn, "prompt", f"{title}\n{rest}", title=title, project=PROJECT, session_id=session,
                           user_id="alice")  # fmt: skip


def test_a_text_sessions_repeat_is_embedded_once(store, embedder):
    db, vectors, indexer = store
    read = ("Read /home/dev/shop/app/cart.py", "Read /home/dev/shop/app/cart.py: 80 lines; starts `class Cart:`")
    first = [prompt(db, *read, "s1"), prompt(db, *read, "s1"), prompt(db, "Ran `pytest -q`", "3 passed", "s1")]
    assert indexer.drain() == 3
    later = [prompt(db, *read, "s2"), prompt(db, "Ran `make lint`", "clean", "s2")]  # a later batch
    assert indexer.drain() == 2
    assert sorted(embedder.texts) == sorted([embedding_text(first[0]), embedding_text(first[2]), embedding_text(later[1])])
    # every version has its vector, the same one for the same text
    index = vectors.index
    same = [index.vector(r["seq"]) for r in (*first[:2], later[0])]
    assert all(np.array_equal(same[0], v) for v in same)
    assert not np.array_equal(same[0], index.vector(first[2]["seq"]))
    fresh = Embedder().embed([embedding_text(first[0])])[0]
    assert float(np.dot(fresh, same[0])) > 0.999  # what the model gives that text on its own


def test_paths_in_the_project_are_embedded_as_the_project_names_them(store):
    db, _, _ = store
    edit = prompt(db, "Edited /home/dev/shop/app/cart.py", "In /home/dev/shop/app/cart.py: `total()` → `sum(...)`", "s1")
    assert embedding_text(edit) == "Edited app/cart.py\nIn app/cart.py: `total()` → `sum(...)`"
    elsewhere = prompt(db, "Read /etc/hosts", "Read /etc/hosts: 3 lines", "s1")
    assert "/etc/hosts" in embedding_text(elsewhere)  # outside the project: the full path is what names it


def test_the_texts_kept_for_reuse_are_bounded(store, embedder):
    db, _, indexer = store
    for n in range(40):
        prompt(db, f"Ran `job {n}`", f"step {n} finished", "s1")
    indexer.drain()
    assert len(indexer._recent) == 40 <= RECENT_TEXTS
    for n in range(RECENT_TEXTS):
        indexer._remember(f"text {n}", np.zeros(Embedder.dimension, dtype=np.float32))
    assert len(indexer._recent) == RECENT_TEXTS and "text 0" in indexer._recent
    assert not any(text.startswith("Ran `job") for text in indexer._recent)  # the oldest went first


def test_an_observation_gets_no_vector_and_a_memory_is_embedded_whole(store, embedder):
    """A tool call is found by its words (files, commands, errors); its meaning is in the session's
    summary and Claude's replies. A memory, a prompt or a session summary is what the user asked or
    was told: embedded whole (up to the model's window)."""
    db, vectors, indexer = store
    # A summary as the local distiller wrote it for a real session of the django replay.
    summary = ("`python reproduce.py` → Traceback (most recent call last):; django.core.exceptions."
               "ImproperlyConfigured: Application labels aren't unique, duplicates: contenttypes")
    with db.transaction() as conn:
        ran = Records.put(conn, "observation", f"Ran `python reproduce.py`\n{summary}", title="Ran `python reproduce.py`",
                          data={"summary": summary}, project=PROJECT, session_id="s1", user_id="alice")  # fmt: skip
        memory = Records.put(conn, "memory", summary, project=PROJECT, user_id="alice")
    indexer.drain()
    assert embedder.texts == [summary]
    assert vectors.index.vector(ran["seq"]) is None
    assert indexer.pending_count() == 0  # nothing left queued for it
    assert ran["seq"] not in vectors.index and memory["seq"] in vectors.index
    assert float(np.dot(Embedder().embed([summary])[0], vectors.index.vector(memory["seq"]))) > 0.999

def test_index_soon_indexes_on_its_thread_and_idle_hands_memory_back(store, embedder):
    """What mem0 adds use: versions given to index_soon are searchable once catch_up returns; an
    idle worker then drops the vectors kept for reuse and the model's arena (they refill on demand)."""
    db, vectors, indexer = store
    seqs = [prompt(db, f"Ran `deploy {n}`", f"deploy {n} finished", "s1")["seq"] for n in range(3)]
    indexer.index_soon(seqs)
    indexer.catch_up()
    assert all(seq in vectors.index for seq in seqs)
    until(lambda: indexer.pending_count() == 0)  # stored once the burst is over
    assert indexer._recent
    indexer.release_memory()
    db.release_memory()
    assert not indexer._recent
    later = prompt(db, "Ran `deploy 9`", "deploy 9 finished", "s1")
    indexer.index_soon([later["seq"]])
    indexer.catch_up()
    assert later["seq"] in vectors.index
    indexer.stop()
    indexer.index_soon([prompt(db, "Ran `late`", "after stop", "s1")["seq"]])  # stopped: left to the drain
    assert indexer.pending_count() == 1 and indexer.drain() == 1


def test_the_drain_keeps_the_models_arena_while_more_is_queued(store, embedder):
    """An import queues thousands of versions: each full batch keeps the model's arena for the next
    (shrunk and grown again at every batch, the same texts cost 7 % more CPU); once the queue is
    found short or empty, the whole arena is handed back."""
    db, vectors, _ = store
    indexer = Indexer(db, vectors, embedder, batch_size=2)
    embedder.kept.clear()
    embedder.released = 0
    seqs = [prompt(db, f"Ran `step {n}`", f"step {n} passed", "s1")["seq"] for n in range(5)]
    assert indexer.drain() == 5
    assert embedder.kept == [True, True, False] and embedder.released == 1  # handed back after the short batch
    seqs += [prompt(db, f"Ran `check {n}`", f"check {n} passed", "s1")["seq"] for n in range(4)]
    assert indexer.drain() == 4
    assert embedder.kept[3:] == [True, True] and embedder.released == 2  # and when the queue is found empty
    prompt(db, "Ran `one more`", "passed", "s1")
    assert indexer.drain() == 1
    assert embedder.kept[5:] == [False] and embedder.released == 2  # a short batch alone shrinks the arena itself
    assert all(seq in vectors.index for seq in seqs)
    alone = Embedder().embed([embedding_text(Records.by_seqs(db.reader(), [seqs[0]])[seqs[0]])])[0]
    assert float(np.dot(alone, vectors.index.vector(seqs[0]))) > 0.999  # the same vector as a text embedded on its own


def until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.02)


class CountedChroma(ChromaStore):
    """The real Chroma store, counting its writes."""

    writes = 0

    def add(self, items):
        type(self).writes += 1
        return super().add(items)


def test_adds_one_by_one_are_searchable_at_once_and_stored_in_chroma_together(tmp_path, embedder):
    """A Chroma write costs about as much for one vector as for many: the add thread's vectors are
    searchable as soon as they are made and stored together when the burst is over. Until stored
    they stay queued, so a worker killed meanwhile loses none: the next start embeds them again."""
    db = Database(paths.database_path(tmp_path))
    CountedChroma.writes = 0
    vectors = Vectors(store=CountedChroma(paths.chroma_path(tmp_path)))
    indexer = Indexer(db, vectors, embedder)
    seqs = []
    for n in range(12):  # twelve adds, each acknowledged and handed over alone
        seqs.append(prompt(db, f"Ran `deploy {n}`", f"deploy {n} finished", "s1")["seq"])
        indexer.index_soon(seqs[-1:])
        indexer.catch_up()
        assert seqs[-1] in vectors.index  # searchable at once
    vectors.delete([seqs[0]])  # forgotten before it was stored: never stored after
    until(lambda: indexer.pending_count() == 0)
    assert CountedChroma.writes < 6, CountedChroma.writes  # one a pass before: twelve
    assert vectors.store.count() == 11 and seqs[0] not in vectors.index

    # Killed before they are stored (no stop, no close): they are still queued, and a new worker
    # on the same files embeds and stores them.
    later = [prompt(db, f"Ran `build {n}`", f"build {n} finished", "s2")["seq"] for n in range(3)]
    indexer.index_soon(later)
    indexer.catch_up()
    assert all(seq in vectors.index for seq in later) and indexer.pending_count() == 3
    indexer._stopping = True  # the add thread dies with the process: nothing more from it
    vectors.store.child.stop()  # and its Chroma process sees its pipe close, as when the worker is killed
    again = Vectors(paths.chroma_path(tmp_path))
    assert Indexer(db, again, embedder).drain() == 3
    assert all(seq in again.index for seq in later) and again.store.count() == 14
    again.close()
    db.close()


def test_a_reply_passage_is_embedded_by_its_opening_words_without_markdown(store, embedder):
    """Claude writes Markdown: its table rules, pipes and emphasis are tokens that say nothing to the
    model. A reply passage is embedded by the first REPLY_MAX_TOKENS tokens of its plain words; every
    word of it stays in the keyword index."""
    db, vectors, indexer = store
    passage = (
        "**Root cause:** the plugin called `http://localhost:8081` from the iPad, where *localhost* is the iPad itself.\n\n"
        "| Option | Result |\n|--------|--------|\n| localhost | refused |\n| tailscale IP | works |\n\n"
        + " ".join(f"Then the backend answered request number {n} from the plugin." for n in range(12))
    )
    with db.transaction() as conn:
        reply = Records.put(conn, "transcript", passage, type="reply", project=PROJECT, session_id="s1")
    assert indexer.drain() == 1
    (embedded,) = embedder.texts
    assert embedded.startswith("Root cause: the plugin called http://localhost:8081 from the iPad, where localhost is")
    assert not set("*`|") & set(embedded) and "----" not in embedded
    assert "tailscale IP works" in embedded  # a table's cells are words like any other
    assert len(embedder._tokenizer.encode(embedded, add_special_tokens=False).ids) <= REPLY_MAX_TOKENS
    with db.reader() as conn:
        found = conn.execute("SELECT rowid FROM records_fts WHERE records_fts MATCH 'answered'").fetchall()
    assert [row[0] for row in found] == [reply["seq"]]  # the words past the cut are found by keyword
