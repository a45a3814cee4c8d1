"""Anthropic Messages (``/v1/messages``): the client's body as an outline, and back.

The steps work on chat-shaped messages (`_messages`). An Anthropic body becomes:

* its top-level ``system`` (a string or text blocks) → one system message;
* a user message → its ``tool_result`` blocks, each a ``tool`` message (``tool_call_id`` from
  ``tool_use_id``), then the rest of its blocks as one user message (a *continuation* when it came
  with results: text sent along with tool results does not set a new task);
* an assistant message → one assistant message whose content is every block but ``tool_use``
  (text, ``thinking`` and ``redacted_thinking`` with their signatures, server-tool blocks, unknown
  blocks) and whose ``tool_calls`` stand for the ``tool_use`` blocks.

With a compaction block in the history (`_compaction`), the outline starts at the assistant turn
holding the newest one — the provider reads nothing before it: the earlier messages are neither
counted nor governed, and go out as they came, in front of the rendered history.

Every outline message keeps its `Origin`: the client's message or block. Rendering walks the
governed outline and re-emits the client's own objects: an untouched message is the client's
object itself; an edited one is rebuilt from the client's blocks with only the edit applied (a
stub for a result's content, a new id, a dropped call, merged turns). Results are always
rendered at the start of the next user message, and results that follow an assistant turn with
no user text after them make a user message of their own — the only place results can go.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._compaction import COMPACTION, newest_compaction
from ._errors import InvalidRequestError
from ._messages import ORIGIN, SYSTEM_ROLES, Message, Origin, interleave, native_of, origin

__all__ = ["AnthropicOutline"]

#: Block types that hold the turn's own reasoning: valid only in assistant turns.
_ASSISTANT_ONLY: Final = frozenset({"thinking", "redacted_thinking", "tool_use", "server_tool_use"})
_SYSTEM: Final = object()


class AnthropicOutline:
    """An Anthropic Messages body (``messages`` and ``system``) as chat-shaped outline messages."""

    format: Final = "anthropic"
    text_type: Final = "text"
    owns_view: Final = True

    def __init__(self, messages: object, system: object = None) -> None:
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
            raise InvalidRequestError(
                f"messages must be a list of Anthropic message dicts, got {type(messages).__name__}"
            )
        self.messages: list[Any] = list(messages)
        self.count = len(self.messages)
        self.system = system
        self.view: list[Message] = []
        #: Repairs made while reading the body (a message whose results did not come first).
        self.parse_counts: dict[str, int] = {}

        # id(first outline message of a client message) -> (client message, its outline messages)
        self._groups: dict[int, tuple[Any, tuple[Message, ...]]] = {}
        self._parts: dict[int, tuple[Message, ...]] = {}  # client message index -> its outline messages
        if system is not None and system not in ("", []):
            self.view.append({"role": "system", "content": system, ORIGIN: Origin(_SYSTEM)})
        # One pass reads every message; only a body holding a compaction block (rare) is searched
        # for the newest one, and its turn read again as the opener.
        read: list[_Read] = []
        for index, message in enumerate(self.messages):
            if not isinstance(message, dict):
                raise InvalidRequestError(
                    f"messages[{index}] must be a dict like {{'role': 'user', 'content': '...'}}, "
                    f"got {type(message).__name__}"
                )
            read.append(_read(message))
        newest = newest_compaction(self.messages, "block") if any(r[2] for r in read) else None
        #: The messages before the newest compaction's turn: what the provider does not read.
        self.dead: list[Any] = self.messages[: newest[0]] if newest is not None else []
        for index in range(len(self.dead), len(self.messages)):
            message = self.messages[index]
            group, results_first, _ = (
                _read(message, opener=True) if newest is not None and index == newest[0] else read[index]
            )
            self._parts[index] = group
            if results_first:
                self._groups[id(group[0])] = (message, group)
            else:  # rendered anew, results first: "tool_result blocks must come first"
                self.parse_counts["results_moved"] = self.parse_counts.get("results_moved", 0) + 1
            before = self._parts.get(index - 1)
            if before and before[-1].get("role") == "tool" and message.get("role") == "user":
                # a user message after one ending in tool results is rendered as one turn with it
                self.parse_counts["merged"] = self.parse_counts.get("merged", 0) + 1
            self.view.extend(group)

    @property
    def where(self) -> dict[int, str]:
        """id(outline message) -> where it sits in the client's body (for `explain`; built on demand)."""
        found: dict[int, str] = {id(m): "system" for m in self.view[:1] if m.get("role") == "system"}
        for index, message in enumerate(self.messages):
            content = message.get("content")
            blocks = {id(b): j for j, b in enumerate(content)} if type(content) is list else {}
            for part in self._parts.get(index, ()):
                block = native_of(part)
                at = blocks.get(id(block)) if part.get("role") == "tool" else None
                found[id(part)] = f"messages[{index}]" + (f".content[{at}]" if at is not None else "")
        return found

    # ---- rendering ---------------------------------------------------------------------------

    def render(self, governed: list[Message]) -> dict[str, Any]:
        """The body's ``messages`` (and ``system``, when the body has or now needs one)."""
        system: list[Message] = []
        index = 0
        while index < len(governed) and governed[index].get("role") in SYSTEM_ROLES:
            system.append(governed[index])
            index += 1
        out: list[Any] = []
        while index < len(governed):
            message = governed[index]
            role = message.get("role")
            if role == "tool" or (role == "user" and not _is_recovered(message)):
                end = index
                while end < len(governed) and governed[end].get("role") == "tool":
                    end += 1
                if end < len(governed) and governed[end].get("role") == "user" and not _is_recovered(governed[end]):
                    end += 1
                out.append(self._user_turn(governed[index:end]))
                index = end
                continue
            out.append(self._other(message))
            index += 1
        fields: dict[str, Any] = {"messages": [*self.dead, *out]}
        if len(system) == 1 and origin(system[0]) is not None and system[0]["content"] is self.system:
            fields["system"] = self.system
        elif system:
            fields["system"] = _join_system([m.get("content") for m in system])
        elif self.system is not None:
            fields["system"] = self.system
        return fields

    def _original(self, group: Sequence[Message]) -> Any:
        """The client's message when `group` is exactly the outline it became, untouched."""
        found = self._groups.get(id(group[0]))
        if (
            found is not None
            and len(found[1]) == len(group)
            and all(a is b for a, b in zip(found[1], group, strict=True))
        ):
            return found[0]
        return None

    def _user_turn(self, group: Sequence[Message]) -> Any:
        original = self._original(group)
        if original is not None:
            return original
        blocks: list[Any] = []
        base: Mapping[str, Any] = {}
        text: Message | None = None
        for message in group:
            if message.get("role") == "tool":
                blocks.append(_result_block(message))
            else:
                text = message
        if text is not None:
            native = native_of(text)
            if isinstance(native, Mapping) and native.get("role") == "user":
                base = native
            content = text.get("content")
            if not blocks:
                return {**base, "role": "user", "content": content}
            blocks.extend(_as_blocks(content))
        return {**base, "role": "user", "content": blocks}

    def _other(self, message: Message) -> Any:
        original = self._original((message,))
        if original is not None:
            return original
        found = origin(message)
        base = found.native if found is not None and isinstance(found.native, Mapping) else {}
        role = message.get("role")
        if role == "assistant":
            return {**base, "role": "assistant", "content": _assistant_content(message, found)}
        content = message.get("content")
        if role == "user":  # an assistant turn kept as the user's (`_roles`): no reasoning blocks there
            if isinstance(content, list):
                content = [b for b in content if not (isinstance(b, Mapping) and b.get("type") in _ASSISTANT_ONLY)]
            return {**{k: v for k, v in base.items() if k != "content"}, "role": "user", "content": content}
        return {**base, "role": role, "content": content}


#: A client message read: its outline messages, whether its ``tool_result`` blocks (if any) all
#: come before its other blocks, and whether it holds a compaction block. (A plain tuple: one is
#: made per message, and a named tuple's constructor costs more than the rest of a result's read.)
_Read = tuple[tuple[Message, ...], bool, bool]


def _kind(block: object) -> object:
    """A block's ``type`` (None for what is not a block)."""
    if type(block) is dict:
        return block.get("type")
    return block.get("type") if isinstance(block, Mapping) else None


def _read(message: dict[str, Any], *, opener: bool = False) -> _Read:
    """A client message as outline messages (module docstring), its blocks walked once."""
    role = message.get("role")
    content = message.get("content")
    if type(content) is not list:
        return ({"role": role, "content": content, ORIGIN: message},), True, False
    if role == "assistant":
        return _read_assistant(message, content, opener)
    compaction = False
    if role == "user":
        results: list[Message] = []
        rest: list[Any] = []
        results_first = True  # every result block comes before the first other block
        for block in content:
            kind = block.get("type") if type(block) is dict else _kind(block)
            if kind == "tool_result":
                result: Message = {
                    "role": "tool",
                    "tool_call_id": block.get("tool_use_id"),
                    "content": block.get("content", ""),
                    ORIGIN: block,
                }
                if block.get("cache_control"):
                    result["cache_control"] = block["cache_control"]
                results.append(result)
                results_first = results_first and not rest
            else:
                rest.append(block)
                compaction = compaction or kind == COMPACTION
        if results:
            if rest:
                results.append({"role": "user", "content": rest, ORIGIN: Origin(message, continuation=True)})
            return tuple(results), results_first, compaction
    else:
        compaction = any(_kind(block) == COMPACTION for block in content)
    return ({"role": role, "content": content, ORIGIN: message},), True, compaction


def _read_assistant(message: dict[str, Any], content: list[Any], opener: bool) -> _Read:
    """An assistant message: its ``tool_use`` blocks as calls, every other block as content."""
    parts: list[Any] = []
    calls: list[Message] = []
    marker: object = None
    compaction = False
    for block in content:
        kind = block.get("type") if type(block) is dict else _kind(block)
        if kind == "tool_use":
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": block.get("input")},
                    ORIGIN: block,
                }
            )
            marker = marker or block.get("cache_control")
        else:
            parts.append(block)
            compaction = compaction or kind == COMPACTION
    assistant: Message = {
        "role": "assistant",
        "content": parts,
        ORIGIN: Origin(message, tuple(content), opener=opener),
    }
    if calls:
        assistant["tool_calls"] = calls
    if marker:
        assistant["cache_control"] = marker  # a breakpoint on a tool_use block protects this turn
    return (assistant,), True, compaction


def _is_recovered(message: Message) -> bool:
    """A user message made from an assistant turn: rendered on its own, never folded with results."""
    native = native_of(message)
    return isinstance(native, Mapping) and native.get("role") == "assistant"


def _result_block(message: Message) -> dict[str, Any]:
    """A ``tool_result`` block for an outline tool message: the client's block with the outline's
    id and content, or a new one (a backfilled result, flagged ``is_error``)."""
    native = native_of(message)
    content = message.get("content")
    if isinstance(native, Mapping):
        block = dict(native)
        block["tool_use_id"] = message.get("tool_call_id")
        if content == "" and "content" not in native:
            block.pop("content", None)
        else:
            block["content"] = content
        return block
    return {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": content, "is_error": True}


def _assistant_content(message: Message, found: Origin | None) -> Any:
    """An assistant turn's blocks: its content parts in their order, with each surviving call
    put back where its ``tool_use`` block was (renamed if its id changed)."""
    content = message.get("content")
    calls = message.get("tool_calls")
    order = found.order if found is not None else ()
    if not calls and not order:
        return content
    return interleave(content if isinstance(content, list) else _as_blocks(content), calls, order, _tool_use)


def _tool_use(block: Any, call: Mapping[str, Any]) -> Any:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    if isinstance(block, Mapping):
        return block if block.get("id") == call.get("id") else {**block, "id": call.get("id")}
    arguments = function.get("arguments")
    return {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments or {}}


def _as_blocks(content: object) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if content is None:
        return []
    return [content]


def _join_system(contents: list[Any]) -> Any:
    if all(isinstance(c, str) for c in contents):
        return "\n\n".join(c for c in contents if c)
    blocks: list[Any] = []
    for content in contents:
        blocks.extend(_as_blocks(content))
    return blocks
