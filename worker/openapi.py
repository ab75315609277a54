"""The OpenAPI document, built from the live route table.

Each handler's docstring is its description; a handler decorated with
`@request_model(Model)` also documents its JSON body with the pydantic schema.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from memory_anchor import __version__
from memory_anchor.schemas.errors import ErrorResponse


def request_model(model):
    """Declare the pydantic model a handler's JSON body must match (for the docs)."""

    def mark(handler):
        handler.request_model = model
        return handler

    return mark


def responses(extra: dict[str, Any]):
    """Declare responses a handler gives besides the usual ones (e.g. a stream's content type)."""

    def mark(handler):
        handler.responses = extra
        return handler

    return mark


# Any route that writes can meet a full disk (worker/store/disk.py).
STORAGE_FULL = {
    "description": "Storage full: the disk holding the data is full (code `storage_full`); nothing stored is lost",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
}


def build_openapi(app: web.Application) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    schemas: dict[str, Any] = {"ErrorResponse": ErrorResponse.model_json_schema()}
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        info = route.get_info()
        path = info.get("path") or info.get("formatter")
        if not path:
            continue
        handler = route.handler
        doc = (handler.__doc__ or "").strip()
        operation: dict[str, Any] = {
            "operationId": handler.__name__,
            "summary": doc.split("\n", 1)[0] or handler.__name__.replace("_", " "),
            "responses": {
                "200": {"description": "OK"},
                "4XX": {
                    "description": "Bad input",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
                },
            },
        }
        operation["responses"]["507"] = STORAGE_FULL
        operation["responses"].update(getattr(handler, "responses", {}))
        if doc:
            operation["description"] = doc
        params = re.findall(r"{(\w+)}", path)
        if params:
            operation["parameters"] = [
                {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params
            ]
        model = getattr(handler, "request_model", None)
        if model is not None:
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}},
            }
        if path != "/api/health":
            operation["security"] = [{"bearer": []}]
        paths.setdefault(path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Memory Anchor worker", "version": __version__},
        "servers": [{"url": "/"}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
