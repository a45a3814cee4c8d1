"""OpenAI Responses (``/v1/responses``): the client's ``input`` items as an outline, and back.

The steps work on chat-shaped messages (`_messages`). A Responses body becomes:

* ``instructions`` → one system message (counted like one);
* a ``message`` item (or a bare ``{"role", "content"}``) of role user, system or developer → that
  message, its content parts (``input_text``, ``input_image``, ``input_file`` …) kept as they are;
* a run of assistant-side items — ``reasoning`` (with ``encrypted_content``), assistant
  ``message`` items, server-tool items (``web_search_call`` …) and tool calls — → an assistant
  turn: the calls (``function_call``, ``custom_tool_call``, ``local_shell_call`` and every other
  ``*_call`` item with a ``call_id``) as its ``tool_calls``, every other item as a content part,
  so a reasoning item stays with the call it precedes. A turn ends with its group of calls: an
  assistant-side item after a call starts the next turn, so each call's outputs have their place
  right after its group (the repairs move an output there when the client sent it later);
* a ``*_call_output`` item → a ``tool`` message answering its ``call_id``;
* anything else (``item_reference``, unknown types) → a message of its own that no rule touches,
  dropped only when snipping drops everything around it;
* the newest ``compaction`` item → such a message too, that opens the history (`_compaction`): the
  items before it are what it replaced — neither counted nor governed, sent as they came, in
  front of the rendered input — and it is kept and counted like the instructions.

A string ``input`` is a single user turn: there is nothing to govern and it is left alone.

With ``previous_response_id`` the earlier history lives upstream: an output answering a call
that is not in the visible input answers a stored call. It is kept, behind an assistant
message that stands for the stored calls and is never rendered.

Rendering walks the governed outline in its order: a message no step touched is the client's own
item (an assistant turn its items), an edited one is rebuilt from the client's items with only the
edit applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._compaction import COMPACTION, newest_compaction
from ._errors import InvalidRequestError
from ._messages import ORIGIN, TEXT_PARTS, Message, Origin, interleave, native_of, origin
from ._steps import OUTPUTS_RETYPED

__all__ = ["ResponsesOutline"]

_INSTRUCTIONS: Final = object()
#: Assistant-side items that are not tool calls answered by the client.
_ASSISTANT_ITEMS: Final = frozenset({"reasoning", "mcp_list_tools", "mcp_approval_request"})
#: Role of an item no rule understands (any string no rule matches).
OPAQUE_ROLE: Final = "x-item"


def _call_id(item: Mapping[str, Any]) -> Any:
    ident = item.get("call_id")
    if ident is None and item.get("type") == "local_shell_call_output":
        ident = item.get("id")  # local shell outputs name their call by `id`
    return ident


def _is_call(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_call") and "call_id" in item


def _is_assistant_side(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    if kind is None or kind == "message":
        return item.get("role") == "assistant"
    return kind in _ASSISTANT_ITEMS or (isinstance(kind, str) and kind.endswith("_call"))


def _call_name(item: Mapping[str, Any]) -> Any:
    name = item.get("name")
    if name is None and isinstance(item.get("type"), str):
        return item["type"].removesuffix("_call")  # local_shell, computer, shell, apply_patch …
    return name


class ResponsesOutline:
    """A Responses body (``input`` and ``instructions``) as chat-shaped outline messages."""

    format: Final = "responses"
    text_type: Final = "input_text"
    owns_view: Final = True

    def __init__(self, items: object, instructions: object = None, previous_response_id: object = None) -> None:
        self.items = items
        self.count = 1 if isinstance(items, str) else len(items) if isinstance(items, list) else 0
        self.instructions = instructions
        #: The earlier history is stored upstream: only the visible input can be governed.
        self.history_upstream = isinstance(previous_response_id, str) and bool(previous_response_id)
        #: Why the input is left alone (a string input), or None.
        self.left_alone: str | None = None
        self.parse_counts: dict[str, int] = {}
        self.view: list[Message] = []
        self.dead: list[Any] = []
        if instructions is not None and instructions != "":
            self.view.append({"role": "system", "content": instructions, ORIGIN: Origin(_INSTRUCTIONS)})
        if isinstance(items, str):
            self.left_alone = "input is a string (a single user turn): nothing to govern"
            self.view.append({"role": "user", "content": items, ORIGIN: Origin(items)})  # counted, not governed
            return
        if isinstance(items, (bytes, Mapping)) or not isinstance(items, Sequence):
            raise InvalidRequestError(f"input must be a string or a list of items, got {type(items).__name__}")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidRequestError(
                    f"input[{index}] must be an item dict like {{'role': 'user', 'content': '...'}}, "
                    f"got {type(item).__name__}"
                )
        newest = newest_compaction(items, "item") if any(i.get("type") == COMPACTION for i in items) else None
        #: The items before the newest compaction: what the provider no longer needs.
        self.dead = list(items[: newest[0]]) if newest is not None else []
        self._read(items, len(self.dead), opener=newest is not None)
        if self.history_upstream:
            self._stand_in_for_stored_calls()
        self._originals = {id(m) for m in self.view}

    def _read(self, items: Sequence[Any], start: int, *, opener: bool) -> None:
        """Read the items from `start` into the outline (with `opener`, the item there is the newest
        compaction, which opens the history the provider reads)."""
        turn: list[Any] = []  # the items of the assistant turn being read
        call_kinds: dict[Any, Any] = {}  # call id -> the type of the call item
        for index in range(start, len(items)):
            item = items[index]
            if _is_assistant_side(item) and not (opener and index == start):
                if turn and _is_call(turn[-1]) and not _is_call(item):
                    self._add_turn(turn)  # a turn ends with its group of calls
                    turn = []
                turn.append(item)
                if _is_call(item):
                    call_kinds[item.get("call_id")] = item.get("type")
                continue
            if turn:
                self._add_turn(turn)
                turn = []
            self.view.append(self._message(item, opener=opener and index == start, call_kinds=call_kinds))
        if turn:
            self._add_turn(turn)

    def _message(self, item: Mapping[str, Any], *, opener: bool, call_kinds: Mapping[Any, Any]) -> Message:
        """The outline message of an item that is not part of an assistant turn."""
        kind = item.get("type")
        if opener:  # the newest compaction: opens the history the provider reads
            return {"role": OPAQUE_ROLE, "content": [item], ORIGIN: Origin(item, opener=True)}
        if isinstance(kind, str) and kind.endswith("_call_output"):
            ident = _call_id(item)
            answered = call_kinds.get(ident)
            if isinstance(answered, str) and kind != f"{answered}_output":
                # an output of the wrong kind answers nothing: rendered as its call's kind
                self.parse_counts[OUTPUTS_RETYPED] = self.parse_counts.get(OUTPUTS_RETYPED, 0) + 1
            return {"role": "tool", "tool_call_id": ident, "content": item.get("output", ""), ORIGIN: item}
        if kind in (None, "message") and isinstance(item.get("role"), str):
            return {"role": item["role"], "content": item.get("content"), ORIGIN: item}
        return {"role": OPAQUE_ROLE, "content": [item], ORIGIN: item}

    def _add_turn(self, items: list[Any]) -> None:
        """An assistant turn of `items`: its calls as tool calls, every other item as a content part."""
        turn: Message = {"role": "assistant", "content": [i for i in items if not _is_call(i)]}
        calls = [
            {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": _call_name(item), "arguments": _arguments(item)},
                ORIGIN: item,
            }
            for item in items
            if _is_call(item)
        ]
        if calls:
            turn["tool_calls"] = calls
        turn[ORIGIN] = Origin(None, tuple(items))
        self.view.append(turn)

    @property
    def where(self) -> dict[int, str]:
        """id(outline message) -> where it sits in the client's body (for `explain`; built on demand)."""
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

    def _stand_in_for_stored_calls(self) -> None:
        visible = {c.get("id") for m in self.view for c in m.get("tool_calls", ())}
        stored: list[tuple[int, Message]] = [
            (i, m) for i, m in enumerate(self.view) if m.get("role") == "tool" and m.get("tool_call_id") not in visible
        ]
        if not stored:
            return
        calls = []
        seen: set[Any] = set()
        for _, result in stored:
            ident = result.get("tool_call_id")
            if ident in seen or not isinstance(ident, str):
                continue
            seen.add(ident)
            native = origin(result)
            kind = native.native.get("type", "function_call_output") if native is not None else "function_call_output"
            calls.append(
                {
                    "id": ident,
                    "type": "function",
                    "function": {"name": f"(stored {kind.removesuffix('_output')})", "arguments": None},
                    ORIGIN: Origin(virtual=True),
                }
            )
        stand_in: Message = {"role": "assistant", "content": [], "tool_calls": calls, ORIGIN: Origin(virtual=True)}
        self.view.insert(stored[0][0], stand_in)

    # ---- rendering ---------------------------------------------------------------------------

    def render(self, governed: list[Message]) -> dict[str, Any]:
        """The body's ``input`` (and ``instructions``), in the governed outline's order."""
        if self.left_alone is not None:
            return {}
        fields: dict[str, Any] = {}
        out: list[Any] = []
        call_types: dict[Any, Any] = {}  # the kinds of the calls the next outputs answer
        for message in governed:
            found = origin(message)
            if found is not None and found.virtual:
                continue
            if found is not None and found.native is _INSTRUCTIONS:
                fields["instructions"] = message.get("content")
            elif message.get("role") == "assistant":
                call_types = _call_types(message.get("tool_calls", ()))
                out.extend(self._turn(message, found))
            elif message.get("role") == "tool":
                out.append(self._output(message, call_types))
            elif id(message) in self._originals:
                out.append(native_of(message))
            elif message.get("role") == OPAQUE_ROLE:
                out.extend(_parts(message.get("content")))
            else:
                out.append(_message_item(message, found))
        fields["input"] = [*self.dead, *out]
        return fields

    def _turn(self, message: Message, found: Origin | None) -> list[Any]:
        """An assistant turn's items: the client's own where no step touched it, else rebuilt."""
        order = found.order if found is not None else ()
        if id(message) in self._originals and order:
            return list(order)
        parts = [said(part) if isinstance(part, str) else part for part in _parts(message.get("content"))]
        return interleave(parts, message.get("tool_calls"), order, _call_item)

    def _output(self, message: Message, call_types: Mapping[Any, Any]) -> Any:
        if id(message) in self._originals:  # (each holds the client's item under `ORIGIN`)
            native = native_of(message)
            if _kind_fits(native, call_types):
                return native
        return _output_item(message, call_types)


def said(text: str) -> dict[str, Any]:
    """Text an assistant turn gained from the rules (a bridge turn), as the message item it is."""
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _call_types(calls: Any) -> dict[Any, Any]:
    """call id -> the type of the client's call item, for an assistant message's outline calls."""
    found: dict[Any, Any] = {}
    for call in calls:
        item = native_of(call) if isinstance(call, Mapping) else None
        if isinstance(item, Mapping):
            found[call.get("id")] = item.get("type")
    return found


def _arguments(item: Mapping[str, Any]) -> Any:
    for key in ("arguments", "input", "action"):
        if key in item:
            return item[key]
    return None


def _parts(content: object) -> list[Any]:
    if isinstance(content, list):
        return content
    return [] if content is None else [content]


def _call_item(item: Any, call: Mapping[str, Any]) -> Any:
    if isinstance(item, Mapping):
        return item if item.get("call_id") == call.get("id") else {**item, "call_id": call.get("id")}
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    arguments = function.get("arguments")
    return {
        "type": "function_call",
        "call_id": call.get("id"),
        "name": function.get("name"),
        "arguments": arguments if isinstance(arguments, str) else "{}",
    }


def _output_item(message: Message, call_types: Mapping[Any, Any]) -> dict[str, Any]:
    """An output item for an outline tool message: the client's item with the outline's call id
    and output, or a new one of the kind its call needs (a backfilled result)."""
    native = native_of(message)
    ident = message.get("tool_call_id")
    content = message.get("content")
    call_type = call_types.get(ident)
    if isinstance(native, Mapping):
        item = dict(native)
        if isinstance(call_type, str):
            item["type"] = f"{call_type}_output"
        item["call_id" if "call_id" in item or item.get("type") != "local_shell_call_output" else "id"] = ident
        if content == "" and "output" not in native:
            item.pop("output", None)
        else:
            item["output"] = content
        return item
    kind = f"{call_type}_output" if isinstance(call_type, str) else "function_call_output"
    return {"type": kind, "call_id": ident, "output": content}


def _kind_fits(item: Any, call_types: Mapping[Any, Any]) -> bool:
    """Whether an output item is of the kind its call needs (or its call is held upstream)."""
    call_type = call_types.get(_call_id(item)) if isinstance(item, Mapping) else None
    return not isinstance(call_type, str) or item.get("type") == f"{call_type}_output"


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
