"""Claude-Code-shaped (Anthropic Messages) and Codex-shaped (OpenAI Responses) agent sessions.

Built from the realistic chat sessions of `bench.sessions` (real file contents, real tool
output), re-dressed the way each agent sends them:

* **Claude Code** (``/v1/messages``): a long system prompt in text blocks with a
  ``cache_control`` breakpoint; tools ``Read``, ``Grep``, ``Glob``, ``LS``, ``Bash``, ``Edit``,
  ``Write``, ``WebFetch``, ``WebSearch``, ``TodoWrite`` with ``input_schema``; every assistant turn
  opens with a ``thinking`` block carrying a signature; results come back as ``tool_result``
  blocks, often with a ``<system-reminder>`` text block riding along; a breakpoint on the newest
  message, as Claude Code places them.
* **Codex CLI** (``/v1/responses``): ``instructions``, then ``input`` items — the user message,
  per round a ``reasoning`` item with ``encrypted_content`` (``store: false``), ``function_call``
  items for ``shell`` (``{"command": ["bash", "-lc", …]}``), ``update_plan`` and ``view_image``,
  ``custom_tool_call`` ``apply_patch`` (freeform), and their outputs.

Deterministic: a pure function of the arguments (and the installed LiteLLM, like `bench.sessions`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from bench.sessions import make_session
from litellm_governance.testing.emulation import sign_thinking

__all__ = ["CLAUDE_CODE_TOOLS", "claude_code_body", "codex_body", "to_claude_code", "to_codex"]

# bench.sessions tool names -> Claude Code's.
_CLAUDE_NAMES = {
    "read_file": "Read",
    "grep": "Grep",
    "find_files": "Glob",
    "list_dir": "LS",
    "exec": "Bash",
    "edit_file": "Edit",
    "write_file": "Write",
    "web_fetch": "WebFetch",
    "web_search": "WebSearch",
    "todo_write": "TodoWrite",
}

CLAUDE_CODE_TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": f"Claude Code's {name} tool.",
        "input_schema": {"type": "object", "properties": {"input": {"type": "string"}}},
    }
    for name in _CLAUDE_NAMES.values()
]

_REMINDER = (
    "<system-reminder>\nThe TodoWrite tool hasn't been used recently. If you're working on tasks that would "
    "benefit from tracking progress, consider using the TodoWrite tool to track progress.\n</system-reminder>"
)


def _signature(text: str) -> str:
    """A stand-in for Anthropic's opaque signature: the one the emulated Anthropic upstream
    (`litellm_governance.testing.emulation`) checks, so any edit of a thinking block is caught."""
    return sign_thinking(text)


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(call["function"]["arguments"])
    except (KeyError, TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {"input": value}


def to_claude_code(chat: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat session as Claude Code sends it: ``{"system": [...], "messages": [...], "tools": [...]}``."""
    system = [
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
        {"type": "text", "text": str(chat[0]["content"]), "cache_control": {"type": "ephemeral"}},
    ]
    messages: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # tool_result blocks waiting for the next user message
    turn = 0
    for message in chat[1:]:
        role = message["role"]
        if role == "tool":
            pending.append(
                {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": message["content"]}
            )
            continue
        if pending:
            blocks = list(pending)
            if turn % 3 == 0:
                blocks.append({"type": "text", "text": _REMINDER})
            messages.append({"role": "user", "content": blocks})
            pending = []
        if role == "user":
            if messages and messages[-1]["role"] == "user":
                messages[-1]["content"] = [
                    *_blocks(messages[-1]["content"]),
                    {"type": "text", "text": message["content"]},
                ]
            else:
                messages.append({"role": "user", "content": message["content"]})
        elif role == "assistant":
            turn += 1
            thought = f"Turn {turn}: deciding the next step of the task."
            blocks = [{"type": "thinking", "thinking": thought, "signature": _signature(thought)}]
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls") or []:
                name = _CLAUDE_NAMES.get(call["function"]["name"], call["function"]["name"])
                blocks.append(
                    {"type": "tool_use", "id": "toolu_" + call["id"][5:], "name": name, "input": _arguments(call)}
                )
            if messages and messages[-1]["role"] == "assistant":
                messages[-1]["content"] = [*messages[-1]["content"], *blocks[1:]]
            else:
                messages.append({"role": "assistant", "content": blocks})
    if pending:
        messages.append({"role": "user", "content": [*pending, {"type": "text", "text": _REMINDER}]})
    for message in messages:  # ids were renamed on the call side: same on the result side
        for block in _blocks(message["content"]):
            if block.get("type") == "tool_result" and block["tool_use_id"].startswith("call_"):
                block["tool_use_id"] = "toolu_" + block["tool_use_id"][5:]
    if messages and isinstance(messages[-1]["content"], list):
        last = messages[-1]["content"][-1]
        messages[-1]["content"][-1] = {**last, "cache_control": {"type": "ephemeral"}}
    return {"system": system, "messages": messages, "tools": CLAUDE_CODE_TOOLS}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def claude_code_body(n_messages: int, *, seed: int = 0, model: str = "claude") -> dict[str, Any]:
    """A Claude Code ``/v1/messages`` request body built from a session of ``n_messages`` chat messages."""
    body = to_claude_code(make_session(n_messages, seed=seed, users_every=40))
    return {"model": model, "max_tokens": 8_192, **body}


CODEX_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "shell",
        "description": "Runs a shell command and returns its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}},
    },
    {
        "type": "function",
        "name": "update_plan",
        "description": "Updates the task plan.",
        "parameters": {"type": "object"},
    },
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch (freeform, Lark grammar)."},
]


def _shell_command(name: str, args: dict[str, Any]) -> str:
    path = args.get("path", ".")
    if name == "read_file":
        return f"sed -n '1,400p' {path}"
    if name == "grep":
        return f"rg -n {json.dumps(args.get('pattern', ''))} {path}"
    if name == "list_dir":
        return f"ls -la {path}"
    if name == "find_files":
        return f"rg --files -g {json.dumps(args.get('pattern', '*'))}"
    if name == "web_fetch":
        return f"curl -sL {args.get('url', '')}"
    return str(args.get("command", name))


def to_codex(chat: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat session as Codex CLI sends it: ``{"instructions": ..., "input": [...], "tools": [...]}``."""
    items: list[dict[str, Any]] = []
    kinds: dict[str, str] = {}
    for message in chat[1:]:
        role = message["role"]
        if role == "user":
            items.append(
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": message["content"]}]}
            )
        elif role == "assistant":
            summary = f"Planning step {len(items)}"
            items.append(
                {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": summary}],
                    "encrypted_content": "gAAAAB"
                    + base64.b64encode(hashlib.sha256(summary.encode()).digest() * 24).decode(),
                }
            )
            if message.get("content"):
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": message["content"]}],
                    }
                )
            for call in message.get("tool_calls") or []:
                name, args = call["function"]["name"], _arguments(call)
                if name in ("edit_file", "write_file"):
                    patch = f"*** Begin Patch\n*** Update File: {args.get('path', 'x')}\n@@\n-old\n+new\n*** End Patch"
                    items.append(
                        {"type": "custom_tool_call", "call_id": call["id"], "name": "apply_patch", "input": patch}
                    )
                    kinds[call["id"]] = "custom_tool_call_output"
                elif name == "todo_write":
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": call["id"],
                            "name": "update_plan",
                            "arguments": json.dumps({"plan": []}),
                        }
                    )
                    kinds[call["id"]] = "function_call_output"
                else:
                    command = ["bash", "-lc", _shell_command(name, args)]
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": call["id"],
                            "name": "shell",
                            "arguments": json.dumps({"command": command}),
                        }
                    )
                    kinds[call["id"]] = "function_call_output"
        elif role == "tool":
            kind = kinds.get(message["tool_call_id"], "function_call_output")
            output = message["content"]
            if kind == "function_call_output" and not output.startswith("Plan"):
                output = json.dumps({"output": output, "metadata": {"exit_code": 0, "duration_seconds": 0.4}})
            items.append({"type": kind, "call_id": message["tool_call_id"], "output": output})
    return {"instructions": str(chat[0]["content"]), "input": items, "tools": CODEX_TOOLS, "store": False}


def codex_body(n_messages: int, *, seed: int = 0, model: str = "gpt") -> dict[str, Any]:
    """A Codex CLI ``/v1/responses`` request body built from a session of ``n_messages`` chat messages."""
    body = to_codex(make_session(n_messages, seed=seed, users_every=40))
    return {"model": model, "max_output_tokens": 8_192, "include": ["reasoning.encrypted_content"], **body}
