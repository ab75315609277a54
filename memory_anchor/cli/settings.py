"""`memory-anchor settings`: the effective settings, where they come from and what they do."""

from __future__ import annotations

import argparse

from memory_anchor import paths
from memory_anchor.cli.main import emit
from memory_anchor.settings import Settings, load_settings


def register(sub) -> None:
    parser = sub.add_parser("settings", help="print the effective settings (settings.json + environment)")
    parser.set_defaults(handler=show_settings)


def show_settings(args: argparse.Namespace) -> int:
    base = args.data_dir or paths.data_dir()
    settings = load_settings(base)
    lines = [f"# {paths.settings_path(base)} (MEMORY_ANCHOR_<KEY> overrides)"]
    for name, field in Settings.model_fields.items():
        lines.append(f"{name} = {getattr(settings, name)!r}    # {field.description}")
    emit(args, settings.model_dump(), "\n".join(lines))
    return 0
