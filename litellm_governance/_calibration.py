"""Calibration, the pure part: what a provider's answer says about the prompt it counted (``usage``,
a context-length rejection's figures), what one answer teaches (`sample_ratio`, `rejection`), the
estimator (`Calibration`) and its form in a shared cache. No LiteLLM, no I/O, no clock; the
estimator's reasons are in docs/calibration.md."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final, TypeAlias, TypeGuard

#: Newest samples kept per deployment.
WINDOW: Final = 24
#: Quantile of the kept samples used as the ratio (nearest rank): an undercount is a rejected request.
QUANTILE: Final = 0.9
#: The learned ratio is the quantile times this: the next request's content is not the last ones'.
LEARNED_MARGIN: Final = 1.03
#: For a ``cache_stable`` budget the ratio applied is held: set to the learned ratio times this ...
HOLD_HEADROOM: Final = 1.03
#: ... and set anew when the learned ratio rises above it or falls this far below it.
HOLD_BAND: Final = 1.06
#: Samples needed before the learned ratio replaces the profile's.
MIN_SAMPLES: Final = 5
#: Requests estimated below this many tiktoken tokens are not samples (fixed framing dominates them).
MIN_SAMPLE_TOKENS: Final = 1000
#: Bounds of the ratio used (a sample beyond half and twice these is nonsense, and dropped).
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


# ---- what an answer says ---------------------------------------------------------------------------


def prompt_tokens_of(usage: object) -> int | None:
    """The prompt size a response's usage (a mapping or a pydantic object) reports: ``prompt_tokens``
    (chat; LiteLLM's, which counts Anthropic's cache reads and writes), else ``input_tokens`` plus
    Anthropic's ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` (which Anthropic's
    ``input_tokens`` leaves out; the Responses API has no such fields)."""
    if usage is None:
        return None

    def field(name: str) -> int | None:
        return _as_int(usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None))

    prompt = field("prompt_tokens")
    if prompt is not None and prompt > 0:
        return prompt
    count = field("input_tokens")
    if count is None:
        return None
    count += (field("cache_read_input_tokens") or 0) + (field("cache_creation_input_tokens") or 0)
    return count if count > 0 else None


@dataclass(frozen=True)
class ContextError:
    """What a provider's context-length error says; every figure is optional."""

    #: The provider's count of the prompt (the messages, tools and system prompt).
    prompt_tokens: int | None = None
    #: The prompt plus the requested output, when the text only gives their sum.
    requested_tokens: int | None = None
    #: The window (or the limit) the text names.
    limit: int | None = None

    def prompt(self, max_output_sent: int | None) -> int | None:
        """The provider's prompt count, from the sum when needed (minus the output the request asked for)."""
        if self.prompt_tokens is not None or self.requested_tokens is None:
            return self.prompt_tokens
        prompt = self.requested_tokens - (max_output_sent or 0)
        return prompt if prompt > 0 else None


_N = r"([0-9][0-9,_]*)"
# Texts that give the provider's prompt count, most specific first, each with the groups of the prompt
# count and of the limit. Sources: `testing.emulation.RULES` (each rule cites its provider's report).
_PROMPT_PATTERNS: Final = tuple(
    (re.compile(pattern, re.IGNORECASE), groups)
    for pattern, groups in (
        # OpenAI, DeepSeek, vLLM: "... is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, ..."
        (rf"maximum context length is {_N} tokens.*?\({_N} in the messages", (2, 1)),
        # OpenAI: "... is 8192 tokens. However, your messages resulted in 9000 tokens."
        (rf"maximum context length is {_N} tokens.*?resulted in {_N} tokens", (2, 1)),
        # vLLM (newer): "... is 32768 tokens. However, your request has 40000 input tokens."
        (rf"maximum context length is {_N} tokens.*?request has {_N} input tokens", (2, 1)),
        # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
        (rf"prompt is too long: {_N} tokens > {_N}", (1, 2)),
        # Anthropic: "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000"
        (rf"input length and `?max_tokens`? exceed context limit: {_N} \+ {_N} > {_N}", (1, 3)),
        # Gemini: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
        (rf"input token count \({_N}\) exceeds the maximum number of tokens allowed \({_N}\)", (1, 2)),
        # Mistral: "Prompt contains 40000 tokens, too large for model with 32768 maximum context length"
        (rf"prompt contains {_N} tokens,? too large for model with {_N}", (1, 2)),
    )
)
# Moonshot gives the prompt plus the requested output: "exceeded model token limit: 262144 (requested: 300000)".
_REQUESTED_PATTERN: Final = re.compile(rf"exceeded model token limit: {_N} \(requested: {_N}\)", re.IGNORECASE)
# Texts that say the prompt is too long without a count. Kept specific: a false match raises a ratio.
_CONTEXT_PHRASES: Final = re.compile(
    "|".join(
        (
            r"context_length_exceeded",
            r"maximum context length",
            r"context window",  # OpenAI Responses: "Your input exceeds the context window of this model."
            r"prompt is too long",
            r"prompt exceeds max length",  # GLM (code 1261)
            r"input is too long",  # Bedrock: "Input is too long for requested model."
            r"exceeded model token limit",
            r"too large for model with",
            r"exceeds the maximum number of tokens",
            r"input length and `?max_tokens`? exceed context limit",
            r"reduce the length of the (?:messages|prompt|input)",
        )
    ),
    re.IGNORECASE,
)


def parse_context_error(text: str) -> ContextError | None:
    """What a context-length error text (the provider's, or LiteLLM's exception text ending with it)
    says, or None when the text is not one. Only figures are read from it."""
    if not isinstance(text, str) or not text:
        return None
    for pattern, (prompt_group, limit_group) in _PROMPT_PATTERNS:
        match = pattern.search(text)
        if match:
            return ContextError(prompt_tokens=_int(match[prompt_group]), limit=_int(match[limit_group]))
    match = _REQUESTED_PATTERN.search(text)
    if match:
        return ContextError(requested_tokens=_int(match[2]), limit=_int(match[1]))
    return ContextError() if _CONTEXT_PHRASES.search(text) else None


# ---- the estimator ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """What was learned about one deployment. Immutable: every update returns a new value."""

    #: Newest samples (provider tokens per tiktoken token), oldest first, at most `WINDOW`.
    samples: tuple[float, ...] = ()
    #: Samples seen in total (the ``n`` of ``learned, n=…``).
    count: int = 0
    #: A lower bound set by a context-length rejection, holding while `count` is below `floor_until`.
    floor: float | None = None
    floor_until: int = 0
    #: The learned ratio as applied to a ``cache_stable`` budget (held while it moves little, `_hold`).
    applied: float | None = None

    @property
    def learned(self) -> float | None:
        """The quantile of the kept samples (times `LEARNED_MARGIN`), once there are `MIN_SAMPLES`."""
        if len(self.samples) < MIN_SAMPLES:
            return None
        ordered = sorted(self.samples)
        return ordered[max(1, math.ceil(QUANTILE * len(ordered))) - 1] * LEARNED_MARGIN

    @property
    def active_floor(self) -> float | None:
        return self.floor if self.floor is not None and self.count < self.floor_until else None

    @property
    def ratio(self) -> float | None:
        """The ratio to budget with, or None (use the profile's) when nothing was learned yet."""
        return self.ratio_for(held=False)

    def ratio_for(self, *, held: bool) -> float | None:
        """`ratio`, with the learned ratio `held` (for a ``cache_stable`` budget) or followed."""
        learned = _hold(self.applied, self.learned) if held else self.learned
        candidates = [x for x in (learned, self.active_floor) if x is not None]
        return _bounded(max(candidates)) if candidates else None

    @property
    def source(self) -> str:
        """For the report: ``learned, n=12`` (``, tightened`` while a rejection's floor decides)."""
        learned, floor = self.learned, self.active_floor
        tightened = floor is not None and (learned is None or floor > learned)
        return f"learned, n={self.count}" + (", tightened" if tightened else "")

    def with_sample(self, ratio: float) -> Calibration:
        """This state with one more sample (a nonsense sample is dropped: same state)."""
        if not _plausible(ratio):
            return self
        state = replace(self, samples=(*self.samples, round(float(ratio), 4))[-WINDOW:], count=self.count + 1)
        return replace(state, applied=_hold(_hold(self.applied, self.learned), state.learned))

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
        """Read `to_value`'s dict (or its JSON text) back; None for anything else: a bad cache entry is
        ignored, never an error."""
        if isinstance(value, (str, bytes)):
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
        if floor is not None and not _is_ratio(floor):
            return None
        kept = tuple(round(float(s), 4) for s in samples if _is_ratio(s))[-WINDOW:]
        return cls(
            samples=kept,
            count=max(count, len(kept)),
            floor=_bounded(float(floor)) if floor is not None else None,
            floor_until=until,
            applied=float(applied) if _is_ratio(applied) else None,  # (else held anew from the samples)
        )


def sample_ratio(reported: int | None, estimated: int) -> float | None:
    """The sample one successful call gives (None when it teaches nothing: too small, no usage)."""
    if reported is None or reported <= 0 or estimated < MIN_SAMPLE_TOKENS:
        return None
    ratio = reported / estimated
    return ratio if _plausible(ratio) else None


def deployment_key(model_info: Mapping[str, object] | None, model: str, api_base: object = None) -> str:
    """The key calibration is kept under: LiteLLM's ``model_info.id`` (the same in every instance with
    the same config), else model and ``api_base``, hashed unless a plain token (no secrets in keys)."""
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
    """A context-length rejection of a request budgeted with ratio `used`. `over_budget`: even the
    smallest valid request did not fit, so it says nothing about the ratio beyond its `measured` sample."""

    used: float
    measured: float | None = None
    proven: float | None = None
    over_budget: bool = False

    def apply(self, state: Calibration) -> Calibration:
        """A floor from the ratio the provider's count proves (`measured`), else `used` times
        `TIGHTEN_STEP` and at least what the window proves (`proven`)."""
        measured = self.measured if self.measured is not None and _plausible(self.measured) else None
        if measured is not None:
            state = state.with_sample(measured)
        if self.over_budget:
            return state
        if measured is not None and measured > self.used:
            floor = measured * TIGHTEN_MARGIN
        else:
            floor = self.used * TIGHTEN_STEP
            if self.proven is not None and _plausible(self.proven):
                floor = max(floor, self.proven * TIGHTEN_MARGIN)
        floor = _bounded(max(floor, state.active_floor or 0.0))
        return replace(state, floor=_round_up(floor), floor_until=state.count + FLOOR_SPAN)


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
    """The event a context-length rejection of a request estimated at `estimated` tiktoken tokens is:
    the ratio the provider's count proves, and the lower bound its window proves (it counted more
    than the window less the output the request asked for)."""
    if estimated <= 0:
        return Rejection(used=used, over_budget=over_budget)
    prompt = error.prompt(max_output_sent)
    room = (error.limit or window or 0) - (max_output_sent or 0)
    measured = prompt / estimated if prompt is not None else None
    proven = room / estimated if room > 0 else None
    return Rejection(used=used, measured=measured, proven=proven, over_budget=over_budget)


def apply_in_order(state: Calibration | None, events: list[Event]) -> Calibration:
    """`events` applied in order to `state` (None: nothing learned yet): how one process's news is
    merged into the value others wrote to the shared cache."""
    current = state if state is not None else Calibration()
    for event in events:
        current = event.apply(current)
    return current


def _hold(applied: float | None, learned: float | None) -> float | None:
    """The ratio to apply, given the one applied so far and the learned one now."""
    if learned is None:
        return None
    if applied is not None and applied / HOLD_BAND <= learned <= applied:
        return applied
    return _round_up(_bounded(learned * HOLD_HEADROOM))


def _round_up(ratio: float) -> float:
    """Rounded up to the 4 decimals the cache keeps: never below what was proven."""
    return math.ceil(ratio * 10_000 - 1e-6) / 10_000


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _bounded(ratio: float) -> float:
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


def _plausible(ratio: float) -> bool:
    return math.isfinite(ratio) and MIN_RATIO / 2 <= ratio <= MAX_RATIO * 2


def _is_ratio(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and _plausible(float(value))


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int(text: str | None) -> int | None:
    digits = text.replace(",", "").replace("_", "") if text is not None else ""
    return int(digits) if digits.isdigit() else None
