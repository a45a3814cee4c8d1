"""`govern()`: the steps in their order, the budget, and the report.

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
governed messages (the proxy runs two hooks per request) is a few cheap scans.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._backfill import Backfill
from ._config import GovernanceConfig
from ._context import Context
from ._errors import ConfigError, InvalidRequestError
from ._ids import UniqueToolCallIds
from ._messages import Message, validate_messages, validate_tools
from ._microcompact import Microcompact
from ._models import resolve_model
from ._orphans import DropOrphans
from ._profiles import PROFILES, Profile, TrailingAssistant, profile_for
from ._report import GovernanceReport
from ._roles import EnforceRoles
from ._snip import Snip
from ._stable import StableShrink
from ._tokens import REPLY_PRIMING, TokenCache, TokenCounter, encoding_for_model

__all__ = ["GovernanceResult", "govern", "token_cache"]

_REPAIR = (DropOrphans(), Backfill(), UniqueToolCallIds())
_SNIP = Snip()
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
    """The governed messages (a new list; unchanged messages are the input's own objects)."""

    messages: list[Message]
    report: GovernanceReport


def govern(
    messages: Sequence[Message],
    *,
    model: str,
    tools: Sequence[Any] | None = None,
    max_output_tokens: int | None = None,
    config: GovernanceConfig | None = None,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
) -> GovernanceResult:
    """Fit `messages` to `model`'s budget and its provider's rules. Never mutates the input.

    `provider` is LiteLLM's provider string when already known (the deployment's), and
    `model_info` the deployment's ``model_info`` (``max_input_tokens``,
    ``supports_assistant_prefill``, ``governance_profile``).
    """
    config = _DEFAULT_CONFIG if config is None else config
    if not isinstance(config, GovernanceConfig):
        raise InvalidRequestError(f"config must be a GovernanceConfig, got {type(config).__name__}")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError(f"model must be a non-empty LiteLLM model string, got {model!r}")
    if provider is not None and (not isinstance(provider, str) or not provider):
        raise InvalidRequestError(f"provider must be a LiteLLM provider string or None, got {type(provider).__name__}")
    if model_info is not None and not isinstance(model_info, Mapping):
        raise InvalidRequestError(f"model_info must be a mapping or None, got {type(model_info).__name__}")
    original = validate_messages(messages)
    tool_list = validate_tools(tools)
    if max_output_tokens is None:
        max_output = config.max_output_tokens
    elif isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens < 0:
        raise InvalidRequestError(f"max_output_tokens must be a non-negative integer, got {max_output_tokens!r}")
    else:
        max_output = max_output_tokens

    facts = resolve_model(model, config=config, provider=provider, model_info=model_info)
    profile = _pick_profile(config, facts.profile, facts.provider, model)
    ctx = Context(
        config=config,
        profile=profile,
        counter=TokenCounter(encoding_for_model(model), token_cache(config.token_cache_size)),
    )
    if profile.trailing_assistant is TrailingAssistant.IF_PREFILL:
        ctx.allow_prefill = facts.prefill_supported(model)
    notes: list[str] = []
    budget: int | None = None
    if facts.max_input_tokens is None:
        notes.append(f"no context window known for {model!r}: history not snipped")
    else:
        budget = max(0, facts.max_input_tokens - max_output - config.safety_buffer_tokens)
        # Budget in tiktoken units: the provider's tokenizer counts up to `token_ratio` times more.
        ctx.budget = math.floor(budget / profile.token_ratio)
    ctx.tools_tokens = ctx.counter.tools(tool_list)
    raw_before = ctx.tools_tokens + REPLY_PRIMING + sum(ctx.tokens(m) for m in original)

    governed = original
    for step in _REPAIR:
        governed = step(governed, ctx)
    governed = _shrink(governed, ctx)
    governed = _ROLES(governed, ctx)

    raw_after = ctx.tools_tokens + REPLY_PRIMING + sum(ctx.tokens(m) for m in governed)
    over_budget = ctx.budget is not None and raw_after > ctx.budget
    if over_budget:
        notes.append(
            "over budget: even the smallest valid request (system, latest user message, newest turn) is too big"
        )
    changed = len(governed) != len(original) or any(a is not b for a, b in zip(governed, original, strict=False))
    breakpoint_index = ctx.last_breakpoint(original)
    prefix_rewritten = breakpoint_index >= 0 and (
        len(governed) <= breakpoint_index or any(governed[i] is not original[i] for i in range(breakpoint_index + 1))
    )
    report = GovernanceReport(
        model=model,
        provider=facts.provider,
        profile=profile.name,
        context_window=facts.max_input_tokens,
        window_source=facts.window_source,
        budget=budget,
        max_output_tokens=max_output,
        tokens_before=math.ceil(raw_before * profile.token_ratio),
        tokens_after=math.ceil(raw_after * profile.token_ratio),
        messages_before=len(original),
        messages_after=len(governed),
        steps={k: v for k, v in sorted(ctx.counts.items()) if v},
        over_budget=over_budget,
        changed=changed,
        cache_prefix_rewritten=prefix_rewritten,
        notes=tuple(notes + ctx.notes),
    )
    return GovernanceResult(messages=list(governed), report=report)


def _pick_profile(config: GovernanceConfig, deployment_profile: str | None, provider: str, model: str) -> Profile:
    if config.profile is not None:
        return PROFILES[config.profile]
    if deployment_profile is not None:
        try:
            return PROFILES[deployment_profile]
        except KeyError:
            raise ConfigError(
                f"model_info.governance_profile must be one of {', '.join(sorted(PROFILES))}, "
                f"got {deployment_profile!r}"
            ) from None
    return profile_for(provider, model)


def _shrink(messages: list[Message], ctx: Context) -> list[Message]:
    """Compact, then snip; retry with fewer scruples while the budget forces it."""
    protected = ctx.config.respect_cache_control and ctx.last_breakpoint(messages) >= 0
    attempts: list[tuple[int | None, bool]] = [(None, False)]
    if protected:
        attempts.append((None, True))  # compacting behind the breakpoint beats cutting it off
    attempts.append((0, True))  # compacting the newest results beats a request that cannot fit
    counts_before = ctx.counts.copy()
    result = messages
    for keep_recent, ignore_breakpoints in attempts:
        ctx.counts = counts_before.copy()
        ctx.over_budget = False
        ctx.ignore_breakpoints = ignore_breakpoints
        if ctx.config.cache_stable:
            result = StableShrink(keep_recent=keep_recent)(messages, ctx)
        else:
            result = _SNIP(Microcompact(keep_recent=keep_recent)(messages, ctx), ctx)
        if ctx.over_budget:
            continue
        if protected and not ignore_breakpoints and ctx.counts["snipped"] > counts_before["snipped"]:
            continue  # a cut would drop what the breakpoint protects: try compacting it first
        break
    return result
