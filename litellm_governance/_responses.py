"""OpenAI Responses (``/v1/responses``): the client's ``input`` items as an outline, and back.

The steps work on chat-shaped messages (`_messages`). A Responses body becomes:

* ``instructions`` → one system message (counted like one);
* a ``message`` item (or a bare ``{"role", "content"}``) of role user, system or developer → that
  message, its content parts (``input_text``, ``input_image``, ``input_file`` …) kept as they are;
* a run of assistant-side items — ``reasoning`` (with ``encrypted_content``), assistant
  ``message`` items, server-tool items (``web_search_call`` …) and tool calls — → one assistant
  message: the calls (``function_call``, ``custom_tool_call``, ``local_shell_call`` and every other
  ``*_call`` item with a ``call_id``) as its ``tool_calls``, every other item as a content part,
  so a reasoning item stays with the call it precedes;
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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._compaction import COMPACTION, newest_compaction
from ._errors import InvalidRequestError
from ._messages import ORIGIN, TEXT_PARTS, Message, Origin, interleave, native_of, origin

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


def _call_name(item: Mapping[str, Any]) -> Any:
    name = item.get("name")
    if name is None and isinstance(item.get("type"), str):
        return item["type"].removesuffix("_call")  # local_shell, computer, shell, apply_patch …
    return name


class ResponsesOutline:
    """A Responses body (``input`` and ``instructions``) as chat-shaped outline messages."""

    format: Final = "responses"
    text_type: Final = "input_text"

    def __init__(self, items: object, instructions: object = None, previous_response_id: object = None) -> None:
        self.items = items
        self.count = 1 if isinstance(items, str) else len(items) if isinstance(items, list) else 0
        self.instructions = instructions
        #: The earlier history is stored upstream: only the visible input can be governed.
        self.history_upstream = isinstance(previous_response_id, str) and bool(previous_response_id)
        self._previous_response_id = previous_response_id
        #: The last `render` moved outputs up into an assistant run (see `reread`).
        self._regrouped = False
        #: Why the input is left alone (a string input), or None.
        self.left_alone: str | None = None
        self.parse_counts: dict[str, int] = {}
        self.view: list[Message] = []
        self._originals: set[int] = set()
        self._view_at: dict[int, int] | None = None  # id(outline message) -> its index (`_untouched_end`)
        self.dead: list[Any] = []
        #: id(client item) -> its index in `input` (to keep the client's order where nothing moved)
        self._position: dict[int, int] = {}
        self._has_instructions = instructions is not None and instructions != ""
        if self._has_instructions:
            self.view.append({"role": "system", "content": instructions, ORIGIN: Origin(_INSTRUCTIONS)})
        if isinstance(items, str):
            self.left_alone = "input is a string (a single user turn): nothing to govern"
            self.view.append({"role": "user", "content": items, ORIGIN: Origin(items)})  # counted, not governed
            return
        if isinstance(items, (bytes, Mapping)) or not isinstance(items, Sequence):
            raise InvalidRequestError(f"input must be a string or a list of items, got {type(items).__name__}")
        compaction = False
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidRequestError(
                    f"input[{index}] must be an item dict like {{'role': 'user', 'content': '...'}}, "
                    f"got {type(item).__name__}"
                )
            compaction = compaction or item.get("type") == COMPACTION
        self._position = {id(item): index for index, item in enumerate(items)}
        newest = newest_compaction(items, "responses") if compaction else None
        #: The items before the newest compaction: what the provider no longer needs.
        self.dead = list(items[: newest[0]]) if newest is not None else []
        view = self.view
        run: Message | None = None
        runs: list[tuple[Message, list[Any]]] = []  # each assistant run and its items, in order
        call_kinds: dict[Any, Any] = {}
        for index in range(len(self.dead), len(items)):
            item = items[index]
            kind = item.get("type")
            if newest is not None and index == newest[0]:
                view.append({"role": OPAQUE_ROLE, "content": [item], ORIGIN: Origin(item, opener=True)})
                run = None
                continue
            # Assistant-side: an assistant message, a reasoning or MCP item, or any `*_call` (inlined:
            # this runs once per item).
            if kind is None or kind == "message":
                assistant, call_kind = item.get("role") == "assistant", False
            else:
                call_kind = isinstance(kind, str) and kind.endswith("_call")
                assistant = kind in _ASSISTANT_ITEMS or call_kind
            if assistant:
                if run is None:
                    run = {"role": "assistant", "content": [], ORIGIN: None}  # its origin: below
                    runs.append((run, []))
                    view.append(run)
                runs[-1][1].append(item)
                if call_kind and "call_id" in item:
                    call_kinds[item.get("call_id")] = kind
                    call = {
                        "id": item.get("call_id"),
                        "type": "function",
                        "function": {"name": _call_name(item), "arguments": _arguments(item)},
                        ORIGIN: item,
                    }
                    run.setdefault("tool_calls", []).append(call)
                else:
                    run["content"].append(item)
                continue
            run = None
            if isinstance(kind, str) and kind.endswith("_call_output"):
                ident = _call_id(item)
                answered = call_kinds.get(ident)
                if isinstance(answered, str) and kind != f"{answered}_output":
                    # an output of the wrong kind answers nothing: rendered as its call's kind
                    self.parse_counts["outputs_retyped"] = self.parse_counts.get("outputs_retyped", 0) + 1
                view.append(
                    {
                        "role": "tool",
                        "tool_call_id": ident,
                        "content": item.get("output", ""),
                        ORIGIN: item,
                    }
                )
            elif kind in (None, "message") and isinstance(item.get("role"), str):
                view.append({"role": item["role"], "content": item.get("content"), ORIGIN: item})
            else:
                view.append({"role": OPAQUE_ROLE, "content": [item], ORIGIN: item})
        for message, order in runs:
            message[ORIGIN] = Origin(None, tuple(order))
        if self.history_upstream:
            self._stand_in_for_stored_calls()
        self._originals = {id(m) for m in view}

    @property
    def where(self) -> dict[int, str]:
        """id(outline message) -> where it sits in the client's body (for `explain`; built on demand).
        The outline holds the items from the newest compaction on, in order: an assistant run
        its items, every other message one."""
        found: dict[int, str] = {}
        index = len(self.dead)
        for message in self.view:
            native = origin(message)
            if native is None or native.virtual:
                continue
            if native.native is _INSTRUCTIONS:
                found[id(message)] = "instructions"
            elif self.left_alone is not None:
                found[id(message)] = "input"
            elif native.native is None and len(native.order) > 1:  # an assistant run of several items
                found[id(message)] = f"input[{index}..{index + len(native.order) - 1}]"
                index += len(native.order)
            else:
                found[id(message)] = f"input[{index}]"
                index += 1
        return found

    def source(self) -> tuple[list[Any], object] | None:
        """The items and instructions as sent (`_formats.Outline.source`); None for a string input,
        a history stored upstream, or one that a compaction opens."""
        if self.left_alone is not None or self.history_upstream or self.dead or type(self.items) is not list:
            return None
        return self.items, self.instructions

    def prefix(self, items: int) -> int:
        """Outline messages read from the first `items` items alone: all up to the one holding the
        last of them, unless that one is an assistant run the next items continue."""
        position, view = self._position, self.view
        held = len(view)
        while held > 0:
            pieces = _pieces(view[held - 1].get(ORIGIN))
            if not pieces or position.get(id(pieces[0]), -1) < items:
                return held if not pieces or position.get(id(pieces[-1]), -1) < items else held - 1
            held -= 1
        return 0

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
        """The body's ``input`` (and ``instructions``). The outputs answering an assistant run's
        calls come right after their call's group of calls, before the run's next item — unless
        the run and its outputs are the client's own, untouched: then they keep the client's order
        (Codex puts an assistant message between a call and its output)."""
        if self.left_alone is not None:
            return {}
        self._regrouped = False
        # Untouched messages render as the very items, in the client's order (stand-ins for calls
        # stored upstream are virtual), unless an output was read as not of its call's kind
        # (rendered as that kind: the only repair reading counts).
        as_sent = not self.parse_counts
        if governed is self.view and as_sent:  # nothing changed: the client's own, as sent
            fields: dict[str, Any] = {"instructions": self.instructions} if self._has_instructions else {}
            fields["input"] = list(self.items)  # type: ignore[call-overload]
            return fields
        call_types: dict[Any, Any] = {}  # the kinds of the calls the next outputs answer
        originals = self._originals
        # Untouched stretches (`_untouched_end`); not with the history upstream: its calls' stand-ins are no item.
        stretches = as_sent and not self.history_upstream
        out: list[Any] = []
        fields = {}
        index, count = 0, len(governed)
        while index < count:
            message = governed[index]
            index += 1
            # (`origin`, inlined: this loop runs once per message; most hold the client's item alone)
            held = message.get(ORIGIN)
            found = held if isinstance(held, Origin) else None
            native = found.native if found is not None else held
            unchanged = id(message) in originals
            if found is not None and found.virtual:
                continue
            if native is _INSTRUCTIONS:
                fields["instructions"] = message.get("content")
                continue
            role = message.get("role")
            if role == "assistant":
                found = origin(message)  # (from reading, a run's own `Origin`: it holds the run's order)
                if unchanged and stretches and found is not None:
                    end, rewritten = self._untouched_end(governed, index - 1)
                    if end >= index:  # the stretch, as the client's items from this run's first on
                        first, last = self._position[id(found.order[0])], self._last_item(governed[end - 1])
                        stretch = self.items[first : last + 1]  # type: ignore[index]
                        for at in rewritten:  # (the kind an output has is its call's: `as_sent`)
                            place = self._position[id(native_of(governed[at]))] - first
                            stretch[place] = _output_item(governed[at], {})
                        out.extend(stretch)
                        index = end
                        while governed[end - 1].get("role") != "assistant":  # (the stretch begins with one)
                            end -= 1
                        call_types = _call_types(governed[end - 1].get("tool_calls", ()))  # (for outputs after it)
                        continue
                call_types = _call_types(message.get("tool_calls", ()))
                if unchanged and found is not None:
                    run = list(found.order)
                else:
                    order = found.order if found is not None else ()
                    run = interleave(_parts(message.get("content")), message.get("tool_calls"), order, _call_item)
                outputs: list[tuple[Any, Any]] = []  # (call id, output item) of the results that follow
                while index < count and governed[index].get("role") == "tool":
                    outputs.append((governed[index].get("tool_call_id"), self._output(governed[index], call_types)))
                    index += 1
                if _answers_last_calls(run, outputs) or (
                    unchanged and self._in_client_order([*run, *(item for _, item in outputs)])
                ):
                    out.extend(run)  # (both orders below agree where the outputs answer the run's last calls)
                    out.extend(item for _, item in outputs)
                else:
                    placed, regrouped = _place_outputs(run, outputs)
                    out.extend(placed)
                    self._regrouped = self._regrouped or regrouped
            elif role == "tool":
                out.append(self._output(message, call_types))
            elif unchanged and held is not None:
                out.append(native)
            elif role == OPAQUE_ROLE:
                out.extend(_parts(message.get("content")))
            else:
                out.append(_message_item(message, origin(message)))
        fields["input"] = [*self.dead, *out]
        return fields

    def _untouched_end(self, governed: list[Message], start: int) -> tuple[int, list[int]]:
        """Where the stretch of `governed` that begins with the untouched assistant run at `start` and
        is the outline's own messages in a row ends (exclusive), short of a run whose outputs go on
        past it: that stretch renders as the client's items from the run's first to its last message's
        last, as sent. (Each untouched message renders as its client's own: a run as its items, its
        outputs after it in the client's order, every other message its item, an output of the kind its
        call needs where no output was read otherwise; and the outline's messages in a
        row hold the client's items in a row.) An output a step rewrote in place (a stub: the same
        item and call id, new content) stays in the stretch, rendered anew where the client's sat, as
        long as the outputs of its run answer the run's last calls (else they are placed after their
        own calls: the stretch stops short of that run). `start` itself when no such stretch holds more
        than the run with outputs that are not all untouched; and the rewritten outputs' places."""
        at = self._view_at
        if at is None:
            at = self._view_at = {id(m): k for k, m in enumerate(self.view)}
        view, count = self.view, len(governed)
        k = at[id(governed[start])] - start
        end = start + 1
        limit = min(count, len(view) - k)
        rewritten: list[int] = []
        while end < limit:
            message, own = governed[end], view[end + k]
            if message is not own:
                if not _rewrites(message, own):
                    break
                rewritten.append(end)
            end += 1
        if end < count and governed[end].get("role") == "tool":  # a group going on past the stretch
            while end > start and governed[end - 1].get("role") == "tool":
                end -= 1
            if governed[end - 1].get("role") == "assistant":
                end -= 1
        checked = -1
        for place in rewritten:
            if place >= end:
                break
            run = place - 1
            while governed[run].get("role") == "tool":
                run -= 1
            if run == checked or governed[run].get("role") != "assistant":
                continue  # (outputs after anything but a run render in place)
            checked, after = run, run + 1
            while after < end and governed[after].get("role") == "tool":
                after += 1
            order = list(governed[run][ORIGIN].order)
            if not _answers_last_calls(order, [(governed[j].get("tool_call_id"), None) for j in range(run + 1, after)]):
                end = run
                break
        return end, [place for place in rewritten if place < end]

    def _last_item(self, message: Message) -> int:
        """The position in ``input`` of the last client item an untouched outline message stands for."""
        return self._position[id(_pieces(message[ORIGIN])[-1])]

    def reread(self, fields: Mapping[str, Any]) -> ResponsesOutline | None:
        """The outline of the rendered `fields` when the last `render` regrouped an assistant run
        (else None). A run whose calls are split by other items (reasoning, an assistant message)
        is one assistant turn here, its outputs after it, as the client sent them; once anything in
        it changed, its outputs go right after their own calls (strict providers and LiteLLM's
        translation to chat need them there). Read again, the request then has one turn per part
        of the run, and a result of an earlier part is no longer the newest exchange: governing
        the output again would do more. `run` governs the re-read outline once, so the output is
        what a second pass leaves alone."""
        if not self._regrouped:
            return None
        return ResponsesOutline(
            fields.get("input", self.items), fields.get("instructions", self.instructions), self._previous_response_id
        )

    def _in_client_order(self, items: list[Any]) -> bool:
        """Whether `items` are the client's own, in the order and contiguous as the client sent them."""
        position = self._position
        expected: int | None = None
        for item in items:
            at = position.get(id(item))
            if at is None or (expected is not None and at != expected):
                return False
            expected = at + 1
        return True

    def _output(self, message: Message, call_types: Mapping[Any, Any]) -> Any:
        if id(message) in self._originals:  # (each holds the client's item under `ORIGIN`)
            native = native_of(message)
            if _kind_fits(native, call_types):
                return native
        return _output_item(message, call_types)


def _pieces(found: object) -> tuple[Any, ...]:
    """The client's items an outline message stands for (what it holds under `ORIGIN`): an assistant
    run's, in order, or its one."""
    if not isinstance(found, Origin):
        return () if found is None else (found,)
    return found.order if found.native is None else (found.native,)


def _rewrites(message: Message, own: Message) -> bool:
    """Whether `message` is the outline's output `own` rewritten in place by a step: the same client
    item and call id (a stub, a truncation), only its content new."""
    return (
        own.get("role") == "tool" == message.get("role")
        and message.get(ORIGIN) is own.get(ORIGIN) is not None
        and message.get("tool_call_id") == own.get("tool_call_id")
    )


def _call_types(calls: Any) -> dict[Any, Any]:
    """call id -> the type of the client's call item, for an assistant message's outline calls."""
    found: dict[Any, Any] = {}
    for call in calls:
        if isinstance(call, (dict, Mapping)):  # (dict first: no ABC check for a dict)
            item = native_of(call)
            if isinstance(item, (dict, Mapping)):
                found[call.get("id")] = item.get("type")
    return found


def _answers_last_calls(run: list[Any], outputs: list[tuple[Any, Any]]) -> bool:
    """Whether every output answers a call of the run's last group of consecutive calls (Codex: a
    reasoning item, then its calls): then `_place_outputs` puts them after the run in their order,
    which is also the client's order when the run and its outputs are the client's, untouched."""
    last: set[Any] = set()
    position = len(run)
    while position > 0:
        item = run[position - 1]
        if not (isinstance(item, (dict, Mapping)) and _is_call(item)):
            break
        last.add(item.get("call_id"))
        position -= 1
    return bool(last) and all(ident in last for ident, _ in outputs)


def _place_outputs(run: list[Any], outputs: list[tuple[Any, Any]]) -> tuple[list[Any], bool]:
    """An assistant run's items with each output right after the group of consecutive calls that
    holds its call (outputs of calls the run does not hold — stored upstream — after the run), and
    whether an output went inside the run (before its last item)."""
    if not outputs:
        return run, False
    group_end: dict[Any, int] = {}  # call id -> index of the last call of its group
    start = None
    for position, item in enumerate([*run, None]):
        is_call = isinstance(item, (dict, Mapping)) and _is_call(item)
        if is_call and start is None:
            start = position
        elif not is_call and start is not None:
            for member in run[start:position]:
                group_end[member.get("call_id")] = position - 1
            start = None
    after: dict[int, list[Any]] = {}
    rest: list[Any] = []
    for ident, item in outputs:
        at = group_end.get(ident)
        (after.setdefault(at, []) if at is not None else rest).append(item)
    placed: list[Any] = []
    for position, item in enumerate(run):
        placed.append(item)
        placed.extend(after.get(position, ()))
    return placed + rest, any(at < len(run) - 1 for at in after)


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
    call_type = call_types.get(_call_id(item)) if isinstance(item, (dict, Mapping)) else None
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
