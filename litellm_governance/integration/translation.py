"""What LiteLLM's translation adds to a request, learned per client format and target, so that the
proxy's pre-call pass fits the request as the provider will receive it.

On a translated route (``/v1/messages`` or ``/v1/responses`` to a chat-only provider such as GLM)
the pre-call pass fits the client's body, and the deployment pass fits the chat call LiteLLM
translates it into. The translation counts more than the client's body: each tool call's input
becomes a JSON string, each tool result a message of its own with its id (about 5 % more on Claude
Code sessions). So the pre-call output, fitted to the budget, no longer fits once translated, and
the deployment pass compacts or cuts again, on its own terms, rewriting the prefix the provider's
prompt cache holds.

The other way round, the translation of a Codex body to chat counts half of it or less: LiteLLM drops
the reasoning items' ``encrypted_content`` (only OpenAI can read it), which the pre-call pass counted.
So GLM received a third to a half of the budget it has room for, and the agent lost history there
was room for.

The deployment pass sees what the pre-call pass sent (its report, in the request's metadata) and
what the translation made of it. Their ratio on the newest requests that came near their budget (the
largest of the last `_SEEN`: a pre-call output that fits once translated leaves the deployment pass
nothing to cut) is the factor the next pre-call pass for the same client format and target fits
with: the budget divided by it (`budgeted`). The factor is rounded up to `FACTOR_STEP` and kept
while that ratio stays within `_SLACK` below it, so that it changes rarely: each change moves the
budget, which a ``cache_stable`` replay follows. Learned only where ``calibrate`` is on, and kept
as the token ratios are (`calibration_store`): per process, and where the proxy has Redis, shared
with every worker and instance under ``litellm_governance:translation:v1:*``, so that a worker's
first request on a route is fitted with what the others learned.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._config import GovernanceConfig
from .calibration_store import CalibrationStore, Kind, shared_cache
from .logonce import LogOnce

__all__ = [
    "FACTOR_STEP",
    "MAX_FACTOR",
    "MIN_FACTOR",
    "TRANSLATION",
    "TRANSLATION_KEY_PREFIX",
    "Factor",
    "Seen",
    "Translations",
    "budgeted",
]

logger = logging.getLogger("litellm_governance")

#: Factors are applied rounded up to this step.
FACTOR_STEP: Final = 0.02
#: At most this factor (a request of tiny tool results translates to far more; it is not the rule).
MAX_FACTOR: Final = 1.3
#: At least this factor (a budget at most four times the deployment's).
MIN_FACTOR: Final = 0.25
#: A factor applied stays while the ratio seen stays within this much below it (it rises at once).
_SLACK: Final = 2 * FACTOR_STEP
#: Observations kept per target: the factor covers the largest of them.
_SEEN: Final = 12
#: Targets remembered per process (the first learned go first).
_KEPT: Final = 512
#: Version of the shared value; a changed rule gets a new one, so old values are ignored.
VALUE_VERSION: Final = 1
#: Key of a route's factor in the proxy's shared cache (Redis), followed by the client format, the
#: target's provider/model and a digest of what else its key holds.
TRANSLATION_KEY_PREFIX: Final = f"litellm_governance:translation:v{VALUE_VERSION}:"


@dataclass(frozen=True)
class Factor:
    """What is known of one route's translation: the newest ratios seen (at most `_SEEN`, oldest
    first) and the factor applied."""

    seen: tuple[float, ...] = ()
    applied: float | None = None

    def observe(self, ratio: float) -> Factor:
        """With `ratio` (bounded) seen last: the applied factor follows the largest of the newest
        ratios, rounded up to `FACTOR_STEP`, and stays while that stays within `_SLACK` below it."""
        seen = (*self.seen, min(MAX_FACTOR, max(MIN_FACTOR, ratio)))[-_SEEN:]
        largest = max(seen)
        applied = self.applied
        if applied is None or not applied - _SLACK <= largest <= applied:
            applied = round(1.0 + math.ceil(round((largest - 1.0) / FACTOR_STEP, 6)) * FACTOR_STEP, 4)
        return Factor(seen, applied)

    @property
    def value(self) -> float | None:
        """The factor to budget with, None while none is known or the translation changes nothing."""
        return None if self.applied is None or self.applied == 1.0 else self.applied

    def to_value(self) -> dict[str, object]:
        """The JSON value kept in the shared cache."""
        return {"v": VALUE_VERSION, "s": list(self.seen), "a": self.applied}

    @classmethod
    def from_value(cls, value: object) -> Factor | None:
        """The state a shared value holds; None for no value, another version or a damaged one."""
        if not isinstance(value, Mapping) or value.get("v") != VALUE_VERSION:
            return None
        seen, applied = value.get("s"), value.get("a")
        if not isinstance(seen, list) or not all(_ratio(x) for x in seen) or not (applied is None or _ratio(applied)):
            return None
        return cls(tuple(float(x) for x in seen[-_SEEN:]), None if applied is None else float(applied))


def _ratio(value: object) -> bool:
    return type(value) in (int, float) and MIN_FACTOR <= value <= MAX_FACTOR  # type: ignore[operator]


@dataclass(frozen=True)
class Seen:
    """News: a translation counted `ratio` times what the pre-call pass sent."""

    ratio: float

    def apply(self, state: Factor) -> Factor:
        return state.observe(self.ratio)


#: The translation factors, one per (client format, pre-call target), in a `CalibrationStore`.
TRANSLATION: Final = Kind(prefix=TRANSLATION_KEY_PREFIX, empty=Factor, from_value=Factor.from_value)


def route_key(key: Hashable) -> str:
    """The store key of a (client format, `Deployment.key()`) pair: the same in every process."""
    fmt, target = key if isinstance(key, tuple) and len(key) == 2 else ("", key)
    named = f"{target[0]}/{target[1]}" if isinstance(target, tuple) and len(target) >= 2 else ""
    digest = hashlib.sha256(repr(key).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{fmt}:{named}:{digest}"


class Translations:
    """The translation factor per (client format, pre-call target key): this process's copy, shared
    through the proxy's Redis where it has one (`CalibrationStore`)."""

    def __init__(self, shared: Callable[[], Any] = shared_cache) -> None:
        self._store = CalibrationStore(shared, kind=TRANSLATION, kept=_KEPT)
        self._failures = LogOnce(logger)

    def observe(self, key: Hashable, sent: int, translated: float, *, budget: int | None, sent_tokens: int) -> None:
        """The pre-call pass sent `sent` tokens (its own count) that the translation made
        `translated`. Only requests that came near their `budget` (half of it, in `sent_tokens`
        provider tokens) teach: those are the ones the factor decides."""
        if sent <= 0 or translated <= 0 or not budget or 2 * sent_tokens < budget:
            return
        try:
            self._store.learn(route_key(key), Seen(translated / sent))
        except Exception as exc:  # noqa: BLE001 - learning never fails a request
            self._failures.failure(exc, "translation factor not shared (%s at %s): learned in this process")

    def factor(self, key: Hashable) -> float | None:
        """This process's factor for `key`: what `Factor.value` says (no read of the shared cache)."""
        state = self._store.known(route_key(key))
        return state.value if isinstance(state, Factor) else None

    def reset(self) -> None:
        """Forget what this process learned (the shared cache is left alone: delete its keys)."""
        self._store.reset()

    async def lookup(self, key: Hashable) -> float | None:
        """The factor for `key`, read from the shared cache where there is one (the first time in this
        process it waits for that read, briefly; after that the copy is refreshed in the background)."""
        try:
            state = await self._store.lookup(route_key(key))
        except Exception as exc:  # noqa: BLE001 - the factor never fails a request: it is fitted without a new read
            self._failures.failure(exc, "translation factor not read (%s at %s): this process's copy is used")
            return self.factor(key)
        return state.value if isinstance(state, Factor) else None


def budgeted(config: GovernanceConfig, window: int, max_output: int, factor: float) -> GovernanceConfig:
    """`config` for a pre-call pass whose request will count `factor` times as much once translated:
    the window whose budget is the deployment's divided by `factor` (smaller when the translation adds,
    larger when it drops). The prompt-caching mode stays the deployment's own (it depends on the
    window)."""
    budget = window - max_output - config.safety_buffer_tokens
    if budget <= 0:
        return config
    fitted = window - math.ceil(budget * (1.0 - 1.0 / factor))
    return config.replace(context_window_tokens=fitted, cache_stable=config.stable_for(window))
