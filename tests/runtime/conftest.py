"""The runtime tests' shared fixtures: a code host serving on a thread, and PostgreSQL store URLs in fresh schemas."""

from __future__ import annotations

import pytest

from shiftchange.runtime.codehost import serve


@pytest.fixture
def provider_url(tmp_path):
    """The URL of a code host serving on a thread of this process, on a ledger in tmp_path; stopped at the end."""
    server, url = serve(tmp_path / "provider-ledger.jsonl")
    server.serve_in_background()
    yield url
    server.stop()


def schema_url(url: str, schema: str) -> str:
    """`url` naming `schema`: what a process opens to share a store another handle made (`make_postgres_store`)."""
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"
