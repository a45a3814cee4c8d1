"""Where things live in LiteLLM's requests and settings: the format each call type carries, each
format's history and metadata fields, and the key the plugin's options and overrides sit under."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._formats import FORMATS, Format, spec_for_call_type

__all__ = ["FORMAT_OF_CALL", "HISTORY", "METADATA", "SETTINGS_KEY", "call_id_of", "format_of"]

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


def format_of(call_type: Any) -> Format | None:
    """The request format of a LiteLLM call type (a str, or a ``CallTypes`` str enum), None if ungoverned."""
    found = spec_for_call_type(call_type)
    return found.name if found is not None else None


def call_id_of(data: Mapping[str, Any]) -> str | None:
    """LiteLLM's ``litellm_call_id`` of a request or log event, if it has one."""
    call_id = data.get("litellm_call_id")
    return call_id if isinstance(call_id, str) and call_id else None
