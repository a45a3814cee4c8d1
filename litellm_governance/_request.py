"""`govern_request`: govern a whole request body (or ``litellm`` kwargs) of any of the three
formats, returning a governed copy of the body. No LiteLLM import: usable without LiteLLM."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from ._config import GovernanceConfig
from ._cut_turns import CutTurns
from ._errors import InvalidRequestError
from ._formats import FORMATS, Format, detect_format, spec
from ._models import Deployment
from ._output import lowered_fields
from ._pipeline import Calibrated, clear_errors, run
from ._report import GovernanceReport
from ._steps import THINKING_OFF
from ._thinking import THINKING_OFF_NOTE, lost_thinking_fields

__all__ = ["Format", "GovernedRequest", "detect_format", "govern_request", "max_output_tokens"]

#: The fields of the three formats that hold the conversation (what `clear_errors` looks into).
_HISTORY_FIELDS: Final = tuple(
    dict.fromkeys(name for spec in FORMATS.values() for name in (spec.history, spec.system) if name is not None)
)


@dataclass(frozen=True)
class GovernedRequest:
    """A governed copy of a request and what was done to it."""

    request: dict[str, Any]
    report: GovernanceReport
    #: The turns a cut removed, if any (what a summary model may summarise; never logged).
    cut: CutTurns | None = None

    @property
    def format(self) -> str:
        """The request format that was governed: ``chat``, ``anthropic`` or ``responses``."""
        return self.report.format


def govern_request(
    request: Mapping[str, Any],
    *,
    format: Format | None = None,
    config: GovernanceConfig | None = None,
    model: str | None = None,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
    token_ratio: float | None = None,
    ratio_source: str | None = None,
    summaries: Mapping[str, str] | None = None,
) -> GovernedRequest:
    """Govern a request body — chat completions (``messages``), Anthropic Messages (``messages``
    + ``system``) or Responses (``input`` + ``instructions``) — or the kwargs of the matching
    ``litellm`` call. `format` defaults to `detect_format`.

    `model` names the model to fit (default ``request["model"]``): for a Router model group,
    pass the deployment's model or its `model_info`. Returns the request itself (not a copy)
    when nothing changed. Raises `InvalidRequestError` for a request whose history is not a
    list of dicts. `summaries` are summaries of cut turns a summary model wrote, by cut key.
    """
    if not isinstance(request, Mapping):
        raise InvalidRequestError(f"request must be a mapping (a request body), got {type(request).__name__}")
    with clear_errors(**{key: request.get(key) for key in _HISTORY_FIELDS if key in request}):
        chosen = spec(detect_format(request) if format is None else format)
        target_model = model or request.get("model")
        if not isinstance(target_model, str) or not target_model:
            raise InvalidRequestError("the request has no 'model' and none was given")
        deployment = Deployment(target_model, provider, dict(model_info) if model_info else None)
        outcome = run(chosen.read(request), deployment, config, Calibrated.of(token_ratio, ratio_source), summaries)
    report = outcome.report
    history = outcome.fields.get(chosen.history, request.get(chosen.history))  # (unedited: as it came)
    thinking = (
        lost_thinking_fields(request, history, chosen.thinking)
        if outcome.context.profile.thinking_leads_tool_turn and isinstance(history, list)
        else ()
    )
    if thinking:
        steps = {**report.steps, THINKING_OFF: 1}
        report = replace(report, steps=steps, notes=(*report.notes, THINKING_OFF_NOTE), changed=True)
    if not report.changed:
        body = request if isinstance(request, dict) else dict(request)
        return GovernedRequest(request=body, report=report, cut=outcome.cut)
    governed = {key: value for key, value in request.items() if key not in thinking}
    governed.update(outcome.fields)
    governed.update(lowered_fields(governed, chosen.max_output, outcome.reserve))
    return GovernedRequest(request=governed, report=report, cut=outcome.cut)


def max_output_tokens(request: Mapping[str, Any], format: Format) -> int | None:
    """The output tokens a request asks for (`FormatSpec.max_output_tokens`)."""
    return FORMATS[format].max_output_tokens(request)
