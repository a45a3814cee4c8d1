"""Start a real LiteLLM proxy process for end-to-end tests.

``start_proxy(config, workdir=...)`` writes ``config`` (a dict) as YAML, runs
``python -m litellm.proxy.proxy_cli --config ... --host 127.0.0.1 --port N`` with a
fresh master key and no database, waits for ``GET /health/liveliness`` and
returns a :class:`ProxyProcess`. Always call ``stop()`` (the fixtures do).

This module is also importable *inside* the proxy process (its directory is put
on the proxy's ``PYTHONPATH``): ``PAYLOAD_SINK_CALLBACK`` names a test-only
logging callback that appends each request's standard logging payload metadata
to the JSON-lines file named by ``$LITELLM_GOVERNANCE_E2E_PAYLOAD_LOG``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from litellm_governance import testing

REPO_ROOT = Path(__file__).resolve().parents[2]
SRC_DIR = REPO_ROOT  # the package lives at the top level
E2E_DIR = Path(__file__).resolve().parent

PAYLOAD_LOG_ENV = "LITELLM_GOVERNANCE_E2E_PAYLOAD_LOG"
# Dotted path for ``litellm_settings.callbacks``; resolved through ``__getattr__`` below.
PAYLOAD_SINK_CALLBACK = "_proxy.payload_sink"


@dataclass(eq=False)
class ProxyProcess(testing.ProxyProcess):
    """A proxy for the e2e tests: with an httpx client and the payload sink's records."""

    payload_log: Path = field(default=Path("/nonexistent"))

    def client(self, timeout: float = 60.0) -> Any:
        """An ``httpx.Client`` for this proxy: base URL, master key, no env proxies. Close it (``with``)."""
        import httpx  # a LiteLLM dependency; imported lazily so the proxy-side import stays light

        return httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout, trust_env=False)

    def payloads(self) -> list[dict[str, Any]]:
        """Records written by the payload-sink callback so far (oldest first)."""
        try:
            text = self.payload_log.read_text()
        except FileNotFoundError:
            return []
        # Only whole lines: the proxy may be writing the next one as this reads (a line without its
        # newline yet is a record still being written).
        complete = text[: text.rfind("\n") + 1]
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def wait_for_payloads(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Poll until the payload sink has at least ``count`` records (logging is asynchronous)."""
        deadline = time.monotonic() + timeout
        while True:
            records = self.payloads()
            if len(records) >= count or time.monotonic() > deadline:
                return records
            time.sleep(0.05)

    def wait_for_payload(self, match: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any] | None:
        """Poll until a payload-sink record satisfies ``match``; return it, or ``None`` on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            for record in self.payloads():
                if match(record):
                    return record
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def clear_payloads(self) -> None:
        """Truncate the payload-sink file."""
        with contextlib.suppress(FileNotFoundError):
            self.payload_log.write_text("")


# Every proxy started here, so the autouse fixture can clear their payload files.
_LIVE: list[ProxyProcess] = []
ProxyStartError = testing.ProxyStartError


def start_proxy(
    config: Mapping[str, Any],
    *,
    workdir: Path,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    name: str = "proxy",
    fresh: bool = False,
) -> ProxyProcess:
    """`testing.start_proxy`, with the repository root and this directory importable in the proxy (for the
    plugin and the payload sink) and the sink's file set. Forked from a process that imported LiteLLM's
    proxy once (``fast_start``; 0.7 s instead of 7 s) unless `fresh`: a test of what happens while the
    proxy process imports LiteLLM (or of its command line) asks for a fresh one.

    `timeout` (seconds until live) defaults to 60 for a forked proxy and 180 for a fresh one: a fresh
    proxy imports all of LiteLLM in each worker. Two workers took 21 s to be live on an idle 2-core
    machine and more than 60 s once while the other test worker was busy (a CI run of `.ci/run`)."""
    if timeout is None:
        timeout = 180.0 if fresh else 60.0
    payload_log = workdir / f"{name}_payloads.jsonl"
    started = testing.start_proxy(
        config,
        workdir=workdir,
        pythonpath=[*pythonpath, SRC_DIR, E2E_DIR],
        extra_env={
            PAYLOAD_LOG_ENV: str(payload_log),
            "LITELLM_LOG": os.environ.get("LITELLM_LOG", "INFO"),
            **(extra_env or {}),
        },
        timeout=timeout,
        name=name,
        fast_start=not fresh,
    )
    proxy = ProxyProcess(
        **{f.name: getattr(started, f.name) for f in fields(testing.ProxyProcess)}, payload_log=payload_log
    )
    testing.proxy._LIVE[testing.proxy._LIVE.index(started)] = proxy  # stopped at exit like every proxy
    _LIVE.append(proxy)
    return proxy


# --- test-only payload sink (imported inside the proxy process) -------------------

_SINK: dict[str, Any] = {}
_SINK_LOCK = threading.Lock()


def _make_payload_sink() -> Any:
    from litellm.integrations.custom_logger import CustomLogger  # only inside the proxy

    class PayloadSink(CustomLogger):
        """Appends each standard logging payload's metadata to ``$LITELLM_GOVERNANCE_E2E_PAYLOAD_LOG``."""

        _lock = threading.Lock()

        def _write(self, event: str, kwargs: Mapping[str, Any]) -> None:
            path = os.environ.get(PAYLOAD_LOG_ENV)
            payload = kwargs.get("standard_logging_object")
            if not path or not isinstance(payload, Mapping):
                return
            record = {
                "event": event,
                "call_type": payload.get("call_type"),
                "model": payload.get("model"),
                "model_group": payload.get("model_group"),
                "model_id": payload.get("model_id"),
                "api_base": payload.get("api_base"),
                "status": payload.get("status"),
                "stream": payload.get("stream"),
                "end_user": payload.get("end_user"),
                "metadata": payload.get("metadata"),
            }
            line = json.dumps(record, default=str)
            with self._lock, open(path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

        async def async_log_success_event(
            self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            self._write("success", kwargs)

        async def async_log_failure_event(
            self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            self._write("failure", kwargs)

    return PayloadSink()


#: Keys `team_auth` accepts, by the LiteLLM team they belong to (a proxy without a database has no keys of its own).
TEAM_KEYS = {"sk-team-a-1": "team-a", "sk-team-a-2": "team-a", "sk-team-b-1": "team-b"}
#: ``general_settings: custom_auth:`` naming `team_auth`.
TEAM_AUTH = "_proxy.team_auth"


async def team_auth(request: Any, api_key: str) -> Any:
    """A test-only ``custom_auth`` (inside the proxy): the keys of `TEAM_KEYS`, each in its team, and the
    master key; LiteLLM then puts ``user_api_key_hash`` and ``user_api_key_team_id`` in each request's metadata."""
    from litellm.proxy._types import UserAPIKeyAuth  # only inside the proxy

    key = api_key.removeprefix("Bearer ").strip()
    if key == os.environ.get("LITELLM_MASTER_KEY"):
        return UserAPIKeyAuth(api_key=key, user_role="proxy_admin")
    if key not in TEAM_KEYS:
        raise PermissionError("unknown key")
    return UserAPIKeyAuth(api_key=key, team_id=TEAM_KEYS[key])


def __getattr__(name: str) -> Any:
    """Build ``payload_sink`` lazily, so importing this module never imports litellm."""
    if name == "payload_sink":
        with _SINK_LOCK:
            if name not in _SINK:
                _SINK[name] = _make_payload_sink()
            return _SINK[name]
    raise AttributeError(name)
