"""schemathesis hooks for tests/test_openapi_fuzz.py (loaded through SCHEMATHESIS_HOOKS).

schemathesis generates JSON bodies by itself; an import body is an export file
(application/x-ndjson), which it cannot write without being told how: one JSON object a line.
"""

import json

import schemathesis
from hypothesis import strategies as st

from memory_anchor.schemas.portability import EXPORT_MEDIA_TYPE

_VALUE = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
_LINE = st.dictionaries(st.text(max_size=12), _VALUE, max_size=4)
_FILE = st.lists(_LINE, max_size=5).map(lambda lines: "".join(json.dumps(line) + "\n" for line in lines).encode())

schemathesis.openapi.media_type(EXPORT_MEDIA_TYPE, _FILE)
