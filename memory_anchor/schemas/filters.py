"""mem0's filter language as a JSON schema (the parser is memory_anchor/worker/store/filters.py).

Pydantic cannot describe a recursive object whose extra keys are conditions,
so the schema is written out here once and attached to every `filters` field;
the OpenAPI builder puts FILTER_DEFS into `components.schemas`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from memory_anchor.schemas.common import NOT_BLANK_PATTERN

_SCALAR = {"type": ["string", "number", "boolean"]}
# Epoch seconds of 0001-01-01 and 9999-12-31T23:59:59: what ISO 8601 dates can say.
TIME_RANGE = (-62135596800, 253402300799)
_TIME = {
    "anyOf": [
        {"type": "number", "minimum": TIME_RANGE[0], "maximum": TIME_RANGE[1]},
        # The first and the last day are left out: with a UTC offset they can fall outside the range.
        {"type": "string", "format": "date-time", "pattern": "^(?!0001-01-01|9999-12-31)"},
    ],
    "description": "ISO 8601 or epoch seconds",
}


def _operators(value: dict, ordered: dict) -> dict:
    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "properties": {
            "eq": {"anyOf": [value, {"type": "null"}]},
            "ne": {"anyOf": [value, {"type": "null"}]},
            "in": {"type": "array", "items": value},
            "nin": {"type": "array", "items": value},
            "gt": ordered,
            "gte": ordered,
            "lt": ordered,
            "lte": ordered,
            "contains": {"type": "string"},
            "icontains": {"type": "string"},
        },
    }


FILTER_DEFS: dict[str, Any] = {
    "FilterValue": _SCALAR,
    "FilterOperators": _operators(
        {"$ref": "#/components/schemas/FilterValue"}, {"type": ["string", "number"]}
    ),
    "FieldCondition": {
        "description": "A value (equality; \"*\" = has a value), a list (any of), or operators",
        "anyOf": [
            {"$ref": "#/components/schemas/FilterValue"},
            {"type": "array", "items": {"$ref": "#/components/schemas/FilterValue"}},
            {"$ref": "#/components/schemas/FilterOperators"},
        ],
    },
    "TimeCondition": {
        "anyOf": [
            _TIME,
            {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": False,
                "properties": {
                    **{op: _TIME for op in ("eq", "ne", "gt", "gte", "lt", "lte")},
                    **{op: {"type": "array", "items": _TIME} for op in ("in", "nin")},
                },
            },
        ]
    },
    "ConditionList": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Filters", "minProperties": 1}},
    "Filters": {
        "type": "object",
        "description": (
            "mem0's filter language: {field: condition} pairs (all must hold), combined with AND, OR "
            "and NOT. Operators: eq, ne, in, nin, gt, gte, lt, lte, contains, icontains. Fields: user_id, "
            "agent_id, run_id, session_id, project, kind, layer, type, status, memory, created_at, "
            "updated_at, happened_at; any other name is a metadata key."
        ),
        "propertyNames": {"pattern": NOT_BLANK_PATTERN},
        "properties": {
            "AND": {"$ref": "#/components/schemas/ConditionList"},
            "OR": {"$ref": "#/components/schemas/ConditionList"},
            "NOT": {"anyOf": [{"$ref": "#/components/schemas/ConditionList"}, {"$ref": "#/components/schemas/Filters", "minProperties": 1}]},
            "created_at": {"$ref": "#/components/schemas/TimeCondition"},
            "updated_at": {"$ref": "#/components/schemas/TimeCondition"},
            "happened_at": {"$ref": "#/components/schemas/TimeCondition"},
            "metadata": {
                "type": "object",
                "propertyNames": {"pattern": NOT_BLANK_PATTERN, "not": {"enum": ["AND", "OR", "NOT"]}},
                "additionalProperties": {"$ref": "#/components/schemas/FieldCondition"},
            },
        },
        "additionalProperties": {"$ref": "#/components/schemas/FieldCondition"},
    },
}

# Pydantic follows every $ref it emits and knows nothing of components.schemas, so a field
# carries this marker and the OpenAPI builder swaps it for {"$ref": ".../Filters"}.
COMPONENT_MARKER = "x-component"
FILTERS_SCHEMA = {"type": "object", COMPONENT_MARKER: "Filters"}

# A `filters` field: any JSON object at runtime (memory_anchor/worker/store/filters.py checks it), this schema in the docs.
FilterObject = Annotated[dict[str, Any], WithJsonSchema(FILTERS_SCHEMA)]


# A point in time on the wire: epoch seconds or an ISO 8601 date-time (what parse_time reads).
Timestamp = Annotated[str | Annotated[float, Field(ge=TIME_RANGE[0], le=TIME_RANGE[1])], WithJsonSchema(_TIME)]
# `as_of`: a sequence number (a SQLite integer), a snapshot label or a timestamp.
AsOf = Annotated[int, Field(ge=0, le=2**63 - 1)] | str


def filters_field(description: str = "mem0 filters (see Filters)") -> Any:
    return Field(default_factory=dict, description=description)
