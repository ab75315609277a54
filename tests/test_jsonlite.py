"""The hooks' and the bridge's JSON (memory_anchor/hookkit/jsonlite.py) reads and writes what `json` does.

It is CPython's own C scanner and encoder without `import json` (which costs
a hook more than its work), so the property is simple: for any JSON value,
and any text that is not JSON, it agrees with `json`.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_anchor.hookkit import jsonlite
from tests.conftest import ROOT

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
values = st.recursive(scalars, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=30)


@given(values)
def test_it_writes_what_json_writes(value):
    assert jsonlite.dumps(value) == json.dumps(value, ensure_ascii=False)
    assert jsonlite.dumps(value, ascii_only=True) == json.dumps(value)


@given(values, st.sampled_from([None, 2]), st.sampled_from(["", " ", "\n\t "]))
def test_it_reads_what_json_reads(value, indent, pad):
    text = pad + json.dumps(value, indent=indent, ensure_ascii=bool(indent)) + pad
    assert jsonlite.loads(text) == json.loads(text)
    assert jsonlite.loads(text.encode("utf-8")) == json.loads(text)


@given(st.text())
def test_text_json_refuses_is_refused(text):
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            jsonlite.loads(text)
    else:
        got = jsonlite.loads(text)
        assert got == expected or (isinstance(got, float) and math.isnan(got) and math.isnan(expected))


@pytest.mark.parametrize("text", ["", "{", "[1,]", '{"a": 1} x', "nul", "\ufeff{}", '"\x01"', "[1] [2]"])
def test_malformed_documents_are_value_errors(text):
    with pytest.raises(ValueError):
        jsonlite.loads(text)


def test_objects_json_cannot_write_are_type_errors():
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonlite.dumps({"when": object()})


def test_a_hook_process_never_imports_json_or_re():
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from memory_anchor.hookkit import jsonlite, runner; "
        "jsonlite.loads('{\"a\": [1, \"é\"]}'); jsonlite.dumps({'a': 'é'}); "
        "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe, str(ROOT)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
