"""JSON for the hooks and the MCP bridge, straight from CPython's C accelerator `_json`.

`import json` imports `re`, `enum` and friends: about as long as a PostToolUse
hook's whole run, paid by every SessionStart and UserPromptSubmit hook and
by every session's bridge. `_json` is the scanner and encoder that `json`
itself uses underneath, so `loads` and `dumps` here parse and write exactly
what `json.loads` and `json.dumps` would. Where
`_json` is missing (another Python implementation) they are `json`'s own.
"""

from __future__ import annotations

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None

_INFINITY = float("inf")
_WHITESPACE = " \t\n\r"


class _ScanContext:
    """The attributes `_json.make_scanner` reads from a `json.JSONDecoder`, set to its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": -_INFINITY, "Infinity": _INFINITY, "NaN": _INFINITY - _INFINITY}.__getitem__


def _not_serializable(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


if _json is not None:
    _scan = _json.make_scanner(_ScanContext())
    _encoders = {
        ascii_only: _json.make_encoder(
            {}, _not_serializable, quote, None, ": ", ", ", False, False, True
        )
        for ascii_only, quote in ((False, _json.encode_basestring), (True, _json.encode_basestring_ascii))
    }

    def loads(data: str | bytes):
        """Like `json.loads`; raises ValueError on anything that is not one JSON document."""
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        if text.startswith("\ufeff"):
            raise ValueError("unexpected UTF-8 BOM")
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = _scan(text, start)
        except StopIteration as stop:
            raise ValueError(f"expecting a JSON value at character {stop.value}") from None
        if text[end:].strip(_WHITESPACE):
            raise ValueError(f"extra data at character {end}")
        return value

    def dumps(value, ascii_only: bool = False) -> str:
        """Like `json.dumps(value, ensure_ascii=ascii_only)`: ASCII-only text survives lone surrogates."""
        if isinstance(value, str):
            return (_json.encode_basestring_ascii if ascii_only else _json.encode_basestring)(value)
        return "".join(_encoders[ascii_only](value, 0))

else:  # pragma: no cover
    import json as _std

    def loads(data: str | bytes):
        return _std.loads(data)

    def dumps(value, ascii_only: bool = False) -> str:
        return _std.dumps(value, ensure_ascii=ascii_only)
