"""Anthropic's context editing and compaction where the deployment lacks them (docs/formats.md): done
before the provider sees the request, removed from it (so LiteLLM 1.108's own polyfill, which runs
after these hooks, applies nothing twice), and answered as ``context_management.applied_edits`` in
the JSON response and the streamed ``message_delta`` event."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final

from .._compaction import without_compaction
from .._context_editing import (
    APPLIED_HERE,
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    ContextEditError,
    apply_context_edits,
    prompt_counter,
    requested_edits,
)
from .._formats import FORMATS
from .._models import Deployment, split_provider
from .._profiles import PROFILES
from .._request import Format
from .failures import LogOnce, logger
from .fields import EDITS_KEY, HISTORY, METADATA, holds_compaction, in_metadata, record

#: Anthropic's server-side compaction edit (LiteLLM polyfills it only with a summary model).
COMPACT: Final = "compact_20260112"
#: What a provider may have: the two edits the gateway can apply, and compaction.
_EVERYTHING: Final = frozenset({CLEAR_TOOL_USES, CLEAR_THINKING, COMPACT})
#: Claude models with context editing (Claude 4 and later), by name.
_EDITING_MODELS: Final = re.compile(r"claude-(?:opus|sonnet|haiku)-(?:[4-9]|\d\d)|claude-(?:fable|[5-9])")
#: Private key in the request's LiteLLM metadata: the applied edits the answer reports.
APPLIED_KEY: Final = "_governance_applied_edits"

_failures = LogOnce(logger)


def native_features(target: Deployment, fmt: Format, translated: bool) -> frozenset[str]:
    """What `target`'s provider does itself with a request in `fmt` (nothing on a route LiteLLM
    translates)."""
    return frozenset() if translated else _NATIVE[fmt](target)


def _messages_features(target: Deployment) -> frozenset[str]:
    """LiteLLM 1.108, read from its sources: ``anthropic/`` has everything; Claude 4 and later on
    Bedrock (InvokeModel) all but ``clear_thinking``, which LiteLLM drops silently (older models refuse
    the field), on Vertex AI and Azure AI everything; ``bedrock/claude_platform/`` nothing (LiteLLM
    drops the field); every other provider nothing."""
    provider, bare = split_provider(target.model, target.provider)
    model = f"{target.model} {bare}".lower()
    if provider == "anthropic":
        return _EVERYTHING
    if provider == "bedrock" and "claude_platform/" not in model and _EDITING_MODELS.search(model):
        return frozenset({CLEAR_TOOL_USES, COMPACT})
    if (provider.startswith("vertex_ai") or provider == "azure_ai") and _EDITING_MODELS.search(model):
        return _EVERYTHING
    return frozenset()


def _responses_features(target: Deployment) -> frozenset[str]:
    """OpenAI's and Azure's own Responses API compact; nothing else does."""
    provider, _ = split_provider(target.model, target.provider)
    return frozenset({COMPACT}) if provider in ("openai", "azure") else frozenset()


#: What a deployment does itself, per request format (chat has nothing to edit or compact).
_NATIVE: Final[Mapping[Format, Callable[[Deployment], frozenset[str]]]] = {
    "chat": lambda _: frozenset(),
    "anthropic": _messages_features,
    "responses": _responses_features,
}


def prepare(
    request: dict[str, Any],
    fmt: Format,
    targets: Callable[[], Sequence[tuple[Deployment, bool]]],
    cache_size: int = 65_536,
) -> dict[str, Any] | None:
    """Do for `request` what none of `targets` (deployment, translated?) does itself: apply the context
    edits, replace compaction blocks or items. A changed copy, or None."""
    history = request.get(HISTORY[fmt])
    if not isinstance(history, list):
        return None
    edits = requested_edits(request.get("context_management")) if FORMATS[fmt].context_edits else []
    if not edits and not holds_compaction(history, fmt):
        return None  # the common case, decided without asking LiteLLM anything
    with _failures.guard("context editing skipped (%s at %s); request sent unchanged"):
        try:
            deployments = list(targets())
            # What none of them does itself.
            missing = _EVERYTHING.difference(*(native_features(t, fmt, later) for t, later in deployments))
            if not deployments or (not edits and COMPACT not in missing):
                return None  # every target compacts itself
            return _prepare(request, fmt, edits, missing, deployments[0][0], cache_size=cache_size)
        except ContextEditError as exc:  # Anthropic would refuse it: left for the provider to answer
            _failures.log(("refused", str(exc)), logging.INFO, "context_management left as sent: %s", exc)
    return None


def _prepare(
    request: dict[str, Any],
    fmt: Format,
    edits: list[Mapping[str, Any]],
    missing: frozenset[str],
    target: Deployment,
    *,
    cache_size: int,
) -> dict[str, Any] | None:
    key = HISTORY[fmt]
    changed: dict[str, Any] = {}
    applied: tuple[dict[str, Any], ...] = ()
    place = FORMATS[fmt].compaction
    replaced = without_compaction(request[key], place) if COMPACT in missing and place is not None else None
    if replaced is not None:
        changed[key] = replaced
    spec = request.get("context_management")
    types = APPLIED_HERE & missing
    if isinstance(spec, Mapping) and any(e.get("type") in types for e in edits):
        count = prompt_counter(
            target.model,
            system=request.get("system"),
            tools=request.get("tools"),
            token_ratio=PROFILES["anthropic"].token_ratio,  # the edits' thresholds are Anthropic's tokens
            cache_size=cache_size,
        )
        history = changed.get(key, request[key])
        outcome = apply_context_edits(history, spec, count=count, thinking=request.get("thinking"), types=types)
        changed[key] = outcome.messages
        changed["context_management"] = outcome.remaining  # None: nothing left in it, the field goes
        applied = outcome.applied_edits
    if not changed:
        return None
    updated = {k: v for k, v in {**request, **changed}.items() if v is not None or k not in changed}
    if applied:
        _remember(updated, fmt, applied)
        cleared = "; ".join(f"{e['type']} {_cleared(e)}" for e in applied)
        logger.info("context editing for %s: %s", target.model, cleared)
    return updated


def _cleared(edit: Mapping[str, Any]) -> str:
    count = edit.get("cleared_tool_uses", edit.get("cleared_thinking_turns", 0))
    unit = "tool uses" if "cleared_tool_uses" in edit else "thinking turns"
    return f"cleared {count} {unit} ({edit.get('cleared_input_tokens', 0)} tokens)"


def _remember(request: dict[str, Any], fmt: Format, applied: tuple[dict[str, Any], ...]) -> None:
    """Keep the applied edits where the answer hooks find them, and in the logging payload."""
    key = METADATA[fmt]
    if not isinstance(request.get(key), dict):
        request[key] = {}
    every = request[key][APPLIED_KEY] = (*request[key].get(APPLIED_KEY, ()), *applied)
    record(request, fmt, {"applied_edits": [dict(e) for e in every]}, key=EDITS_KEY)


def _applied(request: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The edits the gateway applied to `request` (the answer hooks get the metadata dict they went to)."""
    return next((tuple(edits) for edits in in_metadata(request, APPLIED_KEY) if edits), ())


def _merged(answer: object, applied: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """``context_management`` with `applied` added to the edits the answer already reports."""
    existing = answer.get("applied_edits") if isinstance(answer, Mapping) else None
    edits = [*(existing if isinstance(existing, list) else ()), *(dict(e) for e in applied)]
    return {**(answer if isinstance(answer, Mapping) else {}), "applied_edits": edits}


def answered(request: Mapping[str, Any], response: Any) -> Any:
    """An Anthropic JSON answer with the gateway's applied edits in ``context_management`` (None:
    nothing to add)."""
    applied = _applied(request)
    if not applied or not isinstance(response, Mapping) or response.get("type") != "message":
        return None
    return {**response, "context_management": _merged(response.get("context_management"), applied)}


async def streamed(request: Mapping[str, Any], response: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A streamed Anthropic answer (SSE, bytes or str chunks) with the applied edits in its
    ``message_delta`` event, every other byte as it came; events are re-cut only until that one."""
    applied = _applied(request)
    rest, done, as_bytes = "", not applied, True
    async for chunk in response:
        if done or not isinstance(chunk, (bytes, str)):
            yield chunk
            continue
        as_bytes = isinstance(chunk, bytes)
        *events, rest = (rest + (chunk.decode() if isinstance(chunk, bytes) else chunk)).split("\n\n")
        out = ""
        for event in events:
            rewritten = None if done else _with_edits(event, applied)
            done = done or rewritten is not None
            out += (rewritten or event) + "\n\n"
        if done:
            out, rest = out + rest, ""
        yield out.encode() if as_bytes else out
    if rest:
        yield rest.encode() if as_bytes else rest


def _with_edits(event: str, applied: tuple[dict[str, Any], ...]) -> str | None:
    """The SSE `event` with `applied` added, if it is the ``message_delta`` event (else None)."""
    lines = event.split("\n")
    index = next((i for i, line in enumerate(lines) if line.startswith("data:")), None)
    try:
        payload = json.loads(lines[index][5:].strip()) if index is not None else None
    except ValueError:
        return None
    if index is None or not isinstance(payload, dict) or payload.get("type") != "message_delta":
        return None
    payload["context_management"] = _merged(payload.get("context_management"), applied)
    lines[index] = "data: " + json.dumps(payload)
    return "\n".join(lines)
