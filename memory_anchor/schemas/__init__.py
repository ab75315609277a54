"""Pydantic models for every wire format, one module per area.

Defined once and shared: the worker validates requests and shapes responses with
them, `memory_anchor.client.worker_client` and the MCP server parse the same models.
"""
