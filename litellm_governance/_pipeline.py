"""`govern()` and its siblings per request format: the steps in their order, the budget, and
the report.

Every format is governed by the same steps: the request is read into an outline of chat-shaped
messages (`_messages`; for chat, the messages themselves; for Anthropic Messages and Responses,
`_anthropic` and `_responses`), the steps run on that outline, and the outline is rendered back
into the client's format, re-emitting the client's own objects wherever no step edited them.

The order, and why:

1. Repair pairing (`drop_orphans`, `backfill`, then `unique_ids` where the provider
   needs unique ids). Done first so that every later step sees whole units, an assistant message
   followed by exactly its results: snipping then keeps or drops a call together with its
   results, and what the repairs add (stubs, longer ids) is counted against the budget.
   (Nanobot repairs again after snipping because its snip can split pairs and its backfill can
   push a request back over budget; here neither can happen.)
2. Shrink: `microcompact`, then `snip` (or, with ``cache_stable``, `stable_shrink`, which replays
   both over the conversation's growth). Compaction first, because a stub loses one stale tool
   output where a cut loses whole turns. If the budget can only be met by rewriting what a
   ``cache_control`` breakpoint protects, or by compacting even the newest results, shrinking is
   retried with those allowed (the budget beats both preferences).
3. The provider's role rules (`enforce_roles`). Last, because snipping changes which message comes
   first and last; the rules only merge, drop or insert whole non-tool messages, so they never
   separate a call from its results, and they never add more than the synthetic user message
   that snipping already reserved room for.

Every step returns its input list itself when it changes nothing, so a second pass over
governed messages (the proxy runs two hooks per request) is a few cheap scans; and each step says
what it did to which message (`_context.Fate`), which the report, ``explain`` and the metrics read.
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
from ._formats import FORMATS, ChatOutline, Outline, Parsed
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
from ._tokens import REPLY_PRIMING, TokenCounter, encoding_for_model, token_cache
from ._truncate import truncate_newest

__all__ = [
    "AnthropicResult",
    "Calibrated",
    "GovernanceResult",
    "Outcome",
    "ResponsesResult",
    "clear_errors",
    "govern",
    "govern_anthropic",
    "govern_responses",
    "run",
]

_REPAIRS: Final = (drop_orphans, backfill, unique_ids)
_NO_RESERVE: Final = Reserve(0)
_DEFAULT_CONFIG = GovernanceConfig()


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
    """What `run` produced: the request fields in the client's format (none when no step edited the
    history: it goes as it came), the report, and (for
    `explain`) the governed outline and the per-request context it was counted with."""

    fields: dict[str, Any]
    report: GovernanceReport
    governed: list[Message]
    context: Context
    #: The turns a cut removed, if any (what a summary model may summarise).
    cut: CutTurns | None = None
    #: What each step did to which message (`_context.Fate`), in order: what ``explain`` reads.
    fates: tuple[Fate, ...] = ()
    #: The output reservation (`_output`): the request's own field goes out lowered where it says so.
    reserve: Reserve = _NO_RESERVE


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

    `provider` is LiteLLM's provider string when already known (the deployment's), and
    `model_info` the deployment's ``model_info`` (``max_input_tokens``,
    ``supports_assistant_prefill``, ``governance_profile``). `token_ratio`, when given, replaces
    the profile's estimate of how many provider tokens one tiktoken token is.
    """
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
    """`govern` for an Anthropic Messages request (``/v1/messages``: ``messages`` with
    ``tool_use`` / ``tool_result`` blocks and a top-level ``system``). Blocks no rule is about
    (thinking and its signature, images, documents, ``cache_control``, unknown types) go out
    exactly as they came in."""
    with clear_errors(messages=messages, system=system):
        parsed = Parsed(AnthropicOutline(messages, system), tools, max_tokens)
        fields = run(parsed, Deployment(model, provider, model_info), config, Calibrated.of(token_ratio))
    return AnthropicResult(
        messages=list(fields.fields.get("messages", messages)),
        system=fields.fields.get("system", system),
        report=fields.report,
    )


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
    """`govern` for an OpenAI Responses request (``/v1/responses``: ``input`` items and
    ``instructions``). Items no rule is about (reasoning with ``encrypted_content``, server-tool
    calls, ``item_reference``, unknown types) go out exactly as they came in. With
    `previous_response_id` the earlier history is stored upstream: only the visible input is
    governed (outputs answering stored calls are kept) and nothing is snipped."""
    with clear_errors(input=input, instructions=instructions):
        parsed = Parsed(ResponsesOutline(input, instructions, previous_response_id), tools, max_output_tokens)
        outcome = run(parsed, Deployment(model, provider, model_info), config, Calibrated.of(token_ratio))
    fields = outcome.fields
    return ResponsesResult(
        input=fields.get("input", input), instructions=fields.get("instructions", instructions), report=outcome.report
    )


@contextmanager
def clear_errors(**fields: object) -> Iterator[None]:
    """Turn the TypeError a rule raises on a field no provider accepts (a list as a block's
    ``type``: no set holds it) into an InvalidRequestError naming the field (`unnamed_field`,
    looked for only then); any other error goes on as it was."""
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
    ratio = None if calibrated is None else calibrated.ratio
    if ratio is not None and (
        isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.2 <= ratio <= 5.0
    ):
        raise InvalidRequestError(f"token_ratio must be a number between 0.2 and 5.0, got {ratio!r}")
    return config


def run(
    parsed: Parsed,
    deployment: Deployment,
    config: GovernanceConfig | None = None,
    calibrated: Calibrated | None = None,
    summaries: Mapping[str, str] | None = None,
) -> Outcome:
    """Govern a parsed request for `deployment`: the rendered request fields, the report, and the
    governed outline. `calibrated` is the deployment's learned token ratio (None: the profile's);
    `summaries` the summaries of cut turns written so far, by cut key (see `_cut_turns.CutTurns`)."""
    return _run_once(parsed, deployment, config, calibrated, summaries)


@dataclass(frozen=True)
class _Plan:
    """What one pass governs with: the steps' context, and the figures the report gives of it."""

    ctx: Context
    facts: ModelFacts
    ratio: float
    #: Input budget in provider tokens (None: no window known).
    budget: int | None
    reserve: Reserve
    notes: list[str]


def _plan(
    parsed: Parsed,
    deployment: Deployment,
    config: GovernanceConfig,
    calibrated: Calibrated | None,
    summaries: Mapping[str, str] | None,
) -> _Plan:
    """The model's facts, the profile, the output reservation and the budget, as the steps' context."""
    outline = parsed.outline
    model = deployment.model
    facts = resolve_model(model, config=config, provider=deployment.provider, model_info=deployment.model_info)
    profile = _pick_profile(config, facts.profile, facts.provider, model)
    ratio = profile.token_ratio if calibrated is None else float(calibrated.ratio)
    window = facts.max_input_tokens
    reserve = reserve_for(
        parsed.max_output_tokens,
        window=window,
        stated=facts.max_output_tokens,
        config=config,
        thinking=parsed.thinking_budget,
    )
    notes = [] if window is not None else [f"no context window known for {model!r}: history not snipped"]
    budget = None if window is None else max(0, window - reserve.tokens - config.safety_buffer_tokens)
    if budget == 0:
        notes.append(f"no budget left for the history: max output {reserve.tokens} fills the window ({window})")
    upstream = bool(getattr(outline, "history_upstream", False))
    if upstream and budget is not None:
        notes.append(
            "previous_response_id: the earlier history is stored upstream and cannot be governed; "
            "only the visible input was (nothing snipped)"
        )
    counter = TokenCounter(encoding_for_model(model), token_cache(config.token_cache_size))
    ctx = Context(
        config=config,
        profile=profile,
        counter=counter,
        budget=None if budget is None or upstream else math.floor(budget / ratio),  # tiktoken units
        tools_tokens=counter.tools(validate_tools(parsed.tools)),
        allow_prefill=profile.trailing_assistant is TrailingAssistant.IF_PREFILL and facts.prefill_supported(model),
        text_type=outline.text_type,
        reasoning_field=FORMATS[outline.format].reasoning_field,  # type: ignore[index]
        unique_call_ids=FORMATS[outline.format].unique_call_ids,  # type: ignore[index]
        said=FORMATS[outline.format].said,  # type: ignore[index]
        stable=config.stable_for(window),
        summaries=summaries or {},
    )
    return _Plan(ctx, facts, ratio, budget, reserve, notes)


def _run_once(
    parsed: Parsed,
    deployment: Deployment,
    config: GovernanceConfig | None,
    calibrated: Calibrated | None,
    summaries: Mapping[str, str] | None,
) -> Outcome:
    config = _check(deployment, config, calibrated)
    outline: Outline = parsed.outline
    plan = _plan(parsed, deployment, config, calibrated, summaries)
    ctx, notes = plan.ctx, plan.notes
    original = outline.view
    ledger = Ledger(ctx, original, ctx.tools_tokens + REPLY_PRIMING + ctx.total(original))
    tally = Tally()
    left_alone = getattr(outline, "left_alone", None)
    if left_alone is not None:
        notes.append(left_alone)
        governed = original
    else:
        governed = _steps(original, ctx, tally, ledger)
    edited = (
        bool(outline.parse_counts)
        or len(governed) != len(original)
        or any(a is not b for a, b in zip(governed, original, strict=False))
    )
    fields = outline.render(governed) if edited else {}  # (unedited, the request goes as it came)
    history = fields.get("messages", fields.get("input"))
    report = GovernanceReport(
        model=deployment.model,
        provider=plan.facts.provider,
        profile=ctx.profile.name,
        context_window=plan.facts.max_input_tokens,
        window_source=plan.facts.window_source,
        budget=plan.budget,
        max_output_tokens=plan.reserve.tokens,
        max_output_lowered_from=plan.reserve.asked if plan.reserve.lowered else None,
        messages_before=outline.count,
        messages_after=len(history) if isinstance(history, list) and edited else outline.count,
        format=outline.format,
        token_ratio=round(plan.ratio, 4),
        ratio_source="static" if calibrated is None else calibrated.source,
        cache_stable=ctx.stable,
        **_figures(
            outline,
            governed=governed,
            ctx=ctx,
            tally=tally,
            ledger=ledger,
            ratio=plan.ratio,
            notes=notes,
            changed=edited or plan.reserve.lowered,
        ),
    )
    return Outcome(fields, report, governed, ctx, tally.cut, tuple(tally.fates), plan.reserve)


def _steps(original: list[Message], ctx: Context, tally: Tally, ledger: Ledger) -> list[Message]:
    """The steps in their order (module docstring), each stage measured by the ledger."""
    governed = original
    for step in _REPAIRS:
        governed = tally.add(step(governed, ctx))
    ledger.after("repair", governed)
    repaired = governed
    governed = shrink(governed, ctx, tally)
    ledger.after_shrink(repaired, governed)
    if tally.over_budget:
        governed = tally.add(truncate_newest(governed, ctx.with_(original=repaired)))
    ledger.after("truncation", governed)
    governed = tally.add(enforce_roles(governed, ctx))
    ledger.after("roles", governed)
    return governed


def _figures(
    outline: Outline,
    *,
    governed: list[Message],
    ctx: Context,
    tally: Tally,
    ledger: Ledger,
    ratio: float,
    notes: list[str],
    changed: bool,
) -> dict[str, Any]:
    """The report's figures of what the steps did: tokens, counts, notes, the cache breakpoint."""
    raw_before, raw_after = ledger.before, ledger.raw
    over_budget = ctx.budget is not None and raw_after > ctx.budget
    if over_budget:
        notes.append(
            "over budget: even the smallest valid request (system, latest user message, newest turn) is too big"
        )
    steps = tally.counts
    steps.update(outline.parse_counts)
    original = outline.view
    breakpoint_index = ctx.last_breakpoint(original)
    prefix_rewritten = breakpoint_index >= 0 and (
        len(governed) <= breakpoint_index or any(governed[i] is not original[i] for i in range(breakpoint_index + 1))
    )
    return {
        "tokens_before": math.ceil(raw_before * ratio),
        "tokens_after": math.ceil(raw_after * ratio),
        "tokens_removed": ledger.removed(ratio),
        "steps": {k: v for k, v in sorted(steps.items()) if v},
        "over_budget": over_budget,
        "changed": changed,
        "cache_prefix_rewritten": prefix_rewritten,
        "notes": tuple(notes + tally.notes),
        "estimated_tokens": raw_after,
        "large_uncompacted": large_uncompactable(tally.large_uncompacted),
    }


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
