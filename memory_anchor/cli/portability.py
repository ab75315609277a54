"""`memory-anchor export [-o FILE]` and `memory-anchor import FILE`: the whole memory as JSON Lines."""

from __future__ import annotations

import argparse
import os
import sys

from memory_anchor.cli.main import client, emit
from memory_anchor.schemas.portability import EXPORT_MEDIA_TYPE


def register(sub) -> None:
    export = sub.add_parser("export", help="write the whole memory (every version, branches, snapshots) as JSON Lines")
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    export.set_defaults(handler=export_memory)

    load = sub.add_parser("import", help="load an export into an empty worker (all or nothing)")
    load.add_argument("file", help="a file written by `memory-anchor export`")
    load.set_defaults(handler=import_memory)


def export_memory(args: argparse.Namespace) -> int:
    worker = client(args)
    if not args.output:
        worker.download("/api/v1/export", sys.stdout.buffer)
        sys.stdout.flush()
        return 0
    # Written beside the target and renamed at the end: a failed export never
    # leaves a truncated file under the name asked for.
    partial = f"{args.output}.partial"
    try:
        with open(partial, "wb") as out:
            size = worker.download("/api/v1/export", out)
        os.replace(partial, args.output)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    print(f"exported {size} bytes to {args.output}", file=sys.stderr)
    return 0


def import_memory(args: argparse.Namespace) -> int:
    try:
        size = os.path.getsize(args.file)
        source = open(args.file, "rb")
    except OSError as exc:
        print(f"memory-anchor: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    with source:
        result = client(args).upload("/api/v1/import", source, size, content_type=EXPORT_MEDIA_TYPE)
    tables = ", ".join(f"{table} {count}" for table, count in result["imported"].items() if count)
    emit(
        args,
        result,
        f"imported {result['rows']} rows ({tables}) in {result['seconds']:.1f}s; "
        f"{result['queued_for_embedding']} versions queued to rebuild the vector index",
    )
    return 0
