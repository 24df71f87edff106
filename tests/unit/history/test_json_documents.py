"""The store's documents decode the same whether orjson (the fast path) or the standard library reads them, including
what only the standard library accepts; a damaged one is bad input (``ConfigError``, exit 2) naming the store."""

from __future__ import annotations

import json
import math

import pytest

from gpukit.errors import ConfigError
from gpukit.history import connection


@pytest.mark.parametrize("fast", [True, False])
def test_documents_decode_alike_with_and_without_orjson(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    if not fast:
        monkeypatch.setattr(connection, "_orjson", None)
    doc = {"gpus": [{"serial": "1654", "gbps": 4070.25, "samples": [1.5, 2.25] * 3}], "count": 2**40}
    assert connection.loads(json.dumps(doc), "a run", "store.db") == doc
    assert connection.loads(json.dumps(doc).encode(), "a run", "store.db") == doc  # bytes, as PostgreSQL gives them
    old = connection.loads('{"x": NaN, "big": 123456789012345678901234567890}', "a run", "store.db")
    assert math.isnan(old["x"]) and old["big"] == 123456789012345678901234567890  # written before floats were cleaned
    assert connection.json_or("{cut", "fallback") == "fallback"
    with pytest.raises(ConfigError, match="damaged: a run is not valid JSON"):
        connection.loads('{"cut": [1, 2', "a run", "store.db")
