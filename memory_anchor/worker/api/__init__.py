"""The worker's doors: thin HTTP handlers, one module per area, the OpenAPI document
and the MCP endpoint; the work lives in the layers below them.

Layer rule (docs/architecture.md): may import every layer below; only app.py imports it.
"""
