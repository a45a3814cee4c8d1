"""What a call did, beyond its tool's name: reads that a later read supersedes, and multi-purpose
tools whose results are observations only for some of their commands.

* **Superseded reads.** A read whose target the agent read again later — same tool, same file,
  and a range the newer read covers — shows a stale copy: the newer read is what the agent works
  from. Reads of different parts of a file supersede nothing. `READ_TOOLS` says which tools
  read files and how their arguments name the file and the range (checked in each agent's tool
  schema: Claude Code's ``Read`` takes ``offset``/``limit``, the text editors of OpenHands and
  Anthropic a ``view_range``).
* **Observation commands.** OpenHands' ``str_replace_editor`` and Anthropic's text editor tool
  (``str_replace_based_edit_tool``) both view and edit: their ``view`` results are large
  observations the agent can ask for again; their edit confirmations record what changed and
  stay (`OBSERVING_COMMANDS`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

if TYPE_CHECKING:  # `_calls` imports this module (for `kept_arguments`)
    from ._calls import CallInfo

__all__ = ["OBSERVING_COMMANDS", "READ_TOOLS", "ReadTarget", "is_observation", "kept_arguments", "read_target"]


@dataclass(frozen=True)
class ReadShape:
    """How one tool's arguments name the file it reads and the part of it."""

    #: Argument names of the file, in order of preference.
    path_keys: tuple[str, ...]
    #: Only calls whose ``command`` argument is one of these read (None: every call reads).
    commands: frozenset[str] | None = None


_PATHS: Final = ("file_path", "path", "filePath", "absolute_path", "target_file", "notebook_path")
_VIEW: Final = frozenset({"view"})

#: Tools that read a file (one file per call), by name.
READ_TOOLS: Final[Mapping[str, ReadShape]] = {
    "Read": ReadShape(("file_path",)),  # Claude Code: file_path, offset, limit
    "NotebookRead": ReadShape(("notebook_path",)),  # Claude Code
    "read_file": ReadShape(_PATHS),  # Nanobot, Cline, Gemini CLI (absolute_path, offset, limit), Codex
    "read": ReadShape(_PATHS),  # OpenCode: filePath, offset, limit
    "str_replace_editor": ReadShape(("path",), _VIEW),  # OpenHands: command=view, path, view_range
    "str_replace_based_edit_tool": ReadShape(("path",), _VIEW),  # Anthropic's text editor tool
}

#: Tools that observe with some commands and change state with others: (argument, observing values).
OBSERVING_COMMANDS: Final[Mapping[str, tuple[str, frozenset[str]]]] = {
    "str_replace_editor": ("command", _VIEW),
    "str_replace_based_edit_tool": ("command", _VIEW),
}


#: The arguments `_line_range` reads.
_RANGE_KEYS: Final = ("view_range", "start_line", "end_line", "offset", "limit")


def _read_keys(name: str) -> frozenset[str]:
    shape, rule = READ_TOOLS.get(name), OBSERVING_COMMANDS.get(name)
    keys = set(shape.path_keys + _RANGE_KEYS) if shape is not None else set()
    if shape is not None and shape.commands is not None:
        keys.add("command")
    if rule is not None:
        keys.add(rule[0])
    return frozenset(keys)


#: Tool name -> the arguments `is_observation` and `read_target` read of its calls.
_READ_KEYS: Final = {name: _read_keys(name) for name in (*READ_TOOLS, *OBSERVING_COMMANDS)}


def kept_arguments(name: str, arguments: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """What `is_observation` and `read_target` read of a call's arguments (the file, the lines, the
    command), for the tools they are about; None for every other tool. A call's facts are
    remembered between requests (`_calls.call_info`): everything else an agent passed (a file it
    wrote, an edit's text) is left out of them."""
    keys = _READ_KEYS.get(name)
    if arguments is None or keys is None:
        return None
    return {key: value for key, value in arguments.items() if key in keys}


def is_observation(call: CallInfo | None) -> bool:
    """Whether the call's result is an observation by what the call did: every call of a
    single-purpose tool, and the observing commands of `OBSERVING_COMMANDS`' tools."""
    if call is None:
        return True
    rule = OBSERVING_COMMANDS.get(call.name)
    if rule is None:
        return True
    key, observing = rule
    value = call.arguments.get(key) if call.arguments is not None else None
    return isinstance(value, str) and value in observing


class ReadTarget(NamedTuple):
    """A file read and the lines read: [start, end), ``end`` infinite when read to the end (a named
    tuple: one is built per read on every request)."""

    tool: str
    path: str
    start: float
    end: float

    def covers(self, other: ReadTarget) -> bool:
        """Whether this read shows everything `other` showed (same tool and file, wider range)."""
        return (
            self.tool == other.tool and self.path == other.path and self.start <= other.start and self.end >= other.end
        )


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, str) and value.strip().lstrip("-").isdigit() else None


def _line_range(arguments: Mapping[str, Any]) -> tuple[float, float] | None:
    """[start, end) from ``offset``/``limit``, ``start_line``/``end_line`` or ``view_range``; None
    when the arguments name a range in a way this module does not read."""
    view_range = arguments.get("view_range")
    if view_range is not None:
        ends = view_range if isinstance(view_range, list) and len(view_range) == 2 else [None, None]
        first, last = _number(ends[0]), _number(ends[1])
        end = None if last is None else math.inf if last < 0 else last + 1
    elif "start_line" in arguments or "end_line" in arguments:
        first = _number(arguments.get("start_line", 0))
        last = _number(arguments["end_line"]) if arguments.get("end_line") is not None else None
        end = math.inf if last is None else last + 1
    else:
        offset, limit = arguments.get("offset"), arguments.get("limit")
        first = 0.0 if offset is None else _number(offset)
        count = math.inf if limit is None else _number(limit)
        end = None if first is None or count is None else first + count
    return None if first is None or end is None else (first, end)


def read_target(call: CallInfo | None) -> ReadTarget | None:
    """The file and lines `call` read, if it is a read of one file (`READ_TOOLS`)."""
    if call is None or call.arguments is None:
        return None
    shape = READ_TOOLS.get(call.name)
    if shape is None:
        return None
    arguments = call.arguments
    if shape.commands is not None:
        command = arguments.get("command")
        if not isinstance(command, str) or command not in shape.commands:  # (a list is not hashable)
            return None
    for key in shape.path_keys:
        path = arguments.get(key)
        if isinstance(path, str) and path:
            break
    else:
        return None
    lines = _line_range(arguments)
    if lines is None:
        return None
    return ReadTarget(call.name, path, lines[0], lines[1])
