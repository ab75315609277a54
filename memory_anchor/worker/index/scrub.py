"""Chroma index files written before the freed-bytes fix get their unused slots zeroed, once per data dir.

Before memory_anchor/worker/index/heap.py's `clear_reused_memory`, Chroma's HNSW index wrote
bytes of freed heap memory to disk: an earlier request's body (a secret before
redaction, the worker's token) could sit in a data dir written by those
versions. The fix stops new leaks; this clears the old ones.

Where the bytes are. Each HNSW segment is a directory `chroma/<uuid>/` of four
files, written by Chroma's fork of hnswlib (chromadb 1.x, the version pinned in
pyproject.toml; github.com/chroma-core/hnswlib, hnswlib/hnswalg.h):
- `header.bin`: the fields of its HEADER_FIELDS macro, packed: int
  PERSISTENCE_VERSION (1), size_t offsetLevel0_, max_elements_,
  cur_element_count, size_data_per_element_, ... (100 bytes in all, native
  byte order; see `_Header`);
- `data_level0.bin` and `length.bin`: `max_elements_` slots of
  `size_data_per_element_` and 4 bytes, written whole by initPersistentIndex
  and serializeToHnswData from buffers that malloc (and resizeIndex's
  realloc) hand out without clearing. Only the first `cur_element_count`
  slots are ever filled: addPoint memsets a slot before it writes it (and writes
  its length: our collections are cosine, which hnswlib normalises), and every
  reader stops at `cur_element_count`. The slots past it are what leaked;
- `link_lists.bin`: only the `cur_element_count` elements' lists, each memset by
  addPoint: nothing to clear.

Why zeroing is safe. readPersistedIndexFromStreams reads all `max_elements_`
slots back into memory, so the unused ones would be written out again forever;
nothing reads them as data (every loop is bounded by `cur_element_count`, and
a slot is memset when it is first used). Zeros are exactly what a fresh index
of the fixed worker holds there. A file whose sizes do not match its header (a
format this code does not know) is left alone and reported.

Chroma's SQLite file and ours need nothing: SQLite fills a page it adds to the
file with zeros before use (pager.c, getPageNormal), and a reused page holds
only earlier content of the same database, never foreign heap bytes
(tests/test_scrub.py checks every file of the data dir).

Crash safety: zeroing is idempotent and the marker file is written only after
every segment is done and synced, so a kill mid-scrub just repeats it at the
next start. Callers hold Chroma closed meanwhile (ChromaStore.while_closed):
an open client would write its in-memory copy of the old bytes back.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from memory_anchor.worker.store.atomic_write import replaced_atomically

log = logging.getLogger(__name__)

MARKER = "chroma-scrubbed.json"
PERSISTENCE_VERSION = 1
CHUNK = 1 << 20


@dataclass(frozen=True)
class _Header:
    """The first fields of hnswlib's header.bin (PERSISTENCE_VERSION 1); the rest are not needed."""

    LAYOUT = struct.Struct("=i5Q")  # version, offsetLevel0_, max_elements_, cur_element_count, size_data_per_element_, label_offset_
    SIZE = 100  # every HEADER_FIELDS field, packed

    max_elements: int
    used: int
    slot_size: int

    @classmethod
    def read(cls, path: Path) -> "_Header | None":
        raw = path.read_bytes()
        if len(raw) != cls.SIZE:
            return None
        version, _offset, max_elements, used, slot_size, _label = cls.LAYOUT.unpack_from(raw)
        if version != PERSISTENCE_VERSION or used > max_elements or slot_size == 0:
            return None
        return cls(max_elements, used, slot_size)


@dataclass
class ScrubReport:
    segments: int = 0  # HNSW segment directories looked at
    cleared_bytes: int = 0  # non-zero bytes found in unused slots, now zeros
    files: list[str] = field(default_factory=list)  # files that held some, relative to the Chroma dir
    skipped: list[str] = field(default_factory=list)  # segments in a format this code does not know

    def as_dict(self) -> dict:
        return {"segments": self.segments, "cleared_bytes": self.cleared_bytes, "files": self.files, "skipped": self.skipped}


def scrub_chroma_dir(chroma_dir: Path) -> ScrubReport:
    """Zero the unused slots of every HNSW segment under `chroma_dir`. No Chroma client may have it open."""
    report = ScrubReport()
    if not chroma_dir.is_dir():
        return report
    for segment in sorted(p.parent for p in chroma_dir.glob("*/header.bin")):
        report.segments += 1
        header = _Header.read(segment / "header.bin")
        slots = [(segment / "data_level0.bin", header.slot_size if header else 0), (segment / "length.bin", 4)]
        if header is None or not all(_holds_whole_slots(path, size, header) for path, size in slots):
            log.warning("left %s as it is: its index files are not in the format this version reads", segment.name)
            report.skipped.append(segment.name)
            continue
        for path, size in slots:
            cleared = _zero_from(path, header.used * size)
            if cleared:
                report.cleared_bytes += cleared
                report.files.append(str(path.relative_to(chroma_dir)))
        log.info("scrubbed %s: %d of %d slots unused", segment.name, header.max_elements - header.used, header.max_elements)
    return report


def _holds_whole_slots(path: Path, slot_size: int, header: _Header) -> bool:
    """Whether `path` is whole slots, at least the used ones and at most `max_elements`.

    Its length varies: initPersistentIndex writes every slot of the capacity then, while
    persistDirty writes the slots it changed, where they are (a file of 1,500 used slots of 2,048
    ended at the 1,500th, measured), and a later read stops where the file does.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    return size % slot_size == 0 and header.used * slot_size <= size <= header.max_elements * slot_size


def _zero_from(path: Path, start: int) -> int:
    """Overwrite `path` from `start` to its end with zeros (only the chunks that are not already); returns
    how many non-zero bytes there were. Synced before returning."""
    cleared = 0
    with open(path, "r+b") as handle:
        handle.seek(start)
        position = start
        while chunk := handle.read(CHUNK):
            nonzero = len(chunk) - chunk.count(0)
            if nonzero:
                cleared += nonzero
                handle.seek(position)
                handle.write(bytes(len(chunk)))
            position += len(chunk)
            handle.seek(position)
        handle.flush()
        os.fsync(handle.fileno())
    return cleared


class ChromaScrub:
    """The once-per-data-dir scrub of `chroma/`, recorded in `chroma-scrubbed.json`.

        scrub = ChromaScrub(data_dir, chroma_dir)
        if scrub.needed():
            with store.while_closed():
                scrub.run()
    """

    def __init__(self, data_dir: Path, chroma_dir: Path):
        self.marker = Path(data_dir) / MARKER
        self.chroma_dir = Path(chroma_dir)

    def needed(self) -> bool:
        return not self.marker.exists()

    def run(self) -> ScrubReport:
        started = time.monotonic()
        if self.chroma_dir.is_dir():
            log.info("scrubbing the unused slots of the vector index files in %s (once per data dir)", self.chroma_dir)
        report = scrub_chroma_dir(self.chroma_dir)
        with replaced_atomically(self.marker) as handle:
            handle.write(json.dumps({"scrubbed_at": time.time(), **report.as_dict()}).encode("utf-8"))
        if report.segments:
            log.info(
                "scrubbed %d vector index segments in %.1f s: %d bytes of freed memory cleared%s",
                report.segments, time.monotonic() - started, report.cleared_bytes,
                f"; left in an unknown format: {', '.join(report.skipped)}" if report.skipped else "",
            )  # fmt: skip
        return report
