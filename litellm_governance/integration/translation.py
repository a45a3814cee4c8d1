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
budget, which a ``cache_stable`` replay follows. Learned per process (like a token ratio without a
shared cache), and only where ``calibrate`` is on.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, deque
from collections.abc import Hashable
from typing import Final

from .._config import GovernanceConfig

__all__ = ["FACTOR_STEP", "MAX_FACTOR", "MIN_FACTOR", "Translations", "budgeted"]

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
#: Targets remembered (the least recently seen go first).
_KEPT: Final = 512


class Translations:
    """The translation factor per (client format, pre-call target key)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[Hashable, deque[float]] = OrderedDict()
        #: The factor last applied per key: it stays while the ratio seen stays within `_SLACK` below it.
        self._applied: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def observe(self, key: Hashable, sent: int, translated: float, *, budget: int | None, sent_tokens: int) -> None:
        """The pre-call pass sent `sent` tokens (its own count) that the translation made
        `translated`. Only requests that came near their `budget` (half of it, in `sent_tokens`
        provider tokens) teach: those are the ones the factor decides."""
        if sent <= 0 or translated <= 0 or not budget or 2 * sent_tokens < budget:
            return
        factor = min(MAX_FACTOR, max(MIN_FACTOR, translated / sent))
        with self._lock:
            seen = self._seen.pop(key, None) or deque(maxlen=_SEEN)
            seen.append(factor)
            self._seen[key] = seen
            while len(self._seen) > _KEPT:
                gone, _ = self._seen.popitem(last=False)
                self._applied.pop(gone, None)

    def factor(self, key: Hashable) -> float | None:
        """The factor to budget with (rounded up to `FACTOR_STEP`), None while none is known or the
        translation changes nothing."""
        with self._lock:
            seen = self._seen.get(key)
            if not seen:
                return None
            largest = max(seen)
            applied = self._applied.get(key)
            if applied is None or not applied - _SLACK <= largest <= applied:
                steps = math.ceil(round((largest - 1.0) / FACTOR_STEP, 6))
                applied = self._applied[key] = round(1.0 + steps * FACTOR_STEP, 4)
        return None if applied == 1.0 else applied


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
