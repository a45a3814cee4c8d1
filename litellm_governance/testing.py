"""Test helpers: a recording, OpenAI-compatible upstream server, and a real LiteLLM proxy process.

:class:`RecordingUpstream` is a tiny HTTP server bound to ``127.0.0.1`` that
answers the OpenAI endpoints LiteLLM calls (chat completions, text
completions, responses, models; streaming too) plus Anthropic's
``/v1/messages``, and records every request it receives, so a test can check
what actually reached the "provider" after LiteLLM and its callbacks have run.
It uses only the standard library and never touches the network beyond
loopback. Point ``openai/``, ``hosted_vllm/``, ``deepseek/``... models at
:attr:`RecordingUpstream.base_url` and ``anthropic/`` models at
:attr:`RecordingUpstream.root_url`.

Use it as a context manager::

    from litellm_governance.testing import RecordingUpstream

    with RecordingUpstream(reply="hello") as upstream:
        litellm.completion(model="openai/any", api_base=upstream.base_url,
                           api_key="sk-fake", messages=[...])
        assert upstream.bodies()[0]["messages"] == [...]

or run it as a separate process: ``python -m litellm_governance.testing --port 8099``.

:func:`start_proxy` runs ``litellm --config`` (your config, as a dict) on a free loopback port,
offline and with a fresh master key, for end-to-end tests of a proxy configuration.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import itertools
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar
from urllib.parse import urlsplit

__all__ = [
    "ProxyProcess",
    "ProxyStartError",
    "RecordedRequest",
    "RecordingUpstream",
    "free_port",
    "main",
    "serve",
    "start_proxy",
]

ReplyFn = Callable[[Mapping[str, Any]], str]
"""A function from the parsed request body to the assistant's reply text."""

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})
_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_COMPLETION_PATHS = frozenset({"/v1/completions", "/completions"})
_RESPONSES_PATHS = frozenset({"/v1/responses", "/responses"})
_MODELS_PATHS = frozenset({"/v1/models", "/models"})
_MESSAGES_PATHS = frozenset({"/v1/messages", "/v1/v1/messages"})
_KIND_PATHS = {
    "chat": _CHAT_PATHS,
    "completions": _COMPLETION_PATHS,
    "responses": _RESPONSES_PATHS,
    "messages": _MESSAGES_PATHS,
}


@dataclass(frozen=True)
class RecordedRequest:
    """One request the upstream received.

    ``headers`` are lower-cased; secret headers (``authorization``,
    ``api-key``, ...) are left out and only their presence is kept in
    ``has_authorization``. ``body`` is the parsed JSON body, or ``None`` when the
    body was empty or not JSON. ``status`` is the HTTP status the upstream answered.
    """

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    has_authorization: bool
    body: Any
    status: int

    @property
    def model(self) -> str | None:
        """The ``model`` field of the body, if any."""
        if isinstance(self.body, dict):
            model = self.body.get("model")
            return model if isinstance(model, str) else None
        return None


@dataclass
class _State:
    reply: str | ReplyFn
    fail_models: dict[str, int]
    models: tuple[str, ...]
    lock: threading.Lock = field(default_factory=threading.Lock)
    records: list[RecordedRequest] = field(default_factory=list)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))


def _failure_map(models: Iterable[str] | Mapping[str, int], status: int) -> dict[str, int]:
    """Normalise ``fail_models`` to a name-to-status mapping."""
    if isinstance(models, Mapping):
        return {str(name): int(code) for name, code in models.items()}
    if isinstance(models, str):
        return {models: status}
    return dict.fromkeys(models, status)


def _estimate_tokens(value: object) -> int:
    """A crude token estimate: one token per four characters of JSON."""
    return max(1, len(json.dumps(value, ensure_ascii=False, default=str)) // 4)


def _chunks_of(text: str) -> list[str]:
    """Split ``text`` into word-sized pieces (keeping the spaces) for streaming."""
    pieces: list[str] = []
    current = ""
    for char in text:
        current += char
        if char == " ":
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    return pieces or [""]


class _Handler(BaseHTTPRequestHandler):
    """Request handler; the server's ``state`` holds configuration and records."""

    protocol_version = "HTTP/1.1"
    server_version = "RecordingUpstream/1"
    server: _Server

    # --- plumbing -------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default access log (it could leak request details)."""

    def _read_body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _record(self, body: Any, status: int) -> None:
        split = urlsplit(self.path)
        headers: dict[str, str] = {}
        has_auth = False
        for name, value in self.headers.items():
            key = name.lower()
            if key in _SECRET_HEADERS:
                has_auth = True
                continue
            headers[key] = value
        record = RecordedRequest(
            method=self.command,
            path=split.path,
            query=split.query,
            headers=headers,
            has_authorization=has_auth,
            body=body,
            status=status,
        )
        state = self.server.state
        with state.lock:
            state.records.append(record)

    def _send_json(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _send_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_event(self, payload: object, event: str | None = None) -> None:
        prefix = f"event: {event}\n" if event else ""
        self._send_chunk(f"{prefix}data: {json.dumps(payload)}\n\n")

    def _end_sse(self, done: bool = True) -> None:
        if done:
            self._send_chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _next_id(self) -> int:
        state = self.server.state
        with state.lock:
            return next(state.ids)

    def _reply_for(self, body: Mapping[str, Any]) -> str:
        reply = self.server.state.reply
        return reply(body) if callable(reply) else reply

    # --- dispatch -------------------------------------------------------
    def do_GET(self) -> None:
        """Answer ``GET /v1/models``; anything else is a 404."""
        path = urlsplit(self.path).path
        if path in _MODELS_PATHS:
            self._record(None, 200)
            state = self.server.state
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "recording-upstream"} for m in state.models]
            self._send_json(200, {"object": "list", "data": data})
            return
        self._not_found(None)

    def do_POST(self) -> None:
        """Answer the OpenAI POST endpoints; anything else is a 404."""
        path = urlsplit(self.path).path
        body = self._read_body()
        handlers: dict[frozenset[str], Callable[[dict[str, Any]], None]] = {
            _CHAT_PATHS: self._chat,
            _COMPLETION_PATHS: self._completion,
            _RESPONSES_PATHS: self._responses,
            _MESSAGES_PATHS: self._messages,
        }
        for paths, handler in handlers.items():
            if path in paths:
                if not isinstance(body, dict):
                    self._record(body, 400)
                    self._send_error(400, "Request body must be a JSON object.", "invalid_request_error")
                    return
                if self._maybe_fail(body):
                    return
                self._record(body, 200)
                handler(body)
                return
        self._not_found(body)

    def _not_found(self, body: Any) -> None:
        self._record(body, 404)
        self._send_error(404, f"Unknown path {urlsplit(self.path).path}", "not_found_error")

    def _send_error(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

    def _maybe_fail(self, body: Mapping[str, Any]) -> bool:
        state = self.server.state
        model = body.get("model")
        with state.lock:
            status = state.fail_models.get(model) if isinstance(model, str) else None
        if status is None:
            return False
        self._record(body, status)
        if status == 400:
            tokens = _estimate_tokens(body.get("messages", body.get("input", body.get("prompt"))))
            message = (
                "This model's maximum context length is 16 tokens. However, your messages resulted in "
                f"{tokens} tokens. Please reduce the length of the messages."
            )
            self._send_error(400, message, "invalid_request_error", "context_length_exceeded")
        else:
            self._send_error(status, f"Simulated upstream failure for model {model}.", "server_error")
        return True

    # --- endpoints ------------------------------------------------------
    def _usage(self, prompt: object, reply: str) -> dict[str, int]:
        prompt_tokens = _estimate_tokens(prompt)
        completion_tokens = max(1, len(reply) // 4)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    def _chat(self, body: dict[str, Any]) -> None:
        reply = self._reply_for(body)
        model = str(body.get("model", "unknown"))
        ident = f"chatcmpl-recording-{self._next_id()}"
        created = int(time.time())
        usage = self._usage(body.get("messages"), reply)
        if not body.get("stream"):
            self._send_json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "system_fingerprint": None,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply},
                            "logprobs": None,
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
            )
            return
        base = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
        self._start_sse()
        self._send_event(
            {
                **base,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
            }
        )
        for piece in _chunks_of(reply):
            self._send_event({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        self._send_event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            self._send_event({**base, "choices": [], "usage": usage})
        self._end_sse()

    def _completion(self, body: dict[str, Any]) -> None:
        reply = self._reply_for(body)
        model = str(body.get("model", "unknown"))
        ident = f"cmpl-recording-{self._next_id()}"
        created = int(time.time())
        usage = self._usage(body.get("prompt"), reply)
        base = {"id": ident, "object": "text_completion", "created": created, "model": model}
        if not body.get("stream"):
            choice = {"text": reply, "index": 0, "logprobs": None, "finish_reason": "stop"}
            self._send_json(200, {**base, "choices": [choice], "usage": usage})
            return
        self._start_sse()
        for piece in _chunks_of(reply):
            choice = {"text": piece, "index": 0, "logprobs": None, "finish_reason": None}
            self._send_event({**base, "choices": [choice]})
        self._send_event({**base, "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"}]})
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            self._send_event({**base, "choices": [], "usage": usage})
        self._end_sse()

    def _responses(self, body: dict[str, Any]) -> None:
        reply = self._reply_for(body)
        number = self._next_id()
        usage = self._usage(body.get("input"), reply)
        message = {
            "type": "message",
            "id": f"msg_recording_{number}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": reply, "annotations": []}],
        }
        response: dict[str, Any] = {
            "id": f"resp_recording_{number}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": str(body.get("model", "unknown")),
            "output": [message],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "metadata": {},
            "temperature": 1.0,
            "top_p": 1.0,
            "max_output_tokens": None,
            "previous_response_id": None,
            "reasoning": None,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "user": None,
            "usage": {
                "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"],
                "total_tokens": usage["total_tokens"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        if not body.get("stream"):
            self._send_json(200, response)
            return
        in_progress = {**response, "status": "in_progress", "output": [], "usage": None}
        self._start_sse()
        seq = itertools.count()
        self._send_event(
            {"type": "response.created", "sequence_number": next(seq), "response": in_progress},
            event="response.created",
        )
        for piece in _chunks_of(reply):
            self._send_event(
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "item_id": message["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece,
                },
                event="response.output_text.delta",
            )
        self._send_event(
            {"type": "response.completed", "sequence_number": next(seq), "response": response},
            event="response.completed",
        )
        self._end_sse(done=False)

    def _messages(self, body: dict[str, Any]) -> None:
        reply = self._reply_for(body)
        model = str(body.get("model", "unknown"))
        ident = f"msg_recording_{self._next_id()}"
        usage = self._usage([body.get("system"), body.get("messages")], reply)
        anthropic_usage = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
        message: dict[str, Any] = {
            "id": ident,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": reply}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": anthropic_usage,
        }
        if not body.get("stream"):
            self._send_json(200, message)
            return
        self._start_sse()
        start = {**message, "content": [], "stop_reason": None, "usage": {**anthropic_usage, "output_tokens": 0}}
        self._send_event({"type": "message_start", "message": start}, event="message_start")
        self._send_event(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            event="content_block_start",
        )
        for piece in _chunks_of(reply):
            self._send_event(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
                event="content_block_delta",
            )
        self._send_event({"type": "content_block_stop", "index": 0}, event="content_block_stop")
        self._send_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": anthropic_usage["output_tokens"]},
            },
            event="message_delta",
        )
        self._send_event({"type": "message_stop"}, event="message_stop")
        self._end_sse(done=False)


class _Server(ThreadingHTTPServer):
    """A threading HTTP server carrying the shared :class:`_State`."""

    daemon_threads = True
    # socketserver's default backlog (5) resets connections when a proxy sends hundreds at once.
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state: _State) -> None:
        super().__init__(address, _Handler)
        self.state = state


class RecordingUpstream:
    """A local OpenAI-compatible server that records the requests it receives.

    Args:
        reply: the assistant's reply text, or a function from the parsed
            request body to the reply text.
        fail_models: request ``model`` values (as the upstream sees them, i.e.
            without LiteLLM's ``openai/`` prefix) to fail: an iterable of names
            failing with ``fail_status``, or a mapping of name to HTTP status. A
            400 carries an OpenAI "maximum context length" error (LiteLLM raises
            ``ContextWindowExceededError``); other statuses get a generic
            server-error body. Change later with :meth:`set_failing`.
        fail_status: HTTP status for names given as an iterable (default 400).
        models: model ids listed by ``GET /v1/models``.
        host: interface to bind; loopback by default.
        port: TCP port; 0 picks a free one.
    """

    DEFAULT_REPLY: ClassVar[str] = "ok"

    def __init__(
        self,
        reply: str | ReplyFn = DEFAULT_REPLY,
        *,
        fail_models: Iterable[str] | Mapping[str, int] = (),
        fail_status: int = 400,
        models: Sequence[str] = ("recording-model",),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._state = _State(reply=reply, fail_models=_failure_map(fail_models, fail_status), models=tuple(models))
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------
    def start(self) -> RecordingUpstream:
        """Bind the socket and serve in a daemon thread; returns ``self``."""
        if self._server is not None:
            return self
        server = _Server(self._address, self._state)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="RecordingUpstream", daemon=True
        )
        thread.start()
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (safe to call twice)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> RecordingUpstream:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- addresses ------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound TCP port (raises if the server is not running)."""
        if self._server is None:
            raise RuntimeError("RecordingUpstream is not running; call start() first")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root_url}/v1"

    @property
    def root_url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:PORT`` (the ``api_base`` for ``anthropic/`` models)."""
        return f"http://{self._address[0]}:{self.port}"

    # --- configuration ----------------------------------------------------
    def set_reply(self, reply: str | ReplyFn) -> None:
        """Change the reply text (or reply function) for later requests."""
        with self._state.lock:
            self._state.reply = reply

    def set_failing(self, models: Iterable[str] | Mapping[str, int], status: int = 400) -> None:
        """Replace the failing models: names (failing with ``status``) or a name-to-status mapping."""
        failures = _failure_map(models, status)
        with self._state.lock:
            self._state.fail_models = failures

    # --- recordings -------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot (a new list) of every recorded request, oldest first."""
        with self._state.lock:
            return list(self._state.records)

    def clear(self) -> None:
        """Forget all recorded requests."""
        with self._state.lock:
            self._state.records.clear()

    def bodies(self, model: str | None = None, *, kind: str = "chat") -> list[dict[str, Any]]:
        """Parsed bodies of recorded requests of one ``kind``, optionally for one ``model``.

        ``kind`` is ``"chat"`` (``/v1/chat/completions``, the default), ``"completions"``,
        ``"responses"`` or ``"messages"`` (Anthropic ``/v1/messages``).
        """
        paths = _KIND_PATHS[kind]
        return [
            r.body
            for r in self.requests
            if r.path in paths and isinstance(r.body, dict) and (model is None or r.model == model)
        ]


# ---- a real LiteLLM proxy process ----------------------------------------------------------------

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


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


@dataclass(eq=False)
class ProxyProcess:
    """A running ``litellm --config`` process on 127.0.0.1, started by :func:`start_proxy`."""

    base_url: str
    master_key: str
    log_path: Path
    config_path: Path
    process: subprocess.Popen[bytes]
    startup_seconds: float = 0.0
    _log_file: Any = field(repr=False, default=None)

    @property
    def headers(self) -> dict[str, str]:
        """Authorization header for the master key."""
        return {"Authorization": f"Bearer {self.master_key}"}

    def url(self, path: str) -> str:
        """``base_url`` joined with ``path`` (e.g. ``"/v1/chat/completions"``)."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def post(self, path: str, body: object, timeout: float = 120.0) -> tuple[int, dict[str, str], bytes]:
        """POST JSON with the master key: (status, headers, body). Never raises for HTTP errors."""
        request = urllib.request.Request(
            self.url(path),
            data=json.dumps(body).encode(),
            headers={**self.headers, "Content-Type": "application/json"},
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
) -> ProxyProcess:
    """Start ``litellm --config`` on a free 127.0.0.1 port and wait until it is live.

    ``config`` (the proxy config as a dict) is written to ``workdir`` (as JSON, which is YAML too);
    the proxy gets a fresh random master key, no database, and LiteLLM's bundled model map.
    Raises :class:`ProxyStartError` with the end of its log if it exits or is not live within
    ``timeout`` seconds. Stop it with ``stop()`` or a ``with`` block.
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
        log_file = log_path.open("ab")
        started = time.monotonic()
        command = [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(config_path)]
        process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)],
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
            time.sleep(0.2)
        alive = process.poll() is None
        proxy.stop()
        last_error = proxy.log_tail(80)
        if alive:
            raise ProxyStartError(f"proxy not live after {timeout:.0f}s; log tail:\n{last_error}")
        if "address already in use" not in last_error.lower():
            break
    raise ProxyStartError(f"proxy process exited during start-up; log tail:\n{last_error}")


def serve(port: int = 0, *, reply: str = RecordingUpstream.DEFAULT_REPLY, fail_models: Iterable[str] = ()) -> None:
    """Run a :class:`RecordingUpstream` in the foreground, printing its base URL first.

    Serves until SIGINT (Ctrl-C) or SIGTERM, then closes the socket.
    """
    upstream = RecordingUpstream(reply=reply, fail_models=fail_models, port=port).start()
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    print(upstream.base_url, flush=True)
    try:
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        upstream.stop()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point: ``python -m litellm_governance.testing --port N``."""
    parser = argparse.ArgumentParser(
        prog="python -m litellm_governance.testing",
        description="Run a recording OpenAI-compatible upstream on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    parser.add_argument("--reply", default=RecordingUpstream.DEFAULT_REPLY, help="assistant reply text")
    parser.add_argument(
        "--fail-model",
        action="append",
        default=[],
        metavar="MODEL",
        help="answer 400 (context length) for MODEL",
    )
    args = parser.parse_args(argv)
    serve(args.port, reply=args.reply, fail_models=args.fail_model)


if __name__ == "__main__":
    main()
