"""Fixtures for the S3 archive tests against a real S3 server (SeaweedFS in CI).

``THREADKEEP_TEST_S3_URL`` (``s3://bucket/prefix``) names the bucket; credentials and the
endpoint come from the standard AWS variables (``.ci/services/s3.sh env`` prints them).
Without it the tests skip with a reason, unless ``THREADKEEP_REQUIRE_SERVICES=1``, where a
missing server is a failure. Each test writes under its own random key prefix and removes
what it wrote.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from uuid import uuid4

import pytest

from threadkeep import Store, open_store
from threadkeep_contract_tests import require_service
from threadkeep_s3 import S3Archive

S3_ENV = "THREADKEEP_TEST_S3_URL"


@pytest.fixture
def s3_url() -> str:
    """A fresh ``s3://bucket/prefix/<random>`` root for one test."""
    base = require_service(S3_ENV, "S3")
    return f"{base.rstrip('/')}/tests-{uuid4().hex}"


@pytest.fixture
async def archive_factory(s3_url: str) -> AsyncIterator[Callable[..., S3Archive]]:
    """``(**options) -> S3Archive`` on an empty prefix; its objects are removed afterwards."""
    yield lambda **options: S3Archive(s3_url, **options)
    async with S3Archive(s3_url) as opened:
        async for info in opened.list():
            await opened.delete(info.key)


@pytest.fixture
def store_factory() -> Callable[..., Store]:
    """``(**options) -> Store``: a private in-memory hot store, the same one per test."""
    url = f"memory://s3-tests-{uuid4().hex}"
    return lambda **options: open_store(url, **options)


@pytest.fixture
async def archive(s3_url: str) -> AsyncIterator[S3Archive]:
    """An open S3 archive on an empty prefix; its objects are removed afterwards."""
    async with S3Archive(s3_url) as opened:
        try:
            yield opened
        finally:
            async for info in opened.list():
                await opened.delete(info.key)


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """A private in-memory hot store."""
    async with open_store(f"memory://s3-tests-{uuid4().hex}") as opened:
        yield opened
