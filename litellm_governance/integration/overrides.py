"""Per-request overrides (``metadata.governance``), pure: the operator's config and the request's
metadata in; the config to use, the window the client asked for, and notes for the report out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._config import GovernanceConfig, short_repr
from .._errors import ConfigError
from .fields import SETTINGS_KEY

#: Options a client may set per request when the operator allows it (``allow_request_overrides``),
#: besides ``disable`` and ``context_window_tokens`` (which can only lower the model's window).
OVERRIDABLE: Final = frozenset(
    {
        "enabled",
        "keep_recent",
        "min_chars",
        "compactable_tools",
        "compact_batch",
        "snip_watermark",
        "cache_stable",
        "profile",
        "note_cut_turns",
    }
)


def request_overrides(config: GovernanceConfig, metadata: object) -> tuple[GovernanceConfig, int | None, list[str]]:
    """Apply the client's ``governance`` entry of the request's LiteLLM `metadata` where the operator
    allows it, within bounds: the config, a window the client asked for (to be bounded by the
    model's own with `bounded_window`), and notes for the report. Anything not allowed or invalid
    leaves the config as it was and says why in a note."""
    overrides = metadata.get(SETTINGS_KEY) if isinstance(metadata, Mapping) else None
    if not overrides:
        return config, None, []
    try:
        changes, window = _changes(config, overrides)
        updated = config.replace(**changes)
        if window is not None:
            updated.replace(context_window_tokens=window)  # validates the value
    except ConfigError as exc:
        return config, None, [f"per-request overrides ignored: {exc}"]
    return updated, window, []


def _changes(config: GovernanceConfig, overrides: object) -> tuple[dict[str, Any], Any]:
    """The options `overrides` changes, and the window it asks for; a `ConfigError` saying why not."""
    if not config.allow_request_overrides:
        raise ConfigError("not allowed by the operator")
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"metadata.{SETTINGS_KEY} must be an object")
    changes = dict(overrides)
    if "disable" in changes:
        disable = changes.pop("disable")
        if not isinstance(disable, bool):
            raise ConfigError("disable must be true or false")
        changes["enabled"] = not disable
    window = changes.pop("context_window_tokens", None)
    unknown = sorted(map(str, set(changes) - OVERRIDABLE))
    if unknown:
        raise ConfigError("not overridable: " + ", ".join(short_repr(name) for name in unknown[:5]))
    return changes, window


def bounded_window(config: GovernanceConfig, window: int, known: int | None) -> GovernanceConfig:
    """`config` with the client's `window`: clients may lower the window (spend less), never raise it
    past what the model has (`known`, None when nothing knows it)."""
    return config.replace(context_window_tokens=min(window, known) if known is not None else window)
