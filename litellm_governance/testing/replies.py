"""What the upstream answers, in each endpoint's own shape: OpenAI chat, text completions and
Responses, Anthropic Messages, Gemini and Bedrock Converse, as JSON or streamed (SSE, AWS event-stream)."""

from __future__ import annotations

import itertools
import json
import struct
import time
import zlib
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from .emulation import count_text_tokens, seal_compaction, seal_reasoning, sign_thinking
from .scripted import Turn

__all__ = ["Replies", "estimate_tokens"]


def estimate_tokens(value: object) -> int:
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


class Replies(BaseHTTPRequestHandler):
    """The HTTP plumbing (JSON, chunked SSE) and the replies per endpoint; the request handler that
    subclasses it says what to reply (`_turn_for`: the scripted model's turn, else `_reply_for`'s
    text), numbers replies (`_next_id`) and sets the emulated prompt count (`_prompt_tokens`) and
    Anthropic's ``context_management`` answer before calling an endpoint. Tool calls, thinking
    blocks and reasoning items go out in each endpoint's own shape, streamed too."""

    protocol_version = "HTTP/1.1"
    server_version = "RecordingUpstream/1"
    #: TCP_NODELAY on every connection, as providers' servers answer. Without it a reply's body,
    #: written after its headers, waits for the client to acknowledge them: on a kept-alive
    #: connection the client's delayed ACK holds every reply about 40 ms (and each streamed chunk),
    #: which doubled a proxied request's round trip and swamped the latency benches.
    disable_nagle_algorithm = True
    #: The emulated provider's count of the request being answered (None: no emulation).
    _prompt_tokens: int | None = None

    def _reply_for(self, body: Mapping[str, Any]) -> str:
        raise NotImplementedError

    def _next_id(self) -> int:
        raise NotImplementedError

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

    # --- endpoints ------------------------------------------------------
    def _turn_for(self, wire: str, body: Mapping[str, Any]) -> Turn:
        """What to answer: the scripted model's turn, or the reply text (see `_reply_for`)."""
        return Turn(self._reply_for(body))

    #: Multiplies the reported input tokens (the scripted model's ``usage_scale``).
    _usage_scale: float = 1.0
    #: Anthropic's ``context_management`` answer for the request being answered (None: none).
    _context_management: Mapping[str, Any] | None = None

    def _usage(self, prompt: object, reply: str) -> dict[str, int]:
        emulated = self._prompt_tokens
        if emulated is not None:  # the emulated provider's own count
            prompt_tokens = emulated
            completion_tokens = max(1, count_text_tokens(reply))
        else:
            prompt_tokens = estimate_tokens(prompt)
            completion_tokens = max(1, len(reply) // 4)
        prompt_tokens = max(1, round(prompt_tokens * self._usage_scale))
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    def _chat(self, body: dict[str, Any]) -> None:
        turn = self._turn_for("chat", body)
        model = str(body.get("model", "unknown"))
        ident = f"chatcmpl-recording-{self._next_id()}"
        created = int(time.time())
        calls: list[dict[str, Any]] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in turn.calls
        ]
        usage = self._usage(body.get("messages"), turn.text + json.dumps(calls))
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": turn.text}
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            self._send_json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "system_fingerprint": None,
                    "choices": [choice],
                    "usage": usage,
                },
            )
            return
        base = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}

        def chunk(delta: Mapping[str, Any], finish_reason: str | None = None) -> None:
            self._send_event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

        self._start_sse()
        chunk({"role": "assistant", "content": ""})
        for piece in _chunks_of(turn.text) if turn.text else ():
            chunk({"content": piece})
        for index, call in enumerate(calls):
            function = call["function"]
            start = {"index": index, "id": call["id"], "type": "function"}
            chunk({"tool_calls": [{**start, "function": {"name": function["name"], "arguments": ""}}]})
            chunk({"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]})
        chunk({}, finish)
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
        turn = self._turn_for("responses", body)
        number = self._next_id()
        output: list[dict[str, Any]] = []
        if turn.reasoning is not None:
            ident = f"rs_recording_{number}"
            summary = [{"type": "summary_text", "text": turn.reasoning}] if turn.reasoning else []
            output.append(
                {"type": "reasoning", "id": ident, "summary": summary, "encrypted_content": seal_reasoning(ident)}
            )
        for call in turn.calls:
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{call.id}",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": json.dumps(call.arguments),
                    "status": "completed",
                }
            )
        if turn.kind == "compaction":  # OpenAI's own compaction: exactly one item, nothing else
            sealed = seal_compaction(turn.text)
            output = [{"type": "compaction", "id": f"cmp_recording_{number}", "encrypted_content": sealed}]
        elif not turn.calls:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_recording_{number}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                }
            )
        usage = self._usage(body.get("input"), turn.text + json.dumps([c.arguments for c in turn.calls]))
        response: dict[str, Any] = {
            "id": f"resp_recording_{number}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": str(body.get("model", "unknown")),
            "output": output,
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

        def event(kind: str, **fields: Any) -> None:
            self._send_event({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

        event("response.created", response=in_progress)
        event("response.in_progress", response=in_progress)
        for index, item in enumerate(output):
            kind = item["type"]
            if kind == "message":
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
                part = item["content"][0]
                at = {"item_id": item["id"], "output_index": index, "content_index": 0}
                event("response.content_part.added", **at, part={**part, "text": ""})
                for piece in _chunks_of(part["text"]):
                    event("response.output_text.delta", **at, delta=piece)
                event("response.output_text.done", **at, text=part["text"])
                event("response.content_part.done", **at, part=part)
            elif kind == "function_call":
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                at = {"item_id": item["id"], "output_index": index}
                event("response.function_call_arguments.delta", **at, delta=item["arguments"])
                event("response.function_call_arguments.done", **at, arguments=item["arguments"])
            else:
                event("response.output_item.added", output_index=index, item=item)
            event("response.output_item.done", output_index=index, item=item)
        event("response.completed", response=response)
        self._end_sse(done=False)

    def _messages(self, body: dict[str, Any]) -> None:
        turn = self._turn_for("messages", body)
        model = str(body.get("model", "unknown"))
        ident = f"msg_recording_{self._next_id()}"
        content: list[dict[str, Any]] = []
        if turn.reasoning is not None:
            content.append({"type": "thinking", "thinking": turn.reasoning, "signature": sign_thinking(turn.reasoning)})
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        content.extend(
            {"type": "tool_use", "id": f"toolu_{c.id}", "name": c.name, "input": dict(c.arguments)} for c in turn.calls
        )
        stop = "tool_use" if turn.calls else "end_turn"
        usage = self._usage([body.get("system"), body.get("messages")], json.dumps(content))
        anthropic_usage = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
        message: dict[str, Any] = {
            "id": ident,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": anthropic_usage,
        }
        managed = self._context_management
        if not body.get("stream"):
            self._send_json(200, {**message, "context_management": managed} if managed is not None else message)
            return
        self._start_sse()
        start = {**message, "content": [], "stop_reason": None, "usage": {**anthropic_usage, "output_tokens": 0}}
        self._send_event({"type": "message_start", "message": start}, event="message_start")
        for index, block in enumerate(content):
            self._message_block(index, block)
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": anthropic_usage["output_tokens"]},
        }
        if managed is not None:
            delta["context_management"] = managed
        self._send_event(delta, event="message_delta")
        self._send_event({"type": "message_stop"}, event="message_stop")
        self._end_sse(done=False)

    def _message_block(self, index: int, block: Mapping[str, Any]) -> None:
        """One content block as ``content_block_start``, its deltas and ``content_block_stop``."""

        def send(kind: str, **fields: Any) -> None:
            self._send_event({"type": kind, "index": index, **fields}, event=kind)

        kind = block["type"]
        if kind == "text":
            send("content_block_start", content_block={"type": "text", "text": ""})
            for piece in _chunks_of(block["text"]):
                send("content_block_delta", delta={"type": "text_delta", "text": piece})
        elif kind == "thinking":
            send("content_block_start", content_block={"type": "thinking", "thinking": "", "signature": ""})
            if block["thinking"]:
                send("content_block_delta", delta={"type": "thinking_delta", "thinking": block["thinking"]})
            send("content_block_delta", delta={"type": "signature_delta", "signature": block["signature"]})
        else:  # tool_use: the input streamed as partial JSON, in two pieces
            send("content_block_start", content_block={**block, "input": {}})
            arguments = json.dumps(block["input"])
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                send("content_block_delta", delta={"type": "input_json_delta", "partial_json": piece})
        send("content_block_stop")

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
