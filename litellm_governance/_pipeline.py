"""`govern()` and its siblings per request format: the steps in their order, the budget, the report.

Every format is governed alike: the request is read into an outline of chat-shaped messages
(`_formats`), the steps run on it, and it is rendered back into the client's format, re-emitting
the client's own objects wherever no step edited them. The order (`run`), and why:

1. Repair pairing (`drop_orphans`, `backfill`, `unique_ids` where the provider needs unique ids),
   so every later step sees whole units (an assistant message followed by exactly its results)
   and what the repairs add is counted against the budget.
2. Shrink (`_shrinking`): compaction before snipping, since a stub loses one stale output where a
   cut loses whole turns; `truncate_newest` if that is not enough.
3. The provider's role rules (`enforce_roles`), last, because snipping changes which message comes
   first and last; they only merge, drop or insert whole non-tool messages, so they never separate
   a call from its results, and add at most the user message snipping reserved room for.

Each step returns its input list itself when it changes nothing (a second pass is a few cheap
scans) and says what it did to which message (`_context.Fate`), for the report and ``explain``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from ._anthropic import AnthropicOutline
from ._backfill import backfill
from ._config import GovernanceConfig, short_repr, suggestion
from ._context import Context, Fate, Tally
from ._cut_turns import CutTurns
from ._errors import ConfigError, InvalidRequestError
from ._formats import ChatOutline, Outline, Parsed, spec
from ._ids import unique_ids
from ._ledger import Ledger
from ._messages import Message, unnamed_field, validate_tools
from ._microcompact import large_uncompactable
from ._models import Deployment, ModelFacts, resolve_model
from ._orphans import drop_orphans
from ._output import Reserve, reserve_for
from ._profiles import PROFILES, Profile, TrailingAssistant, profile_for
from ._report import GovernanceReport
from ._responses import ResponsesOutline
from ._roles import enforce_roles
from ._shrinking import shrink
from ._tokens import TokenCounter, encoding_for_model, token_cache
from ._truncate import truncate_newest

_DEFAULT_CONFIG: Final = GovernanceConfig()


@dataclass(frozen=True)
class GovernanceResult:
    """The governed chat messages (a new list; unchanged messages are the input's own objects)."""

    messages: list[Message]
    report: GovernanceReport


@dataclass(frozen=True)
class AnthropicResult:
    """A governed Anthropic Messages request: ``messages`` and ``system`` (the input's own objects
    wherever nothing changed; ``system`` is None when the request had none)."""

    messages: list[Any]
    system: Any
    report: GovernanceReport


@dataclass(frozen=True)
class ResponsesResult:
    """A governed Responses request: ``input`` (the input itself when it is a string or nothing
    changed) and ``instructions``."""

    input: Any
    instructions: Any
    report: GovernanceReport


@dataclass(frozen=True)
class Calibrated:
    """A token ratio learned for a deployment (provider tokens per tiktoken token), and where it came from."""

    ratio: float
    source: str = "given"

    @classmethod
    def of(cls, ratio: float | None, source: str | None = None) -> Calibrated | None:
        """None when there is no ratio (the profile's is used)."""
        return None if ratio is None else cls(ratio, source or "given")


@dataclass(frozen=True)
class Outcome:
    """What `run` produced: the request fields in the client's format (none: the history goes as it
    came), the report, the governed outline and its context, the turns a cut removed (for a summary
    model), each step's fates (for ``explain``), and the output reservation (`_output`)."""

    fields: dict[str, Any]
    report: GovernanceReport
    governed: list[Message]
    context: Context
    cut: CutTurns | None
    fates: tuple[Fate, ...]
    reserve: Reserve


def govern(
    messages: Sequence[Message],
    *,
    model: str,
    tools: Sequence[Any] | None = None,
    max_output_tokens: int | None = None,
    config: GovernanceConfig | None = None,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
    token_ratio: float | None = None,
) -> GovernanceResult:
    """Fit chat `messages` to `model`'s budget and its provider's rules. Never mutates the input.

    `provider` is LiteLLM's provider string when known, `model_info` the deployment's
    (``max_input_tokens``, ``supports_assistant_prefill``, ``governance_profile``); `token_ratio`
    replaces the profile's estimate of how many provider tokens one tiktoken token is."""
    with clear_errors(messages=messages):
        parsed = Parsed(ChatOutline(messages), tools, max_output_tokens)
        outcome = run(parsed, Deployment(model, provider, model_info), config, Calibrated.of(token_ratio))
    return GovernanceResult(messages=list(outcome.fields.get("messages", messages)), report=outcome.report)


def govern_anthropic(
    messages: Sequence[Any],
    *,
    model: str,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    max_tokens: int | None = None,
    config: GovernanceConfig | None = None,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
    token_ratio: float | None = None,
) -> AnthropicResult:
    """`govern` for an Anthropic Messages request (``/v1/messages``: ``tool_use`` / ``tool_result``
    blocks, a top-level ``system``). Blocks no rule is about (thinking and its signature, images,
    documents, ``cache_control``, unknown types) go out exactly as they came in."""
    with clear_errors(messages=messages, system=system):
        parsed = Parsed(AnthropicOutline(messages, system), tools, max_tokens)
        outcome = run(parsed, Deployment(model, provider, model_info), config, Calibrated.of(token_ratio))
    fields = outcome.fields
    return AnthropicResult(list(fields.get("messages", messages)), fields.get("system", system), outcome.report)


def govern_responses(
    input: Any,
    *,
    model: str,
    instructions: Any = None,
    tools: Sequence[Any] | None = None,
    max_output_tokens: int | None = None,
    previous_response_id: str | None = None,
    config: GovernanceConfig | None = None,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
    token_ratio: float | None = None,
) -> ResponsesResult:
    """`govern` for an OpenAI Responses request (``/v1/responses``: ``input`` items, ``instructions``).
    Items no rule is about (reasoning with ``encrypted_content``, server-tool calls, ``item_reference``,
    unknown types) go out exactly as they came in. With `previous_response_id` the earlier history is
    upstream: only the visible input is governed (outputs of stored calls kept), nothing snipped."""
    with clear_errors(input=input, instructions=instructions):
        parsed = Parsed(ResponsesOutline(input, instructions, previous_response_id), tools, max_output_tokens)
        outcome = run(parsed, Deployment(model, provider, model_info), config, Calibrated.of(token_ratio))
    fields = outcome.fields
    return ResponsesResult(fields.get("input", input), fields.get("instructions", instructions), outcome.report)


@contextmanager
def clear_errors(**fields: object) -> Iterator[None]:
    """Turn the TypeError a rule raises on a field no provider accepts (a list as a block's ``type``:
    no set holds it) into an InvalidRequestError naming the field; any other error goes on as it was."""
    try:
        yield
    except InvalidRequestError:
        raise
    except TypeError as error:
        for name, value in fields.items():
            found = unnamed_field(value, name)
            if found is not None:
                raise InvalidRequestError(f"{found} must be a string, not a list or an object") from error
        raise


def _check(deployment: Deployment, config: object, calibrated: Calibrated | None) -> GovernanceConfig:
    config = _DEFAULT_CONFIG if config is None else config
    if not isinstance(config, GovernanceConfig):
        raise InvalidRequestError(f"config must be a GovernanceConfig, got {type(config).__name__}")
    model, provider, model_info = deployment.model, deployment.provider, deployment.model_info
    if not isinstance(model, str) or not model:
        raise InvalidRequestError(f"model must be a non-empty LiteLLM model string, got {model!r}")
    if provider is not None and (not isinstance(provider, str) or not provider):
        raise InvalidRequestError(f"provider must be a LiteLLM provider string or None, got {type(provider).__name__}")
    if model_info is not None and not isinstance(model_info, Mapping):
        raise InvalidRequestError(f"model_info must be a mapping or None, got {type(model_info).__name__}")
    ratio = 1.0 if calibrated is None else calibrated.ratio
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.2 <= ratio <= 5.0:
        raise InvalidRequestError(f"token_ratio must be a number between 0.2 and 5.0, got {ratio!r}")
    return config


def run(
    parsed: Parsed,
    deployment: Deployment,
    config: GovernanceConfig | None = None,
    calibrated: Calibrated | None = None,
    summaries: Mapping[str, str] | None = None,
) -> Outcome:
    """Govern a parsed request for `deployment`. `calibrated` is the deployment's learned token ratio
    (None: the profile's); `summaries` the summaries of cut turns written so far, by cut key."""
    plan = _plan(parsed, deployment, config, calibrated, summaries)
    ctx, outline, tally = plan.ctx, plan.outline, Tally()
    governed = original = outline.view
    ledger = Ledger(ctx, original)  # the tokens each stage removed
    if outline.left_alone is None:
        for repair in (drop_orphans, backfill, unique_ids):
            governed = tally.add(repair(governed, ctx))
        ledger.after("repair", governed)
        repaired = governed
        governed = shrink(governed, ctx, tally)
        ledger.after_shrink(repaired, governed)
        if tally.over_budget:
            governed = tally.add(truncate_newest(governed, ctx.with_(original=repaired)))
        ledger.after("truncation", governed)
        governed = tally.add(enforce_roles(governed, ctx))
        ledger.after("roles", governed)
    unchanged = len(governed) == len(original) and all(a is b for a, b in zip(governed, original, strict=True))
    edited = bool(outline.parse_counts) or not unchanged
    fields = outline.render(governed) if edited else {}  # (unedited, the request goes as it came)
    report = _report(plan, governed, tally, ledger, edited=edited, fields=fields)
    return Outcome(fields, report, governed, ctx, tally.cut, tuple(tally.fates), plan.reserve)


@dataclass(frozen=True)
class _Plan:
    """What a request is governed with: the steps' context and the model's figures for the report."""

    outline: Outline
    ctx: Context
    model: str
    facts: ModelFacts
    ratio: float
    calibrated: Calibrated | None
    budget: int | None  # input budget in provider tokens (None: no window known)
    reserve: Reserve


def _plan(
    parsed: Parsed,
    deployment: Deployment,
    config: GovernanceConfig | None,
    calibrated: Calibrated | None,
    summaries: Mapping[str, str] | None,
) -> _Plan:
    """The checked arguments, the model's facts, the profile, the output reservation and the budget."""
    config = _check(deployment, config, calibrated)
    outline, model = parsed.outline, deployment.model
    facts = resolve_model(model, config=config, provider=deployment.provider, model_info=deployment.model_info)
    profile = _pick_profile(config, facts.profile, facts.provider, model)
    ratio = profile.token_ratio if calibrated is None else float(calibrated.ratio)
    window, asked = facts.max_input_tokens, parsed.max_output_tokens
    reserve = reserve_for(
        asked, window=window, stated=facts.max_output_tokens, config=config, thinking=parsed.thinking_budget
    )
    budget = None if window is None else max(0, window - reserve.tokens - config.safety_buffer_tokens)
    counter = TokenCounter(encoding_for_model(model), token_cache(config.token_cache_size))
    fmt = spec(outline.format)
    ctx = Context(
        config=config,
        profile=profile,
        counter=counter,
        budget=None if budget is None or outline.history_upstream else math.floor(budget / ratio),  # tiktoken units
        tools_tokens=counter.tools(validate_tools(parsed.tools)),
        allow_prefill=profile.trailing_assistant is TrailingAssistant.IF_PREFILL and facts.prefill_supported(model),
        text_type=outline.text_type,
        reasoning_field=fmt.reasoning_field,
        unique_call_ids=fmt.unique_call_ids,
        said=fmt.said,
        stable=config.stable_for(window),
        summaries=summaries or {},
    )
    return _Plan(outline, ctx, model, facts, ratio, calibrated, budget, reserve)


def _report(
    plan: _Plan, governed: list[Message], tally: Tally, ledger: Ledger, *, edited: bool, fields: Mapping[str, Any]
) -> GovernanceReport:
    """The report: the plan's figures, and what the steps did to the request's tokens and messages."""
    outline, ctx, facts, ratio, reserve = plan.outline, plan.ctx, plan.facts, plan.ratio, plan.reserve
    window, budget, original = facts.max_input_tokens, plan.budget, outline.view
    over_budget = ctx.budget is not None and ledger.raw > ctx.budget
    notes = [] if window is not None else [f"no context window known for {plan.model!r}: history not snipped"]
    if budget == 0:
        notes.append(f"no budget left for the history: max output {reserve.tokens} fills the window ({window})")
    if outline.history_upstream and budget is not None:
        notes.append(
            "previous_response_id: the earlier history is stored upstream and cannot be governed; "
            "only the visible input was (nothing snipped)"
        )
    if outline.left_alone is not None:
        notes.append(outline.left_alone)
    if over_budget:
        notes.append(
            "over budget: even the smallest valid request (system, latest user message, newest turn) is too big"
        )
    steps = tally.counts
    steps.update(outline.parse_counts)
    kept_to = ctx.last_breakpoint(original)  # the prefix a cache breakpoint protects
    history = fields.get("messages", fields.get("input"))
    return GovernanceReport(
        model=plan.model,
        provider=facts.provider,
        profile=ctx.profile.name,
        context_window=window,
        window_source=facts.window_source,
        budget=budget,
        max_output_tokens=reserve.tokens,
        max_output_lowered_from=reserve.asked if reserve.lowered else None,
        messages_before=outline.count,
        messages_after=len(history) if isinstance(history, list) else outline.count,
        format=outline.format,
        token_ratio=round(ratio, 4),
        ratio_source="static" if plan.calibrated is None else plan.calibrated.source,
        cache_stable=ctx.stable,
        tokens_before=math.ceil(ledger.before * ratio),
        tokens_after=math.ceil(ledger.raw * ratio),
        tokens_removed=ledger.removed(ratio),
        steps={k: v for k, v in sorted(steps.items()) if v},
        over_budget=over_budget,
        changed=edited or reserve.lowered,
        cache_prefix_rewritten=kept_to >= 0
        and (len(governed) <= kept_to or any(governed[i] is not original[i] for i in range(kept_to + 1))),
        notes=tuple(notes + tally.notes),
        estimated_tokens=ledger.raw,
        large_uncompacted=large_uncompactable(tally.large_uncompacted),
    )


def _pick_profile(config: GovernanceConfig, deployment_profile: str | None, provider: str, model: str) -> Profile:
    if config.profile is not None:
        return PROFILES[config.profile]
    if deployment_profile is not None:
        try:
            return PROFILES[deployment_profile]
        except KeyError:
            known = ", ".join(sorted(PROFILES))
            hint = suggestion(str(deployment_profile), PROFILES)
            raise ConfigError(
                f"model_info.governance_profile must be one of {known}, got {short_repr(deployment_profile)}{hint}",
                redacted=f"model_info.governance_profile is not one of {known}{hint}",
            ) from None
    return profile_for(provider, model)
