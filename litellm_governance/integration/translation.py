"""What LiteLLM's translation adds to a request, learned per client format and target, so that the
proxy's pre-call pass fits the request as the provider will receive it.

On a translated route (``/v1/messages`` or ``/v1/responses`` to a chat-only provider such as GLM)
the pre-call pass fits the client's body, and the deployment pass fits the chat call LiteLLM
translates it into. The translation counts more than the client's body: each tool call's input
becomes a JSON string, each tool result a message of its own with its id (about 5 % more on Claude
Code sessions). So the pre-call output, fitted to the budget, no longer fits once translated, and
the deployment pass compacts or cuts again, on its own terms, rewriting the prefix the provider's
prompt cache holds.

The deployment pass sees what the pre-call pass sent (its report, in the request's metadata) and
what the translation made of it. Their ratio, averaged over the requests that came near their
budget, is the factor the next pre-call pass for the same client format and target fits with: the
window less what the translation would add to a full budget (`budgeted`). The factor is rounded up
to `FACTOR_STEP` and kept while the average stays within `_SLACK` below it, so that it changes
rarely: each change moves the budget, which a ``cache_stable`` replay follows. Learned per
process (like a token ratio without a shared cache), and only where ``calibrate`` is on.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Final

from .._config import GovernanceConfig

__all__ = ["FACTOR_STEP", "MAX_FACTOR", "Translations", "budgeted"]

#: Factors are applied rounded up to this step.
FACTOR_STEP: Final = 0.02
#: At most this factor (a request of tiny tool results translates to far more; it is not the rule).
MAX_FACTOR: Final = 1.3
#: A factor applied stays while the average stays within this much below it (it rises at once).
_SLACK: Final = 2 * FACTOR_STEP
#: Weight of a new observation in the running average.
_WEIGHT: Final = 0.2
#: Targets remembered (the least recently seen go first).
_KEPT: Final = 512


class Translations:
    """The translation factor per (client format, pre-call target key)."""

    def __init__(self) -> None:
        self._average: OrderedDict[Hashable, float] = OrderedDict()
        #: The factor last applied per key: it stays while the average stays within `_SLACK` below it.
        self._applied: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def observe(self, key: Hashable, sent: int, translated: float, *, budget: int | None, sent_tokens: int) -> None:
        """The pre-call pass sent `sent` tokens (its own count) that the translation made
        `translated`. Only requests that came near their `budget` (half of it, in `sent_tokens`
        provider tokens) teach: those are the ones the factor decides."""
        if sent <= 0 or translated <= 0 or not budget or 2 * sent_tokens < budget:
            return
        factor = min(MAX_FACTOR, max(1.0, translated / sent))
        with self._lock:
            before = self._average.pop(key, None)
            self._average[key] = factor if before is None else before + _WEIGHT * (factor - before)
            while len(self._average) > _KEPT:
                gone, _ = self._average.popitem(last=False)
                self._applied.pop(gone, None)

    def factor(self, key: Hashable) -> float | None:
        """The factor to budget with (rounded up to `FACTOR_STEP`), None while none is known or the
        translation adds nothing."""
        with self._lock:
            average = self._average.get(key)
            if average is None:
                return None
            applied = self._applied.get(key)
            if applied is None or not applied - _SLACK <= average <= applied:
                steps = math.ceil(round((average - 1.0) / FACTOR_STEP, 6))
                applied = self._applied[key] = round(1.0 + max(0, steps) * FACTOR_STEP, 4)
        return None if applied <= 1.0 else applied


def budgeted(config: GovernanceConfig, window: int, max_output: int, factor: float) -> GovernanceConfig:
    """`config` for a pre-call pass whose request will count `factor` times more once translated:
    the window less what the translation adds to a full budget. The prompt-caching mode stays the
    deployment's own (it depends on the window)."""
    budget = window - max_output - config.safety_buffer_tokens
    if budget <= 0:
        return config
    smaller = window - math.ceil(budget * (1.0 - 1.0 / factor))
    return config.replace(context_window_tokens=smaller, cache_stable=config.stable_for(window))
