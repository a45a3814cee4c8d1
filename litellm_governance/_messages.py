"""Small, pure helpers over the messages the steps work on (plain dicts).

The steps see every request as chat-shaped messages: ``role`` (system, developer, user, assistant,
tool), ``content``, assistant ``tool_calls`` (``id``, ``function.name``) and tool ``tool_call_id``.
For a chat request those are the client's own messages. For the other formats (`_anthropic`,
`_responses`) they are an *outline*: each outline message holds the client's own blocks or items
as its content parts, and under the key `ORIGIN` which of the client's objects it stands for (an
`Origin`, or the object itself where that is all there is to say: `origin` reads either), so that
rendering re-emits those objects untouched unless a step edited them.
`ORIGIN` is not a string, so it can never collide with a key a client sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeAlias

from ._errors import InvalidRequestError

__all__ = [
    "ORIGIN",
    "TRACE",
    "Message",
    "Origin",
    "call_id",
    "call_name",
    "content_chars",
    "has_cache_control",
    "is_empty_content",
    "is_instruction",
    "is_opener",
    "is_system",
    "merge_content",
    "native_of",
    "origin",
    "tool_calls",
    "unnamed_field",
    "validate_messages",
    "validate_tools",
]

Message: TypeAlias = dict[Any, Any]

SYSTEM_ROLES: Final = frozenset({"system", "developer"})
#: Content part types that hold plain text in the three formats (chat and Anthropic ``text``,
#: Responses ``input_text`` / ``output_text``).
TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})


class _OriginKey:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ORIGIN"


#: Key of an outline message's `Origin` (an object, not a string: no client key can equal it).
ORIGIN: Final = _OriginKey()


class _TraceKey:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TRACE"


#: Key under which `explain` tags each input message with its index (a tuple of indexes once
#: merged); steps copy it along with the message, so every output says where it came from.
TRACE: Final = _TraceKey()


class Origin(NamedTuple):
    """Which of the client's own objects an outline message stands for. (A named tuple, not a frozen
    dataclass: a tuple is built three times faster.) Where it would say no more than the object
    (no order, no flag: most of a body's blocks and items), a reader stores the object itself under
    `ORIGIN` instead, and `origin` makes the Origin only when asked: building one for every block
    and item took a quarter of reading a 400-message body."""

    #: The client's message, block or item (None for one that stands for nothing rendered).
    native: Any = None
    #: An assistant turn: the client's pieces in their order, content and calls interleaved
    #: (rendering puts surviving calls back between the content parts where they were).
    order: tuple[Any, ...] = ()
    #: A user message that came with tool results (Anthropic): its text continues a tool loop
    #: (reminders, interjections) rather than setting a new task.
    continuation: bool = False
    #: Stands for history held upstream (Responses ``previous_response_id``): never rendered.
    virtual: bool = False
    #: Opens the history the provider reads (the turn or item holding the newest compaction, see
    #: `_compaction`): kept and counted like the system prompt, and a conversation may start with it.
    opener: bool = False

    def merged(self, later: Origin) -> Origin:
        """The origin of this message merged with a `later` one."""
        return Origin(
            self.native, self.order + later.order, self.continuation and later.continuation, opener=self.opener
        )


def origin(message: Mapping[Any, Any]) -> Origin | None:
    """The outline origin of `message` (None for a chat message or one a step created)."""
    found = message.get(ORIGIN)
    if found is None or isinstance(found, Origin):
        return found
    return Origin(found)  # the client's object, stored alone (see `Origin`)


def native_of(message: Mapping[Any, Any]) -> Any:
    """``origin(message).native`` without making the `Origin`: the client's object `message` stands
    for (None for a chat message, one a step created, or an assistant run of several items)."""
    found = message.get(ORIGIN)
    return found.native if isinstance(found, Origin) else found


def interleave(
    parts: Sequence[Any], calls: object, order: Sequence[Any], make_call: Callable[[Any, Mapping[Any, Any]], Any]
) -> list[Any]:
    """An assistant turn's pieces for rendering: `parts` (its content, possibly edited or merged)
    in their order, with each surviving call of `calls` put back where its own piece stood in the
    client's `order`; ``make_call(piece, call)`` renders a call (``piece`` None for a new call).
    Parts and calls are matched to `order` by identity, so whatever a step did not touch is the
    client's own object."""
    by_piece: dict[int, tuple[Any, Any]] = {}
    loose: list[tuple[Any, Any]] = []
    for call in calls if type(calls) is list else ():
        piece = native_of(call) if isinstance(call, Mapping) else None
        if piece is not None:
            by_piece[id(piece)] = (piece, call)
        else:
            loose.append((None, call))
    position = {id(piece): i for i, piece in enumerate(order)}
    out: list[Any] = []
    done = 0
    for part in parts:
        at = position.get(id(part))
        if at is not None and at >= done:
            for piece in order[done:at]:
                entry = by_piece.pop(id(piece), None)
                if entry is not None:
                    out.append(make_call(*entry))
            done = at + 1
        out.append(part)
    for piece in order[done:]:
        entry = by_piece.pop(id(piece), None)
        if entry is not None:
            out.append(make_call(*entry))
    out.extend(make_call(*entry) for entry in (*by_piece.values(), *loose))
    return out


def validate_messages(messages: object) -> list[Message]:
    """Check that `messages` is a chat message list; return it typed. Damage inside is fine."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidRequestError(f"messages must be a list of message dicts, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequestError(
                f"messages[{index}] must be a dict like {{'role': 'user', 'content': '...'}}, "
                f"got {type(message).__name__}"
            )
    return list(messages)


#: Fields the rules compare with names they know (in a set, or as a dict's key): a list or an
#: object there names nothing, and makes such a comparison raise.
_NAME_FIELDS: Final = ("type", "role", "id", "call_id", "tool_call_id", "tool_use_id", "name")
#: What a message, block or item holds for its tool, not for the rules: never looked into.
_TOOLS_OWN: Final = frozenset({"input", "arguments", "action", "parameters", "metadata"})


def unnamed_field(value: object, where: str) -> str | None:
    """Where in `value` (a history, a system prompt) a message, part, block or item has a list or
    an object as its ``type``, ``role`` or id — fields every provider sets to a string: the first
    such, as ``where[3].content[0].type`` (None: nowhere). A call's arguments are not looked into
    (what they hold is the tool's). For a clear error where such a field made a rule raise; it walks
    the whole value, so it is not run on a request that governs."""
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
    """A system message's content as a user message's: between a label and an end mark,
    nothing else changed."""
    if isinstance(content, str):
        return f"{SYSTEM_NOTE_LABEL}\n{content}\n{SYSTEM_NOTE_END}"
    parts = content if isinstance(content, list) else [] if content is None else [content]
    return [{"type": text_type, "text": SYSTEM_NOTE_LABEL}, *parts, {"type": text_type, "text": SYSTEM_NOTE_END}]


def _edge_text(content: object, last: bool) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        part = content[-1] if last else content[0]
        text = part.get("text") if isinstance(part, Mapping) else None
        return text if isinstance(text, str) else None
    return None


def is_opener(message: Mapping[Any, Any]) -> bool:
    """The message that opens the history the provider reads: the newest compaction's (see
    `Origin.opener`)."""
    found = origin(message)
    return found is not None and found.opener


def is_instruction(message: Mapping[Any, Any]) -> bool:
    """A system message, a user message made only of system notes (see `system_note`), or the
    compaction that opens the history (`is_opener`): counted and kept like the system prompt,
    never taken for the task. A note merged with the user's own text is the user's message."""
    role = message.get("role")
    if isinstance(role, str) and role in SYSTEM_ROLES:  # `is_system`, inlined: called for every message
        return True
    found = message.get(ORIGIN)
    if isinstance(found, Origin) and found.opener:  # `is_opener`
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
    if type(call) is dict or isinstance(call, Mapping):
        ident = call.get("id")
        if type(ident) is str and ident:
            return ident
    return None


def call_name(call: object) -> str | None:
    """A tool call's function name, when it is a non-empty string."""
    if type(call) is dict or isinstance(call, Mapping):
        function = call.get("function")
        if type(function) is dict or isinstance(function, Mapping):
            name = function.get("name")
            if type(name) is str and name:
                return name
    return None


def content_chars(content: object) -> int:
    """Characters of text in a message's content (text parts only for lists)."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                total += len(part["text"])
            elif isinstance(part, str):
                total += len(part)
        return total
    return 0


def is_empty_content(content: object) -> bool:
    """No content at all: None, an empty or blank string, an empty list, or a list of text parts
    that are all blank."""
    if content is None:
        return True
    if isinstance(content, str):
        return not content or content.isspace()  # (`not content.strip()`, without copying the text)
    if isinstance(content, list):
        return all(is_blank_part(part) for part in content)
    return False


def is_blank_part(part: object) -> bool:
    """A text part with no text (providers that reject empty text reject these), or a Responses
    message item in an assistant turn with nothing but such parts."""
    if isinstance(part, str):
        return not part or part.isspace()
    if isinstance(part, (dict, Mapping)) and part.get("type") in TEXT_PARTS:  # (a dict: no ABC check)
        text = part.get("text")
        return text is None or (isinstance(text, str) and (not text or text.isspace()))
    if isinstance(part, Mapping) and part.get("type") == "message" and isinstance(part.get("content"), list):
        return all(is_blank_part(inner) for inner in part["content"])
    return False


def has_cache_control(message: Mapping[str, Any]) -> bool:
    """Whether the message carries an explicit prompt-cache breakpoint (on itself or a part)."""
    if message.get("cache_control"):
        return True
    content = message.get("content")
    if type(content) is list:
        return any((type(part) is dict or isinstance(part, Mapping)) and part.get("cache_control") for part in content)
    return False


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
