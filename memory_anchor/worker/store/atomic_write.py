"""Writing a file so that readers see the old content or the new, never a torn mix.

    with replaced_atomically(path) as handle:   # a binary file beside `path`
        handle.write(data)
    # now `path` holds exactly what was written, synced to disk

If the block raises, `path` is left as it was and the partial file is removed.
The partial file has a unique name, so two processes writing the same target
(two workers sharing a model cache) never write into each other's file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def replaced_atomically(path: Path) -> Iterator[BinaryIO]:
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
