"""Capture: what Claude Code's hooks send, made safe and kept durable.

Truncation and redaction before anything reaches disk, the durable inbox,
transcripts, and reading back what was captured (timeline, live feed).

Layer rule (docs/architecture.md): may import store/.
"""
