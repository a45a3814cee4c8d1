"""`RecordingUpstream`: a local HTTP server that answers like the providers LiteLLM calls (emulating
one's rules and window when asked) and records every request it receives."""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from .emulation import Emulator, unseal_compaction
from .replies import Replies, estimate_tokens
from .scripted import ScriptedModel, Turn

__all__ = ["RecordedRequest", "RecordingUpstream", "ReplyFn"]

ReplyFn = Callable[[Mapping[str, Any]], str]
"""A function from the parsed request body to the assistant's reply text."""

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})
_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_COMPLETION_PATHS = frozenset({"/v1/completions", "/completions"})
_RESPONSES_PATHS = frozenset({"/v1/responses", "/responses"})
_MODELS_PATHS = frozenset({"/v1/models", "/models"})
_MESSAGES_PATHS = frozenset({"/v1/messages", "/v1/v1/messages", "/anthropic/v1/messages"})
_KIND_PATHS = {
    "chat": _CHAT_PATHS,
    "completions": _COMPLETION_PATHS,
    "responses": _RESPONSES_PATHS,
    "messages": _MESSAGES_PATHS,
}
# Gemini (``gemini/`` with ``api_base`` = root URL) and Bedrock Converse (``bedrock/converse/`` with
# ``api_base`` = root URL) put the model in the path.
_GEMINI_PATH = re.compile(
    r"^(?:/v1beta|/v1)?/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
_CONVERSE_PATH = re.compile(r"^/model/(?P<model>[^/]+)/(?P<method>converse|converse-stream)$")
_KINDS = (*_KIND_PATHS, "gemini", "converse")
#: The endpoints the scripted model answers on (the others answer the reply text).
_SCRIPTED_KINDS = frozenset({"chat", "responses", "messages"})


def _route(path: str) -> tuple[str, str | None, bool] | None:
    """``(kind, model from the path, streaming by path)`` for a POST path this server answers."""
    for kind, paths in _KIND_PATHS.items():
        if path in paths:
            return kind, None, False
    match = _GEMINI_PATH.match(path)
    if match:
        return "gemini", unquote(match["model"]), match["method"] == "streamGenerateContent"
    match = _CONVERSE_PATH.match(path)
    if match:
        return "converse", unquote(match["model"]), match["method"] == "converse-stream"
    return None


@dataclass(frozen=True)
class RecordedRequest:
    """One request the upstream received.

    ``headers`` are lower-cased; secret headers (``authorization``,
    ``api-key``, ...) are left out and only their presence is kept in
    ``has_authorization``. ``body`` is the parsed JSON body, or ``None`` when the
    body was empty or not JSON. ``status`` is the HTTP status the upstream answered;
    ``rule`` the id of the emulated provider rule that rejected it (``None`` if none did);
    ``answer`` what the scripted model answered (``round 3: 2 calls``, ``final after 6 rounds``,
    ``summary``, ``side``; ``None`` without a script or for a rejected request).
    """

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    has_authorization: bool
    body: Any
    status: int
    rule: str | None = None
    answer: str | None = None

    @property
    def model(self) -> str | None:
        """The ``model`` field of the body, else the model named in the path (Gemini, Bedrock)."""
        if isinstance(self.body, dict):
            model = self.body.get("model")
            if isinstance(model, str):
                return model
        route = _route(self.path) if self.method == "POST" else None
        return route[1] if route is not None else None

    @property
    def kind(self) -> str | None:
        """``chat``, ``completions``, ``responses``, ``messages``, ``gemini`` or ``converse`` (POST only)."""
        route = _route(self.path) if self.method == "POST" else None
        return route[0] if route is not None else None


@dataclass
class _State:
    reply: str | ReplyFn
    fail_models: dict[str, int]
    models: tuple[str, ...]
    lock: threading.Lock = field(default_factory=threading.Lock)
    records: list[RecordedRequest] = field(default_factory=list)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    emulator: Emulator | None = None
    record_dir: Path | None = None
    file_numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    script: ScriptedModel | None = None


def _failure_map(models: Iterable[str] | Mapping[str, int], status: int) -> dict[str, int]:
    """Normalise ``fail_models`` to a name-to-status mapping."""
    if isinstance(models, Mapping):
        return {str(name): int(code) for name, code in models.items()}
    if isinstance(models, str):
        return {models: status}
    return dict.fromkeys(models, status)


class _Handler(Replies):
    """Request handler; the server's ``state`` holds configuration and records."""

    server: _Server
    #: The scripted model's answer to the request being handled (None: no script).
    _turn: Turn | None = None

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

    def _record(self, body: Any, status: int, rule: str | None = None, answer: str | None = None) -> None:
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
            rule=rule,
            answer=answer,
        )
        state = self.server.state
        with state.lock:
            state.records.append(record)
            number = next(state.file_numbers) if state.record_dir is not None else 0
            record_dir = state.record_dir
        if record_dir is not None:
            _write_record(record_dir, number, record)

    def _next_id(self) -> int:
        state = self.server.state
        with state.lock:
            return next(state.ids)

    def _reply_for(self, body: Mapping[str, Any]) -> str:
        reply = self.server.state.reply
        return reply(body) if callable(reply) else reply

    def _turn_for(self, wire: str, body: Mapping[str, Any]) -> Turn:
        turn = self._turn
        return turn if turn is not None else super()._turn_for(wire, body)

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
        """Answer the OpenAI, Anthropic, Gemini and Bedrock POST endpoints; anything else is a 404."""
        path = urlsplit(self.path).path
        body = self._read_body()
        route = _route(path)
        if route is None:
            self._not_found(body)
            return
        kind, path_model, path_stream = route
        if not isinstance(body, dict):
            self._record(body, 400)
            self._send_error(400, "Request body must be a JSON object.", "invalid_request_error")
            return
        if self._maybe_fail(body, path_model):
            return
        state = self.server.state
        with state.lock:
            emulator, script = state.emulator, state.script
        self._prompt_tokens: int | None = None
        self._context_management = None
        self._turn = None
        if emulator is not None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            verdict = emulator.answer(kind, body, path_model, headers)
            rejection, self._prompt_tokens = verdict.rejection, verdict.tokens
            self._context_management = verdict.context_management
            if rejection is not None:
                self._record(body, rejection.status, rejection.rule_id)
                self._send_json(rejection.status, rejection.body, rejection.headers)
                return
        if script is not None and kind in _SCRIPTED_KINDS:
            self._usage_scale = script.usage_scale
            self._turn = script.answer(kind, _as_read(kind, body), self._next_id())
        self._record(body, 200, answer=self._turn.describe() if self._turn is not None else None)
        handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "chat": self._chat,
            "completions": self._completion,
            "responses": self._responses,
            "messages": self._messages,
        }
        if kind == "gemini":
            self._gemini(body, path_model or "unknown", path_stream)
        elif kind == "converse":
            self._converse(body, path_model or "unknown", path_stream)
        else:
            handlers[kind](body)

    def _not_found(self, body: Any) -> None:
        self._record(body, 404)
        self._send_error(404, f"Unknown path {urlsplit(self.path).path}", "not_found_error")

    def _send_error(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

    def _maybe_fail(self, body: Mapping[str, Any], path_model: str | None = None) -> bool:
        state = self.server.state
        model = body.get("model", path_model)
        with state.lock:
            status = state.fail_models.get(model) if isinstance(model, str) else None
        if status is None:
            return False
        self._record(body, status)
        if status == 400:
            tokens = estimate_tokens(body.get("messages", body.get("input", body.get("prompt"))))
            message = (
                "This model's maximum context length is 16 tokens. However, your messages resulted in "
                f"{tokens} tokens. Please reduce the length of the messages."
            )
            self._send_error(400, message, "invalid_request_error", "context_length_exceeded")
        else:
            self._send_error(status, f"Simulated upstream failure for model {model}.", "server_error")
        return True


_RECORD_NAME = re.compile(r"^(\d{6,})\.json$")


def _next_record_number(directory: Path) -> int:
    """The number after the highest ``NNNNNN.json`` already in `directory`: a restarted upstream goes on
    numbering and never overwrites an earlier run's recordings."""
    numbers = [int(match[1]) for path in directory.iterdir() if (match := _RECORD_NAME.match(path.name))]
    return max(numbers, default=0) + 1


def _as_read(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the model reads it: on ``/v1/responses`` each compaction item this upstream issued
    stands for its summary (a user message), as OpenAI expands its own items."""
    items = body.get("input")
    if kind != "responses" or not isinstance(items, list) or not any(_compaction(i) for i in items):
        return body
    read = []
    for item in items:
        summary = unseal_compaction(item.get("encrypted_content")) if _compaction(item) else None
        read.append(item if summary is None else {"role": "user", "content": summary})
    return {**body, "input": read}


def _compaction(item: object) -> bool:
    return isinstance(item, dict) and item.get("type") == "compaction"


def _write_record(directory: Path, number: int, record: RecordedRequest) -> None:
    """Write one received request to ``directory`` as ``NNNNNN.json`` (secret headers already left out)."""
    data = {
        "number": number,
        "method": record.method,
        "path": record.path,
        "query": record.query,
        "headers": dict(record.headers),
        "has_authorization": record.has_authorization,
        "status": record.status,
        "rule": record.rule,
        "answer": record.answer,
        "body": record.body,
    }
    target = directory / f"{number:06d}.json"
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    partial.replace(target)


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
        emulate: behave like this provider (one of
            :data:`litellm_governance.testing.emulation.PROVIDERS`: ``"openai"``, ``"anthropic"``,
            ``"gemini"``, ``"bedrock"``, ``"mistral"``, ``"deepseek"``, ``"moonshot"``,
            ``"glm"``, ``"vllm"``): requests that break its rules get its real error.
        window: the emulated context window in tokens (``None``: no limit). A prompt that
            does not fit ``window`` minus the requested output tokens gets the provider's
            context-length error (the generic format of the endpoint if ``emulate`` is unset).
        token_rate: how many provider tokens one tiktoken ``cl100k_base`` token counts as.
        default_max_tokens: output reserve when a request states no ``max_tokens``.
        record_dir: write every request received to this directory, one JSON file each
            (numbered after the highest number already there, so a restart overwrites nothing;
            path, headers without secrets, body, status, rejecting rule).
        script: play an agent's model (:class:`~litellm_governance.testing.ScriptedModel`): rounds
            of shell calls, then a final text, on chat completions, ``/v1/messages`` and
            ``/v1/responses`` (instead of ``reply``), so a real agent CLI can run a task against it.

    With ``emulate`` or ``window`` set, ``usage`` reports the emulator's prompt count
    (``prompt_tokens`` / ``input_tokens`` / ``promptTokenCount`` / ``inputTokens``).
    Change emulation later with :meth:`set_emulation`.
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
        emulate: str | None = None,
        window: int | None = None,
        token_rate: float = 1.0,
        default_max_tokens: int = 0,
        record_dir: str | os.PathLike[str] | None = None,
        script: ScriptedModel | None = None,
    ) -> None:
        self._state = _State(reply=reply, fail_models=_failure_map(fail_models, fail_status), models=tuple(models))
        self._state.emulator = _emulator(emulate, window, token_rate, default_max_tokens)
        self._state.script = script
        if record_dir is not None:
            self._state.record_dir = Path(record_dir)
            self._state.record_dir.mkdir(parents=True, exist_ok=True)
            self._state.file_numbers = itertools.count(_next_record_number(self._state.record_dir))
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

    def set_emulation(
        self,
        emulate: str | None,
        *,
        window: int | None = None,
        token_rate: float = 1.0,
        default_max_tokens: int = 0,
    ) -> None:
        """Emulate another provider (or none: ``emulate=None``, ``window=None``) from the next request on."""
        emulator = _emulator(emulate, window, token_rate, default_max_tokens)
        with self._state.lock:
            self._state.emulator = emulator

    @property
    def emulation(self) -> Emulator | None:
        """The current :class:`~litellm_governance.testing.emulation.Emulator`, or ``None``."""
        with self._state.lock:
            return self._state.emulator

    @property
    def script(self) -> ScriptedModel | None:
        """The scripted model this upstream plays, if any."""
        return self._state.script

    @property
    def record_dir(self) -> Path | None:
        """Where every request is written as a JSON file, if anywhere."""
        return self._state.record_dir

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
        ``"responses"``, ``"messages"`` (Anthropic ``/v1/messages``), ``"gemini"``
        (``models/{model}:generateContent``) or ``"converse"`` (Bedrock ``/model/{model}/converse``).
        """
        if kind not in _KINDS:
            raise KeyError(kind)
        return [
            r.body
            for r in self.requests
            if r.kind == kind and isinstance(r.body, dict) and (model is None or r.model == model)
        ]


def _emulator(emulate: str | None, window: int | None, token_rate: float, default_max_tokens: int) -> Emulator | None:
    if emulate is None and window is None:
        return None
    return Emulator(emulate, window, token_rate, default_max_tokens)
