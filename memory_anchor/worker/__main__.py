"""`python -m memory_anchor.worker run [--data-dir D] [--port P]`: the worker in the foreground."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory_anchor.worker", description="Run the Memory Anchor worker.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run in the foreground until SIGTERM")
    run.add_argument("--data-dir", type=Path, default=None)
    run.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    # One BLAS thread, set before numpy loads: scoring vectors is memory-bound, and
    # on a busy 2-core machine a second OpenBLAS thread doubled its time (measured);
    # concurrent requests get the other core instead.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from memory_anchor.worker.app import run_worker

    return run_worker(args.data_dir, port=args.port)


if __name__ == "__main__":
    code = main()
    # Everything the worker holds is closed by now (run_worker's `finally`): the
    # interpreter's own teardown, freeing the model and Chroma's indexes, took 1 to 3 s
    # more (measured), and a restart, `worker stop` and every test that stops a worker
    # waited for it.
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
