"""User settings: one JSON file in the data dir, every key overridable by environment.

`settings.json` is written with its defaults on first run so that a user can see
and edit every knob. An environment variable `MEMORY_ANCHOR_<KEY>` (upper case)
wins over the file; lists are comma separated.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from memory_anchor.core import paths

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


class Settings(BaseModel):
    """Every setting, with its default and what it is for."""

    host: str = Field("127.0.0.1", description="Interface the worker binds to; loopback only.")
    port: int = Field(38120, description="Preferred worker port; a free one is picked when taken.")
    log_level: str = Field("INFO", description="Worker log level.")

    # Compression and extraction with Claude
    llm_model: str = Field("claude-haiku-4-5", description="Model used to compress and extract.")
    llm_daily_token_budget: int = Field(
        200_000, description="Tokens per day the worker may spend on Claude calls; then local."
    )
    llm_batch_size: int = Field(8, description="Tool uses compressed per Claude call.")
    llm_timeout_seconds: float = Field(30.0, description="Timeout of one Claude call.")
    llm_max_retries: int = Field(3, description="Retries with backoff on 429/5xx/timeouts.")
    llm_route: Literal["auto", "api", "cli", "local"] = Field(
        "auto",
        description="How to reach Claude: auto (ANTHROPIC_API_KEY, else the Claude Code login, else local), "
        "api (the key only), cli (the Claude Code login only) or local (never call Claude).",
    )
    claude_cli_path: str = Field(
        "", description="The `claude` executable to distil through; empty: PATH and Claude Code's install places."
    )

    # Capture
    max_tool_output_chars: int = Field(
        20_000, description="Tool input/output longer than this is truncated with a marker."
    )
    excluded_projects: list[str] = Field(
        default_factory=list, description="Project paths (or globs) never captured."
    )
    excluded_tools: list[str] = Field(
        default_factory=list, description="Tool names (or globs) never captured."
    )

    # Recall
    context_token_budget: int = Field(
        3000, description="Tokens SessionStart may inject (identity comes on top, in full)."
    )
    context_budget_facts: int = Field(
        2000, description="Of the context budget, at most this many tokens of verified facts."
    )
    context_budget_events: int = Field(
        500, description="Of the context budget, at most this many tokens of recent events."
    )
    prompt_recall: bool = Field(True, description="Add relevant memories to each prompt.")
    code_checks: bool = Field(
        True, description="Check memories against the git working tree when they are shown (marks, demoted facts, "
        "next steps closed by commits); off, memories are shown as they were written.")  # fmt: skip
    prompt_recall_threshold: float = Field(
        0.50, description="Minimum similarity (cosine, 0..1) for a memory to be added to a prompt on its meaning "
        "alone; one that shares the prompt's words too needs 0.40."
    )
    prompt_recall_limit: int = Field(3, description="At most this many memories per prompt (a question gets four more).")

    # Branches and agents
    default_branch: str = Field("main", description="Branch a session writes to by default.")
    auto_branch_on_fork: bool = Field(
        True, description="A forked Claude Code session gets its own memory branch."
    )
    read_only_agents: list[str] = Field(
        default_factory=list, description="Agents whose writes become proposals."
    )

    # Storage
    storage_url: str = Field(
        "",
        description="Where memory is stored: empty = the embedded SQLite in the data dir; "
        "postgresql://ROLE@HOST:PORT/DB = the team's PostgreSQL database, as your own member role "
        "(set up with `memory-anchor storage init` and `add-member`; capture stays local).",
    )

    # First run (read by the hooks and the bootstrap with the standard library, see memory_anchor/hookkit)
    python: str = Field(
        "", description="Python 3.10+ to build the plugin's environment with; empty: found automatically."
    )
    spool_max_mb: float = Field(
        100.0, gt=0, description="Cap of spool.jsonl (events kept while the worker is away); the newest are kept."
    )
    chroma_idle_seconds: float = Field(
        30.0, gt=0, description="Chroma runs in a process of its own while vectors are written or deleted; "
        "it exits after this many seconds without one (it holds about 120 MB while it runs).",
    )

    @field_validator("storage_url")
    @classmethod
    def _known_storage(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("storage_url must be empty (SQLite in the data dir) or a postgresql:// URL")
        return value

    def shown(self) -> dict[str, Any]:
        """Every value as `memory-anchor settings` may print it: a password in `storage_url` masked."""
        return {**self.model_dump(), "storage_url": without_password(self.storage_url)}

    @field_validator("host")
    @classmethod
    def _loopback_only(cls, value: str) -> str:
        if value not in LOOPBACK_HOSTS:
            raise ValueError(f"host must be a loopback address ({', '.join(sorted(LOOPBACK_HOSTS))})")
        return value


def without_password(url: str) -> str:
    """A database URL with its password (in the user part or a `password=` parameter) as ***.

    The manual (docs/guide.md) recommends ~/.pgpass or PGPASSWORD, but a URL with a password must still
    never reach a terminal, a log or a status page in clear.
    """
    from urllib.parse import parse_qsl, urlencode, urlsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparseable URL>"
    if password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@"))
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "password" for key, _ in query):
        masked = [(key, "***" if key == "password" else value) for key, value in query]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    return parts.geturl()


def _env_overrides() -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        raw = os.environ.get(f"MEMORY_ANCHOR_{name.upper()}")
        if raw is None:
            continue
        if field.annotation == list[str]:
            overrides[name] = [part.strip() for part in raw.split(",") if part.strip()]
        else:
            overrides[name] = raw
    return overrides


def load_settings(base: Path | None = None, *, write_defaults: bool = True) -> Settings:
    """Read settings.json (creating it with defaults), then apply the environment.

    A malformed file is an error the user must see, not silently replaced.
    """
    path = paths.settings_path(base)
    stored: dict[str, Any] = {}
    if path.exists():
        try:
            stored = json.loads(path.read_text(encoding="utf-8") or "{}")
        except json.JSONDecodeError as exc:
            raise SettingsError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(stored, dict):
            raise SettingsError(f"{path} must hold a JSON object")
    elif write_defaults:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(Settings().model_dump(), indent=2) + "\n", encoding="utf-8")
    try:
        return Settings(**{**stored, **_env_overrides()})
    except ValidationError as exc:
        raise SettingsError(f"invalid settings ({path} or MEMORY_ANCHOR_* variables): {exc}") from exc


class SettingsError(Exception):
    """Settings that cannot be used; the message says which and why."""
