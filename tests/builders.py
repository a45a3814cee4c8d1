"""Terse builders for chat messages, so test tables read like conversations."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import settings

Message = dict[str, Any]


def examples(at_default: int) -> int:
    """A test's Hypothesis examples: `at_default` under the default profile (300 examples), scaled to
    the profile ``HYPOTHESIS_PROFILE`` loads (tests/conftest.py), so that ``deep`` searches longer
    and ``ci`` and ``matrix`` shorter, every test alike."""
    return max(1, at_default * settings.default.max_examples // 300)


def system(text: str = "You are a coding agent.") -> Message:
    return {"role": "system", "content": text}


def user(content: Any = "Fix the failing test.") -> Message:
    return {"role": "user", "content": content}


def assistant(content: Any = "Done.", *calls: dict[str, Any]) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def call(ident: str, name: str = "read_file", **arguments: Any) -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def result(ident: str, content: Any = "ok", name: str | None = None) -> Message:
    message: Message = {"role": "tool", "tool_call_id": ident, "content": content}
    if name is not None:
        message["name"] = name
    return message


def calling(*idents: str, name: str = "read_file", content: Any = None) -> Message:
    """An assistant message calling `name` once per id."""
    return assistant(content, *(call(i, name) for i in idents))


def long_text(n: int = 600, seed: str = "x") -> str:
    """A tool output of at least `n` characters."""
    line = f"{seed} = compute({seed!r})  # a line of real-looking code\n"
    return (line * (n // len(line) + 1))[:n]
