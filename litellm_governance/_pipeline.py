"""`govern()` and its siblings per request format: the steps in their order, the budget, and
the report.

Every format is governed by the same steps: the request is read into an outline of chat-shaped
messages (`_messages`; for chat, the messages themselves; for Anthropic Messages and Responses,
`_anthropic` and `_responses`), the steps run on that outline, and the outline is rendered back
into the client's format, re-emitting the client's own objects wherever no step edited them.

The order, and why:

1. Repair pairing (`DropOrphans`, `Backfill`, then `UniqueToolCallIds` where the provider
   needs unique ids). Done first so that every later step sees whole units, an assistant message
   followed by exactly its results: snipping then keeps or drops a call together with its
   results, and what the repairs add (stubs, longer ids) is counted against the budget.
   (Nanobot repairs again after snipping because its snip can split pairs and its backfill can
   push a request back over budget; here neither can happen.)
2. Shrink: `Microcompact`, then `Snip` (or, with ``cache_stable``, `StableShrink`, which replays
   both over the conversation's growth). Compaction first, because a stub loses one stale tool
   output where a cut loses whole turns. If the budget can only be met by rewriting what a
   ``cache_control`` breakpoint protects, or by compacting even the newest results, shrinking is
   retried with those allowed (the budget beats both preferences).
3. The provider's role rules (`EnforceRoles`). Last, because snipping changes which message comes
   first and last; the rules only merge, drop or insert whole non-tool messages, so they never
   separate a call from its results, and they never add more than the synthetic user message
   that snipping already reserved room for.

Every step returns its input list itself when it changes nothing, so a second pass over
governed messages (the proxy runs two hooks per request) is a few cheap scans. And the next request
of a conversation begins with the previous one: the counts and the steps' walks over those messages
are taken from it (`_conversations`), and only what was added is counted and walked.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Final

from ._anthropic import AnthropicOutline
from ._backfill import Backfill
from ._config import GovernanceConfig, short_repr, suggestion
from ._context import Context, Tally
from ._conversations import conversations, counts_of
from ._cut_turns import CutTurns
from ._errors import ConfigError, InvalidRequestError
from ._formats import ChatOutline, Outline, Parsed
from ._ids import UniqueToolCallIds
from ._ledger import Ledger
from ._messages import Message, unnamed_field, validate_tools
from ._microcompact import large_uncompactable
from ._models import Deployment, resolve_model
from ._orphans import DropOrphans
from ._profiles import PROFILES, Profile, TrailingAssistant, profile_for
from ._report import GovernanceReport
from ._responses import ResponsesOutline
from ._roles import EnforceRoles
from ._shrinking import shrink
from ._tokens import REPLY_PRIMING, TokenCache, TokenCounter, encoding_for_model
from ._truncate import TruncateNewest

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
    "token_cache",
]

_REPAIR = (DropOrphans(), Backfill(), UniqueToolCallIds())
_TRUNCATE = TruncateNewest()
_ROLES = EnforceRoles()
_DEFAULT_CONFIG = GovernanceConfig()

_caches: dict[int, TokenCache] = {}
_caches_lock = threading.Lock()


def token_cache(size: int = _DEFAULT_CONFIG.token_cache_size) -> TokenCache:
    """The process-wide token-count cache holding at most `size` entries."""
    with _caches_lock:
        cache = _caches.get(size)
        if cache is None:
            cache = _caches[size] = TokenCache(size)
        return cache


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
    """What `run` produced: the request fields in the client's format, the report, and (for
    `explain`) the governed outline and the per-request context it was counted with."""

    fields: dict[str, Any]
    report: GovernanceReport
    governed: list[Message]
    context: Context
    #: The turns a cut removed, if any (what a summary model may summarise).
    cut: CutTurns | None = None


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
    return GovernanceResult(messages=list(outcome.fields["messages"]), report=outcome.report)


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
        messages=list(fields.fields["messages"]), system=fields.fields.get("system"), report=fields.report
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
    `summaries` the summaries of cut turns written so far, by cut key (see `_cut_turns.CutTurns`).

    Where rendering changed how the request reads (`ResponsesOutline.reread`: a Responses run
    regrouped around its outputs), the re-read request is governed once more, so that governing
    the output again changes nothing; the outcome is the second pass's, reported as both."""
    outcome = _run_once(parsed, deployment, config, calibrated, summaries)
    reread = getattr(parsed.outline, "reread", None)
    again = reread(outcome.fields) if reread is not None and outcome.report.changed else None
    if again is None:
        return outcome
    second = _run_once(Parsed(again, parsed.tools, parsed.max_output_tokens), deployment, config, calibrated, summaries)
    report = outcome.report.then(second.report)
    return Outcome(
        fields={**outcome.fields, **second.fields},
        report=replace(report, notes=(*report.notes, REGROUPED_NOTE)),
        # explain's per-message story is the first pass's (its messages carry the input's tags)
        governed=outcome.governed,
        context=outcome.context,
        cut=second.cut or outcome.cut,
    )


#: The report's note when the output was governed once more (`run`).
REGROUPED_NOTE: Final = "an assistant turn was regrouped around its tool outputs: governed once more as it now reads"


def _run_once(
    parsed: Parsed,
    deployment: Deployment,
    config: GovernanceConfig | None,
    calibrated: Calibrated | None,
    summaries: Mapping[str, str] | None,
) -> Outcome:
    config = _check(deployment, config, calibrated)
    outline: Outline = parsed.outline
    model = deployment.model
    original = outline.view
    tool_list = validate_tools(parsed.tools)
    max_output_tokens = parsed.max_output_tokens
    if max_output_tokens is None:
        max_output = config.max_output_tokens
    elif isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens < 0:
        raise InvalidRequestError(f"max_output_tokens must be a non-negative integer, got {max_output_tokens!r}")
    else:
        max_output = max_output_tokens

    facts = resolve_model(model, config=config, provider=deployment.provider, model_info=deployment.model_info)
    profile = _pick_profile(config, facts.profile, facts.provider, model)
    ratio = profile.token_ratio if calibrated is None else float(calibrated.ratio)
    notes: list[str] = []
    left_alone = getattr(outline, "left_alone", None)
    history_upstream = bool(getattr(outline, "history_upstream", False))
    budget: int | None = None
    step_budget: int | None = None
    if facts.max_input_tokens is None:
        notes.append(f"no context window known for {model!r}: history not snipped")
    else:
        budget = max(0, facts.max_input_tokens - max_output - config.safety_buffer_tokens)
        if history_upstream:
            notes.append(
                "previous_response_id: the earlier history is stored upstream and cannot be governed; "
                "only the visible input was (nothing snipped)"
            )
        else:
            # Budget in tiktoken units: the provider's tokenizer counts `ratio` times more (or fewer).
            step_budget = math.floor(budget / ratio)
    counter = TokenCounter(encoding_for_model(model), token_cache(config.token_cache_size))
    ctx = Context(
        config=config,
        profile=profile,
        counter=counter,
        budget=step_budget,
        tools_tokens=counter.tools(tool_list),
        allow_prefill=profile.trailing_assistant is TrailingAssistant.IF_PREFILL and facts.prefill_supported(model),
        text_type=outline.text_type,
        format=outline.format,
        stable=config.stable_for(facts.max_input_tokens),
        summaries=summaries or {},
    )
    # What the conversation's previous request counted and walked, where this one begins with it.
    recall = conversations(config.conversation_cache_size).recall(outline, counter.encoding_name)
    seen = recall.seen if recall is not None else None
    if seen is not None:
        ctx.seed_all(original[: recall.reuse], seen.counts[: recall.reuse])  # type: ignore[union-attr]
    raw_before = ctx.tools_tokens + REPLY_PRIMING + ctx.total(original)

    if recall is not None:  # the walks the conversation's requests share: over the request as read
        walks = seen.walks if seen is not None and recall.reuse == seen.messages else {}
        ctx.memo.conversation = (original, recall.mark, walks)
    tally = Tally()
    governed = original
    # Tokens after each stage (tiktoken units), for the report's tokens removed per stage.
    ledger = Ledger(ctx, original, raw_before)
    if left_alone is not None:
        notes.append(left_alone)
    else:
        for step in _REPAIR:
            governed = tally.add(step(governed, ctx))
        ledger.after("repair", governed)
        repaired = governed
        governed = shrink(governed, ctx, tally)
        ledger.after_shrink(repaired, governed, tally.saved)
        if tally.over_budget:
            governed = tally.add(_TRUNCATE(governed, ctx.with_(original=repaired)))
        ledger.after("truncation", governed)
        governed = tally.add(_ROLES(governed, ctx))
        ledger.after("roles", governed)

    if recall is not None:
        recall.leave(counts_of(original[: recall.mark], ctx.memo.counts), dict(ctx.memo.kept))
    raw_after = ledger.raw
    over_budget = ctx.budget is not None and raw_after > ctx.budget
    if over_budget:
        notes.append(
            "over budget: even the smallest valid request (system, latest user message, newest turn) is too big"
        )
    parse_counts: Mapping[str, int] = getattr(outline, "parse_counts", None) or {}
    tally.counts.update(parse_counts)
    changed = (
        bool(parse_counts)
        or len(governed) != len(original)
        or any(a is not b for a, b in zip(governed, original, strict=False))
    )
    fields = outline.render(governed) if changed else outline.render(original)
    breakpoint_index = ctx.last_breakpoint(original)
    prefix_rewritten = breakpoint_index >= 0 and (
        len(governed) <= breakpoint_index or any(governed[i] is not original[i] for i in range(breakpoint_index + 1))
    )
    history = fields.get("messages", fields.get("input"))
    report = GovernanceReport(
        model=model,
        provider=facts.provider,
        profile=profile.name,
        context_window=facts.max_input_tokens,
        window_source=facts.window_source,
        budget=budget,
        max_output_tokens=max_output,
        tokens_before=math.ceil(raw_before * ratio),
        tokens_after=math.ceil(raw_after * ratio),
        tokens_removed=ledger.removed(ratio),
        messages_before=outline.count,
        messages_after=len(history) if isinstance(history, list) else outline.count,
        steps={k: v for k, v in sorted(tally.counts.items()) if v},
        over_budget=over_budget,
        changed=changed,
        cache_prefix_rewritten=prefix_rewritten,
        notes=tuple(notes + tally.notes),
        format=outline.format,
        token_ratio=round(ratio, 4),
        ratio_source="static" if calibrated is None else calibrated.source,
        cache_stable=ctx.stable,
        estimated_tokens=raw_after,
        large_uncompacted=large_uncompactable(tally.large_uncompacted),
    )
    return Outcome(fields=fields, report=report, governed=governed, context=ctx, cut=tally.cut)


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
