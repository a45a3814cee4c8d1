"""A real LiteLLM proxy process for end-to-end tests: `start_proxy` runs ``litellm --config`` on a free
loopback port, offline, with a fresh master key; ``fast_start`` forks it from a server process that
imported LiteLLM's proxy once."""

from __future__ import annotations

import atexit
import contextlib
import json
import multiprocessing
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "IMPORT_TIME_ENV",
    "ProcessHandle",
    "ProxyProcess",
    "ProxyStartError",
    "free_port",
    "proxy_env",
    "start_proxy",
]

_PROXY_ENV_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
_DROP_ENV_VARS = ("DATABASE_URL", "DIRECT_URL", "REDIS_HOST", "REDIS_URL", "LITELLM_CONFIG_BUCKET_NAME")
# An opener that ignores any *_PROXY environment variables.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Every proxy started here, so none outlives this process (they run in their own session).
_LIVE: list[ProxyProcess] = []


@atexit.register
def _stop_all() -> None:
    for proxy in list(_LIVE):
        proxy.stop(timeout=5)


_HANDED_OUT: set[int] = set()  # every port `free_port` has returned in this process
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago, and that this process was not given before.

    The system may offer a port again as soon as the socket that found it is closed. Two proxies
    started at once (the demo starts both of its proxies in threads) could then get the same port:
    one binds it, the other fails, and the other's readiness check is answered by the first, so its
    requests reach a proxy with another master key ("No connected db.")."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        with _HANDED_OUT_LOCK:
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
    raise OSError("no free port on 127.0.0.1 that this process was not given before")


def proxy_env(
    master_key: str,
    *,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a proxy process: offline (LiteLLM's bundled model map), no database,
    no HTTP proxies, the given master key, ``pythonpath`` in front of ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if k not in _PROXY_ENV_VARS and k not in _DROP_ENV_VARS}
    paths = [str(p) for p in pythonpath]
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
        }
    )
    env.update(extra_env or {})
    return env


class ProxyStartError(RuntimeError):
    """The proxy process died or did not become live in time (the message ends with its log)."""


class ProcessHandle(Protocol):
    """What :class:`ProxyProcess` needs of its process (``subprocess.Popen`` has it)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass(eq=False)
class ProxyProcess:
    """A running ``litellm --config`` process on 127.0.0.1, started by :func:`start_proxy`."""

    base_url: str
    master_key: str
    log_path: Path
    config_path: Path
    process: ProcessHandle
    startup_seconds: float = 0.0
    _log_file: Any = field(repr=False, default=None)

    @property
    def headers(self) -> dict[str, str]:
        """Authorization header for the master key."""
        return {"Authorization": f"Bearer {self.master_key}"}

    def url(self, path: str) -> str:
        """``base_url`` joined with ``path`` (e.g. ``"/v1/chat/completions"``)."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def post(
        self, path: str, body: object, timeout: float = 120.0, *, headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """POST JSON with the master key (and `headers`): (status, headers, body). Never raises for
        HTTP errors."""
        request = urllib.request.Request(
            self.url(path),
            data=json.dumps(body).encode(),
            headers={**self.headers, "Content-Type": "application/json", **(headers or {})},
        )
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                return int(response.status), dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), dict(exc.headers), exc.read()

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

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _status(url: str, timeout: float = 2.0) -> int | None:
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
    timeout: float = 90.0,
    name: str = "proxy",
    fast_start: bool = False,
) -> ProxyProcess:
    """Start ``litellm --config`` on a free 127.0.0.1 port and wait until it is live.

    ``config`` (the proxy config as a dict) is written to ``workdir`` (as JSON, which is YAML too);
    the proxy gets a fresh random master key, no database, and LiteLLM's bundled model map.
    Raises :class:`ProxyStartError` with the end of its log if it exits or is not live within
    ``timeout`` seconds. Stop it with ``stop()`` or a ``with`` block.

    ``fast_start=True`` forks the proxy from a server process that has imported LiteLLM's proxy
    once (multiprocessing's forkserver, started on first use): the proxy runs LiteLLM's own CLI
    entry point with these arguments, environment and working directory, but skips the seconds
    of importing LiteLLM. What LiteLLM reads from the environment while it is imported
    (`IMPORT_TIME_ENV`) comes from the first fast start; a later one that asks for other values
    there is started as a fresh process instead.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / f"{name}_config.yaml"
    log_path = workdir / f"{name}.log"
    config_path.write_text(json.dumps(dict(config), indent=2))
    master_key = "sk-" + secrets.token_urlsafe(32)
    env = proxy_env(master_key, pythonpath=pythonpath, extra_env=extra_env)
    last_error = ""
    for _attempt in range(3):  # the free port can be taken between free_port() and bind: retry
        port = free_port()
        arguments = ["--config", str(config_path), "--host", "127.0.0.1", "--port", str(port)]
        log_file = log_path.open("ab")
        started = time.monotonic()
        process: ProcessHandle
        if fast_start and _forkable(env):
            process = _fork_proxy(arguments, env, workdir, log_path, [str(p) for p in pythonpath])
        else:
            process = subprocess.Popen(
                [sys.executable, "-m", "litellm.proxy.proxy_cli", *arguments],
                cwd=str(workdir),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proxy = ProxyProcess(f"http://127.0.0.1:{port}", master_key, log_path, config_path, process, 0.0, log_file)
        _LIVE.append(proxy)
        deadline = started + timeout
        while time.monotonic() < deadline and process.poll() is None:
            if _status(proxy.url("/health/liveliness")) == 200:
                proxy.startup_seconds = time.monotonic() - started
                return proxy
            time.sleep(0.05 if fast_start else 0.2)
        alive = process.poll() is None
        proxy.stop()
        last_error = proxy.log_tail(80)
        if alive:
            raise ProxyStartError(f"proxy not live after {timeout:.0f}s; log tail:\n{last_error}")
        if "address already in use" not in last_error.lower():
            break
    raise ProxyStartError(f"proxy process exited during start-up; log tail:\n{last_error}")


# ---- fast start: proxies forked from a process that imported LiteLLM's proxy once ---------------

#: Environment variables LiteLLM (or a library it imports) reads while being imported: a forked
#: proxy has the values the forkserver was started with.
IMPORT_TIME_ENV: tuple[str, ...] = (
    "LITELLM_LOG",
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "LITELLM_MODE",
    "LITELLM_RUST",
    "PROMETHEUS_MULTIPROC_DIR",
    "prometheus_multiproc_dir",
)
_FORK_LOCK = threading.Lock()
_fork_env: dict[str, str | None] | None = None
_fork_context: Any = None


def _forkable(env: Mapping[str, str]) -> bool:
    """Whether a proxy with `env` can be forked from the forkserver (starting it if need be)."""
    global _fork_env, _fork_context
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    wanted = {key: env.get(key) for key in IMPORT_TIME_ENV}
    with _FORK_LOCK:
        if _fork_env is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["litellm.proxy.proxy_server", "litellm.proxy.proxy_cli", __name__])
            saved = {key: os.environ.get(key) for key in IMPORT_TIME_ENV}
            try:  # the forkserver takes this process's environment: give it the proxy's import-time part
                for key, value in wanted.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
                from multiprocessing import forkserver

                forkserver.ensure_running()
            finally:
                for key, value in saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
            _fork_env, _fork_context = wanted, context
        return wanted == _fork_env


class _ForkedProcess:
    """A forked proxy behind ``subprocess.Popen``'s ``pid`` / ``poll`` / ``wait``."""

    def __init__(self, process: Any) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        return int(self._process.pid)

    def poll(self) -> int | None:
        return None if self._process.is_alive() else int(self._process.exitcode)

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self.poll()
        if code is None:
            raise subprocess.TimeoutExpired(["litellm"], timeout or 0.0)
        return code


def _fork_proxy(
    arguments: list[str], env: Mapping[str, str], workdir: Path, log_path: Path, pythonpath: list[str]
) -> ProcessHandle:
    process = _fork_context.Process(
        target=_run_forked,
        args=(arguments, dict(env), str(workdir), str(log_path), pythonpath),
        name="litellm-proxy",
        daemon=False,
    )
    process.start()
    return _ForkedProcess(process)


def _run_forked(arguments: list[str], env: dict[str, str], workdir: str, log_path: str, pythonpath: list[str]) -> None:
    """In the forked child: become the proxy process ``litellm`` would have started."""
    os.setsid()  # its own session, as start_new_session gives a subprocess (stop() kills the group)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:0] = [p for p in pythonpath if p not in sys.path]
    sys.argv = ["litellm", *arguments]
    from litellm.proxy import proxy_cli

    proxy_cli.run_server.main(args=arguments, prog_name="litellm")
