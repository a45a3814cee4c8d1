"""Small, pure helpers over the messages the steps work on (plain dicts), and the `Outline` base.

The steps see every request as chat-shaped messages: ``role`` (system, developer, user, assistant,
tool), ``content``, assistant ``tool_calls`` (``id``, ``function.name``) and tool ``tool_call_id``.
For a chat request those are the client's own messages. For the other formats (`_anthropic`,
`_responses`) they are an *outline*: each outline message holds the client's own blocks or items
as its content parts, and under the key `ORIGIN` which of the client's objects it stands for (an
`Origin`, or the object itself where that is all there is to say: `origin` reads either), so that
rendering re-emits those objects untouched unless a step edited them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeAlias

from ._errors import InvalidRequestError

Message: TypeAlias = dict[Any, Any]

SYSTEM_ROLES: Final = frozenset({"system", "developer"})
#: Content part types that hold plain text in the three formats (chat and Anthropic ``text``,
#: Responses ``input_text`` / ``output_text``).
TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})


class _Key:
    """A message key that is not a string, so no key a client sent can equal it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: Key of an outline message's `Origin`.
ORIGIN: Final = _Key("ORIGIN")
#: Key under which `explain` tags each input message with its index (a tuple of indexes once
#: merged); steps copy it along with the message, so every output says where it came from.
TRACE: Final = _Key("TRACE")


class Origin(NamedTuple):
    """Which of the client's own objects an outline message stands for. Where it would say no more
    than the object (most blocks and items), a reader stores the object itself under `ORIGIN`, and
    `origin` makes the Origin only when asked."""

    #: The client's message, block or item (None for one that stands for nothing rendered).
    native: Any = None
    #: An assistant turn: the client's pieces (content and calls) in their order (see `interleave`).
    order: tuple[Any, ...] = ()
    #: A user message that came with tool results (Anthropic): it continues a loop, sets no new task.
    continuation: bool = False
    #: Stands for history held upstream (Responses ``previous_response_id``): never rendered.
    virtual: bool = False
    #: Opens the history the provider reads (the newest compaction's, `_compaction`): kept and counted
    #: like the system prompt, and a conversation may start with it.
    opener: bool = False

    def merged(self, later: Origin) -> Origin:
        """The origin of this message merged with a `later` one."""
        return Origin(
            self.native, self.order + later.order, self.continuation and later.continuation, opener=self.opener
        )


def origin(message: Mapping[Any, Any]) -> Origin | None:
    """The outline origin of `message` (None for a chat message or one a step created)."""
    found = message.get(ORIGIN)
    return found if found is None or isinstance(found, Origin) else Origin(found)


def native_of(message: Mapping[Any, Any]) -> Any:
    """``origin(message).native`` without making the `Origin`: the client's object `message` stands
    for (None for a chat message, one a step created, or an assistant run of several items)."""
    found = message.get(ORIGIN)
    return found.native if isinstance(found, Origin) else found


class Outline:
    """A request read into chat-shaped messages for the steps (`view`), and rendered back in its
    own format (`render`); one subclass per format (`_formats`)."""

    format: str
    #: Type of the text parts a merge makes of string content.
    text_type = "text"
    #: The view's messages are the outline's own dicts (False: the client's, never to be written to).
    owns_view = True
    #: Why the history is left alone (None: it is governed).
    left_alone: str | None = None
    #: The earlier history is stored upstream: only what the request holds can be governed.
    history_upstream = False

    def __init__(self, count: int) -> None:
        #: How many messages (or input items) the client sent.
        self.count = count
        #: The request as chat-shaped messages.
        self.view: list[Message] = []
        #: Repairs made while reading the request (counted in the report like a step's).
        self.parse_counts: dict[str, int] = {}
        #: What comes before the newest compaction (`_compaction`): sent as it came, never governed.
        self.dead: list[Any] = []

    def render(self, governed: list[Message]) -> dict[str, Any]:
        """The request fields that carry the governed history, in the request's own format."""
        raise NotImplementedError


def interleave(
    parts: Sequence[Any], calls: object, order: Sequence[Any], make_call: Callable[[Any, Mapping[Any, Any]], Any]
) -> list[Any]:
    """An assistant turn's pieces for rendering: `parts` (its content, possibly edited or merged)
    in their order, with each surviving call of `calls` put back where its own piece (the client's
    block or item it was read from) stood in the client's `order`, as ``make_call(piece, call)``.
    Parts and pieces are matched to `order` by identity, so whatever a step did not touch is the
    client's own object."""
    pending = {id(native_of(call)): (native_of(call), call) for call in (calls if type(calls) is list else ())}
    position = {id(piece): i for i, piece in enumerate(order)}
    out: list[Any] = []
    done = 0
    for part in parts:
        at = position.get(id(part))
        if at is not None and at >= done:
            out.extend(make_call(*entry) for piece in order[done:at] if (entry := pending.pop(id(piece), None)))
            done = at + 1
        out.append(part)
    out.extend(make_call(*entry) for piece in order[done:] if (entry := pending.pop(id(piece), None)))
    out.extend(make_call(*entry) for entry in pending.values())
    return out


def validate_list(value: object, field: str, expected: str) -> list[Any]:
    """`value` as a list of dicts, or an error saying that `field` must be `expected`. Damage
    inside the dicts is fine."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InvalidRequestError(f"{field} must be {expected}, got {type(value).__name__}")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidRequestError(
                f"{field}[{index}] must be a dict like {{'role': 'user', 'content': '...'}}, got {type(item).__name__}"
            )
    return list(value)


#: Fields the rules compare with names they know (in a set, or as a dict's key): a list or an
#: object there names nothing, and makes such a comparison raise.
_NAME_FIELDS: Final = ("type", "role", "id", "call_id", "tool_call_id", "tool_use_id", "name")
#: What a message, block or item holds for its tool, not for the rules: never looked into.
_TOOLS_OWN: Final = frozenset({"input", "arguments", "action", "parameters", "metadata"})


def unnamed_field(value: object, where: str) -> str | None:
    """Where in `value` (a history, a system prompt) a message, part, block or item has a list or
    an object as its ``type``, ``role`` or id — fields every provider sets to a string: the first
    such, as ``where[3].content[0].type`` (None: nowhere). A call's arguments are not looked into.
    For a clear error where such a field made a rule raise (it walks the whole value)."""
    stack: list[tuple[object, str]] = [(value, where)]
    seen: set[int] = set()
    while stack:
        item, path = stack.pop()
        if id(item) in seen:  # (a Python caller's value may hold itself)
            continue
        seen.add(id(item))
        if isinstance(item, Mapping):
            for field in _NAME_FIELDS:
                if isinstance(item.get(field), (list, set, Mapping)):
                    return f"{path}.{field}"
            inner = [(v, f"{path}.{k}") for k, v in item.items() if k not in _TOOLS_OWN]
        elif isinstance(item, (list, tuple)):
            inner = [(v, f"{path}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        stack.extend(reversed([(v, at) for v, at in inner if isinstance(v, (Mapping, list, tuple))]))
    return None


def validate_tools(tools: object) -> list[Any] | None:
    """Check the request's `tools`: None or a list of schemas."""
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidRequestError(f"tools must be a list of tool schemas or None, got {type(tools).__name__}")
    return list(tools)


def is_system(message: Mapping[str, Any]) -> bool:
    role = message.get("role")
    return isinstance(role, str) and role in SYSTEM_ROLES


#: First and last line of a mid-conversation system message turned into a user message.
SYSTEM_NOTE_LABEL: Final = "[System note]"
SYSTEM_NOTE_END: Final = "[/System note]"


def system_note(content: object, text_type: str = "text") -> object:
    """A system message's content as a user message's: between a label and an end mark."""
    if isinstance(content, str):
        return f"{SYSTEM_NOTE_LABEL}\n{content}\n{SYSTEM_NOTE_END}"
    parts = content if isinstance(content, list) else [] if content is None else [content]
    return [{"type": text_type, "text": SYSTEM_NOTE_LABEL}, *parts, {"type": text_type, "text": SYSTEM_NOTE_END}]


def _edge_text(content: object, last: bool) -> str | None:
    if isinstance(content, list) and content:
        part = content[-1] if last else content[0]
        content = part.get("text") if isinstance(part, Mapping) else None
    return content if isinstance(content, str) else None


def is_opener(message: Mapping[Any, Any]) -> bool:
    """The message that opens the history the provider reads (`Origin.opener`)."""
    found = message.get(ORIGIN)
    return isinstance(found, Origin) and found.opener


def is_instruction(message: Mapping[Any, Any]) -> bool:
    """A system message, a user message made only of system notes (see `system_note`), or the
    compaction that opens the history (`is_opener`): counted and kept like the system prompt,
    never taken for the task. A note merged with the user's own text is the user's message."""
    role = message.get("role")
    found = message.get(ORIGIN)  # (`is_system` and `is_opener` inlined: called for every message)
    if (isinstance(role, str) and role in SYSTEM_ROLES) or (isinstance(found, Origin) and found.opener):
        return True
    if role != "user":
        return False
    content = message.get("content")
    first, last = _edge_text(content, last=False), _edge_text(content, last=True)
    return (
        first is not None
        and last is not None
        and (first == SYSTEM_NOTE_LABEL or first.startswith(SYSTEM_NOTE_LABEL + "\n"))
        and (last == SYSTEM_NOTE_END or last.endswith("\n" + SYSTEM_NOTE_END))
    )


def tool_calls(message: Mapping[str, Any]) -> list[Any]:
    """The assistant message's tool calls ([] when absent or not a list)."""
    calls = message.get("tool_calls")
    return calls if type(calls) is list else []


def call_id(call: object) -> str | None:
    """A tool call's id, when it is a non-empty string."""
    ident = call.get("id") if type(call) is dict or isinstance(call, Mapping) else None
    return ident if type(ident) is str and ident else None


def call_name(call: object) -> str | None:
    """A tool call's function name, when it is a non-empty string."""
    function = call.get("function") if type(call) is dict or isinstance(call, Mapping) else None
    name = function.get("name") if type(function) is dict or isinstance(function, Mapping) else None
    return name if type(name) is str and name else None


def content_chars(content: object) -> int:
    """Characters of text in a message's content (text parts only for lists)."""
    if isinstance(content, str):
        return len(content)
    total = 0
    for part in content if isinstance(content, list) else ():
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            total += len(part["text"])
        elif isinstance(part, str):
            total += len(part)
    return total


def is_empty_content(content: object) -> bool:
    """No content at all: None, an empty or blank string, an empty list, or a list of text parts
    that are all blank."""
    if isinstance(content, list):
        return all(is_blank_part(part) for part in content)
    return content is None or (isinstance(content, str) and is_blank_part(content))


def is_blank_part(part: object) -> bool:
    """A text part with no text (providers that reject empty text reject these), or a Responses
    message item with nothing but such parts."""
    if (type(part) is dict or isinstance(part, Mapping)) and part.get("type") in TEXT_PARTS:
        part = "" if part.get("text") is None else part.get("text")
    elif isinstance(part, Mapping) and part.get("type") == "message" and isinstance(part.get("content"), list):
        return all(is_blank_part(inner) for inner in part["content"])
    return isinstance(part, str) and (not part or part.isspace())


def has_cache_control(message: Mapping[str, Any]) -> bool:
    """Whether the message carries an explicit prompt-cache breakpoint (on itself or a part)."""
    content = message.get("content")
    return bool(message.get("cache_control")) or (
        type(content) is list
        and any((type(part) is dict or isinstance(part, Mapping)) and part.get("cache_control") for part in content)
    )


def _as_parts(content: object, text_type: str) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str):
        return [{"type": text_type, "text": content}] if content else []
    if isinstance(content, Mapping):
        return [content]  # a lone part: kept as it is
    text = str(content) if isinstance(content, (int, float, bool)) else repr(type(content))
    return [{"type": text_type, "text": text}]


def merge_content(first: object, second: object, text_type: str = "text") -> object:
    """Both contents, in order, losing nothing: strings joined by a blank line, lists concatenated
    (a string next to a list becomes a part of `text_type`: ``input_text`` in the Responses format)."""
    if first is None or first == "":
        return second if second is not None else first
    if second is None or second == "":
        return first
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    return _as_parts(first, text_type) + _as_parts(second, text_type)
