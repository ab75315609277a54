"""`memory-anchor settings`: the effective settings, where they come from and what they do,
and which route reaches Claude (API key, Claude Code login or local) and why."""

from __future__ import annotations

import argparse
from typing import Any

from memory_anchor.core import paths
from memory_anchor.cli.main import emit
from memory_anchor.schemas.settings import Settings, load_settings


def register(sub) -> None:
    parser = sub.add_parser("settings", help="print the effective settings (settings.json + environment)")
    parser.set_defaults(handler=show_settings)


def show_settings(args: argparse.Namespace) -> int:
    base = args.data_dir or paths.data_dir()
    settings = load_settings(base)
    shown = settings.shown()
    lines = [f"# {paths.settings_path(base)} (MEMORY_ANCHOR_<KEY> overrides)"]
    for name, field in Settings.model_fields.items():
        lines.append(f"{name} = {shown[name]!r}    # {field.description}")
    route = claude_route(base, settings)
    lines.append(f"# Claude route ({route['seen_by']}): {route['active']}")
    emit(args, {**shown, "claude_route": route}, "\n".join(lines))
    return 0


def claude_route(base, settings: Settings) -> dict[str, Any]:
    """The running worker's route (its environment is the one that counts), else the one a
    worker started from this shell would take."""
    from memory_anchor.core import lifecycle

    if lifecycle.running_worker(base) is not None:
        from memory_anchor.client.worker_client import WorkerClient, WorkerError

        try:
            llm = WorkerClient(base, autostart=False).get("/api/v1/status").get("llm") or {}
            if llm.get("active"):
                return {**llm, "seen_by": "the running worker"}
        except WorkerError:
            pass
    from memory_anchor.worker.llm.route import choose_route

    route = choose_route(settings)
    return {**route.to_json(), "active": route.describe(), "seen_by": "no worker running; as one started here would"}
