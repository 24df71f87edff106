"""The PostgreSQL server the store tests run against, named by ``GPUKIT_TEST_PG_URL`` (a role that may create
databases and roles; `.ci/run` starts one with `.ci/postgres.sh` and sets it). Without it the PostgreSQL cases skip
with the reason, except in CI (``CI=true``), where they fail: a store test that silently skipped there would prove
nothing. The fixtures (``pg_url``, ``store_url``) are in tests/conftest.py."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

__all__ = ["PG_ENV", "pg_admin_url", "with_database"]

PG_ENV = "GPUKIT_TEST_PG_URL"


def pg_admin_url() -> str:
    """The test server's URL, or skip (fail in CI) with the reason."""
    url = os.environ.get(PG_ENV, "").strip()
    if (url and not url.startswith(("postgresql://", "postgres://"))) or any(c.isspace() for c in url):
        pytest.fail(f"{PG_ENV} is not one postgresql:// URL: {url!r}")
    if url:
        return url
    reason = f"{PG_ENV} is not set: no PostgreSQL server to test the shared store against (.ci/run starts one)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " — in CI these tests must run")
    pytest.skip(reason)


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
