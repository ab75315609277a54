"""`memory-anchor doctor`: check the interpreter, environment, worker, data dir, embedder and Claude route."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    parser = sub.add_parser("doctor", help="say whether memory works, and what fixes it when it does not")
    parser.set_defaults(handler=doctor)


def doctor(args: argparse.Namespace) -> int:
    from memory_anchor.hookkit import doctor as checks

    return checks.run(str(args.data_dir) if args.data_dir else None)
