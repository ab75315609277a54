"""The base of the wire models: a model's validator is built when it is first used, not at import.

Each worker, CLI and MCP process imports every schema module but uses a few of their ~80 models;
building them all at import cost about 0.15 s of CPU at every start (importing worker.app:
0.91 -> 0.72 s of CPU, measured). A model is built, once, at its first validation or schema.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    model_config = ConfigDict(defer_build=True)
