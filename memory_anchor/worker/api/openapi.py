"""The OpenAPI 3.1 document, built from the live route table.

Each handler's docstring is its description. Decorators document the rest:

    @request_model(Model)            # the JSON body (required=False: it may be omitted)
    @request_content(type, {...})    # a body that is not JSON (its media type and schema)
    @query_param("page", {...})      # a query parameter and its constraints
    @response_model(Model)           # the success body (status=201, array=True when it is a list)

A handler without `@request_model` that reads a JSON body still gets one: the
pydantic model it validates with (`Model.model_validate(...)` in its source),
else any JSON object. Every pydantic schema lands in `components.schemas`, so
the document has no dangling `#/$defs/...` references.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from aiohttp import web

from memory_anchor.core.version import __version__
from memory_anchor.schemas.branches import NAME_SCHEMA
from memory_anchor.schemas.common import SESSION_ID_MAX_CHARS, SESSION_ID_PATTERN
from memory_anchor.schemas.corrections import FACT_ID_PATTERN
from memory_anchor.schemas.errors import ErrorResponse
from memory_anchor.schemas.filters import COMPONENT_MARKER, FILTER_DEFS

REF = "#/components/schemas/{model}"
# Error statuses any authenticated route can answer: bad input (400/422), token (401),
# read-only agent (403), unknown id or branch (404), conflicting write (409), too large (413),
# gone (410), our fault (500), busy (503), disk full (507).
ERROR_STATUSES = (400, 401, 403, 404, 409, 410, 413, 422, 500, 503, 507)
PUBLIC_ERROR_STATUSES = (404, 500)
# Path parameters are named the same across the API; these are what the handlers accept.
PATH_PARAMS: dict[str, dict[str, Any]] = {
    "approval_id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    "conflict_id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    "archive_id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    "quarantine_id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    "step_id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    "forgotten_id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    "fact_ref": {"type": "string", "pattern": FACT_ID_PATTERN},  # a fact's id or its first characters
    "entity_type": {"type": "string", "enum": ["user", "agent", "app", "run"]},
    "session_id": {"type": "string", "minLength": 1, "maxLength": SESSION_ID_MAX_CHARS, "pattern": SESSION_ID_PATTERN},
}


def request_model(model, *, required: bool = True):
    """Declare the pydantic model a handler's JSON body must match (for the docs)."""

    def mark(handler):
        handler.request_model = model
        handler.request_required = required
        return handler

    return mark


def request_content(media_type: str, schema: dict[str, Any], description: str = ""):
    """Declare a body that is not JSON (e.g. an export file), by its media type (for the docs)."""

    def mark(handler):
        handler.request_content = {"required": True, "content": {media_type: {"schema": schema}},
                                   **({"description": description} if description else {})}  # fmt: skip
        return handler

    return mark


def response_model(model, *, status: int = 200, array: bool = False):
    """Declare what a handler answers on success (for the docs)."""

    def mark(handler):
        handler.response_model = (model, status, array)
        return handler

    return mark


def responses(extra: dict[str, Any]):
    """Declare responses a handler gives besides the usual ones (e.g. a stream's content type)."""

    def mark(handler):
        handler.responses = extra
        return handler

    return mark


def query_param(name: str, schema: dict[str, Any], description: str = "", *, required: bool = False):
    """Declare a query parameter the handler reads, with the constraints it enforces."""

    def mark(handler):
        params = list(getattr(handler, "query_params", []))
        params.insert(0, {"name": name, "in": "query", "required": required, "schema": schema,
                          **({"description": description} if description else {})})  # fmt: skip
        handler.query_params = params
        return handler

    return mark


def query_object(name: str, properties: dict[str, dict[str, Any]], *, min_properties: int = 0, description: str = ""):
    """Declare query parameters that go together (`?user_id=..&agent_id=..`), e.g. "at least one of"."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if min_properties:
        schema["minProperties"] = min_properties

    def mark(handler):
        param = {"name": name, "in": "query", "style": "form", "explode": True, "required": bool(min_properties),
                 "schema": schema, **({"description": description} if description else {})}  # fmt: skip
        handler.query_params = [param, *getattr(handler, "query_params", [])]
        return handler

    return mark


class _Components:
    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def ref(self, model) -> dict[str, str]:
        if model.__name__ not in self.schemas:
            schema = model.model_json_schema(ref_template=REF)
            for name, sub in schema.pop("$defs", {}).items():
                self.schemas.setdefault(name, _swap_markers(sub))
            self.schemas[model.__name__] = _swap_markers(schema)
        return {"$ref": REF.format(model=model.__name__)}


def _swap_markers(node: Any) -> Any:
    """Fields marked with `x-component` (see schemas/filters.py) become plain $refs."""
    if isinstance(node, dict):
        if COMPONENT_MARKER in node:
            return {"$ref": REF.format(model=node[COMPONENT_MARKER]),
                    **({"description": node["description"]} if "description" in node else {})}  # fmt: skip
        return {k: _swap_markers(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_swap_markers(v) for v in node]
    return node


def _path_schema(name: str, path: str) -> dict[str, Any]:
    if name == "name" and path.startswith("/api/v1/branches/"):
        return {"type": "string", **NAME_SCHEMA}
    return PATH_PARAMS.get(name, {"type": "string", "minLength": 1})


def _source(handler) -> str:
    try:
        return inspect.getsource(handler)
    except (OSError, TypeError):
        return ""


def _body(handler, source: str, components: _Components) -> dict[str, Any] | None:
    if hasattr(handler, "request_content"):
        return handler.request_content
    model = getattr(handler, "request_model", None)
    required = getattr(handler, "request_required", True)
    if model is None:
        if "read_json_object(" not in source and "_agent_body(" not in source:
            return None
        required = "can_read_body" not in source
        for name in re.findall(r"(\w+)\.model_validate\(", source):
            candidate = getattr(handler, "__globals__", {}).get(name)
            if candidate is not None and hasattr(candidate, "model_json_schema"):
                model = candidate
                break
    schema = components.ref(model) if model is not None else {"type": "object"}
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _responses(handler, source: str, public: bool, components: _Components) -> dict[str, Any]:
    declared = getattr(handler, "response_model", None)
    statuses = {int(s) for s in re.findall(r"status=(\d{3})\b", source)}
    success = declared[1] if declared else min([s for s in statuses if s < 400 and s != 303] or [200])
    body: dict[str, Any] = {"type": "object"}
    if declared:
        body = components.ref(declared[0])
        if declared[2]:
            body = {"type": "array", "items": body}
    responses: dict[str, Any] = {str(success): {"description": "OK", "content": {"application/json": {"schema": body}}}}
    for status in sorted(s for s in statuses if s < 400 and s != success):
        responses[str(status)] = {"description": "OK"}
    error = {"content": {"application/json": {"schema": components.ref(ErrorResponse)}}}
    for status in sorted(set(PUBLIC_ERROR_STATUSES if public else ERROR_STATUSES) | {s for s in statuses if s >= 400}):
        responses[str(status)] = {"description": _REASONS.get(status, "Error"), **error}
    return responses


_REASONS = {
    400: "Bad input", 401: "Missing or wrong token", 403: "Not allowed", 404: "Not found", 409: "Conflict",
    410: "Gone", 413: "Too large", 422: "Invalid request body", 500: "Worker fault", 503: "Busy",
    507: "Storage full",
}  # fmt: skip


def build_openapi(app: web.Application) -> dict[str, Any]:
    from memory_anchor.worker.api.middleware import PUBLIC_PATHS

    components = _Components()
    components.schemas.update(FILTER_DEFS)
    paths: dict[str, dict[str, Any]] = {}
    names = [route.handler.__name__ for route in app.router.routes() if route.method != "HEAD"]
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        info = route.get_info()
        path = info.get("path") or info.get("formatter")
        if not path:
            continue
        path = re.sub(r"{(\w+):[^}]*}", r"{\1}", path)  # aiohttp's {name:regex} is OpenAPI's {name}
        handler = route.handler
        source = _source(handler)
        doc = (handler.__doc__ or "").strip()
        public = path in PUBLIC_PATHS or path.startswith("/static/")
        operation: dict[str, Any] = {
            # operationIds must be unique: two modules may each have an `add_memory`.
            "operationId": handler.__name__ if names.count(handler.__name__) == 1
            else f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}",
            "summary": doc.split("\n", 1)[0] or handler.__name__.replace("_", " "),
            "responses": _responses(handler, source, public, components),
        }
        operation["responses"].update(getattr(handler, "responses", {}))
        if doc:
            operation["description"] = doc
        params = [{"name": p, "in": "path", "required": True, "schema": _path_schema(p, path)} for p in re.findall(r"{(\w+)}", path)]
        params += getattr(handler, "query_params", [])
        if params:
            operation["parameters"] = params
        body = _body(handler, source, components)
        if body is not None:
            operation["requestBody"] = body
        if not public:
            operation["security"] = [{"bearer": []}, {"token": []}]
        paths.setdefault(path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Memory Anchor worker", "version": __version__},
        "servers": [{"url": "/"}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(components.schemas.items())),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "The token in worker.json"},
                "token": {
                    "type": "apiKey", "in": "header", "name": "Authorization",
                    "description": "mem0's scheme: `Authorization: Token <the token in worker.json>`",
                },  # fmt: skip
            },
        },
    }
