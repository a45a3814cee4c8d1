"""OpenAI Responses (``/v1/responses``): the client's ``input`` items as an outline, and back.

* ``instructions`` → one system message;
* a ``message`` item (or a bare ``{"role", "content"}``) of role user, system or developer → that
  message, its content parts (``input_text``, ``input_image`` …) kept as they are;
* a run of assistant-side items (``reasoning``, assistant ``message`` items, server-tool items such
  as ``web_search_call``, tool calls) → an assistant turn: the calls (``*_call`` items with a
  ``call_id``) as its ``tool_calls``, every other item as a content part, so a reasoning item stays
  with the call it precedes. A turn ends with its group of calls: their outputs follow it;
* a ``*_call_output`` item → a ``tool`` message answering its ``call_id``;
* the newest ``compaction`` item (`_compaction`), and anything else (``item_reference``, unknown
  types) → a message of its own that no rule touches. The items before that compaction go out as
  they came, neither counted nor governed.

A string ``input`` is a single user turn, left alone. With ``previous_response_id`` the earlier
history lives upstream: an output whose call is not in the input answers a stored call, and is kept
behind an assistant message that stands for the stored calls and is never rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ._compaction import COMPACTION, newest_compaction
from ._messages import ORIGIN, TEXT_PARTS, Message, Origin, Outline, interleave, native_of, origin, validate_list
from ._steps import OUTPUTS_RETYPED

__all__ = ["ResponsesOutline"]

_INSTRUCTIONS: Final = object()
#: Assistant-side items that are not tool calls answered by the client.
_ASSISTANT_ITEMS: Final = frozenset({"reasoning", "mcp_list_tools", "mcp_approval_request"})
#: Role of an item no rule understands (any string no rule matches).
OPAQUE_ROLE: Final = "x-item"


class ResponsesOutline(Outline):
    """A Responses body (``input`` and ``instructions``) as chat-shaped outline messages."""

    format = "responses"
    text_type = "input_text"

    def __init__(self, items: object, instructions: object = None, previous_response_id: object = None) -> None:
        super().__init__(1 if isinstance(items, str) else 0)
        self.items = items
        self.history_upstream = isinstance(previous_response_id, str) and bool(previous_response_id)
        if instructions is not None and instructions != "":
            self.view.append({"role": "system", "content": instructions, ORIGIN: Origin(_INSTRUCTIONS)})
        if isinstance(items, str):
            self.left_alone = "input is a string (a single user turn): nothing to govern"
            self.view.append({"role": "user", "content": items, ORIGIN: Origin(items)})  # counted, not governed
            return
        self.items = listed = validate_list(items, "input", "a string or a list of items")
        self.count = len(listed)
        start = 0
        if any(item.get("type") == COMPACTION for item in listed):
            newest = newest_compaction(listed, "item")
            if newest is not None:
                self.dead = listed[: newest[0]]
                opener = listed[newest[0]]  # opens the history the provider reads
                self.view.append({"role": OPAQUE_ROLE, "content": [opener], ORIGIN: Origin(opener, opener=True)})
                start = newest[0] + 1
        self._read(listed[start:])
        if self.history_upstream:
            self._stand_in_for_stored_calls()
        self._originals = {id(m) for m in self.view}

    def _read(self, items: list[Any]) -> None:
        turn: list[Any] = []  # the items of the assistant turn being read
        calls: list[Any] = []  # its calls (they end it)
        kinds: dict[Any, Any] = {}  # call id -> the type of the call item
        for item in items:
            side = _side(item)
            if turn and (side is None or (calls and side != "call")):
                self._add_turn(turn, calls)
                turn, calls = [], []
            if side is None:
                self.view.append(self._message(item, kinds))
                continue
            turn.append(item)
            if side == "call":
                calls.append(item)
                kinds[item.get("call_id")] = item.get("type")
        if turn:
            self._add_turn(turn, calls)

    def _message(self, item: Mapping[str, Any], kinds: Mapping[Any, Any]) -> Message:
        """The outline message of an item that is not part of an assistant turn."""
        kind = item.get("type")
        if isinstance(kind, str) and kind.endswith("_call_output"):
            ident = item.get("call_id")
            if ident is None and kind == "local_shell_call_output":
                ident = item.get("id")  # local shell outputs name their call by `id`
            answered = kinds.get(ident)
            if isinstance(answered, str) and kind != f"{answered}_output":
                # an output of the wrong kind answers nothing: rendered as its call's kind
                self.parse_counts[OUTPUTS_RETYPED] = self.parse_counts.get(OUTPUTS_RETYPED, 0) + 1
            return {"role": "tool", "tool_call_id": ident, "content": item.get("output", ""), ORIGIN: item}
        if kind in (None, "message") and isinstance(item.get("role"), str):
            return {"role": item["role"], "content": item.get("content"), ORIGIN: item}
        return {"role": OPAQUE_ROLE, "content": [item], ORIGIN: item}

    def _add_turn(self, items: list[Any], calls: list[Any]) -> None:
        """An assistant turn of `items` ending with its `calls`."""
        turn: Message = {"role": "assistant", "content": items[: len(items) - len(calls)]}
        if calls:
            turn["tool_calls"] = [_outline_call(item) for item in calls]
        turn[ORIGIN] = Origin(None, tuple(items))
        self.view.append(turn)

    def _stand_in_for_stored_calls(self) -> None:
        visible = {c.get("id") for m in self.view for c in m.get("tool_calls", ())}
        stored = [
            i for i, m in enumerate(self.view) if m.get("role") == "tool" and m.get("tool_call_id") not in visible
        ]
        calls: dict[str, Message] = {}
        for index in stored:
            ident = self.view[index].get("tool_call_id")
            if isinstance(ident, str) and ident not in calls:
                kind = native_of(self.view[index]).get("type", "function_call_output").removesuffix("_output")
                function = {"name": f"(stored {kind})", "arguments": None}
                calls[ident] = {"id": ident, "type": "function", "function": function, ORIGIN: Origin(virtual=True)}
        if stored:
            stand_in = {
                "role": "assistant",
                "content": [],
                "tool_calls": [*calls.values()],
                ORIGIN: Origin(virtual=True),
            }
            self.view.insert(stored[0], stand_in)

    @property
    def where(self) -> dict[int, str]:
        """id(outline message) -> where it sits in the client's body (for `explain`)."""
        position = {id(item): index for index, item in enumerate(self.items)} if isinstance(self.items, list) else {}
        found: dict[int, str] = {}
        for message in self.view:
            native = origin(message)
            if native is None or native.virtual:
                continue
            pieces = native.order if native.native is None else (native.native,)
            at = sorted(position[id(p)] for p in pieces if id(p) in position)
            if native.native is _INSTRUCTIONS:
                found[id(message)] = "instructions"
            elif self.left_alone is not None:
                found[id(message)] = "input"
            elif at:
                found[id(message)] = f"input[{at[0]}]" if len(at) == 1 else f"input[{at[0]}..{at[-1]}]"
        return found

    def render(self, governed: list[Message]) -> dict[str, Any]:
        """The body's ``input`` (and ``instructions``), in the governed outline's order."""
        if self.left_alone is not None:
            return {}
        fields: dict[str, Any] = {}
        out: list[Any] = []
        call_types: dict[Any, Any] = {}  # the kinds of the calls the next outputs answer
        for message in governed:
            found = message.get(ORIGIN)
            role = message.get("role")
            if isinstance(found, Origin) and found.virtual:
                continue
            if isinstance(found, Origin) and found.native is _INSTRUCTIONS:
                fields["instructions"] = message.get("content")
            elif role == "assistant":
                call_types = {call.get("id"): native_of(call).get("type") for call in message.get("tool_calls", ())}
                out.extend(self._turn(message, found.order if isinstance(found, Origin) else ()))
            elif role == "tool":
                out.append(self._output(message, call_types))
            elif id(message) in self._originals:
                out.append(native_of(message))
            elif role == OPAQUE_ROLE:
                out.extend(_parts(message.get("content")))
            else:
                out.append(_message_item(message, origin(message)))
        fields["input"] = [*self.dead, *out]
        return fields

    def _turn(self, message: Message, order: tuple[Any, ...]) -> list[Any]:
        """An assistant turn's items: the client's own where no step touched it, else rebuilt."""
        if id(message) in self._originals and order:
            return list(order)
        parts = [said(part) if isinstance(part, str) else part for part in _parts(message.get("content"))]
        return interleave(parts, message.get("tool_calls"), order, _call_item)

    def _output(self, message: Message, call_types: Mapping[Any, Any]) -> Any:
        """An output item: the client's own where no step touched it and it is of the kind its
        call needs (or its call is held upstream)."""
        native = native_of(message)
        call_type = call_types.get(message.get("tool_call_id"))
        own = id(message) in self._originals
        fits = own and (not isinstance(call_type, str) or native.get("type") == f"{call_type}_output")
        return native if fits else _output_item(message, call_type)


def said(text: str) -> dict[str, Any]:
    """Text an assistant turn gained from the rules (a bridge turn), as the message item it is."""
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _side(item: Mapping[str, Any]) -> str | None:
    """``call`` for a tool call the client answers (a ``*_call`` item with a ``call_id``), ``part``
    for another assistant-side item, None for an item of the user's side or no side."""
    kind = item.get("type")
    if kind is None or kind == "message":
        return "part" if item.get("role") == "assistant" else None
    if isinstance(kind, str) and kind.endswith("_call"):
        return "call" if "call_id" in item else "part"
    return "part" if kind in _ASSISTANT_ITEMS else None


def _outline_call(item: Mapping[str, Any]) -> Message:
    """The outline call of a call item: its name (for a call that has none, its kind:
    ``local_shell``, ``computer`` …) and its ``arguments``, ``input`` or ``action``."""
    name = item.get("name")
    if name is None and isinstance(item.get("type"), str):
        name = item["type"].removesuffix("_call")
    arguments = next((item[key] for key in ("arguments", "input", "action") if key in item), None)
    function = {"name": name, "arguments": arguments}
    return {"id": item.get("call_id"), "type": "function", "function": function, ORIGIN: item}


def _parts(content: object) -> list[Any]:
    if isinstance(content, list):
        return content
    return [] if content is None else [content]


def _call_item(item: Mapping[str, Any], call: Mapping[str, Any]) -> Any:
    return item if item.get("call_id") == call.get("id") else {**item, "call_id": call.get("id")}


def _output_item(message: Message, call_type: Any) -> dict[str, Any]:
    """An output item for an outline tool message: the client's item with the outline's call id
    and output, or a new one of the kind its call (of `call_type`) needs (a backfilled result)."""
    native = native_of(message)
    ident = message.get("tool_call_id")
    content = message.get("content")
    if not isinstance(native, Mapping):
        kind = f"{call_type}_output" if isinstance(call_type, str) else "function_call_output"
        return {"type": kind, "call_id": ident, "output": content}
    item = dict(native)
    if isinstance(call_type, str):
        item["type"] = f"{call_type}_output"
    item["call_id" if "call_id" in item or item.get("type") != "local_shell_call_output" else "id"] = ident
    if content == "" and "output" not in native:
        item.pop("output", None)
    else:
        item["output"] = content
    return item


def _message_item(message: Message, found: Origin | None) -> dict[str, Any]:
    role = message.get("role")
    content = message.get("content")
    if found is not None and found.native is None:
        # An assistant turn kept as the user's (`_roles`): its text, as the user's input text.
        texts = [
            part["text"]
            for item in _parts(content)
            if isinstance(item, Mapping) and item.get("type") == "message"
            for part in _parts(item.get("content"))
            if isinstance(part, Mapping) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str)
        ]
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": t} for t in texts]}
    base = found.native if found is not None and isinstance(found.native, Mapping) else {"type": "message"}
    return {**base, "role": role, "content": content}
