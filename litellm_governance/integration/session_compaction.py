"""Codex's remote compaction at the gateway, on the way in (docs/codex-compaction.md; the pure part is
`_session_compaction`, the answer `compaction_answers`): the gateway's own compaction items read back
as messages (`before_routing`, `at_deployment`), a compaction request for a group without compaction
of its own turned into a summary request with a `Plan` (or, in ``note`` mode, answered by LiteLLM's
``mock_response``), and Codex WebSocket sessions on such groups refused (`refuse_websocket`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from .._config import GovernanceConfig
from .._formats import FORMATS
from .._models import Deployment
from .._request import Format
from .._session_compaction import is_trigger_request, read_back, session_note, summary_request
from .._steps import COMPACTED_SESSION
from .context_editing import COMPACT, native_features
from .failures import LogOnce, logger
from .fields import METADATA, in_metadata, metadata_key, record, report_slot
from .passes import STATE_KEY, PassState
from .routing import deployment_target, group_deployments, proxy_router, translated_later

#: Key of the `Plan` in the request's LiteLLM metadata.
PLAN_KEY: Final = "_governance_compaction"
#: Marks the fallback the gateway adds to a summary request: the same model group, answered with the
#: note (the deployment hook takes the mark off before LiteLLM sees the call).
NOTE_FALLBACK: Final = "_governance_note_fallback"
#: The mode of a plan the gateway's own fallback answers with the note.
FALLBACK: Final = "note-fallback"
#: What LiteLLM's ``mock_response`` answers where the note does (short: LiteLLM streams a mock three
#: characters a chunk; the answer hook puts the note in the item).
NOTE_ANSWER: Final = "[litellm-governance: the session's note answers this compaction]"
#: LiteLLM's call type for a Responses WebSocket session, and the header by which Codex announces
#: remote compaction (sent with the WebSocket handshake too).
WEBSOCKET_CALL: Final = "_aresponses_websocket"
CODEX_FEATURES: Final = "x-codex-beta-features"
REMOTE_COMPACTION: Final = "remote_compaction_v2"

_once = LogOnce(logger)


@dataclass(frozen=True)
class Plan:
    """How the gateway answers one compaction request: its mode (``model``: the model's summary, the
    note where that fails; ``note``: the note), the session's note and size, the model whose
    tokenizer counted them, and when the request came (`time.perf_counter`)."""

    mode: str
    note: str
    tokens_before: int
    model: str
    started: float


class WebSocketRefused(Exception):
    """Raised by the pre-call hook to turn a Codex WebSocket session away (see `refuse_websocket`)."""


def plan_of(request: Mapping[str, Any] | None) -> Plan | None:
    """The `Plan` in a request's (or a translated call's) LiteLLM metadata, if any."""
    plans = in_metadata(request, PLAN_KEY) if isinstance(request, Mapping) else []
    return next((plan for plan in plans if isinstance(plan, Plan)), None)


def _answering_for(group: object) -> Deployment | None:
    """The deployment whose tokenizer counts the session if the gateway answers compaction requests for
    `group` (a name that is no proxy group stands for itself); None when every deployment compacts."""
    targets = group_deployments(group, "responses")
    if not targets and isinstance(group, str) and group:
        targets = [(Deployment(group), False)]
    lacking = any(COMPACT not in native_features(target, "responses", later) for target, later in targets)
    return targets[0][0] if lacking else None


def refuse_websocket(data: Mapping[str, Any], call_type: object) -> None:
    """Raise `WebSocketRefused` for a Codex WebSocket session announcing remote compaction on a group the
    gateway answers compaction requests for: no callback sees a WebSocket answer (LiteLLM 1.108), and
    Codex falls back to HTTP (after about 3 s)."""
    if getattr(call_type, "value", call_type) != WEBSOCKET_CALL:
        return
    group, refuse = data.get("model"), False
    with _once.guard("Responses WebSocket session let through (%s at %s)"):
        refuse = _announces_remote_compaction(data) and _answering_for(group) is not None
    if not refuse:
        return
    _once.log(
        ("websocket", group),
        logging.INFO,
        "Responses WebSocket session for %s refused: Codex's compaction requests are answered over HTTP "
        "(Codex falls back to HTTP by itself)",
        group,
    )
    raise WebSocketRefused(
        f"litellm-governance: model group {group!r} answers Codex's compaction requests over HTTP only; "
        "use HTTP (POST /v1/responses)"
    )


def _announces_remote_compaction(data: Mapping[str, Any]) -> bool:
    server_request = data.get("proxy_server_request")
    headers = server_request.get("headers") if isinstance(server_request, Mapping) else None
    if not isinstance(headers, Mapping):
        return False
    features = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == CODEX_FEATURES), None)
    return isinstance(features, str) and REMOTE_COMPACTION in features


def before_routing(data: dict[str, Any], fmt: Format, config: Callable[[], GovernanceConfig]) -> dict[str, Any] | None:
    """The proxy's pre-call step (module docstring): a new dict, or None: unchanged. Fails open."""
    if not FORMATS[fmt].session_compaction or not isinstance(data.get("input"), list):
        return None
    with _once.guard("compaction request left as sent (%s at %s)"):
        replaced = read_back(data["input"])
        request = data if replaced is None else {**data, "input": replaced}
        target = _answering_for(data.get("model")) if is_trigger_request(request) else None
        if target is not None:
            return _planned(request, config(), target)
        return request if replaced is not None else None
    return None


def _planned(request: Mapping[str, Any], config: GovernanceConfig, target: Deployment) -> dict[str, Any]:
    """The summary request for compaction request `request`, with its `Plan`."""
    session = session_note(request["input"], target.model, cache_size=config.token_cache_size)
    note_mode = config.compaction == "note"
    out = summary_request(request, note=session.note if note_mode else None)
    if config.summary_model and not note_mode:
        out["model"] = config.summary_model
    if not note_mode and isinstance(out.get("model"), str):
        out["fallbacks"] = _with_note_fallback(request.get("fallbacks"), out["model"])
    metadata = out.get(METADATA["responses"])
    if not isinstance(metadata, dict):
        metadata = out[METADATA["responses"]] = {}
    metadata[PLAN_KEY] = Plan(config.compaction, session.note, session.tokens, target.model, time.perf_counter())
    return out


def _with_note_fallback(client: object, group: str) -> list[Any]:
    """The fallbacks of a summary request to `group`: the client's (else the proxy's) with, at the end of
    `group`'s chain (its own, else the generic ``*`` one), the same group answered with the note — so
    that a model call that fails before its answer starts, after every retry and fallback, is answered
    with the note too."""
    if isinstance(client, list):
        base = list(client)
    else:
        configured = getattr(proxy_router(), "fallbacks", None)
        base = list(configured) if isinstance(configured, list) else []
    entries = [e for e in base if isinstance(e, Mapping) and len(e) == 1]
    own = next((e[group] for e in entries if group in e), None)
    generic = next((e["*"] for e in entries if "*" in e), None)
    chain = own if isinstance(own, list) else generic if isinstance(generic, list) else []
    if not entries:
        chain = [e for e in base if isinstance(e, str)]  # a client's plain list of groups
        base = []
    kept = [e for e in base if not (isinstance(e, Mapping) and group in e)]
    return [*kept, {group: [*chain, {"model": group, NOTE_FALLBACK: True}]}]


def at_deployment(kwargs: dict[str, Any], fmt: Format) -> dict[str, Any] | None:
    """After routing: the read-back where no pre-call pass did it (the SDK), and in ``note`` mode the
    call LiteLLM makes for a deployment without a Responses API answered with ``mock_response``. A new
    dict, or None: unchanged."""
    with _once.guard("compaction read-back skipped (%s at %s)"):
        plan = plan_of(kwargs)
        if plan is not None and plan.mode != "model" and not FORMATS[fmt].session_compaction:  # translated
            return {**kwargs, "mock_response": NOTE_ANSWER}
        if plan is not None and NOTE_FALLBACK in kwargs:
            return _noted_fallback(kwargs, fmt, plan)
        if not FORMATS[fmt].session_compaction:
            return None
        out = _without_threshold(kwargs)
        metadata = kwargs.get(metadata_key(kwargs, fmt))
        proxied = isinstance(metadata, Mapping) and STATE_KEY in metadata
        replaced = read_back(kwargs["input"]) if isinstance(kwargs.get("input"), list) and not proxied else None
        if replaced is not None:
            out = {**(out or kwargs), "input": replaced}
        return out
    return None


def _without_threshold(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """A Responses call without its ``context_management`` (OpenAI's ``compact_threshold``) when its
    deployment has no compaction of its own: LiteLLM would refuse the field there ("does not support
    parameters"), and the gateway fits the history to the window anyway. None: left as it is."""
    if not isinstance(kwargs.get("context_management"), list):
        return None
    target = deployment_target(kwargs)
    if COMPACT in native_features(target, "responses", translated_later("responses", kwargs)):
        return None
    _once.log(
        ("threshold", target.model),
        logging.INFO,
        "context_management (compact_threshold) left out for %s: it has no compaction; the history is fitted instead",
        target.model,
    )
    return {key: value for key, value in kwargs.items() if key != "context_management"}


def _noted_fallback(kwargs: dict[str, Any], fmt: Format, plan: Plan) -> dict[str, Any]:
    """The gateway's own fallback (`_with_note_fallback`): its mark taken off, its plan the note's."""
    out = {key: value for key, value in kwargs.items() if key != NOTE_FALLBACK}
    key = metadata_key(out, fmt)
    out[key] = {**out.get(key, {}), PLAN_KEY: replace(plan, mode=FALLBACK)}
    _once.log(
        ("fallback", plan.model), logging.WARNING, "%s: the model's summary failed; the note answers", COMPACTED_SESSION
    )
    return out


def reported(request: dict[str, Any] | None, fmt: Format) -> None:
    """Say ``compacted_session`` in the report of a summary request the gateway answers. Fails open."""
    plan = plan_of(request)
    if plan is not None and request is not None:
        with _once.guard("compacted_session not reported (%s at %s)"):
            _report(request, fmt, plan)


def _report(request: dict[str, Any], fmt: Format, plan: Plan) -> None:
    note = (
        f"{COMPACTED_SESSION}: a compaction request for a deployment without compaction of its own; the "
        f"gateway answers with one compaction item holding the session's summary ({plan.mode}; the session "
        f"was {plan.tokens_before} tokens)"
    )
    metadata = request.get(metadata_key(request, fmt))
    state = metadata.get(STATE_KEY) if isinstance(metadata, dict) else None
    if isinstance(metadata, dict) and isinstance(state, PassState) and state.pre_call_report is not None:
        first = state.pre_call_report
        steps = dict(sorted({**first.steps, COMPACTED_SESSION: 1}.items()))
        report = replace(first, steps=steps, changed=True, notes=(*first.notes, note))
        metadata[STATE_KEY] = replace(state, pre_call_report=report)
        record(request, fmt, {**report.to_dict(), "summary": report.summary(), "stage": "pre_call"})
        return
    slot = report_slot(request)
    if slot is None:
        record(
            request,
            fmt,
            {"changed": True, "steps": {COMPACTED_SESSION: 1}, "notes": [note], "summary": f"{COMPACTED_SESSION}=1"},
        )
    elif COMPACTED_SESSION not in slot.get("steps", {}):
        slot["steps"] = {**slot.get("steps", {}), COMPACTED_SESSION: 1}
        slot["summary"] = f"{COMPACTED_SESSION}=1; {slot.get('summary', '')}"
