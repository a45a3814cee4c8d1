"""A real redis-server for the e2e tests (what two proxies share: calibration, summaries)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

from litellm_governance.testing import free_port

#: Set by CI: a test that needs redis-server fails (instead of skipping) without it.
REDIS_ENV = "LITELLM_GOVERNANCE_REQUIRE_REDIS"


@dataclass
class RedisServer:
    host: str
    port: int
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server on a free 127.0.0.1 port, started for the test session (no persistence)."""
    yield from _redis_server(tmp_path_factory)


@pytest.fixture
def own_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for one test (the session's is stopped by the test that shows B going on without it)."""
    yield from _redis_server(tmp_path_factory)


def _redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get(REDIS_ENV) == "1":
            pytest.fail(f"redis-server is not installed and {REDIS_ENV}=1 (apt-get install -y redis-server)")
        pytest.skip(f"redis-server is not installed (apt-get install -y redis-server); {REDIS_ENV}=1 requires it")
    workdir = tmp_path_factory.mktemp("redis")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=(workdir / "redis.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = RedisServer("127.0.0.1", port, process)
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, decode_responses=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                if client.ping():
                    break
            except redis.RedisError:
                pass
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start: " + (workdir / "redis.log").read_text()[-2000:])
            time.sleep(0.05)
        yield server
    finally:
        server.stop()
