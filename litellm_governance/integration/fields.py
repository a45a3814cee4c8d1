"""Where the plugin's data sits in LiteLLM's requests and settings — the one module that knows: the
format each call type carries, each format's history and metadata fields, the key of the plugin's
options and per-request overrides, and where its report goes (``spend_logs_metadata.governance`` of
the request's LiteLLM metadata: LiteLLM's standard logging payload keeps it, so every logging
integration sees it) and comes back as the proxy's response header."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._compaction import is_compaction
from .._formats import FORMATS, Format, spec_for_call_type

#: The key in ``litellm.callback_settings`` (the proxy config's ``callback_settings:``) with our
#: options, and in a request's metadata with its per-request overrides.
SETTINGS_KEY: Final = "governance"
#: Where each format keeps its history.
HISTORY: Final[Mapping[Format, str]] = {spec.name: spec.history for spec in FORMATS.values()}
#: Where each format keeps LiteLLM's own metadata (``metadata`` on /v1/messages and /v1/responses is
#: the provider's field: nothing of ours may go there).
METADATA: Final[Mapping[Format, str]] = {spec.name: spec.metadata for spec in FORMATS.values()}
#: Response header the proxy adds to governed requests.
HEADER: Final = "x-litellm-governance"
#: Where the report lives in ``spend_logs_metadata``; and next to it, the context edits the gateway
#: applied (`context_editing`) and the figures of a compaction answer it gave (`compaction_answers`).
REPORT_KEY: Final = "governance"
EDITS_KEY: Final = "governance_context_editing"
ANSWER_KEY: Final = "governance_compaction"
# The metadata field of /v1/messages and /v1/responses requests.
_CLIENT_METADATA: Final = "litellm_metadata"


def format_of(call_type: Any) -> Format | None:
    """The request format of a LiteLLM call type (a str, or a ``CallTypes`` str enum), None if ungoverned."""
    found = spec_for_call_type(call_type)
    return found.name if found is not None else None


def client_format(request: Mapping[str, Any], fmt: Format) -> Format:
    """The format the client sent `request` in: on the call LiteLLM makes of a ``/v1/messages`` or
    ``/v1/responses`` request for a deployment that takes another format, the client's (its logging
    object keeps the client's call type), else `fmt` itself."""
    return format_of(getattr(request.get("litellm_logging_obj"), "call_type", None)) or fmt


def metadata_key(request: Mapping[str, Any], fmt: Format) -> str:
    """The field of `request` with the LiteLLM metadata the plugin reads and writes: the format's own,
    except on the chat call LiteLLM translates a ``/v1/messages`` or ``/v1/responses`` request into,
    which carries the client request's very ``litellm_metadata`` dict (header and logging read it)."""
    key = METADATA[fmt]
    carried = key != _CLIENT_METADATA and not isinstance(request.get(key), dict)
    return _CLIENT_METADATA if carried and isinstance(request.get(_CLIENT_METADATA), dict) else key


def spend_logs(request: dict[str, Any], key: str) -> dict[str, Any] | None:
    """``spend_logs_metadata`` of the request's LiteLLM metadata field `key`, made where missing: what
    LiteLLM's standard logging payload keeps (None: a value of the client's that is no dict)."""
    if request.get(key) is None:
        request[key] = {}
    metadata = request[key]
    if isinstance(metadata, dict) and metadata.get("spend_logs_metadata") is None:
        metadata["spend_logs_metadata"] = {}
    spend = metadata.get("spend_logs_metadata") if isinstance(metadata, dict) else None
    return spend if isinstance(spend, dict) else None


def record(request: dict[str, Any], fmt: Format, entry: dict[str, Any], key: str = REPORT_KEY) -> None:
    """Put the report `entry` (or what `key` names) in ``spend_logs_metadata`` of the request's LiteLLM
    metadata, where LiteLLM's logging payload keeps it."""
    spend = spend_logs(request, metadata_key(request, fmt))
    if spend is not None:
        spend[key] = entry


def logged_report(payload: Mapping[str, Any], kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The report of a logged request: in the standard logging payload's metadata, else in the
    request's own LiteLLM metadata."""
    holders: list[object] = [payload.get("metadata")]
    params = kwargs.get("litellm_params")
    if isinstance(params, Mapping):
        holders += [params.get("metadata"), params.get(_CLIENT_METADATA)]
    for holder in holders:
        spend = holder.get("spend_logs_metadata") if isinstance(holder, Mapping) else None
        entry = spend.get(REPORT_KEY) if isinstance(spend, Mapping) else None
        if isinstance(entry, Mapping):
            return entry
    return None


def in_metadata(request: Mapping[str, Any], key: str) -> list[Any]:
    """The values at `key` of the request's LiteLLM metadata fields (``litellm_metadata`` first)."""
    fields = (request.get(_CLIENT_METADATA), request.get("metadata"))
    return [metadata[key] for metadata in fields if isinstance(metadata, Mapping) and key in metadata]


def report_slot(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The report recorded in `request`, in whichever field of LiteLLM metadata it is."""
    for key in ("metadata", _CLIENT_METADATA):
        metadata = request.get(key)
        spend = metadata.get("spend_logs_metadata") if isinstance(metadata, dict) else None
        report = spend.get(REPORT_KEY) if isinstance(spend, dict) else None
        if isinstance(report, dict):
            return report
    return None


def header(request: Mapping[str, Any]) -> dict[str, str] | None:
    """The proxy's response header for `request`: the summary of its report, if it has one."""
    report = report_slot(request)
    summary = report.get("summary") if report else None
    return {HEADER: summary} if isinstance(summary, str) else None


def call_id_of(data: Mapping[str, Any]) -> str | None:
    """LiteLLM's ``litellm_call_id`` of a request or log event, if it has one."""
    call_id = data.get("litellm_call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def history_chars(history: object) -> int:
    """Roughly the text a history holds (messages' and items' text, blocks' ``text`` or ``content``):
    whether it is big enough to govern off the event loop."""
    if isinstance(history, str):
        return len(history)
    chars = 0
    for message in history if isinstance(history, list) else ():
        if not isinstance(message, Mapping):
            continue
        content = message["content"] if "content" in message else message.get("output")
        if isinstance(content, str):
            chars += len(content)
        for block in content if isinstance(content, list) else ():
            text = (block.get("text") or block.get("content")) if isinstance(block, Mapping) else None
            chars += len(text) if isinstance(text, (str, list, dict)) else 0
    return chars


def holds_compaction(history: object, fmt: Format) -> bool:
    """Whether a history holds a compaction block (Anthropic) or item (Responses)."""
    where = FORMATS[fmt].compaction
    if where is None or not isinstance(history, list):
        return False
    for message in history:
        content = message.get("content") if isinstance(message, Mapping) else None
        if where == "item" and is_compaction(message):
            return True
        if where == "block" and isinstance(content, list) and any(is_compaction(b) for b in content):
            return True
    return False
