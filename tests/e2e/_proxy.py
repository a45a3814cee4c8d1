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

import atexit
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SRC_DIR = REPO_ROOT / "src"
E2E_DIR = Path(__file__).resolve().parent

PAYLOAD_LOG_ENV = "LITELLM_GOVERNANCE_E2E_PAYLOAD_LOG"
# Dotted path for ``litellm_settings.callbacks``; resolved through ``__getattr__`` below.
PAYLOAD_SINK_CALLBACK = "_proxy.payload_sink"

_PROXY_ENV_VARS = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
_DROP_ENV_VARS = ("DATABASE_URL", "DIRECT_URL", "REDIS_HOST", "REDIS_URL", "LITELLM_CONFIG_BUCKET_NAME")

# An opener that ignores any *_PROXY environment variables.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# Every proxy started here, so none outlives the test process (they run in their own session).
_LIVE: list[ProxyProcess] = []


@atexit.register
def _stop_all() -> None:
    for proxy in list(_LIVE):
        proxy.stop(timeout=5)


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _dump_yaml(config: Mapping[str, Any], path: Path) -> None:
    import yaml  # type: ignore[import-untyped,unused-ignore]  # installed with litellm[proxy]

    path.write_text(yaml.safe_dump(dict(config), sort_keys=False))


def proxy_env(
    master_key: str,
    *,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a proxy process: offline, no DB, no HTTP proxies."""
    env = {k: v for k, v in os.environ.items() if k not in _PROXY_ENV_VARS and k not in _DROP_ENV_VARS}
    paths = [str(p) for p in pythonpath] + [str(SRC_DIR), str(E2E_DIR)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update(
        {
            "LITELLM_MASTER_KEY": master_key,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "PYTHONPATH": os.pathsep.join(paths),
            "PYTHONUNBUFFERED": "1",
            "LITELLM_LOG": env.get("LITELLM_LOG", "INFO"),
        }
    )
    if extra_env:
        env.update(extra_env)
    return env


@dataclass(eq=False)
class ProxyProcess:
    """A running LiteLLM proxy started by :func:`start_proxy`."""

    base_url: str
    master_key: str
    log_path: Path
    config_path: Path
    payload_log: Path
    process: subprocess.Popen[bytes]
    startup_seconds: float
    _log_file: Any = field(repr=False, default=None)

    @property
    def headers(self) -> dict[str, str]:
        """Authorization header for the master key."""
        return {"Authorization": f"Bearer {self.master_key}"}

    def client(self, timeout: float = 60.0) -> Any:
        """An ``httpx.Client`` for this proxy: base URL, master key, no env proxies. Close it (``with``)."""
        import httpx  # a LiteLLM dependency; imported lazily so the proxy-side import stays light

        return httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout, trust_env=False)

    def url(self, path: str) -> str:
        """``base_url`` joined with ``path`` (e.g. ``"/v1/chat/completions"``)."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.process.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the proxy's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def payloads(self) -> list[dict[str, Any]]:
        """Records written by the payload-sink callback so far (oldest first)."""
        try:
            text = self.payload_log.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

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

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate the proxy (SIGTERM, then SIGKILL) and close its log."""
        proc = self.process
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # its own session: see start_new_session
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self in _LIVE:
            _LIVE.remove(self)


class ProxyStartError(RuntimeError):
    """The proxy process died or did not become live in time."""


def _get_status(url: str, timeout: float = 2.0) -> int | None:
    try:
        with _OPENER.open(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return None


def start_proxy(
    config: Mapping[str, Any],
    *,
    workdir: Path,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    name: str = "proxy",
) -> ProxyProcess:
    """Write ``config`` to ``workdir``, start the proxy and wait until it is live.

    ``pythonpath`` entries are prepended to the proxy's ``PYTHONPATH`` (``src/``
    and this directory are always added, so ``litellm_governance.*`` and
    ``_proxy.payload_sink`` import). Raises :class:`ProxyStartError` with the tail
    of the log if the process exits or is not live within ``timeout`` seconds.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / f"{name}_config.yaml"
    log_path = workdir / f"{name}.log"
    payload_log = workdir / f"{name}_payloads.jsonl"
    _dump_yaml(config, config_path)
    master_key = "sk-" + secrets.token_urlsafe(32)
    env = proxy_env(
        master_key, pythonpath=pythonpath, extra_env={PAYLOAD_LOG_ENV: str(payload_log), **(extra_env or {})}
    )

    last_error = ""
    for _attempt in range(3):  # the free port can be taken between free_port() and bind: retry
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        log_file = log_path.open("ab")
        started = time.monotonic()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "litellm.proxy.proxy_cli",
                "--config",
                str(config_path),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=str(workdir),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proxy = ProxyProcess(
            base_url=base_url,
            master_key=master_key,
            log_path=log_path,
            config_path=config_path,
            payload_log=payload_log,
            process=process,
            startup_seconds=0.0,
            _log_file=log_file,
        )
        _LIVE.append(proxy)
        deadline = started + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            if _get_status(base_url + "/health/liveliness") == 200:
                proxy.startup_seconds = time.monotonic() - started
                return proxy
            time.sleep(0.2)
        alive = process.poll() is None
        proxy.stop()
        last_error = proxy.log_tail(80)
        if alive:
            raise ProxyStartError(f"proxy not live after {timeout:.0f}s; log tail:\n{last_error}")
        if "address already in use" not in last_error.lower():
            break
    raise ProxyStartError(f"proxy process exited during start-up; log tail:\n{last_error}")


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


def __getattr__(name: str) -> Any:
    """Build ``payload_sink`` lazily, so importing this module never imports litellm."""
    if name == "payload_sink":
        with _SINK_LOCK:
            if name not in _SINK:
                _SINK[name] = _make_payload_sink()
            return _SINK[name]
    raise AttributeError(name)
