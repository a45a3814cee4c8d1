"""Where things live in LiteLLM's requests and settings: the format each call type carries, each
format's history and metadata fields, and the key the plugin's options and overrides sit under."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from .._formats import FORMATS, Format, spec_for_call_type

__all__ = [
    "FORMAT_OF_CALL",
    "HISTORY",
    "METADATA",
    "SETTINGS_KEY",
    "HistoryFacts",
    "HistoryScan",
    "call_id_of",
    "declared_size",
    "format_of",
    "metadata_key",
    "scan_history",
]

#: The key in ``litellm.callback_settings`` (the proxy config's ``callback_settings:``) with our
#: options, and in a request's metadata with its per-request overrides.
SETTINGS_KEY: Final = "governance"
# The rest is read off the format descriptions (`_formats.FORMATS`), the one place that knows them.
#: LiteLLM call types (strings; str enums in the deployment hook) -> the request format they carry.
FORMAT_OF_CALL: Final[Mapping[str, Format]] = {
    call_type: spec.name for spec in FORMATS.values() for call_type in spec.call_types
}
#: Where each format keeps its history (the field a pass is keyed on).
HISTORY: Final[Mapping[Format, str]] = {spec.name: spec.history for spec in FORMATS.values()}
#: Where each format keeps LiteLLM's own metadata (Anthropic's and OpenAI's ``metadata`` is the
#: provider's field on /v1/messages and /v1/responses: nothing of ours may go there).
METADATA: Final[Mapping[Format, str]] = {spec.name: spec.metadata for spec in FORMATS.values()}
# The metadata field of /v1/messages and /v1/responses requests (`METADATA`).
_CLIENT_METADATA: Final = "litellm_metadata"


def metadata_key(request: Mapping[str, Any], fmt: Format) -> str:
    """The field of `request` with the LiteLLM metadata the plugin reads (per-request overrides) and
    writes (its pass state and report): the format's own (`METADATA`), except on the chat call
    LiteLLM makes when it translates a ``/v1/messages`` or ``/v1/responses`` request for a chat
    deployment. That inner call has no ``metadata`` and carries the client request's
    ``litellm_metadata``, the very dict: the client's overrides are there, so is the proxy's
    pre-call pass, and a report written there is the one the response header and LiteLLM's
    logging payload show."""
    key = METADATA[fmt]
    carried = key != _CLIENT_METADATA and not isinstance(request.get(key), dict)
    return _CLIENT_METADATA if carried and isinstance(request.get(_CLIENT_METADATA), dict) else key


def format_of(call_type: Any) -> Format | None:
    """The request format of a LiteLLM call type (a str, or a ``CallTypes`` str enum), None if ungoverned."""
    found = spec_for_call_type(call_type)
    return found.name if found is not None else None


def call_id_of(data: Mapping[str, Any]) -> str | None:
    """LiteLLM's ``litellm_call_id`` of a request or log event, if it has one."""
    call_id = data.get("litellm_call_id")
    return call_id if isinstance(call_id, str) and call_id else None


class HistoryScan(NamedTuple):
    """What the hooks need to know of a history before governing it, from one walk (`scan_history`)."""

    #: The text it holds, roughly (messages' and items' text, blocks' ``text`` or ``content``): whether
    #: it is big enough to govern off the event loop.
    chars: int
    #: Whether it holds a ``compaction`` block (Anthropic) or item (Responses): whether context
    #: editing has anything to replace.
    compaction: bool


def scan_history(history: object, fmt: Format) -> HistoryScan:
    """One walk over a request's history for its size and its compaction blocks or items. It runs on every
    proxied request, once (the deployment pass reuses the pre-call pass's, `passes.PassState`): plain
    loops, no generator per message, ``(dict, Mapping)`` settling a dict without Mapping's ABC check."""
    if isinstance(history, str):
        return HistoryScan(len(history), False)
    if not isinstance(history, list):
        return HistoryScan(0, False)
    items = fmt == "responses"  # a Responses compaction is an item,
    blocks = fmt == "anthropic"  # an Anthropic one a block (chat has none)
    chars = 0
    compaction = False
    for message in history:
        if not isinstance(message, (dict, Mapping)):
            continue
        if items and message.get("type") == "compaction":
            compaction = True
        content = message["content"] if "content" in message else message.get("output")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, (dict, Mapping)):
                    text = block.get("text") or block.get("content")
                    if isinstance(text, (str, list, dict)):
                        chars += len(text)
                    if blocks and block.get("type") == "compaction":
                        compaction = True
    return HistoryScan(chars, compaction)


def declared_size(data: Mapping[str, Any]) -> int | None:
    """The size in bytes of the body the client sent the proxy, from its ``content-length`` (LiteLLM
    keeps the client's headers in ``proxy_server_request``); None outside the proxy and for a body
    sent compressed or without a length."""
    server_request = data.get("proxy_server_request")
    headers = server_request.get("headers") if isinstance(server_request, Mapping) else None
    if not isinstance(headers, Mapping):
        return None
    length: object = None
    for name, value in headers.items():
        lowered = name.lower() if isinstance(name, str) else ""
        if lowered == "content-encoding" and isinstance(value, str) and value.strip().lower() != "identity":
            return None  # the length of the compressed body, not of what was parsed
        if lowered == "content-length":
            length = value
    return int(length) if isinstance(length, str) and length.isascii() and length.isdigit() else None


class HistoryFacts:
    """What the hooks know of one request's history: whether it is big and whether it holds compaction
    blocks or items, each found out only when first asked for. Both come from one walk (`scan_history`),
    which a proxied request often needs not at all: the proxy knows the body's size
    (`declared_size`), a chat history holds no compaction, and whether a history holds any need
    not be looked at for deployments that compact natively (`context_editing.prepare`)."""

    __slots__ = ("_chars", "_compaction", "_declared", "_fmt", "_history")

    def __init__(
        self, history: object, fmt: Format, *, declared: int | None = None, compaction: bool | None = None
    ) -> None:
        self._history = history
        self._fmt = fmt
        self._declared = declared
        self._chars: int | None = None
        self._compaction = False if fmt == "chat" else compaction

    def big(self, chars: int, declared_bytes: int) -> bool:
        """Whether the body is longer than `declared_bytes` (when its length was declared) or its
        history has more than `chars` characters."""
        if self._declared is not None:
            return self._declared > declared_bytes
        if self._chars is None:
            self._scan()
        return self._chars > chars  # type: ignore[operator]  # (set by `_scan`)

    def compaction(self) -> bool:
        """Whether the history holds a compaction block or item."""
        if self._compaction is None:
            self._scan()
        return self._compaction  # type: ignore[return-value]  # (set by `_scan`)

    def may_hold_compaction(self) -> bool:
        """False only when the history is known to hold no compaction block or item (without looking)."""
        return self._compaction is not False

    def _scan(self) -> None:
        found = scan_history(self._history, self._fmt)
        self._chars = found.chars
        self._compaction = found.compaction
