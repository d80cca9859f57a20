"""Redis fixtures: a shared server for the store tests, and private servers the fault tests may
stop and restart. Every test works under its own key prefix and deletes its keys afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

from redis_server import DEFAULT_URL, REDIS_SERVER, RedisServer, redis_reachable


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """``$LOOPWARDEN_REDIS_URL``, else a server on the default port, else one started here."""
    env = os.environ.get("LOOPWARDEN_REDIS_URL")
    if env:
        if not redis_reachable(env):
            pytest.fail(f"LOOPWARDEN_REDIS_URL={env} is set but not reachable")
        yield env
        return
    if redis_reachable(DEFAULT_URL):
        yield DEFAULT_URL
        return
    if REDIS_SERVER is None:
        pytest.skip("no Redis reachable and redis-server is not installed")
    server = RedisServer()
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    prefix = f"loopwarden-test:{uuid.uuid4().hex}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A private redis-server the test may stop and start again (same port)."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
