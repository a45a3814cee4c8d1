"""Calibration: learning how many tokens a deployment's provider counts per tiktoken token.

Budgets are computed in tiktoken tokens times a ratio (`Profile.token_ratio`: 1.0, 1.1 or 1.15).
Real tokenizers differ per model and per content, and every successful response says the truth:
``usage.prompt_tokens``. This module is the pure part of learning from it: what one observation
teaches (`sample_ratio`; `_provider_answers` reads what an answer says), the estimator
(`Calibration`), and its form in a shared cache (`Calibration.to_value` /
`Calibration.from_value`). No LiteLLM, no I/O, no clock:
`integration.learning` decides when to learn, `integration.calibration_store` where the state lives.

The estimator, and why:

* **A high quantile of recent samples.** Each successful call gives one sample, ``reported /
  estimated`` (the provider's prompt tokens over the plugin's tiktoken estimate of exactly what was
  sent). The ratio used is the `QUANTILE` (0.9, nearest rank) of the newest `WINDOW` (24) samples:
  an undercount is a rejected request, an overcount only a little unused window, so the estimate
  leans high; a quantile ignores the few outliers (an image the provider bills heavily, a server-side
  tool loop whose usage sums several calls) that would drag a mean or a maximum; and a window of
  recent samples follows a conversation whose content mix drifts (code, prose, many short compacted
  results), which an all-time statistic would not. With few samples the quantile is their maximum.
* **A minimum number of samples** (`MIN_SAMPLES`, 5) before the learned ratio replaces the profile's.
  Requests smaller than `MIN_SAMPLE_TOKENS` teach nothing (fixed per-request framing dominates them).
* **Bounds**: the ratio used stays within [`MIN_RATIO`, `MAX_RATIO`]; a sample outside
  [`MIN_RATIO` / 2, `MAX_RATIO` * 2] is nonsense (a usage that counts something else) and is dropped.
* **Tightening**: a context-length rejection sets a *floor* at once, so the next request fits even
  before `MIN_SAMPLES`. When the provider's text says how many tokens it counted, the rejection is
  also a sample, and the floor is that measured ratio plus `TIGHTEN_MARGIN`; when it does not (GLM,
  Bedrock, OpenAI Responses), the floor is the ratio that was used times `TIGHTEN_STEP`, and at least
  what the window itself proves. The floor holds for the next `FLOOR_SPAN` samples, then the samples
  speak alone.
* **Held, for a ``cache_stable`` budget** (`ratio_for`, `HOLD_HEADROOM`, `HOLD_BAND`). The quantile
  moves with nearly every sample, and each move moves the budget. A ``cache_stable`` deployment
  replays its conversation's growth under that budget, so a budget that moves rewrites the
  prompt-cached prefix: in a replay of a Claude Code session to a GLM deployment through a real
  proxy (64k window, 200 turns), 17 of the 47 prefix rewrites came on a turn where the learned ratio
  had moved. So there the ratio applied is held: set to the learned ratio times `HOLD_HEADROOM`, it
  stays while the learned ratio stays between it and `HOLD_BAND` below it, and is set anew when the
  learned ratio rises above it (at once: an undercount is a rejected request) or falls below that
  band. The cost is a budget up to that much tighter than the learned ratio alone gives; where
  every turn is fitted to the full budget (no ``cache_stable``), the learned ratio is followed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final, TypeAlias

from ._provider_answers import ContextError, parse_context_error, prompt_tokens_of

__all__ = [
    "FLOOR_SPAN",
    "HOLD_BAND",
    "HOLD_HEADROOM",
    "LEARNED_MARGIN",
    "MAX_RATIO",
    "MIN_RATIO",
    "MIN_SAMPLES",
    "MIN_SAMPLE_TOKENS",
    "QUANTILE",
    "TIGHTEN_MARGIN",
    "TIGHTEN_STEP",
    "WINDOW",
    "Calibration",
    "ContextError",
    "Event",
    "Rejection",
    "Sample",
    "deployment_key",
    "parse_context_error",
    "prompt_tokens_of",
    "rejection",
    "sample_ratio",
]

#: Newest samples kept per deployment.
WINDOW: Final = 24
#: Quantile of the kept samples used as the ratio (nearest rank).
QUANTILE: Final = 0.9
#: The learned ratio is the quantile times this: the content of the next request is not the content
#: of the last ones (its mix of code, prose and short compacted results drifts turn by turn).
LEARNED_MARGIN: Final = 1.03
#: The ratio applied is set to the learned ratio times this (room for it to rise without a change).
HOLD_HEADROOM: Final = 1.03
#: The ratio applied is set anew when the learned ratio falls this far below it.
HOLD_BAND: Final = 1.06
#: Samples needed before the learned ratio replaces the profile's.
MIN_SAMPLES: Final = 5
#: Requests estimated below this many tiktoken tokens are not samples.
MIN_SAMPLE_TOKENS: Final = 1000
#: Bounds of the ratio used.
MIN_RATIO: Final = 0.5
MAX_RATIO: Final = 2.5
#: After a rejection whose text gives the provider's count: the floor is the measured ratio times this.
TIGHTEN_MARGIN: Final = 1.02
#: After a rejection without a count: the floor is the ratio used times this.
TIGHTEN_STEP: Final = 1.1
#: A floor holds for this many samples after the rejection that set it.
FLOOR_SPAN: Final = 24
#: Version of the cache value (`Calibration.to_value`); a value of another version is ignored.
VALUE_VERSION: Final = 1

# Keys safe to use verbatim in a cache key (LiteLLM's deployment ids are sha256 hex digests).
_SAFE_ID: Final = re.compile(r"^[A-Za-z0-9_.:@/-]{1,128}$")


@dataclass(frozen=True)
class Calibration:
    """What was learned about one deployment. Immutable: every update returns a new value."""

    #: Newest samples (provider tokens per tiktoken token), oldest first, at most `WINDOW`.
    samples: tuple[float, ...] = ()
    #: Samples seen in total (the ``n`` of ``learned, n=…``).
    count: int = 0
    #: A lower bound set by a context-length rejection, or None.
    floor: float | None = None
    #: The floor holds while `count` is below this.
    floor_until: int = 0
    #: The learned ratio as applied, held while the learned one moves little (`held`); None: not
    #: recorded (a state built directly, or read from a value written before it was kept).
    applied: float | None = None

    # ---- the ratio -------------------------------------------------------------------------------

    @property
    def learned(self) -> float | None:
        """The quantile of the kept samples, once there are `MIN_SAMPLES` of them."""
        if len(self.samples) < MIN_SAMPLES:
            return None
        ordered = sorted(self.samples)
        rank = max(1, math.ceil(QUANTILE * len(ordered)))
        return ordered[rank - 1] * LEARNED_MARGIN

    @property
    def held(self) -> float | None:
        """The learned ratio as applied (module docstring: held, not followed), None before
        `MIN_SAMPLES`."""
        return _hold(self.applied, self.learned)

    @property
    def active_floor(self) -> float | None:
        """The rejection floor, while it holds."""
        return self.floor if self.floor is not None and self.count < self.floor_until else None

    @property
    def ratio(self) -> float | None:
        """The ratio to budget with, or None (use the profile's) when nothing was learned yet."""
        return self.ratio_for(held=False)

    def ratio_for(self, *, held: bool) -> float | None:
        """`ratio`, with the learned ratio `held` (for a ``cache_stable`` budget) or followed."""
        candidates = [x for x in (self.held if held else self.learned, self.active_floor) if x is not None]
        return _bounded(max(candidates)) if candidates else None

    @property
    def source(self) -> str:
        """For the report: ``learned, n=12`` (``, tightened`` while a rejection's floor decides)."""
        learned, floor = self.learned, self.active_floor
        tightened = floor is not None and (learned is None or floor > learned)
        return f"learned, n={self.count}" + (", tightened" if tightened else "")

    # ---- updates ---------------------------------------------------------------------------------

    def with_sample(self, ratio: float) -> Calibration:
        """This state with one more sample (a nonsense sample is dropped: same state)."""
        if not _plausible(ratio):
            return self
        samples = (*self.samples, round(float(ratio), 4))[-WINDOW:]
        state = replace(self, samples=samples, count=self.count + 1)
        return replace(state, applied=_hold(self.held, state.learned))

    def after_rejection(self, *, used: float, measured: float | None, proven: float | None = None) -> Calibration:
        """This state after a context-length rejection of a request budgeted with ratio `used`.

        `measured` is the ratio the provider's own count proves (its count over the estimate), when
        its text gave one; `proven` a lower bound the window proves without a count. The next
        request is budgeted with at least the new floor.
        """
        state = self
        if measured is not None and _plausible(measured):
            state = state.with_sample(measured)
        if measured is not None and _plausible(measured) and measured > used:
            floor = measured * TIGHTEN_MARGIN
        else:
            floor = used * TIGHTEN_STEP
            if proven is not None and _plausible(proven):
                floor = max(floor, proven * TIGHTEN_MARGIN)
        floor = _bounded(max(floor, state.active_floor or 0.0))
        # Rounded up (to the 4 decimals the cache keeps): a floor is never below what was proven.
        return replace(state, floor=math.ceil(floor * 10_000 - 1e-6) / 10_000, floor_until=state.count + FLOOR_SPAN)

    # ---- the cache value -------------------------------------------------------------------------

    def to_value(self) -> dict[str, object]:
        """A small JSON-able dict for a shared cache (LiteLLM's RedisCache stores it as JSON)."""
        value: dict[str, object] = {"v": VALUE_VERSION, "n": self.count, "s": list(self.samples)}
        if self.floor is not None:
            value["f"] = self.floor
            value["u"] = self.floor_until
        if self.applied is not None:
            value["a"] = self.applied
        return value

    @classmethod
    def from_value(cls, value: object) -> Calibration | None:
        """Read `to_value`'s dict (or its JSON text) back; None for anything else (another version,
        a damaged or foreign value): a bad cache entry is ignored, never an error."""
        if isinstance(value, (str, bytes)):
            import json

            try:
                value = json.loads(value)
            except ValueError:
                return None
        if not isinstance(value, Mapping) or value.get("v") != VALUE_VERSION:
            return None
        count, until = _as_int(value.get("n")), _as_int(value.get("u", 0))
        samples, floor, applied = value.get("s"), value.get("f"), value.get("a")
        if count is None or until is None or not isinstance(samples, list):
            return None
        if applied is not None and not (_is_number(applied) and _plausible(float(applied))):
            applied = None  # (held anew from the samples)
        kept = tuple(round(float(s), 4) for s in samples if _is_number(s) and _plausible(float(s)))[-WINDOW:]
        if floor is not None and not (_is_number(floor) and _plausible(float(floor))):
            return None
        return cls(
            samples=kept,
            count=max(count, len(kept)),
            floor=_bounded(float(floor)) if floor is not None else None,
            floor_until=until,
            applied=float(applied) if applied is not None else None,
        )


def sample_ratio(reported: int | None, estimated: int) -> float | None:
    """The sample one successful call gives (None when it teaches nothing: too small, no usage)."""
    if reported is None or reported <= 0 or estimated < MIN_SAMPLE_TOKENS:
        return None
    ratio = reported / estimated
    return ratio if _plausible(ratio) else None


def deployment_key(model_info: Mapping[str, object] | None, model: str, api_base: object = None) -> str:
    """The key calibration is kept under: LiteLLM's ``model_info.id`` (the Router and the proxy give
    every deployment one, the same in every instance with the same config), else the model and its
    ``api_base``. Ids that are not plain tokens, and model + api_base, are hashed (no secrets or
    odd characters in cache keys)."""
    ident = model_info.get("id") if isinstance(model_info, Mapping) else None
    if isinstance(ident, (str, int)) and not isinstance(ident, bool) and str(ident):
        text = str(ident)
        return text if _SAFE_ID.match(text) else "id-" + _digest(text)
    base = api_base if isinstance(api_base, str) else ""
    return "model-" + _digest(f"{model}\x00{base}")


@dataclass(frozen=True)
class Sample:
    """A successful call: the provider's prompt count over the estimate of what was sent."""

    ratio: float

    def apply(self, state: Calibration) -> Calibration:
        return state.with_sample(self.ratio)


@dataclass(frozen=True)
class Rejection:
    """A context-length rejection of a request budgeted with ratio `used` (see
    `Calibration.after_rejection`). `over_budget`: even the smallest valid request did not fit the
    budget, so the rejection says nothing about the ratio beyond its `measured` sample."""

    used: float
    measured: float | None = None
    proven: float | None = None
    over_budget: bool = False

    def apply(self, state: Calibration) -> Calibration:
        if self.over_budget:
            return state.with_sample(self.measured) if self.measured is not None else state
        return state.after_rejection(used=self.used, measured=self.measured, proven=self.proven)


Event: TypeAlias = Sample | Rejection


def rejection(
    error: ContextError,
    *,
    estimated: int,
    used: float,
    max_output_sent: int | None = None,
    window: int | None = None,
    over_budget: bool = False,
) -> Rejection:
    """The event a context-length rejection is, for a request estimated at `estimated` tiktoken
    tokens and budgeted with ratio `used`: the ratio the provider's count proves (when its text gave
    one), and the lower bound its window proves (it counted more than the window less the output
    the request asked for)."""
    measured: float | None = None
    proven: float | None = None
    if estimated > 0:
        prompt = error.prompt(max_output_sent)
        if prompt is not None:
            measured = prompt / estimated
        limit = error.limit or window
        if limit is not None and limit - (max_output_sent or 0) > 0:
            proven = (limit - (max_output_sent or 0)) / estimated
    return Rejection(used=used, measured=measured, proven=proven, over_budget=over_budget)


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _hold(applied: float | None, learned: float | None) -> float | None:
    """The ratio to apply, given the one applied so far and the learned one now (module docstring)."""
    if learned is None:
        return None
    if applied is not None and applied / HOLD_BAND <= learned <= applied:
        return applied
    # Rounded up to the 4 decimals the cache keeps: never below the learned ratio times the headroom.
    return math.ceil(_bounded(learned * HOLD_HEADROOM) * 10_000 - 1e-6) / 10_000


def _bounded(ratio: float) -> float:
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


def _plausible(ratio: float) -> bool:
    return math.isfinite(ratio) and MIN_RATIO / 2 <= ratio <= MAX_RATIO * 2


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
