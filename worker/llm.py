"""The worker's one door to Claude: the `anthropic` SDK, retries and a daily budget.

`ClaudeClient` is synchronous on purpose: the pipeline calls it from a worker
thread, never from the event loop. It

- reads `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` (so tests and proxies can
  point it anywhere) and the model, timeout and retry count from `Settings`;
- retries 408/409/429/5xx/529, timeouts and connection errors with exponential
  backoff, waiting at least what a `retry-after` header asks for (the SDK's own
  retries are off so that this policy is the only one, and testable);
- keeps the day's token spend in the SQLite table `llm_usage` and makes a call
  only when its worst case (estimated input + `max_tokens`) fits in what is left
  of `llm_daily_token_budget`: the user's budget is a ceiling, not a target.

Failures are exceptions with a clear message: `LLMUnavailable` (no key, budget
spent: use the local path), `LLMError` with `retryable` (try again later or
fall back), `LLMReplyError` (Claude answered, but not with what was asked).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the SDK costs ~45 MB: imported only once a key makes Claude usable
    import anthropic

from memory_anchor.settings import Settings
from worker.store.db import Database

log = logging.getLogger(__name__)

BACKOFF_BASE_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
RETRY_AFTER_MAX_SECONDS = 120.0
CHARS_PER_TOKEN = 3  # conservative: estimates should overshoot, not undershoot


class LLMError(Exception):
    """A Claude call that gave no usable answer. `retryable`: worth trying again later."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class LLMUnavailable(LLMError):
    """No Claude today: no API key, or the daily token budget is spent."""


class LLMReplyError(LLMError):
    """Claude answered, but the reply is not what was asked for (e.g. not JSON)."""

    def __init__(self, message: str, reply: str = ""):
        super().__init__(message, retryable=False)
        self.reply = reply


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    stop_reason: str | None
    model: str


class ClaudeClient:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        today: Callable[[], str] = lambda: date.today().isoformat(),
    ):
        self.settings = settings
        self.db = db
        self.api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY", "").strip()
        self.base_url = base_url if base_url is not None else os.environ.get("ANTHROPIC_BASE_URL", "").strip()
        self._sleep = sleep
        self._today = today
        self._client: anthropic.Anthropic | None = None

    # --- availability and budget ---------------------------------------------

    @property
    def model(self) -> str:
        return self.settings.llm_model

    @property
    def available(self) -> bool:
        return self.unavailable_reason() is None

    def unavailable_reason(self) -> str | None:
        """Why no call can be made now, or None when one can."""
        if not self.api_key:
            return "no ANTHROPIC_API_KEY is set"
        if self.remaining_budget() <= 0:
            return f"the daily token budget ({self.settings.llm_daily_token_budget}) is spent"
        return None

    def usage_today(self) -> dict[str, int]:
        row = (
            self.db.reader()
            .execute("SELECT input_tokens, output_tokens, calls FROM llm_usage WHERE day = ?", (self._today(),))
            .fetchone()
        )
        if row is None:
            return {"input_tokens": 0, "output_tokens": 0, "calls": 0}
        return {"input_tokens": row[0], "output_tokens": row[1], "calls": row[2]}

    def remaining_budget(self) -> int:
        used = self.usage_today()
        return self.settings.llm_daily_token_budget - used["input_tokens"] - used["output_tokens"]

    def _record_usage(self, input_tokens: int, output_tokens: int) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                """INSERT INTO llm_usage(day, input_tokens, output_tokens, calls) VALUES (?, ?, ?, 1)
                   ON CONFLICT(day) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
                   output_tokens = output_tokens + excluded.output_tokens, calls = calls + 1""",
                (self._today(), input_tokens, output_tokens),
            )

    # --- calls -------------------------------------------------------------------

    def _sdk(self) -> anthropic.Anthropic:
        if self._client is None:
            import anthropic

            self._client = anthropic.Anthropic(
                api_key=self.api_key,
                base_url=self.base_url or None,
                timeout=self.settings.llm_timeout_seconds,
                max_retries=0,
            )
        return self._client

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> Completion:
        """One user prompt → Claude's text reply, with retries and budget accounting."""
        reason = self.unavailable_reason()
        if reason:
            raise LLMUnavailable(f"Claude is unavailable: {reason}")
        estimate = (len(system) + len(prompt)) // CHARS_PER_TOKEN + max_tokens
        if estimate > self.remaining_budget():
            raise LLMUnavailable(
                f"Claude is unavailable: this call may need ~{estimate} tokens and only "
                f"{self.remaining_budget()} of today's budget are left"
            )
        import anthropic

        attempts = self.settings.llm_max_retries + 1
        for attempt in range(attempts):
            try:
                response = self._sdk().messages.create(
                    model=self.model,
                    max_tokens=max_tokens,
                    system=system,
                    messages=[{"role": "user", "content": prompt}],
                )
                break
            except anthropic.APIStatusError as exc:
                status = exc.status_code
                retryable = status in (408, 409, 429) or status >= 500
                problem = f"HTTP {status}: {_error_message(exc)}"
                if not retryable:
                    hint = " (check ANTHROPIC_API_KEY)" if status in (401, 403) else ""
                    raise LLMError(f"Claude rejected the request: {problem}{hint}") from exc
                retry_after = _retry_after(exc.response.headers if exc.response is not None else {})
            except anthropic.APITimeoutError:
                problem, retry_after = f"timed out after {self.settings.llm_timeout_seconds}s", None
            except anthropic.APIConnectionError as exc:
                problem, retry_after = f"connection failed: {exc}", None
            except anthropic.AnthropicError as exc:  # anything else the SDK raises
                problem, retry_after = f"{type(exc).__name__}: {exc}", None
            if attempt + 1 >= attempts:
                raise LLMError(
                    f"Claude call failed after {attempts} attempts: {problem}",
                    retryable=True,
                    retry_after=retry_after,
                )
            delay = self._backoff(attempt, retry_after)
            log.info("Claude call failed (%s); retry %d/%d in %.1fs", problem, attempt + 1, attempts - 1, delay)
            self._sleep(delay)

        usage = getattr(response, "usage", None)
        input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
        output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        self._record_usage(input_tokens, output_tokens)
        text = "".join(
            getattr(block, "text", "") for block in (response.content or []) if getattr(block, "type", "") == "text"
        )
        return Completion(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            stop_reason=response.stop_reason,
            model=response.model or self.model,
        )

    def complete_json(self, system: str, prompt: str, max_tokens: int = 2048) -> Any:
        """Ask for JSON and parse the reply; `LLMReplyError` when it is not JSON."""
        system = (
            f"{system}\n\nReply with a single JSON value and nothing else: no prose, no Markdown fences."
        ).strip()
        completion = self.complete(system, prompt, max_tokens)
        try:
            return parse_json_reply(completion.text)
        except ValueError as exc:
            cut = " (the reply hit max_tokens and was cut off)" if completion.stop_reason == "max_tokens" else ""
            raise LLMReplyError(f"Claude's reply is not valid JSON{cut}: {exc}", completion.text) from exc

    @staticmethod
    def _backoff(attempt: int, retry_after: float | None) -> float:
        delay = min(BACKOFF_BASE_SECONDS * 2**attempt, BACKOFF_MAX_SECONDS)
        delay *= random.uniform(0.75, 1.0)  # jitter: parallel workers do not retry in lockstep
        if retry_after is not None:
            delay = max(delay, min(retry_after, RETRY_AFTER_MAX_SECONDS))
        return delay


def _retry_after(headers: Any) -> float | None:
    """Seconds a 429/529 asks us to wait (`retry-after-ms` or `retry-after`)."""
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(float(millis) / 1000, 0.0)
        seconds = headers.get("retry-after")
        if seconds is not None:
            return max(float(seconds), 0.0)
    except (TypeError, ValueError, AttributeError):
        return None
    return None


def _error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    return str(error.get("message") or exc.message or "no details")[:300]


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_OPENING = re.compile(r"[\[{]")


def parse_json_reply(text: str) -> Any:
    """The JSON value in a model reply: bare, fenced, or after some prose.

    Raises ValueError, with the start of the reply, when there is none.
    """
    stripped = (text or "").strip()
    if not stripped:
        raise ValueError("the reply is empty")
    candidates = [stripped] + [m.group(1).strip() for m in _FENCE.finditer(stripped)]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    # Prose may hold bracketed bits ("see [1]"): take the largest value found.
    decoder = json.JSONDecoder()
    best: tuple[int, Any] | None = None
    position = 0
    for _ in range(200):
        match = _OPENING.search(stripped, position)
        if match is None:
            break
        try:
            value, end = decoder.raw_decode(stripped, match.start())
        except ValueError:
            position = match.start() + 1
            continue
        if best is None or end - match.start() > best[0]:
            best = (end - match.start(), value)
        position = end
    if best is not None:
        return best[1]
    raise ValueError(f"no JSON object or array found in: {stripped[:200]!r}")
