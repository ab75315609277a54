"""The Distiller: Claude when it can, local compression when it must.

See memory_anchor/worker/pipeline/compress/__init__.py for the contract the pipeline relies on.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_anchor.schemas.observations import ObservationDraft, SessionSummaryDraft
from memory_anchor.core.redact import sanitize
from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.llm.client import LLMError, LLMUnavailable
from memory_anchor.worker.pipeline.compress import claude, local

log = logging.getLogger(__name__)

# After a transient failure, do not call Claude again for this long: new tool
# uses are deferred at once instead of each batch blocking the pipeline thread
# through a full round of retries.
COOLDOWN_SECONDS = 30.0
# A tool use deferred this many times is compressed locally: a Claude outage
# delays observations, it never withholds them indefinitely.
MAX_DEFERRALS = 5


@dataclass
class ObservationsResult:
    """What `Distiller.observations` decided for a batch of tool uses.

    - `retry_after is None`: done; `drafts[i]` is the observation of `payloads[i]`.
    - `retry_after` set: Claude failed transiently; nothing was produced
      (`drafts` is empty); keep the raw events and call again after that many
      seconds. `error` says what went wrong.
    """

    drafts: list[ObservationDraft] = field(default_factory=list)
    source: str = "local"  # claude | local | mixed (some items fell back)
    retry_after: float | None = None
    error: str | None = None

    @property
    def deferred(self) -> bool:
        return self.retry_after is not None


class Distiller:
    def __init__(self, settings: Settings, llm: Any = None, *, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.llm = llm  # a memory_anchor.worker.llm.client.ClaudeClient, or None for local only
        self._clock = clock
        self._cooldown_until = 0.0
        self._last_error: str | None = None
        self._deferrals: dict[str, int] = {}
        self._finished: dict[str, ObservationDraft] = {}

    @property
    def batch_size(self) -> int:
        return max(1, self.settings.llm_batch_size)

    def uses_claude(self) -> bool:
        return self.llm is not None and self.llm.available

    # --- observations ----------------------------------------------------------------

    def observations(self, payloads: Sequence[dict[str, Any]], *, final_attempt: bool = False,
                     local_only: bool = False, already_clean: bool = False) -> ObservationsResult:  # fmt: skip
        """One observation per PostToolUse payload (see ObservationsResult).

        Batches of `llm_batch_size` go to Claude in one call each. Without a key
        or budget, or with `final_attempt`, or after MAX_DEFERRALS, a failure
        falls back to local compression instead of deferring. `local_only`
        (imported history) never calls Claude. `already_clean`: the payloads went through
        `sanitize_event` with these settings already, as every event in the inbox has
        (the event door, the history door and the spool's ingestion clean them), so they
        are not cleaned twice: that second pass was a fifth of an import's processing.
        """
        cleaned = list(payloads) if already_clean else [sanitize(p, self.settings.max_tool_output_chars) for p in payloads]
        local_drafts = [local.compress_tool_use(p) for p in cleaned]
        if not cleaned or local_only or self.llm is None or not self.llm.available:
            return ObservationsResult(drafts=local_drafts, source="local")

        keys = [_payload_key(p, i) for i, p in enumerate(cleaned)]
        give_up = final_attempt or any(self._deferrals.get(k, 0) >= MAX_DEFERRALS for k in keys)
        now = self._clock()
        if now < self._cooldown_until and not give_up:
            return self._defer(keys, self._cooldown_until - now, self._last_error or "Claude cooling down")

        # Drafts of earlier chunks survive a deferral here, so a retry does not pay twice.
        done: dict[int, ObservationDraft] = {
            i: self._finished[k] for i, k in enumerate(keys) if k in self._finished
        }
        todo = [i for i in range(len(cleaned)) if i not in done]
        from_claude = sum(d.distilled_by == "claude" for d in done.values())
        errors: list[str] = []
        for start in range(0, len(todo), self.batch_size):
            indexes = todo[start : start + self.batch_size]
            chunk = [cleaned[i] for i in indexes]
            base = [local_drafts[i] for i in indexes]
            try:
                reply = self.llm.complete_json(
                    claude.OBSERVATION_SYSTEM,
                    claude.observations_prompt(chunk),
                    max_tokens=claude.observations_max_tokens(len(chunk)),
                )
            except LLMUnavailable as exc:  # no budget left: local is the answer, not a retry
                errors.append(str(exc))
                merged, used = base, 0
            except LLMError as exc:
                if exc.retryable and not give_up:
                    self._cooldown_until = self._clock() + max(exc.retry_after or 0.0, COOLDOWN_SECONDS)
                    self._last_error = str(exc)
                    return self._defer(keys, self._cooldown_until - self._clock(), str(exc))
                errors.append(str(exc))  # a malformed reply or a rejected request: local
                merged, used = base, 0
            else:
                merged, used = claude.merge_observations(reply, base, chunk)
                if used < len(base):
                    errors.append(f"Claude's reply covered {used} of {len(base)} tool uses")
            from_claude += used
            for index, draft in zip(indexes, merged):
                done[index] = draft
                self._finished[keys[index]] = draft
        drafts = [done[i] for i in range(len(cleaned))]
        for key in keys:
            self._deferrals.pop(key, None)
            self._finished.pop(key, None)
        source = "claude" if from_claude == len(drafts) else "local" if from_claude == 0 else "mixed"
        if errors:
            log.info("observations compressed with local fallback: %s", "; ".join(errors))
        return ObservationsResult(drafts=drafts, source=source, error="; ".join(errors) or None)

    def _defer(self, keys: list[str], delay: float, error: str) -> ObservationsResult:
        for key in keys:
            self._deferrals[key] = self._deferrals.get(key, 0) + 1
        if len(self._deferrals) > 10_000:  # payloads that never came back (excluded later, ...)
            self._deferrals.clear()
        if len(self._finished) > 10_000:
            self._finished.clear()
        return ObservationsResult(retry_after=max(delay, 1.0), error=error)

    # --- session summaries ------------------------------------------------------------

    def session_summary(
        self, prompts: Sequence[Any], observations: Sequence[Any], last_assistant_message: str | None = None,
        *, local_only: bool = False,
    ) -> SessionSummaryDraft:
        """A summary of a session; Claude's when available, else (or on failure) local.

        `observations` may be ObservationDrafts, their dicts, or stored records
        (fields under `data`). A summary is rewritten at every Stop, so a failed
        call is not retried: the local summary stands until the next one.
        """
        prompt_texts = [_clean_prompt(p) for p in prompts if isinstance(p, str) and p.strip()]
        drafts = [d for d in (local.as_observation(o) for o in observations) if d is not None]
        last = sanitize(last_assistant_message) if isinstance(last_assistant_message, str) else ""
        base = local.summarize_session(prompt_texts, drafts, last)
        if local_only or self.llm is None or not self.llm.available or self._clock() < self._cooldown_until:
            return base
        if not prompt_texts and not drafts and not last:
            return base
        try:
            reply = self.llm.complete_json(
                claude.SUMMARY_SYSTEM, claude.summary_prompt(prompt_texts, drafts, last), max_tokens=1200
            )
        except LLMError as exc:
            log.info("session summary falls back to local: %s", exc)
            return base
        return claude.merge_summary(reply, base) or base


@functools.lru_cache(maxsize=4096)
def _clean_prompt(prompt: str) -> str:
    """A prompt as a summary reads it; kept, as every Stop of a session reads all its prompts again."""
    return sanitize(prompt)


def _payload_key(payload: Any, index: int) -> str:
    if isinstance(payload, dict):
        tool_use_id = payload.get("tool_use_id")
        if isinstance(tool_use_id, str) and tool_use_id:
            return tool_use_id
        return f"hash:{hash(repr(sorted(payload.items(), key=lambda kv: str(kv[0])))[:5000])}"
    return f"item:{index}:{hash(repr(payload)[:5000])}"
