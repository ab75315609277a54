"""The worker's one door to Claude: the route to it, retries and a daily budget.

`ClaudeClient` is synchronous on purpose: the pipeline calls it from a worker
thread, never from the event loop. It

- takes the route `llm_route` picks (memory_anchor/worker/llm/route.py): the `anthropic` SDK
  with `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` (so tests and proxies can
  point it anywhere), else the user's Claude Code login through `claude -p`
  (memory_anchor/worker/llm/claude_cli.py), else none (the local path);
- reads the model, timeout and retry count from `Settings`;
- retries 408/409/429/5xx/529, timeouts and connection errors with exponential
  backoff, waiting at least what a `retry-after` header asks for (the SDK's own
  retries are off so that this policy is the only one, and testable);
- keeps the day's token spend in the SQLite table `llm_usage` and makes a call
  only when its worst case (estimated input + `max_tokens`) fits in what is left
  of `llm_daily_token_budget`: the user's budget is a ceiling, not a target.

Failures are exceptions with a clear message: `LLMUnavailable` (no route to
Claude, budget spent: use the local path), `LLMError` with `retryable` (try again later or
fall back), `LLMReplyError` (Claude answered, but not with what was asked).
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable
from datetime import date
from typing import Any

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the SDK costs ~45 MB: imported only once a key makes Claude usable
    import anthropic

from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.llm import claude_cli
from memory_anchor.worker.llm.claude_cli import CliStatus
from memory_anchor.worker.llm.completion import Completion
from memory_anchor.worker.llm.route import CLI, LOCAL, Route, choose_route
from memory_anchor.worker.store import llm_usage
from memory_anchor.worker.store.db import Database

log = logging.getLogger(__name__)

BACKOFF_BASE_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
RETRY_AFTER_MAX_SECONDS = 120.0
CHARS_PER_TOKEN = 3  # conservative: estimates should overshoot, not undershoot
ROUTE_RECHECK_SECONDS = 300.0


class LLMError(Exception):
    """A Claude call that gave no usable answer. `retryable`: worth trying again later."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class LLMUnavailable(LLMError):
    """No Claude now: no route to it (no key, no logged-in CLI), or the daily token budget is spent."""


class LLMReplyError(LLMError):
    """Claude answered, but the reply is not what was asked for (e.g. not JSON)."""

    def __init__(self, message: str, reply: str = ""):
        super().__init__(message, retryable=False)
        self.reply = reply


class _Transient(Exception):
    """One failed attempt worth retrying (429, 5xx, timeout, connection)."""

    def __init__(self, problem: str, retry_after: float | None = None):
        super().__init__(problem)
        self.problem = problem
        self.retry_after = retry_after


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
        find_cli: Callable[[str], CliStatus | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.settings = settings
        self.db = db
        self.api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY", "").strip()
        self.base_url = base_url if base_url is not None else os.environ.get("ANTHROPIC_BASE_URL", "").strip()
        self._sleep = sleep
        self._today = today
        self._find_cli = find_cli
        self._clock = clock
        self._client: anthropic.Anthropic | None = None
        self._route: Route | None = None
        self._route_at = 0.0
        self._route_lock = threading.Lock()

    # --- route, availability and budget ------------------------------------------

    @property
    def model(self) -> str:
        return self.settings.llm_model

    @property
    def route(self) -> Route:
        """How Claude is reached (see memory_anchor/worker/llm/route.py); looked at again every few minutes,
        so that a user who logs in to Claude Code later gets Claude without a restart."""
        with self._route_lock:
            if self._route is None or self._clock() - self._route_at > ROUTE_RECHECK_SECONDS:
                env = {**os.environ, "ANTHROPIC_API_KEY": self.api_key}
                previous, self._route = self._route, choose_route(self.settings, env, self._find_cli)
                self._route_at = self._clock()
                if previous is None or previous.describe() != self._route.describe():
                    log.info("Claude route: %s", self._route.describe())
            return self._route

    def forget_route(self) -> None:
        with self._route_lock:
            self._route = None

    @property
    def available(self) -> bool:
        return self.unavailable_reason() is None

    def unavailable_reason(self) -> str | None:
        """Why no call can be made now, or None when one can."""
        route = self.route
        if route.name == LOCAL:
            return route.reason
        if self.remaining_budget() <= 0:
            return f"the daily token budget ({self.settings.llm_daily_token_budget}) is spent"
        return None

    def usage_today(self) -> dict[str, int]:
        return llm_usage.usage_on(self.db.reader(), self._today())

    def remaining_budget(self) -> int:
        used = self.usage_today()
        return self.settings.llm_daily_token_budget - used["input_tokens"] - used["output_tokens"]

    def _record_usage(self, input_tokens: int, output_tokens: int) -> None:
        with self.db.transaction() as conn:
            llm_usage.add_call(conn, self._today(), input_tokens, output_tokens)

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
        """One user prompt → Claude's text reply, with retries and budget accounting.

        The same policy whichever route: the budget check, the retries with
        backoff, the usage recorded in `llm_usage`.
        """
        reason = self.unavailable_reason()
        if reason:
            raise LLMUnavailable(f"Claude is unavailable: {reason}")
        estimate = (len(system) + len(prompt)) // CHARS_PER_TOKEN + max_tokens
        if estimate > self.remaining_budget():
            raise LLMUnavailable(
                f"Claude is unavailable: this call may need ~{estimate} tokens and only "
                f"{self.remaining_budget()} of today's budget are left"
            )
        route = self.route
        call = self._call_cli if route.name == CLI else self._call_api
        attempts = self.settings.llm_max_retries + 1
        for attempt in range(attempts):
            try:
                completion = call(route, system, prompt, max_tokens)
                break
            except _Transient as failure:
                problem, retry_after = failure.problem, failure.retry_after
            if attempt + 1 >= attempts:
                raise LLMError(
                    f"Claude call failed after {attempts} attempts: {problem}",
                    retryable=True,
                    retry_after=retry_after,
                )
            delay = self._backoff(attempt, retry_after)
            log.info("Claude call failed (%s); retry %d/%d in %.1fs", problem, attempt + 1, attempts - 1, delay)
            self._sleep(delay)
        self._record_usage(completion.input_tokens, completion.output_tokens)
        return completion

    def _call_api(self, route: Route, system: str, prompt: str, max_tokens: int) -> Completion:
        """One attempt through the `anthropic` SDK."""
        import anthropic

        try:
            response = self._sdk().messages.create(
                model=self.model,
                max_tokens=max_tokens,
                system=system,
                messages=[{"role": "user", "content": prompt}],
            )
        except anthropic.APIStatusError as exc:
            status = exc.status_code
            problem = f"HTTP {status}: {_error_message(exc)}"
            if not (status in (408, 409, 429) or status >= 500):
                hint = " (check ANTHROPIC_API_KEY)" if status in (401, 403) else ""
                raise LLMError(f"Claude rejected the request: {problem}{hint}") from exc
            raise _Transient(problem, _retry_after(exc.response.headers if exc.response is not None else {})) from exc
        except anthropic.APITimeoutError as exc:
            raise _Transient(f"timed out after {self.settings.llm_timeout_seconds}s") from exc
        except anthropic.APIConnectionError as exc:
            raise _Transient(f"connection failed: {exc}") from exc
        except anthropic.AnthropicError as exc:  # anything else the SDK raises
            raise _Transient(f"{type(exc).__name__}: {exc}") from exc
        usage = getattr(response, "usage", None)
        text = "".join(
            getattr(block, "text", "") for block in (response.content or []) if getattr(block, "type", "") == "text"
        )
        return Completion(
            text=text,
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            stop_reason=response.stop_reason,
            model=response.model or self.model,
        )

    def _call_cli(self, route: Route, system: str, prompt: str, max_tokens: int) -> Completion:
        """One attempt through the user's Claude Code login (`claude -p`, memory_anchor/worker/llm/claude_cli.py)."""
        assert route.cli is not None
        try:
            return claude_cli.complete(
                route.cli.path, system, prompt, model=self.model, max_tokens=max_tokens,
                timeout=self.settings.llm_timeout_seconds,
            )  # fmt: skip
        except claude_cli.CliCallError as exc:
            if exc.logged_out:
                self.forget_route()  # look again: the user may have logged out, or in elsewhere
                raise LLMUnavailable(f"Claude is unavailable: Claude Code is not logged in ({exc})") from exc
            if exc.retryable:
                raise _Transient(f"claude -p: {exc}") from exc
            hint = " (check the Claude Code login: `claude auth status`)" if exc.status in (401, 403) else ""
            raise LLMError(f"Claude Code rejected the request: {exc}{hint}") from exc

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
