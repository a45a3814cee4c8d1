"""What a tool call did, in a few words: its tool, its main argument and its outcome.

Stubs and the note that stands for cut turns name the calls they replace, so the agent can ask
for an output again and does not repeat what it already did: ``Read(file_path="src/app.py")``,
``Bash(command="pytest -x tests")``. Everything here is a pure function of the call and its result,
so the same stub or note line is written on every request (the provider's prompt cache depends
on it).

The *main argument* is the first of `MAIN_ARGUMENT_KEYS` a call has (command, path, pattern,
query, url …), else its first string argument. Shell commands given as an argument vector
(Codex's ``shell``, ``local_shell``) are joined; ``bash -lc "…"`` shows the script.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from ._backfill import BACKFILL_CONTENT
from ._messages import Message, call_id, call_name, native_of, tool_calls
from ._reads import kept_arguments

__all__ = [
    "MAIN_ARGUMENT_KEYS",
    "CallInfo",
    "call_info",
    "calls_by_id",
    "describe_size",
    "is_stub",
    "looks_like_error",
    "main_argument",
    "parse_arguments",
    "shorten",
]

#: Argument names that say what a call was about, in order of preference.
MAIN_ARGUMENT_KEYS: Final = (
    "command",
    "cmd",
    "file_path",
    "path",
    "filePath",
    "absolute_path",
    "notebook_path",
    "target_file",
    "pattern",
    "query",
    "q",
    "url",
    "regex",
    "glob",
    "dir_path",
    "directory",
    "search_term",
    "prompt",
    "code",
)
#: A main argument longer than this is shortened (its head and tail kept).
ARGUMENT_CHARS: Final = 80
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh"})
_SPACES: Final = re.compile(r"\s+")
# The first line of a result that failed (tool errors of the agents in AGENT_TOOLS, shells, Python).
_ERROR_START: Final = re.compile(
    r"^\s*(<tool_use_error>|error\b|Error\b|ERROR\b|fatal:|Exception\b|Traceback \(most recent call last\))"
)
_STUB: Final = re.compile(r"\[[^\[\]\n]{1,200} result omitted from context[:\]]")
# Searched in lower-cased text, and without a leading \b: a pattern that opens with a literal is
# searched for that literal first, about ten times faster (the word boundary is checked after).
_EXIT_CODE: Final = re.compile(r"exit(?:ed with)?[ _]?(?:code|status)[:= ]+(-?\d+)")
#: A string as JSON quotes it (`json.dumps` with an option builds an encoder on every call).
_quoted: Final = json.JSONEncoder(ensure_ascii=False).encode


#: Tools with a sub-command whose calls are named by it and by their path, e.g.
#: ``str_replace_editor(command="view", path="/repo/a.py")`` (OpenHands, Anthropic's text editor).
SUBCOMMAND_TOOLS: Final = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})


class CallInfo(NamedTuple):
    """A tool call as a stub or a note names it."""

    name: str
    #: The main argument's name and its (shortened, single-line) value; None when the call has none.
    key: str | None = None
    value: str | None = None
    #: What `_reads` reads of the call's arguments (`kept_arguments`: a read's file and lines, an
    #: editor's command); None for other tools, or when the arguments are not an object.
    arguments: Mapping[str, Any] | None = None
    #: A sub-command shown before the main argument (`SUBCOMMAND_TOOLS`).
    command: str | None = None

    def describe(self) -> str:
        """``Read(file_path="src/app.py")``, or ``Read()`` when the call has no main argument."""
        shown = []
        if self.command is not None:
            shown.append(f"command={_quoted(self.command)}")
        if self.key is not None and self.value is not None:
            shown.append(f"{self.key}={_quoted(self.value)}")
        return f"{self.name}({', '.join(shown)})"


def shorten(text: str, limit: int = ARGUMENT_CHARS) -> str:
    """`text` on one line (runs of whitespace become one space), at most `limit` characters: a
    longer one keeps its head and its tail around ``…`` (a path's file name, a command's start)."""
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    head = (limit - 1) * 2 // 3
    tail = limit - 1 - head
    return f"{flat[:head]}…{flat[len(flat) - tail :]}"


def _command_text(value: object) -> str | None:
    """A shell command given as a string or an argument vector (``["bash", "-lc", "ls"]``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if len(value) >= 3 and value[0] in _SHELLS and value[1] in ("-c", "-lc", "-ic"):
            return str(value[2])
        return " ".join(value)
    return None


def main_argument(arguments: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(name, shortened value) of the argument that says what the call was about, or None."""
    if not arguments:
        return None
    for key in MAIN_ARGUMENT_KEYS:
        if key in arguments:
            text = _command_text(arguments[key])
            if text is not None and text.strip():
                return key, shorten(text)
    for key, value in arguments.items():
        if isinstance(key, str) and isinstance(value, str) and value.strip():
            return key, shorten(value)
    return None


def parse_arguments(arguments: object) -> Mapping[str, Any] | None:
    """A call's arguments as a mapping: chat sends a JSON string, Anthropic an object (``input``),
    Responses either, or an ``action`` object (``local_shell``)."""
    if isinstance(arguments, Mapping):
        return arguments
    if not (isinstance(arguments, str) and arguments.lstrip().startswith("{")):
        return None
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def call_info(call: Mapping[str, Any]) -> CallInfo | None:
    """How a stub or note names `call` (an outline ``tool_calls`` entry); None without a name."""
    name = call_name(call)
    if name is None:
        return None
    function = call.get("function")
    arguments = parse_arguments(function.get("arguments") if isinstance(function, Mapping) else None)
    command = None
    if name in SUBCOMMAND_TOOLS and arguments is not None and isinstance(arguments.get("command"), str):
        command = shorten(arguments["command"], 20)
        arguments_shown: Mapping[str, Any] | None = {k: v for k, v in arguments.items() if k != "command"}
    else:
        arguments_shown = arguments
    found = main_argument(arguments_shown)
    kept = kept_arguments(name, arguments)
    if found is None:
        return CallInfo(name, arguments=kept, command=command)
    return CallInfo(name, found[0], found[1], kept, command)


def calls_by_id(messages: Sequence[Message]) -> dict[str, CallInfo]:
    """tool_call_id -> the call it names, for every named call in `messages` (a later call with
    the same id wins: results come after their call)."""
    found: dict[str, CallInfo] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in tool_calls(message):
            ident = call_id(call)
            if ident is not None and (info := call_info(call)) is not None:
                found[ident] = info
    return found


def describe_size(content: object) -> str:
    """A result's size the way an agent reads it: ``412 lines``, ``85 characters`` (one line),
    ``2 images``; for blocks, their text and the other blocks counted by type."""
    if isinstance(content, str):
        return _text_size(content)
    texts: list[str] = []
    others: dict[str, int] = {}
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
                else:
                    kind = str(part.get("type") or "part")
                    others[kind] = others.get(kind, 0) + 1
    text = "\n".join(texts)
    pieces: list[str] = []
    if text or not others:
        pieces.append(_text_size(text))
    for kind, count in sorted(others.items()):
        label = kind.replace("input_", "").replace("_url", "")
        pieces.append(f"{count} {label}{'s' if count != 1 else ''}")
    return ", ".join(pieces)


def _text_size(text: str) -> str:
    lines = text.count("\n") + (0 if text.endswith("\n") else 1) if text else 0
    return f"{lines:,} lines" if lines > 1 else f"{len(text):,} characters"


def is_stub(content: object) -> bool:
    """Whether `content` is a compaction stub (``[Read result omitted from context: …]``, or the
    shorter ``[read_file result omitted from context]`` of earlier versions): never stubbed again."""
    return isinstance(content, str) and content.endswith("]") and _STUB.match(content) is not None


def looks_like_error(result: Message) -> bool:
    """Whether a tool result reports a failure: Anthropic's ``is_error`` flag, the stand-in for a
    lost result, or text that opens like an error (``Error:``, ``<tool_use_error>``, a traceback)
    or states a non-zero exit code."""
    native = native_of(result)
    if isinstance(native, Mapping) and native.get("is_error") is True:
        return True
    if result.get("is_error") is True:
        return True
    content = result.get("content")
    if isinstance(content, list):
        content = next(
            (p.get("text") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)), ""
        )
    if not isinstance(content, str) or not content:
        return False
    if content == BACKFILL_CONTENT:
        return True  # the stand-in for a result that never came
    head = content[:2_000]
    if _ERROR_START.match(head):
        return True
    code = _exit_code(head.lower()) or _exit_code(content[-500:].lower())
    return code is not None and code != "0"


def _exit_code(text: str) -> str | None:
    """The first exit code `text` (lower-cased) states: ``exit code: 2``, ``exited with status 1``."""
    for match in _EXIT_CODE.finditer(text):
        start = match.start()
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            return match.group(1)
    return None
