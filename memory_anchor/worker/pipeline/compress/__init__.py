"""Distillation: raw hook events → observations and session summaries.

The pipeline's contract (all synchronous; call from a worker thread):

    distiller = Distiller(settings, llm)          # llm: memory_anchor.worker.llm.client.ClaudeClient | None

    distiller.observations(payloads: list[dict], *, final_attempt=False) -> ObservationsResult
        payloads: PostToolUse payloads as Claude Code sent them (redacted again here).
        result.retry_after is None  → result.drafts[i] is the ObservationDraft of payloads[i];
                                      result.source is "claude", "local" or "mixed".
        result.retry_after = seconds → Claude failed transiently (429/5xx/timeout/connection
                                      after retries); no drafts: keep the events in the inbox
                                      and retry after that delay. After MAX_DEFERRALS tries
                                      (or with final_attempt=True) the local path answers.
        No key or no budget left → local drafts at once (never deferred).

    distiller.session_summary(prompts: list[str], observations: list[ObservationDraft | dict],
                              last_assistant_message: str | None) -> SessionSummaryDraft
        Claude's summary when available, else the local one; never raises, never defers.

Modules: `local` (deterministic, no LLM), `claude` (prompts and reply merging),
`distiller` (the policy above). Models: memory_anchor/schemas/observations.py.
"""

from memory_anchor.worker.pipeline.compress.distiller import COOLDOWN_SECONDS, MAX_DEFERRALS, Distiller, ObservationsResult

__all__ = ["COOLDOWN_SECONDS", "MAX_DEFERRALS", "Distiller", "ObservationsResult"]
