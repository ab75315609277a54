"""mem0's filter language, compiled to SQL over `records`.

    {"AND": [{"user_id": "alice"},
             {"created_at": {"gte": "2026-01-01"}},
             {"OR": [{"topic": {"in": ["perf", "db"]}}, {"NOT": [{"app_id": "legacy"}]}]}]}

A condition is `{field: value}` (equality; a list means "any of"; "*" means
"has a value") or `{field: {operator: value, ...}}` with the operators of
mem0's platform and OSS filters: eq, ne, in, nin, gt, gte, lt, lte, contains,
icontains. Several fields or operators in one object must all hold; AND, OR
and NOT combine lists of conditions.

Fields: the record columns (user_id, agent_id, run_id, session_id, project,
kind, layer, type, status), `memory` (the text), the times created_at (first
version), updated_at (this version) and happened_at, and everything else is a
metadata key (mem0 keeps app_id and categories there too); `metadata` may also
hold metadata conditions itself. Anything else is a `FilterError` (400) that
says what is wrong, never a 500.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memory_anchor.worker.store.dialect import POSTGRES, SQLITE, truth
from memory_anchor.worker.store.records import RecordError, parse_time

LOGICAL = ("AND", "OR", "NOT")
OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "icontains")
COLUMNS = ("user_id", "agent_id", "run_id", "session_id", "project", "kind", "layer", "type", "status")
TIMES = ("created_at", "updated_at", "happened_at")
WILDCARD = "*"
MAX_DEPTH = 16
MAX_CONDITIONS = 200
INT64 = (-(2**63), 2**63 - 1)


class FilterError(RecordError):
    def __init__(self, message: str):
        super().__init__(message, code="invalid_filter", status=400)


@dataclass(frozen=True)
class Filter:
    """A parsed filter; `sql(alias, dialect)` is a WHERE fragment over `records <alias>`."""

    tree: tuple

    def sql(self, alias: str = "r", dialect: str = SQLITE) -> tuple[str, list[Any]]:
        return _sql(self.tree, alias, dialect)


def parse(filters: Any) -> Filter:
    """Check and parse a mem0 filter object (raises FilterError)."""
    if not isinstance(filters, dict):
        raise FilterError("filters must be a JSON object")
    counter = [0]
    return Filter(_parse_object(filters, "filters", 0, counter))


def split(filters: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(plain, rest): top-level `field: value` equalities, and everything else as one filter object.

    Plain equalities are what the callers can push into indexes (the vector
    filter, the stable-column prefilter); the rest is compiled with `parse`.
    A top-level AND of plain conditions counts as plain.
    """
    plain: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    if not isinstance(filters, dict):
        raise FilterError("filters must be a JSON object")
    items = list(filters.items())
    if isinstance(filters.get("AND"), list) and all(_is_plain_object(c) for c in filters["AND"]):
        items = [(k, v) for k, v in items if k != "AND"] + [kv for c in filters["AND"] for kv in c.items()]
    for key, value in items:
        if key not in LOGICAL and key not in plain and _is_plain(key, value):
            plain[key] = value
        elif key in rest or key in plain:
            rest.setdefault("AND", []).append({key: value})
        else:
            rest[key] = value
    return plain, rest


def _is_plain_object(condition: Any) -> bool:
    return isinstance(condition, dict) and len(condition) == 1 and all(
        k not in LOGICAL and _is_plain(k, v) for k, v in condition.items()
    )


def _is_plain(key: str, value: Any) -> bool:
    if key == "metadata":
        return isinstance(value, dict) and not set(value) & {*LOGICAL, *OPERATORS} and all(
            _is_plain(str(k), v) for k, v in value.items()
        )
    if key in TIMES or key == "memory" or value is None:
        return False
    if isinstance(value, list):
        return all(_scalar(v) for v in value)
    return _scalar(value) and value != WILDCARD


def _scalar(value: Any) -> bool:
    """A value SQLite binds as it is (an int beyond 64 bits does not)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return INT64[0] <= value <= INT64[1]
    return isinstance(value, (bool, float, str))


# --- parsing -----------------------------------------------------------------------


def _parse_object(obj: dict, where: str, depth: int, counter: list[int]) -> tuple:
    if depth > MAX_DEPTH:
        raise FilterError(f"{where}: filters nest deeper than {MAX_DEPTH} levels")
    parts = []
    for key, value in obj.items():
        if not isinstance(key, str) or not key.strip():
            raise FilterError(f"{where}: a field name must be a non-empty string")
        if key in LOGICAL:
            parts.append(_parse_logical(key, value, f"{where}.{key}", depth, counter))
        elif key == "metadata" and isinstance(value, dict) and not (set(value) & set(OPERATORS)):
            for meta_key, meta_value in value.items():
                if meta_key in LOGICAL:
                    raise FilterError(f"{where}.metadata: put {meta_key} outside `metadata`, around whole conditions")
                parts.append(_parse_field(("meta", str(meta_key)), meta_value, f"{where}.metadata.{meta_key}", counter))
        else:
            parts.append(_parse_field(_field(key), value, f"{where}.{key}", counter))
    return ("and", tuple(parts))


def _parse_logical(op: str, value: Any, where: str, depth: int, counter: list[int]) -> tuple:
    if op == "NOT" and isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        raise FilterError(f"{where} needs a non-empty list of condition objects")
    children = []
    for n, child in enumerate(value):
        if not isinstance(child, dict) or not child:
            raise FilterError(f"{where}[{n}] must be a non-empty condition object, not {_show(child)}")
        children.append(_parse_object(child, f"{where}[{n}]", depth + 1, counter))
    if op == "NOT":
        return ("not", ("and", tuple(children)))
    return ("and" if op == "AND" else "or", tuple(children))


def _field(key: str) -> tuple[str, str]:
    if key in COLUMNS:
        return ("column", key)
    if key in TIMES:
        return ("time", key)
    if key == "memory":
        return ("column", "text")
    return ("meta", key)


def _parse_field(field: tuple[str, str], value: Any, where: str, counter: list[int]) -> tuple:
    if isinstance(value, dict):
        if not value:
            raise FilterError(f"{where}: an empty object is not a condition; use one of {', '.join(OPERATORS)}")
        unknown = [k for k in value if k not in OPERATORS]
        if unknown:
            raise FilterError(
                f"{where}: {', '.join(repr(k) for k in unknown)} is not a filter operator; "
                f"use one of {', '.join(OPERATORS)} (a nested object is not a value)"
            )
        return ("and", tuple(_leaf(field, op, operand, f"{where}.{op}", counter) for op, operand in value.items()))
    if value == WILDCARD:
        return _leaf(field, "any", None, where, counter)
    if isinstance(value, list):
        return _leaf(field, "in", value, where, counter)
    return _leaf(field, "eq", value, where, counter)


def _leaf(field: tuple[str, str], op: str, operand: Any, where: str, counter: list[int]) -> tuple:
    counter[0] += 1
    if counter[0] > MAX_CONDITIONS:
        raise FilterError(f"filters hold more than {MAX_CONDITIONS} conditions")
    if op in ("in", "nin"):
        if not isinstance(operand, list):
            raise FilterError(f"{where}: `{op}` needs a list of values, not {_show(operand)}")
        operand = [_value(field, v, where) for v in operand]
    elif op in ("gt", "gte", "lt", "lte"):
        if operand is None or isinstance(operand, (bool, list, dict)):
            raise FilterError(f"{where}: `{op}` needs a number or a string, not {_show(operand)}")
        operand = _value(field, operand, where)
    elif op in ("contains", "icontains"):
        if not isinstance(operand, str):
            raise FilterError(f"{where}: `{op}` needs a string, not {_show(operand)}")
    elif op in ("eq", "ne"):
        operand = None if operand is None else _value(field, operand, where)
    return ("leaf", field, op, operand)


def _value(field: tuple[str, str], value: Any, where: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and not _scalar(value):
        value = float(value)  # JSON numbers have no size limit; SQLite integers do
    if not _scalar(value):
        raise FilterError(f"{where}: {_show(value)} is not a filter value (a string, number or boolean)")
    if field[0] == "time":
        try:
            return parse_time(value.upper() if isinstance(value, str) else value)
        except (ValueError, OverflowError) as exc:
            raise FilterError(f"{where}: {exc}")
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- SQL ---------------------------------------------------------------------------


def _sql(node: tuple, alias: str, dialect: str) -> tuple[str, list[Any]]:
    kind = node[0]
    if kind in ("and", "or"):
        if not node[1]:
            return truth(dialect, True), []
        parts, params = [], []
        for child in node[1]:
            text, child_params = _sql(child, alias, dialect)
            parts.append(text)
            params.extend(child_params)
        return "(" + f" {kind.upper()} ".join(parts) + ")", params
    if kind == "not":
        text, params = _sql(node[1], alias, dialect)
        return f"(NOT {text})", params
    if dialect == POSTGRES:
        return _leaf_postgres(node, alias)
    return _leaf_sql(node, alias)


def _leaf_sql(node: tuple, alias: str) -> tuple[str, list[Any]]:
    """A leaf for SQLite: metadata through its JSON1 functions, conditions as 0 or 1."""
    _, (space, name), op, operand = node
    if space == "column":
        target, target_params = f"{alias}.{name}", []
    elif space == "time":
        target, target_params = _time_target(name, alias), []
    else:
        path = '$."' + name.replace('"', "") + '"'
        target, target_params = f"json_extract({alias}.metadata, ?)", [path]
    text, params = _compare(target, target_params, op, operand, space == "meta", alias)
    # Every leaf is 0 or 1, never NULL, so NOT and OR mean what they say on missing values.
    return f"COALESCE({text}, 0)", params


def _compare(target: str, tp: list[Any], op: str, operand: Any, is_meta: bool, alias: str) -> tuple[str, list[Any]]:
    if op == "any":
        return f"({target} IS NOT NULL AND {target} != '')", [*tp, *tp]
    if op == "eq":
        return (f"({target} IS NULL)", tp) if operand is None else (f"({target} = ?)", [*tp, operand])
    if op == "ne":
        return f"({target} IS NOT ?)", [*tp, operand]
    if op in ("in", "nin"):
        if not operand:
            return ("0" if op == "in" else "1"), []
        marks = ",".join("?" * len(operand))
        if op == "in":
            return f"({target} IN ({marks}))", [*tp, *operand]
        return f"({target} IS NULL OR {target} NOT IN ({marks}))", [*tp, *tp, *operand]
    if op in ("gt", "gte", "lt", "lte"):
        symbol = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[op]
        if is_meta:  # compare numbers with numbers and strings with strings, as JSON would
            types = "'integer','real'" if isinstance(operand, (int, float)) else "'text'"
            return f"(typeof({target}) IN ({types}) AND {target} {symbol} ?)", [*tp, *tp, operand]
        return f"({target} {symbol} ?)", [*tp, operand]
    # contains / icontains: a substring of a string, or an element of a JSON array
    fold = (lambda x: f"lower({x})") if op == "icontains" else (lambda x: x)
    substring = f"instr({fold(target)}, {fold('?')}) > 0"
    if not is_meta:
        return f"({substring})", [*tp, operand]
    path = tp[0]
    return (
        f"(CASE json_type({alias}.metadata, ?) WHEN 'array' THEN "
        f"EXISTS (SELECT 1 FROM json_each({alias}.metadata, ?) e WHERE {fold('e.value')} = {fold('?')}) "
        f"ELSE {substring} END)",
        [path, path, operand, *tp, operand],
    )


def _leaf_postgres(node: tuple, alias: str) -> tuple[str, list[Any]]:
    """A leaf for PostgreSQL: metadata as jsonb, compared with JSON values, so numbers meet
    numbers and strings strings, as SQLite's JSON1 does; conditions are booleans."""
    _, (space, name), op, operand = node
    if space != "meta":
        target = _time_target(name, alias) if space == "time" else f"{alias}.{name}"
        # Record columns are text (SQLite compares a number with one as text) or, for times, numbers.
        value = (lambda v: v) if space == "time" else _as_text
        text, params = _compare_postgres_column(target, op, operand, value)
        return f"COALESCE({text}, false)", params
    json_value = f"({alias}.metadata::jsonb -> CAST(? AS TEXT))"
    json_text = f"({alias}.metadata::jsonb ->> CAST(? AS TEXT))"
    key = name.replace('"', "")
    if op == "any":
        text, params = f"({json_text} IS NOT NULL AND {json_text} <> '')", [key, key]
    elif op == "eq" and operand is None:
        text, params = f"({json_value} IS NULL)", [key]
    elif op == "eq":
        text, params = f"({json_value} = CAST(? AS JSONB))", [key, _json(operand)]
    elif op == "ne":
        text, params = f"({json_value} IS DISTINCT FROM CAST(? AS JSONB))", [key, _json(operand)]
    elif op in ("in", "nin"):
        if not operand:
            return truth(POSTGRES, op == "nin"), []
        marks = ",".join("CAST(? AS JSONB)" for _ in operand)
        values = [_json(v) for v in operand]
        if op == "in":
            text, params = f"({json_value} IN ({marks}))", [key, *values]
        else:
            text, params = f"({json_value} IS NULL OR {json_value} NOT IN ({marks}))", [key, key, *values]
    elif op in ("gt", "gte", "lt", "lte"):
        symbol = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[op]
        json_type = "number" if isinstance(operand, (int, float)) else "string"
        text = f"(jsonb_typeof({json_value}) = '{json_type}' AND {json_value} {symbol} CAST(? AS JSONB))"
        params = [key, key, _json(operand)]
    else:  # contains / icontains: a substring of a string, or a string element of an array
        fold = (lambda x: f"lower({x})") if op == "icontains" else (lambda x: x)
        text = (
            f"(CASE jsonb_typeof({json_value}) WHEN 'array' THEN EXISTS ("
            f"SELECT 1 FROM jsonb_array_elements({json_value}) e(v) "
            f"WHERE jsonb_typeof(e.v) = 'string' AND {fold('(e.v #>> ARRAY[]::text[])')} = {fold('CAST(? AS TEXT)')}) "
            f"ELSE strpos({fold(json_text)}, {fold('CAST(? AS TEXT)')}) > 0 END)"
        )
        params = [key, key, operand, key, operand]
    return f"COALESCE({text}, false)", params


def _compare_postgres_column(target: str, op: str, operand: Any, value) -> tuple[str, list[Any]]:
    if op == "any":
        return f"({target} IS NOT NULL AND CAST({target} AS TEXT) <> '')", []
    if op == "eq":
        return (f"({target} IS NULL)", []) if operand is None else (f"({target} = ?)", [value(operand)])
    if op == "ne":
        return f"({target} IS DISTINCT FROM ?)", [None if operand is None else value(operand)]
    if op in ("in", "nin"):
        if not operand:
            return truth(POSTGRES, op == "nin"), []
        marks = ",".join("?" * len(operand))
        values = [value(v) for v in operand]
        if op == "in":
            return f"({target} IN ({marks}))", values
        return f"({target} IS NULL OR {target} NOT IN ({marks}))", values
    if op in ("gt", "gte", "lt", "lte"):
        symbol = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[op]
        return f"({target} {symbol} ?)", [value(operand)]
    fold = (lambda x: f"lower({x})") if op == "icontains" else (lambda x: x)
    return f"(strpos({fold(f'CAST({target} AS TEXT)')}, {fold('CAST(? AS TEXT)')}) > 0)", [operand]


def _time_target(name: str, alias: str) -> str:
    if name == "created_at":  # the record's first version, not this one
        return f"(SELECT min(c.created_at) FROM records c WHERE c.id = {alias}.id)"
    if name == "updated_at":  # this version's
        return f"{alias}.created_at"
    return f"{alias}.{name}"


def _as_text(value: Any) -> str:
    """A filter value as SQLite's text affinity would see it beside a text column."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _json(value: Any) -> str:
    return json.dumps(value)
