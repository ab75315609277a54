"""Structured logging: one JSON object per line in <data dir>/logs/worker.log."""

from __future__ import annotations

import json
import logging
import logging.handlers
from pathlib import Path

from memory_anchor.core.redact import redact_text


class JsonFormatter(logging.Formatter):
    """One JSON line per record, redacted like captured data: an error can quote what it failed on."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        if record.exc_info:
            entry["exception"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(path: Path, level: str = "INFO") -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=5_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("chromadb", "httpx", "httpcore", "onnxruntime"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
