"""Anthropic Messages (``/v1/messages``): the client's body as an outline, and back.

* The top-level ``system`` (a string or text blocks) → one system message;
* a user message → its ``tool_result`` blocks, each a ``tool`` message (``tool_call_id`` from
  ``tool_use_id``), then the rest of its blocks as one user message (a *continuation* when it came
  with results: text sent along with tool results does not set a new task);
* an assistant message → one assistant message whose content is every block but ``tool_use``
  (text, signed ``thinking`` and ``redacted_thinking``, server-tool and unknown blocks) and whose
  ``tool_calls`` stand for the ``tool_use`` blocks.

With a compaction block in the history (`_compaction`), the outline starts at the assistant turn
holding the newest one: the messages before it go out as they came, neither counted nor governed.
Rendering puts results first in their user message ("tool_result blocks must come first"), or in
a user message of their own where no user text follows them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._compaction import COMPACTION, newest_compaction
from ._messages import ORIGIN, SYSTEM_ROLES, Message, Origin, Outline, interleave, native_of, origin, validate_list
from ._steps import MERGED, RESULTS_MOVED

__all__ = ["AnthropicOutline"]

#: Block types that hold the turn's own reasoning: valid only in assistant turns.
_ASSISTANT_ONLY: Final = frozenset({"thinking", "redacted_thinking", "tool_use", "server_tool_use"})
_SYSTEM: Final = object()


class AnthropicOutline(Outline):
    """An Anthropic Messages body (``messages`` and ``system``) as chat-shaped outline messages."""

    format = "anthropic"

    def __init__(self, messages: object, system: object = None) -> None:
        self.messages = validate_list(messages, "messages", "a list of Anthropic message dicts")
        super().__init__(len(self.messages))
        self.system = system
        #: id(first outline message of a client message) -> (its index, the client message, its
        #: outline messages, whether rendering it anew is needed to put its results first)
        self._groups: dict[int, tuple[int, Any, tuple[Message, ...], bool]] = {}
        if system is not None and system not in ("", []):
            self.view.append({"role": "system", "content": system, ORIGIN: Origin(_SYSTEM)})
        read = [_read(message) for message in self.messages]
        if any(compaction for _, _, compaction in read):
            newest = newest_compaction(self.messages, "block")
            if newest is not None:
                self.dead = self.messages[: newest[0]]
                read[newest[0]] = _read(self.messages[newest[0]], opener=True)
        for index in range(len(self.dead), len(self.messages)):
            group, results_first, _ = read[index]
            self._groups[id(group[0])] = (index, self.messages[index], group, not results_first)
            if not results_first:
                self.parse_counts[RESULTS_MOVED] = self.parse_counts.get(RESULTS_MOVED, 0) + 1
            before = read[index - 1][0] if index > len(self.dead) else ()
            if before and before[-1].get("role") == "tool" and self.messages[index].get("role") == "user":
                # a user message after one ending in tool results is rendered as one turn with it
                self.parse_counts[MERGED] = self.parse_counts.get(MERGED, 0) + 1
            self.view.extend(group)

    @property
    def where(self) -> dict[int, str]:
        """id(outline message) -> where it sits in the client's body (for `explain`)."""
        found: dict[int, str] = {id(m): "system" for m in self.view[:1] if m.get("role") == "system"}
        for index, message, group, _ in self._groups.values():
            content = message.get("content")
            blocks = {id(b): j for j, b in enumerate(content)} if type(content) is list else {}
            for part in group:
                at = blocks.get(id(native_of(part))) if part.get("role") == "tool" else None
                found[id(part)] = f"messages[{index}]" + ("" if at is None else f".content[{at}]")
        return found

    def render(self, governed: list[Message]) -> dict[str, Any]:
        """The body's ``messages`` (and ``system``, when the body has or now needs one)."""
        index = 0
        while index < len(governed) and governed[index].get("role") in SYSTEM_ROLES:
            index += 1
        system = governed[:index]
        out: list[Any] = []
        group: list[Message] = []  # tool results, then the user message they came with
        for message in governed[index:]:
            role = message.get("role")
            plain_user = role == "user" and not _is_recovered(message)
            if role == "tool" or plain_user:
                group.append(message)
            if group and role != "tool":
                out.append(self._user_turn(group))
                group = []
            if role != "tool" and not plain_user:
                out.append(self._other(message))
        if group:
            out.append(self._user_turn(group))
        fields: dict[str, Any] = {"messages": [*self.dead, *out]}
        if len(system) == 1 and origin(system[0]) is not None and system[0]["content"] is self.system:
            fields["system"] = self.system
        elif system:
            contents = [m.get("content") for m in system]
            texts = all(isinstance(c, str) for c in contents)
            fields["system"] = (
                "\n\n".join(c for c in contents if c) if texts else [b for c in contents for b in _as_blocks(c)]
            )
        elif self.system is not None:
            fields["system"] = self.system
        return fields

    def _original(self, group: Sequence[Message]) -> Any:
        """The client's message when `group` is exactly the outline it became, untouched."""
        found = self._groups.get(id(group[0]))
        if found is None or found[3] or len(found[2]) != len(group):
            return None
        return found[1] if all(a is b for a, b in zip(found[2], group, strict=True)) else None

    def _user_turn(self, group: Sequence[Message]) -> Any:
        original = self._original(group)
        if original is not None:
            return original
        blocks = [_result_block(m) for m in group if m.get("role") == "tool"]
        if group[-1].get("role") == "tool":
            return {"role": "user", "content": blocks}
        native = native_of(group[-1])
        base = native if isinstance(native, Mapping) and native.get("role") == "user" else {}
        content = group[-1].get("content")
        return {**base, "role": "user", "content": [*blocks, *_as_blocks(content)] if blocks else content}

    def _other(self, message: Message) -> Any:
        original = self._original((message,))
        if original is not None:
            return original
        found = origin(message)
        base = found.native if found is not None and isinstance(found.native, Mapping) else {}
        role = message.get("role")
        content = message.get("content")
        order = found.order if found is not None else ()
        if role == "assistant" and (message.get("tool_calls") or order):
            # its blocks in their order, each surviving call put back where its tool_use block was
            blocks = content if isinstance(content, list) else _as_blocks(content)
            content = interleave(blocks, message.get("tool_calls"), order, _tool_use)
        elif role == "user":  # an assistant turn kept as the user's (`_roles`): no reasoning blocks there
            if isinstance(content, list):
                content = [b for b in content if not (isinstance(b, Mapping) and b.get("type") in _ASSISTANT_ONLY)]
            base = {k: v for k, v in base.items() if k != "content"}
        return {**base, "role": role, "content": content}


def _read(message: dict[str, Any], *, opener: bool = False) -> tuple[tuple[Message, ...], bool, bool]:
    """A client message as outline messages (module docstring), its blocks walked once; whether
    its ``tool_result`` blocks (if any) all come before its other blocks; whether it holds a
    compaction block."""
    role = message.get("role")
    content = message.get("content")
    if type(content) is not list:
        return ({"role": role, "content": content, ORIGIN: message},), True, False
    pieces: list[Message] = []  # an assistant message's calls, or a user message's results
    rest: list[Any] = []
    results_first = True
    compaction = False
    marker: object = None  # a breakpoint on a tool_use block protects its turn
    for block in content:
        kind = block.get("type") if type(block) is dict or isinstance(block, Mapping) else None
        if kind == "tool_use" and role == "assistant":
            function = {"name": block.get("name"), "arguments": block.get("input")}
            pieces.append({"id": block.get("id"), "type": "function", "function": function, ORIGIN: block})
            marker = marker or block.get("cache_control")
        elif kind == "tool_result" and role == "user":
            result: Message = {
                "role": "tool",
                "tool_call_id": block.get("tool_use_id"),
                "content": block.get("content", ""),
                ORIGIN: block,
            }
            if block.get("cache_control"):
                result["cache_control"] = block["cache_control"]
            pieces.append(result)
            results_first = results_first and not rest
        else:
            rest.append(block)
            compaction = compaction or kind == COMPACTION
    if role == "assistant":
        turn: Message = {"role": "assistant", "content": rest, ORIGIN: Origin(message, tuple(content), opener=opener)}
        if pieces:
            turn["tool_calls"] = pieces
        if marker:
            turn["cache_control"] = marker
        return (turn,), True, compaction
    if not pieces:
        return ({"role": role, "content": content, ORIGIN: message},), True, compaction
    if rest:
        pieces.append({"role": "user", "content": rest, ORIGIN: Origin(message, continuation=True)})
    return tuple(pieces), results_first, compaction


def _is_recovered(message: Message) -> bool:
    """A user message made from an assistant turn: rendered on its own, never folded with results."""
    native = native_of(message)
    return isinstance(native, Mapping) and native.get("role") == "assistant"


def _result_block(message: Message) -> dict[str, Any]:
    """A ``tool_result`` block for an outline tool message: the client's block with the outline's
    id and content, or a new one (a backfilled result, flagged ``is_error``)."""
    native = native_of(message)
    content = message.get("content")
    if not isinstance(native, Mapping):
        return {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": content, "is_error": True}
    block = {**native, "tool_use_id": message.get("tool_call_id")}
    if content == "" and "content" not in native:
        block.pop("content", None)
    else:
        block["content"] = content
    return block


def _tool_use(block: Mapping[str, Any], call: Mapping[str, Any]) -> Any:
    return block if block.get("id") == call.get("id") else {**block, "id": call.get("id")}


def _as_blocks(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else [] if content is None else [content]
