"""Test helpers: a recording, OpenAI-compatible upstream server, and a real LiteLLM proxy process.

:class:`RecordingUpstream` is a tiny HTTP server bound to ``127.0.0.1`` that
answers the OpenAI endpoints LiteLLM calls (chat completions, text
completions, responses, models; streaming too) plus Anthropic's
``/v1/messages``, and records every request it receives, so a test can check
what actually reached the "provider" after LiteLLM and its callbacks have run.
It uses only the standard library and never touches the network beyond
loopback. Point ``openai/``, ``hosted_vllm/``, ``deepseek/``, ``zai/``, ``mistral/``,
``moonshot/``... models at :attr:`RecordingUpstream.base_url`, and ``anthropic/``,
``gemini/`` and ``bedrock/converse/`` models at :attr:`RecordingUpstream.root_url`
(it also serves Gemini's ``models/{model}:generateContent`` and Bedrock's
``/model/{model}/converse``, streaming included).

``RecordingUpstream(emulate="glm", window=32768, token_rate=1.3)`` makes it behave like
that provider (see :mod:`litellm_governance.emulation`): a request that breaks one of the
provider's documented rules, or does not fit the window, gets the provider's real status and
error body; an accepted one reports the provider-style prompt token count in ``usage``.
``record_dir=`` writes every request received to a directory, one JSON file each.

Use it as a context manager::

    from litellm_governance.testing import RecordingUpstream

    with RecordingUpstream(reply="hello") as upstream:
        litellm.completion(model="openai/any", api_base=upstream.base_url,
                           api_key="sk-fake", messages=[...])
        assert upstream.bodies()[0]["messages"] == [...]

or run it as a separate process: ``python -m litellm_governance.testing --port 8099
[--emulate glm] [--window 32768] [--token-rate 1.3] [--record-dir DIR]``.

:func:`start_proxy` runs ``litellm --config`` (your config, as a dict) on a free loopback port,
offline and with a fresh master key, for end-to-end tests of a proxy configuration. With
``fast_start=True`` the proxy is forked from a server process that imported LiteLLM's proxy once
(about 0.7 s a proxy instead of 7 s; see :func:`start_proxy`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import itertools
import json
import multiprocessing
import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Protocol
from urllib.parse import unquote, urlsplit

from litellm_governance.emulation import PROVIDERS, Emulator, count_text_tokens

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
    ``rule`` the id of the emulated provider rule that rejected it (``None`` if none did).
    """

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    has_authorization: bool
    body: Any
    status: int
    rule: str | None = None

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

    def _record(self, body: Any, status: int, rule: str | None = None) -> None:
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
        )
        state = self.server.state
        with state.lock:
            state.records.append(record)
            number = next(state.file_numbers) if state.record_dir is not None else 0
            record_dir = state.record_dir
        if record_dir is not None:
            _write_record(record_dir, number, record)

    def _send_json(self, status: int, payload: object, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_sse(self, content_type: str = "text/event-stream") -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _send_chunk(self, text: str | bytes) -> None:
        data = text.encode() if isinstance(text, str) else text
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
            emulator = state.emulator
        self._prompt_tokens: int | None = None
        if emulator is not None:
            rejection, self._prompt_tokens = emulator.check(kind, body, path_model)
            if rejection is not None:
                self._record(body, rejection.status, rejection.rule_id)
                self._send_json(rejection.status, rejection.body, rejection.headers)
                return
        self._record(body, 200)
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
        emulated = getattr(self, "_prompt_tokens", None)
        if emulated is not None:  # the emulated provider's own count
            prompt_tokens = emulated
            completion_tokens = max(1, count_text_tokens(reply))
        else:
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

    def _gemini(self, body: dict[str, Any], model: str, stream: bool) -> None:
        """Gemini ``generateContent`` / ``streamGenerateContent?alt=sse``."""
        reply = self._reply_for(body)
        usage = self._usage(body.get("contents"), reply)
        gemini_usage = {
            "promptTokenCount": usage["prompt_tokens"],
            "candidatesTokenCount": usage["completion_tokens"],
            "totalTokenCount": usage["total_tokens"],
        }
        ident = f"recording-{self._next_id()}"

        def response(text: str, finish: str | None, final: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
            if finish:
                candidate["finishReason"] = finish
            partial = {"promptTokenCount": usage["prompt_tokens"], "totalTokenCount": usage["prompt_tokens"]}
            return {
                "candidates": [candidate],
                "usageMetadata": gemini_usage if final else partial,
                "modelVersion": model,
                "responseId": ident,
            }

        if not stream:
            self._send_json(200, response(reply, "STOP", True))
            return
        self._start_sse()
        pieces = _chunks_of(reply)
        for number, piece in enumerate(pieces):
            last = number == len(pieces) - 1
            self._send_chunk(f"data: {json.dumps(response(piece, 'STOP' if last else None, last))}\r\n\r\n")
        self._end_sse(done=False)

    def _converse(self, body: dict[str, Any], model: str, stream: bool) -> None:
        """Bedrock ``converse`` / ``converse-stream`` (AWS event-stream frames)."""
        reply = self._reply_for(body)
        usage = self._usage(body.get("messages"), reply)
        bedrock_usage = {
            "inputTokens": usage["prompt_tokens"],
            "outputTokens": usage["completion_tokens"],
            "totalTokens": usage["total_tokens"],
        }
        if not stream:
            message = {"role": "assistant", "content": [{"text": reply}]}
            payload = {
                "output": {"message": message},
                "stopReason": "end_turn",
                "usage": bedrock_usage,
                "metrics": {"latencyMs": 1},
            }
            self._send_json(200, payload)
            return
        self._start_sse("application/vnd.amazon.eventstream")
        self._send_chunk(_event_stream_frame("messageStart", {"role": "assistant"}))
        for piece in _chunks_of(reply):
            self._send_chunk(
                _event_stream_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
            )
        self._send_chunk(_event_stream_frame("contentBlockStop", {"contentBlockIndex": 0}))
        self._send_chunk(_event_stream_frame("messageStop", {"stopReason": "end_turn"}))
        self._send_chunk(_event_stream_frame("metadata", {"usage": bedrock_usage, "metrics": {"latencyMs": 1}}))
        self._end_sse(done=False)


def _event_stream_frame(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """One AWS event-stream message (``application/vnd.amazon.eventstream``) carrying a JSON event."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")):
        raw_name, raw_value = name.encode(), value.encode()
        headers += struct.pack(">B", len(raw_name)) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", zlib.crc32(message) & 0xFFFFFFFF)


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
            :data:`litellm_governance.emulation.PROVIDERS`: ``"openai"``, ``"anthropic"``,
            ``"gemini"``, ``"bedrock"``, ``"mistral"``, ``"deepseek"``, ``"moonshot"``,
            ``"glm"``, ``"vllm"``): requests that break its rules get its real error.
        window: the emulated context window in tokens (``None``: no limit). A prompt that
            does not fit ``window`` minus the requested output tokens gets the provider's
            context-length error (the generic format of the endpoint if ``emulate`` is unset).
        token_rate: how many provider tokens one tiktoken ``cl100k_base`` token counts as.
        default_max_tokens: output reserve when a request states no ``max_tokens``.
        record_dir: write every request received to this directory, one JSON file each
            (numbered; path, headers without secrets, body, status, rejecting rule).

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
    ) -> None:
        self._state = _State(reply=reply, fail_models=_failure_map(fail_models, fail_status), models=tuple(models))
        self._state.emulator = _emulator(emulate, window, token_rate, default_max_tokens)
        if record_dir is not None:
            self._state.record_dir = Path(record_dir)
            self._state.record_dir.mkdir(parents=True, exist_ok=True)
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
        """The current :class:`~litellm_governance.emulation.Emulator`, or ``None``."""
        with self._state.lock:
            return self._state.emulator

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


def serve(
    port: int = 0,
    *,
    reply: str = RecordingUpstream.DEFAULT_REPLY,
    fail_models: Iterable[str] = (),
    emulate: str | None = None,
    window: int | None = None,
    token_rate: float = 1.0,
    default_max_tokens: int = 0,
    record_dir: str | os.PathLike[str] | None = None,
) -> None:
    """Run a :class:`RecordingUpstream` in the foreground, printing its base URL first.

    Serves until SIGINT (Ctrl-C) or SIGTERM, then closes the socket.
    """
    upstream = RecordingUpstream(
        reply=reply,
        fail_models=fail_models,
        port=port,
        emulate=emulate,
        window=window,
        token_rate=token_rate,
        default_max_tokens=default_max_tokens,
        record_dir=record_dir,
    ).start()
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
        description=(
            "Run a recording upstream on 127.0.0.1 (OpenAI, Anthropic, Gemini and Bedrock Converse endpoints), "
            "optionally emulating a provider's request rules and context window."
        ),
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
    parser.add_argument("--emulate", choices=PROVIDERS, default=None, help="reject requests as this provider does")
    parser.add_argument("--window", type=int, default=None, metavar="TOKENS", help="emulated context window")
    parser.add_argument(
        "--token-rate", type=float, default=1.0, metavar="RATE", help="provider tokens per tiktoken token (default 1.0)"
    )
    parser.add_argument(
        "--default-max-tokens",
        type=int,
        default=0,
        metavar="TOKENS",
        help="output reserve when a request states no max_tokens (default 0)",
    )
    parser.add_argument(
        "--record-dir", default=None, metavar="DIR", help="write every request received to DIR, one JSON file each"
    )
    args = parser.parse_args(argv)
    serve(
        args.port,
        reply=args.reply,
        fail_models=args.fail_model,
        emulate=args.emulate,
        window=args.window,
        token_rate=args.token_rate,
        default_max_tokens=args.default_max_tokens,
        record_dir=args.record_dir,
    )


if __name__ == "__main__":
    main()
