"""Files replaced whole or not at all (the model cache and the vector snapshot use this)."""

from __future__ import annotations

import pytest

from memory_anchor.worker.store.atomic_write import replaced_atomically


def test_the_new_content_replaces_the_old(tmp_path):
    target = tmp_path / "index.npz"
    target.write_bytes(b"old")
    with replaced_atomically(target) as handle:
        handle.write(b"new content")
    assert target.read_bytes() == b"new content"
    assert [p.name for p in tmp_path.iterdir()] == ["index.npz"]


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path):
    target = tmp_path / "index.npz"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with replaced_atomically(target) as handle:
            handle.write(b"half of the")
            raise RuntimeError("disk full")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["index.npz"]
