"""Calibration: the estimator, the provider texts it reads, its cache value (`_calibration`), and how
the hook learns, stores and shares what it learned (`integration.learning`), without a proxy.

The proxy, real Redis and real providers' (emulated) answers are in
``tests/e2e/test_calibration_e2e.py``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceHook
from litellm_governance import _calibration as cal
from litellm_governance._calibration import (
    FLOOR_SPAN,
    HOLD_BAND,
    HOLD_HEADROOM,
    LEARNED_MARGIN,
    MAX_RATIO,
    MIN_RATIO,
    MIN_SAMPLE_TOKENS,
    MIN_SAMPLES,
    TIGHTEN_MARGIN,
    TIGHTEN_STEP,
    WINDOW,
    Calibration,
    ContextError,
    Rejection,
    Sample,
    apply_in_order,
)
from litellm_governance.integration.learning import (
    CALIBRATION_KEY_PREFIX,
    CalibrationStore,
    Sent,
)
from litellm_governance.integration.metrics import deployment_label
from litellm_governance.testing.emulation import PROVIDERS, RULES, RULES_BY_ID, check_context, error_response

from .builders import assistant, calling, examples, result, system, user


def held(quantile: float) -> float:
    """The ratio applied to a ``cache_stable`` budget when the samples' quantile is `quantile`, set
    anew (rounded up to 4 decimals)."""
    return math.ceil(quantile * LEARNED_MARGIN * HOLD_HEADROOM * 10_000 - 1e-6) / 10_000


def learned(*samples: float, base: Calibration | None = None) -> Calibration:
    state = base or Calibration()
    for ratio in samples:
        state = state.with_sample(ratio)
    return state


# ---- the estimator ------------------------------------------------------------------------------


class TestEstimator:
    def test_nothing_learned_means_the_profiles_ratio(self) -> None:
        """No samples: no ratio (govern_request then uses the profile's)."""
        assert Calibration().ratio is None

    def test_fewer_than_the_minimum_samples_change_nothing(self) -> None:
        """Four samples are not enough to replace the profile's ratio."""
        assert learned(*[1.3] * (MIN_SAMPLES - 1)).ratio is None

    def test_the_minimum_samples_replace_the_profile(self) -> None:
        """From the fifth sample on, the ratio is learned, with a small margin, and says so."""
        state = learned(*[1.3] * MIN_SAMPLES)
        assert state.ratio == pytest.approx(1.3 * LEARNED_MARGIN)
        assert state.source == f"learned, n={MIN_SAMPLES}"

    def test_lower_ratios_are_learned_too(self) -> None:
        """A tokenizer that counts fewer tokens than tiktoken frees budget."""
        assert learned(*[0.8] * 10).ratio == pytest.approx(0.8 * LEARNED_MARGIN)

    def test_a_high_quantile_leans_high(self) -> None:
        """The ratio is near the top of the samples, not their mean: undercounting is a rejection."""
        state = learned(*[1.0 + i / 100 for i in range(20)])  # 1.00 .. 1.19
        assert 1.17 * LEARNED_MARGIN <= state.ratio <= 1.19 * LEARNED_MARGIN  # type: ignore[operator]

    @pytest.mark.parametrize("outliers", [1, 2])
    def test_rare_outliers_are_ignored(self, outliers: int) -> None:
        """A usage that counts something else (an image, a server-side tool loop) does not move the ratio."""
        state = learned(*[1.3] * (WINDOW - outliers), *[2.4] * outliers)
        assert state.ratio == pytest.approx(1.3 * LEARNED_MARGIN)

    def test_frequent_high_samples_are_not_outliers(self) -> None:
        """When a fifth of the requests count high, the ratio follows them."""
        state = learned(*[1.3] * (WINDOW - WINDOW // 5), *[1.6] * (WINDOW // 5))
        assert state.ratio == pytest.approx(1.6 * LEARNED_MARGIN)

    def test_the_newest_samples_decide(self) -> None:
        """Old samples leave the window: the ratio follows a drifting content mix."""
        state = learned(*[1.6] * WINDOW, *[1.2] * WINDOW)
        assert state.ratio == pytest.approx(1.2 * LEARNED_MARGIN)
        assert state.count == 2 * WINDOW and len(state.samples) == WINDOW

    @pytest.mark.parametrize("nonsense", [0.0, 0.1, 6.0, 100.0, math.inf, math.nan, -1.0])
    def test_nonsense_samples_are_dropped(self, nonsense: float) -> None:
        """A ratio no tokenizer produces is not a sample."""
        state = learned(1.3)
        assert state.with_sample(nonsense) == state

    @pytest.mark.parametrize(("sample", "expected"), [(3.5, MAX_RATIO), (0.3, MIN_RATIO)])
    def test_the_ratio_is_bounded(self, sample: float, expected: float) -> None:
        """Plausible but extreme samples give a ratio within [MIN_RATIO, MAX_RATIO]."""
        assert learned(*[sample] * MIN_SAMPLES).ratio == expected


class TestHold:
    """For a ``cache_stable`` budget the ratio applied is held while the learned one moves little
    (`_calibration`: held): each move of the budget rewrites the deployment's cached prefix."""

    def test_small_moves_of_the_learned_ratio_leave_the_ratio_alone(self) -> None:
        """A content mix that drifts a little each turn moves the quantile on most samples; the
        ratio applied stays."""
        state = learned(*[1.3] * WINDOW)
        applied = state.ratio_for(held=True)
        seen = set()
        for step in range(60):
            state = state.with_sample(1.3 * (1.0 + 0.01 * (step % 3)))  # 1.300, 1.313, 1.326, ...
            assert state.learned is not None
            seen.add(state.learned)
            assert state.ratio_for(held=True) == applied
        assert len(seen) > 1  # the learned ratio did move
        assert state.ratio == state.learned  # (followed where nothing is replayed)

    def test_a_rise_above_it_is_applied_at_once(self) -> None:
        """An undercount is a rejected request: the ratio never lags below the learned one."""
        state = learned(*[1.3] * WINDOW)
        state = learned(*[1.45] * 3, base=state)
        assert state.learned == pytest.approx(1.45 * LEARNED_MARGIN)
        assert state.ratio_for(held=True) == held(1.45)

    def test_a_small_fall_keeps_it_and_a_large_one_lowers_it(self) -> None:
        """Freed room is given back once the learned ratio falls out of the band below the ratio."""
        state = learned(*[1.3] * WINDOW)
        applied = state.ratio_for(held=True)
        assert applied is not None
        state = learned(*[1.27] * WINDOW, base=state)  # within the band: kept
        assert state.ratio_for(held=True) == applied
        state = learned(*[1.1] * WINDOW, base=state)  # below it: set anew
        assert state.ratio_for(held=True) == held(1.1)
        assert state.ratio_for(held=True) < applied / HOLD_BAND

    @given(st.lists(st.floats(min_value=0.6, max_value=2.0), min_size=MIN_SAMPLES, max_size=80))
    @settings(max_examples=examples(200), deadline=None)
    def test_the_ratio_is_never_below_the_learned_one_nor_far_above(self, samples: list[float]) -> None:
        """Whatever the samples: at least the learned ratio (what the samples prove, with its
        margin), at most `HOLD_BAND` above it; and it changes no more often than the learned one."""
        state, changes, learned_changes = Calibration(), 0, 0
        for sample in samples:
            before = state
            state = state.with_sample(sample)
            if state.learned is None:
                continue
            assert state.learned <= state.ratio_for(held=True) <= state.learned * HOLD_BAND + 1e-4  # type: ignore[operator]
            if before.learned is not None:
                changes += state.ratio_for(held=True) != before.ratio_for(held=True)
                learned_changes += state.learned != before.learned
        assert changes <= learned_changes

    def test_the_ratio_applied_is_shared_with_the_samples(self) -> None:
        """Another process reading the cache value applies the same ratio (not one held anew from the
        samples alone); a value written before the ratio was kept is held anew from its samples."""
        state = learned(*[1.3] * WINDOW, *[1.27] * WINDOW)
        assert state.ratio_for(held=True) == held(1.3) != held(1.27)
        value = state.to_value()
        assert Calibration.from_value(value) == state and Calibration.from_value(value).ratio_for(
            held=True
        ) == state.ratio_for(held=True)  # type: ignore[union-attr]
        older = {k: v for k, v in value.items() if k != "a"}
        assert Calibration.from_value(older).ratio_for(held=True) == held(1.27)  # type: ignore[union-attr]
        assert Calibration.from_value({**value, "a": "high"}).ratio_for(held=True) == held(1.27)  # type: ignore[union-attr]


class TestSampleRatio:
    @pytest.mark.parametrize(
        ("reported", "estimated", "expected"),
        [
            (13_000, 10_000, 1.3),
            (8_000, 10_000, 0.8),
            (None, 10_000, None),  # no usage
            (0, 10_000, None),
            (1_300, MIN_SAMPLE_TOKENS - 1, None),  # too small to teach anything
            (100_000, 10_000, None),  # 10x: not a tokenizer
        ],
    )
    def test_table(self, reported: int | None, estimated: int, expected: float | None) -> None:
        """One successful call gives reported / estimated, when that means something."""
        got = cal.sample_ratio(reported, estimated)
        assert got == (pytest.approx(expected) if expected is not None else None)


class TestTightening:
    def test_a_counted_rejection_tightens_at_once(self) -> None:
        """Before any sample, a rejection whose text gives the count sets the ratio it proves (plus a margin)."""
        state = Rejection(used=1.0, measured=1.3).apply(Calibration())
        assert state.ratio == pytest.approx(1.3 * TIGHTEN_MARGIN)
        assert state.source == "learned, n=1, tightened"  # the measured rejection is a sample too

    def test_the_next_request_fits(self) -> None:
        """A request budgeted with the tightened ratio fits the window the provider counted against."""
        window, max_out, safety, true_ratio = 16_384, 1_024, 1_024, 1.31
        budget = window - max_out - safety
        sent = budget  # governed to the budget at ratio 1.0 (tiktoken tokens)
        error = ContextError(prompt_tokens=math.ceil(sent * true_ratio), limit=window)
        state = cal.rejection(error, estimated=sent, used=1.0, max_output_sent=max_out, window=window).apply(
            Calibration()
        )
        assert state.ratio is not None
        next_sent = math.floor(budget / state.ratio)
        assert next_sent * true_ratio <= window - max_out

    def test_an_uncounted_rejection_steps_up(self) -> None:
        """GLM, Bedrock, OpenAI Responses say only "too long": the ratio used times TIGHTEN_STEP."""
        state = Rejection(used=1.15).apply(Calibration())
        assert state.ratio == pytest.approx(1.15 * TIGHTEN_STEP)
        assert state.count == 0 and state.source == "learned, n=0, tightened"

    def test_steps_compound_until_the_bound(self) -> None:
        """Every further rejection steps again, never past MAX_RATIO."""
        state, used = Calibration(), 1.0
        for _ in range(20):
            state = Rejection(used=used).apply(state)
            assert state.ratio is not None and state.ratio >= min(used * TIGHTEN_STEP, MAX_RATIO) - 1e-9
            used = state.ratio
        assert state.ratio == MAX_RATIO

    def test_what_the_window_proves_beats_a_small_step(self) -> None:
        """Without a count, the provider still counted more than the window less the output it was asked for."""
        error = ContextError()
        event = cal.rejection(error, estimated=10_000, used=1.0, max_output_sent=1_000, window=16_000)
        assert event.proven == pytest.approx(1.5)
        assert event.apply(Calibration()).ratio == pytest.approx(1.5 * TIGHTEN_MARGIN)

    def test_a_count_below_the_ratio_used_still_steps_up(self) -> None:
        """A count that does not explain the rejection (something else was counted) is no excuse to stay."""
        state = Rejection(used=1.2, measured=1.1).apply(Calibration())
        assert state.ratio == pytest.approx(1.2 * TIGHTEN_STEP)

    def test_the_floor_holds_for_a_while_then_the_samples_decide(self) -> None:
        """After FLOOR_SPAN samples a rejection's floor no longer holds the ratio up."""
        state = Rejection(used=1.0, measured=1.5).apply(learned(*[1.2] * 10))
        assert state.ratio == pytest.approx(1.5 * TIGHTEN_MARGIN)
        state = learned(*[1.2] * (FLOOR_SPAN - 1), base=state)
        assert state.ratio == pytest.approx(1.5 * TIGHTEN_MARGIN)
        state = state.with_sample(1.2)
        assert state.ratio == pytest.approx(1.2 * LEARNED_MARGIN) and state.source == f"learned, n={state.count}"

    def test_a_lower_floor_never_replaces_a_higher_one(self) -> None:
        """Two rejections in a row: the second cannot loosen the first."""
        state = Rejection(used=1.0, measured=1.6).apply(Calibration())
        state = Rejection(used=1.0, measured=1.1).apply(state)
        assert state.ratio == pytest.approx(1.6 * TIGHTEN_MARGIN)

    def test_over_budget_rejections_only_teach_their_count(self) -> None:
        """When even the smallest valid request did not fit, the ratio was not the problem."""
        assert Rejection(used=1.0, over_budget=True).apply(Calibration()) == Calibration()
        state = Rejection(used=1.0, measured=1.3, over_budget=True).apply(Calibration())
        assert state.floor is None and state.samples == (1.3,)

    def test_events_apply_in_order(self) -> None:
        """apply_in_order is how one process's news lands on the value another wrote."""
        events = [Sample(1.3), Sample(1.3), Rejection(used=1.3, measured=1.5)]
        merged = apply_in_order(learned(1.2, 1.2), events)
        assert merged.count == 5 and merged.ratio == pytest.approx(1.5 * max(TIGHTEN_MARGIN, LEARNED_MARGIN))
        assert apply_in_order(None, []) == Calibration()


# ---- the providers' texts -----------------------------------------------------------------------

_WIRES = {"openai": "chat", "anthropic": "messages", "gemini": "gemini", "bedrock": "converse"}


def emulated_error(provider: str, wire: str, tokens: int, window: int, max_tokens: int | None) -> str:
    """The message the emulated provider answers (its real text) for a prompt of `tokens`."""
    body: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens, "max_output_tokens": max_tokens}
    if wire == "converse" and max_tokens is not None:
        body = {"inferenceConfig": {"maxTokens": max_tokens}}
    if wire == "gemini" and max_tokens is not None:
        body = {"generationConfig": {"maxOutputTokens": max_tokens}}
    violation = check_context(provider, wire, body, tokens, window=window)
    assert violation is not None
    rejection = error_response(provider, wire, violation)
    return rejection.message


# (provider, wire, max_tokens) -> what the text tells: "prompt" (the count), "requested" (count +
# output), or "" (only that the prompt is too long).
_TELLS = {
    ("openai", "chat"): "prompt",
    ("openai", "responses"): "",
    ("anthropic", "messages"): "prompt",
    ("gemini", "gemini"): "prompt",
    ("bedrock", "converse"): "",
    ("mistral", "chat"): "prompt",
    ("deepseek", "chat"): "prompt",
    ("moonshot", "chat"): "requested",
    ("glm", "chat"): "",
    ("vllm", "chat"): "prompt",
}


class TestParsing:
    @pytest.mark.parametrize(("provider", "wire"), sorted(_TELLS))
    @pytest.mark.parametrize("max_tokens", [None, 2_000])
    def test_every_emulated_providers_text(self, provider: str, wire: str, max_tokens: int | None) -> None:
        """The real context-length texts of every provider in the emulator (testing.emulation) are recognised, and their
        count read (the prompt's own, also where the text gives only prompt + output)."""
        tokens, window = 40_123, 32_768
        if provider == "anthropic" and max_tokens is not None:
            tokens = 31_000  # fits alone, not with the output: Anthropic's other text
        text = emulated_error(provider, wire, tokens, window, max_tokens)
        error = cal.parse_context_error(text)
        assert error is not None, text
        tells = _TELLS[(provider, wire)]
        if tells == "prompt":
            assert error.prompt_tokens == tokens and error.prompt(max_tokens) == tokens
        elif tells == "requested":
            assert error.prompt(max_tokens) == tokens
        else:
            assert error.prompt(max_tokens) is None

    def test_the_table_covers_every_provider(self) -> None:
        """A provider added to the emulator gets a row above."""
        assert {provider for provider, _ in _TELLS} == set(PROVIDERS)

    @pytest.mark.parametrize("rule", [r for r in RULES if not r.id.endswith("context_length")], ids=lambda r: r.id)
    def test_no_other_provider_error_is_taken_for_one(self, rule: Any) -> None:
        """Every other error the providers answer (pairing, roles, signatures...) never tightens a ratio."""
        assert cal.parse_context_error(rule.error) is None

    @pytest.mark.parametrize(
        ("text", "prompt", "limit"),
        [
            (  # LiteLLM's exception text ends with the provider's body
                'litellm.ContextWindowExceededError: litellm.BadRequestError: AnthropicError - {"type": "error", '
                '"error": {"type": "invalid_request_error", "message": "prompt is too long: 18211 tokens > 8000 '
                'maximum"}, "request_id": "req_x"}',
                18_211,
                8_000,
            ),
            (  # thousands separators
                "This model's maximum context length is 128,000 tokens. However, your messages resulted in "
                "131,072 tokens. Please reduce the length of the messages.",
                131_072,
                128_000,
            ),
            (  # vLLM's newer wording
                "This model's maximum context length is 32768 tokens. However, your request has 40000 input "
                "tokens. Please reduce the length of the input messages.",
                40_000,
                32_768,
            ),
        ],
    )
    def test_wrapped_and_varied_texts(self, text: str, prompt: int, limit: int) -> None:
        """The count is found inside LiteLLM's wrapping, with separators, in other servers' wordings."""
        assert cal.parse_context_error(text) == ContextError(prompt_tokens=prompt, limit=limit)

    @pytest.mark.parametrize("text", ["", "Rate limit reached", "Internal server error", "invalid api key"])
    def test_other_errors_are_not_context_errors(self, text: str) -> None:
        """Only context-length texts count."""
        assert cal.parse_context_error(text) is None


# ---- usage of the three formats -------------------------------------------------------------------


class TestPromptTokens:
    @pytest.mark.parametrize(
        ("usage", "expected"),
        [
            ({"prompt_tokens": 1200, "completion_tokens": 5}, 1200),  # chat (LiteLLM's normalised usage)
            ({"input_tokens": 1000, "output_tokens": 5}, 1000),  # Responses, Anthropic without caching
            ({"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 90}, 1000),
            ({"input_tokens": 10, "cache_read_input_tokens": None}, 10),
            ({"prompt_tokens": 0, "input_tokens": 0}, None),
            ({}, None),
            (None, None),
            ("1200", None),
        ],
    )
    def test_mappings(self, usage: object, expected: int | None) -> None:
        """Anthropic's cached tokens count toward the prompt; LiteLLM's prompt_tokens already has them."""
        assert cal.prompt_tokens_of(usage) == expected

    def test_litellm_usage_objects(self) -> None:
        """LiteLLM's pydantic usage types are read by attribute."""
        from litellm.types.llms.openai import ResponseAPIUsage
        from litellm.types.utils import Usage

        assert cal.prompt_tokens_of(Usage(prompt_tokens=1500, completion_tokens=3, total_tokens=1503)) == 1500
        assert cal.prompt_tokens_of(ResponseAPIUsage(input_tokens=900, output_tokens=3, total_tokens=903)) == 900


# ---- keys and the cache value -----------------------------------------------------------------------


class TestDeploymentKey:
    def test_litellm_ids_are_used_as_they_are(self) -> None:
        """The Router's sha256 ids (and plain ids) are the key, so operators can find them in Redis."""
        ident = "f2f9bdb197f6550c557373613c0ea2fea4475536f775c5afb9308933c63b3e44"
        assert cal.deployment_key({"id": ident}, "openai/x") == ident
        assert cal.deployment_key({"id": "gpt-eu-1"}, "openai/x", "http://a") == "gpt-eu-1"

    def test_odd_ids_are_hashed(self) -> None:
        """Ids with spaces or other characters (or very long) become a digest."""
        key = cal.deployment_key({"id": "my deployment\n"}, "openai/x")
        assert key.startswith("id-") and len(key) == 35

    def test_without_an_id_model_and_api_base(self) -> None:
        """The SDK without a Router: the model and its api_base (hashed: no URLs or keys in cache keys)."""
        a = cal.deployment_key(None, "openai/gpt-4o", "https://eu.example/v1")
        b = cal.deployment_key({}, "openai/gpt-4o", "https://us.example/v1")
        assert (
            a != b
            and a.startswith("model-")
            and a == cal.deployment_key(None, "openai/gpt-4o", "https://eu.example/v1")
        )


class TestSerialisation:
    def test_round_trip(self) -> None:
        """to_value / from_value give back the same state, through JSON too."""
        state = Rejection(used=1.0, measured=1.4).apply(learned(1.31, 1.29, 1.3))
        value = state.to_value()
        assert Calibration.from_value(value) == state
        assert Calibration.from_value(json.dumps(value)) == state
        assert len(json.dumps(value)) < 40 + 8 * WINDOW

    @pytest.mark.parametrize(
        "value",
        [
            None,
            "not json",
            [],
            {"v": 2, "n": 1, "s": [1.3]},  # another version of the estimator
            {"v": 1, "n": "1", "s": [1.3]},
            {"v": 1, "n": 1, "s": "1.3"},
            {"v": 1, "n": 1, "s": [1.3], "f": "high"},
            {"v": 1, "n": 1, "s": [1.3], "f": 1e9},
        ],
    )
    def test_foreign_values_are_ignored(self, value: object) -> None:
        """A value this version did not write is no state (never an error)."""
        assert Calibration.from_value(value) is None

    def test_damaged_samples_are_dropped(self) -> None:
        """Samples that are not plausible ratios are left out; the count is at least what is kept."""
        state = Calibration.from_value({"v": 1, "n": 0, "s": [1.3, "x", 99, True, 1.2]})
        assert state == Calibration(samples=(1.3, 1.2), count=2)


# ---- the store: this process's copy, the shared cache -------------------------------------------------


class FakeRedis:
    """LiteLLM's RedisCache as the store sees it: async get/set (JSON values), ping; failure modes."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.down = False  # answers None and fails ping, like RedisCache when Redis is gone
        self.raising = False
        self.delay = 0.0
        self.gets = 0
        self.sets = 0

    async def _wait(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.raising:
            raise ConnectionError("redis is down")

    async def async_get_cache(self, key: str, **kwargs: Any) -> Any:
        self.gets += 1
        await self._wait()
        return None if self.down else json.loads(json.dumps(self.data.get(key)))

    async def async_set_cache(self, key: str, value: Any, **kwargs: Any) -> None:
        self.sets += 1
        await self._wait()
        if not self.down:
            self.data[key] = json.loads(json.dumps(value))

    async def ping(self) -> bool:
        await self._wait()
        if self.down:
            raise ConnectionError("redis is down")
        return True


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def settle(store: CalibrationStore) -> None:
    """Let the store's background reads and writes finish."""
    for _ in range(100):
        if not store._tasks:
            return
        await asyncio.sleep(0.02)


@pytest.fixture(autouse=True)
def _quick_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from litellm_governance.integration import learning

    monkeypatch.setattr(learning, "_CALIBRATION_WRITE_INTERVAL", 0.0)
    monkeypatch.setattr(learning, "_CALIBRATION_REFRESH", 0.0)


class TestStore:
    def test_without_a_shared_cache_the_process_remembers(self) -> None:
        """The SDK, or a proxy without Redis: learned in this process, used by this process."""

        async def scenario() -> Calibration | None:
            store = CalibrationStore(shared=lambda: None)
            for _ in range(MIN_SAMPLES):
                store.learn("d", Sample(1.3))
            return await store.lookup("d")

        state = run(scenario())
        assert state is not None and state.ratio == pytest.approx(1.3 * LEARNED_MARGIN)

    def test_what_one_process_learns_another_reads(self) -> None:
        """Two stores on one Redis: the second's first lookup already has the first's samples."""
        redis = FakeRedis()

        async def scenario() -> Calibration | None:
            one, two = CalibrationStore(shared=lambda: redis), CalibrationStore(shared=lambda: redis)
            for _ in range(MIN_SAMPLES):
                one.learn("d", Sample(1.3))
                await settle(one)
            return await two.lookup("d")

        state = run(scenario())
        assert state is not None and state.count == MIN_SAMPLES and state.ratio is not None
        assert list(redis.data) == [CALIBRATION_KEY_PREFIX + "d"]

    def test_news_from_two_processes_is_merged(self) -> None:
        """Each process writes its events on top of what it reads: both processes' samples are kept."""
        redis = FakeRedis()

        async def scenario() -> Calibration | None:
            one, two = CalibrationStore(shared=lambda: redis), CalibrationStore(shared=lambda: redis)
            for _ in range(3):
                one.learn("d", Sample(1.3))
                await settle(one)
                two.learn("d", Sample(1.5))
                await settle(two)
            return Calibration.from_value(redis.data[CALIBRATION_KEY_PREFIX + "d"])

        state = run(scenario())
        assert state is not None and sorted(state.samples) == [1.3, 1.3, 1.3, 1.5, 1.5, 1.5]

    def test_every_event_is_written_once(self) -> None:
        """Events arriving while a read or write is under way are written after it, none twice."""
        redis = FakeRedis()
        redis.delay = 0.01

        async def scenario() -> Calibration | None:
            store = CalibrationStore(shared=lambda: redis)
            await store.lookup("d")
            for _ in range(10):
                store.learn("d", Sample(1.3))
                await store.lookup("d")  # refreshes in the background (the refresh interval is 0 here)
                await asyncio.sleep(0.004)
            await settle(store)
            return Calibration.from_value(redis.data[CALIBRATION_KEY_PREFIX + "d"])

        state = run(scenario())
        assert state is not None and state.count == 10

    def test_a_slow_shared_cache_does_not_hold_requests(self) -> None:
        """A lookup waits at most the timeout for a first read, then goes on with what it has."""
        redis = FakeRedis()
        redis.delay = 5.0

        async def scenario() -> tuple[Calibration | None, float]:
            store = CalibrationStore(shared=lambda: redis)
            loop = asyncio.get_running_loop()
            began = loop.time()
            state = await store.lookup("d")
            return state, loop.time() - began

        state, seconds = run(scenario())
        assert state is None and seconds < 2.5, "the lookup waited for the 5 s read"  # not a speed limit

    @pytest.mark.parametrize("failure", ["raising", "down"])
    def test_a_failing_shared_cache_keeps_the_local_copy(self, failure: str, caplog: pytest.LogCaptureFixture) -> None:
        """Redis gone (raising, or RedisCache's None-and-failed-ping): learning and lookups go on locally,
        with one warning."""
        redis = FakeRedis()

        async def scenario() -> Calibration | None:
            store = CalibrationStore(shared=lambda: redis)
            for _ in range(MIN_SAMPLES):
                store.learn("d", Sample(1.3))
                await settle(store)
            setattr(redis, failure, True)
            for _ in range(3):
                store.learn("d", Sample(1.3))
                await settle(store)
                await store.lookup("d")
                await settle(store)
            return await store.lookup("d")

        with caplog.at_level(logging.DEBUG, logger="litellm_governance"):
            state = run(scenario())
        assert state is not None and state.count == MIN_SAMPLES + 3
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "shared cache" in warnings[0].getMessage()

    def test_deleting_the_key_starts_over(self) -> None:
        """An operator's DEL of the key resets every process at its next read."""
        redis = FakeRedis()

        async def scenario() -> Calibration | None:
            store = CalibrationStore(shared=lambda: redis)
            for _ in range(MIN_SAMPLES):
                store.learn("d", Sample(1.3))
                await settle(store)
            redis.data.clear()
            await store.lookup("d")  # stale: re-read in the background
            await settle(store)
            return await store.lookup("d")

        assert run(scenario()) is None

    def test_in_flight_requests_are_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Requests that never get an answer do not grow memory without bound."""
        from litellm_governance.integration import learning

        monkeypatch.setattr(learning, "_CALIBRATION_IN_FLIGHT", 3)
        store = CalibrationStore(shared=lambda: None)
        sent = Sent("d", 2000, 1.0, None, None, False)
        for i in range(10):
            store.remember(f"call-{i}", sent)
        assert store.take("call-0") is None and store.take("call-9") is sent


# ---- the hook: learning from LiteLLM's hooks -------------------------------------------------------

SECRET = "CALMARK-secret-content"


def conversation(rounds: int = 60) -> list[dict[str, Any]]:
    messages = [system(f"{SECRET} You are an agent. " * 20), user(f"{SECRET} fix the bug")]
    for i in range(rounds):
        messages += [calling(f"c{i}", content="Reading."), result(f"c{i}", f"{SECRET} line {i} " * 40)]
    return [*messages, assistant("Done.")]


def kwargs(call_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """What the deployment hook gets from LiteLLM for a chat call to deployment "dep-1"."""
    return {
        "model": "openai/up-cal",
        "messages": messages,
        "max_tokens": 1024,
        "litellm_call_id": call_id,
        "metadata": {"model_info": {"id": "dep-1", "max_input_tokens": 16_384}},
        **extra,
    }


class Harness:
    """A GovernanceHook driven the way LiteLLM drives it (no proxy, no network)."""

    def __init__(self, **options: Any) -> None:
        self.hook = GovernanceHook(cache_stable=False, **options)
        self.calls = 0

    def send(self, messages: list[dict[str, Any]], **extra: Any) -> tuple[str, dict[str, Any]]:
        """The deployment hook's pass: the call id and the request as sent."""
        from litellm.types.utils import CallTypes

        self.calls += 1
        call_id = f"call-{self.calls}"
        request = kwargs(call_id, messages, **extra)
        governed = run(self.hook.async_pre_call_deployment_hook(request, CallTypes.acompletion))
        return call_id, governed or request

    def report(self, request: dict[str, Any]) -> dict[str, Any]:
        report: dict[str, Any] = request["metadata"]["spend_logs_metadata"]["governance"]
        return report

    def succeed(self, request: dict[str, Any], ratio: float) -> None:
        usage = {"prompt_tokens": round(self.report(request)["estimated_tokens"] * ratio)}
        run(self.hook.async_post_call_success_deployment_hook(request, {"usage": usage}, None))

    def reject(self, request: dict[str, Any], text: str) -> None:
        import litellm

        error = litellm.ContextWindowExceededError(message=text, model="up-cal", llm_provider="openai")
        run(self.hook.async_post_call_failure_deployment_hook(request, error, None))


@pytest.fixture
def harness() -> Iterator[Callable[..., Harness]]:
    yield Harness


@pytest.mark.litellm
class TestHook:
    def test_successes_teach_the_deployment(self, harness: Callable[..., Harness]) -> None:
        """Five answers with usage replace the profile's ratio; the report says where it came from."""
        h = harness()
        for _ in range(MIN_SAMPLES):
            _, request = h.send(conversation())
            assert h.report(request)["ratio_source"] == "static"
            h.succeed(request, 1.3)
        _, request = h.send(conversation())
        report = h.report(request)
        assert report["ratio_source"] == f"learned, n={MIN_SAMPLES}"
        assert report["token_ratio"] == pytest.approx(1.3 * LEARNED_MARGIN, abs=2e-3)

    def test_the_header_says_which_ratio_it_used(self, harness: Callable[..., Harness]) -> None:
        """Identical requests get other token figures once calibration has learned: the summary (the
        proxy's header) says which ratio it used and where it came from."""
        h = harness()
        first = h.report(h.send(conversation(200))[1])["summary"]
        for _ in range(MIN_SAMPLES):
            _, request = h.send(conversation(200))
            h.succeed(request, 1.3)
        later = h.report(h.send(conversation(200))[1])["summary"]
        assert "; ratio=1 static;" in first
        learned_ratio = re.search(r"; ratio=([\d.]+) learned;", later)
        assert learned_ratio is not None, later
        assert float(learned_ratio.group(1)) == pytest.approx(1.3 * LEARNED_MARGIN, abs=1e-3)
        assert first.split("; ratio=")[0] != later.split("; ratio=")[0]  # the figures moved, and it says why

    def test_an_answer_teaches_once(self, harness: Callable[..., Harness]) -> None:
        """The deployment hook and the log event see the same answer: it is one sample."""
        h = harness()
        call_id, request = h.send(conversation())
        h.succeed(request, 1.3)
        usage = {"prompt_tokens": 99_999}
        run(h.hook.async_log_success_event({"litellm_call_id": call_id}, {"usage": usage}, None, None))
        state = h.hook._learning.store._learned["dep-1"].state
        assert state is not None and state.count == 1 and state.samples == (pytest.approx(1.3, abs=1e-3),)

    def test_streaming_answers_teach_through_the_log_event(self, harness: Callable[..., Harness]) -> None:
        """No usage in the deployment hook (a stream): the log event's usage is the sample."""
        h = harness()
        call_id, request = h.send(conversation())
        run(h.hook.async_post_call_success_deployment_hook(request, object(), None))
        estimated = h.report(request)["estimated_tokens"]
        payload = {"standard_logging_object": {"prompt_tokens": round(estimated * 0.8)}, "litellm_call_id": call_id}
        run(h.hook.async_log_success_event(payload, object(), None, None))
        state = h.hook._learning.store._learned["dep-1"].state
        assert state is not None and state.samples == (pytest.approx(0.8, abs=1e-3),)

    def test_a_rejection_tightens_the_next_request(self, harness: Callable[..., Harness]) -> None:
        """OpenAI's count in the rejection sets the ratio of the very next request."""
        h = harness()
        _, request = h.send(conversation(200))
        estimated = h.report(request)["estimated_tokens"]
        counted = round(estimated * 1.3)
        h.reject(
            request,
            f"This model's maximum context length is 16384 tokens. However, you requested {counted + 1024} "
            f"tokens ({counted} in the messages, 1024 in the completion).",
        )
        _, request = h.send(conversation(200))
        report = h.report(request)
        assert report["ratio_source"] == "learned, n=1, tightened"
        assert report["token_ratio"] == pytest.approx(1.3 * TIGHTEN_MARGIN, abs=2e-3)
        assert report["estimated_tokens"] * 1.3 <= 16_384 - 1024

    def test_a_rejection_without_a_count_steps_up(self, harness: Callable[..., Harness]) -> None:
        """ "Prompt exceeds max length" (GLM): the ratio used times the step."""
        h = harness()
        _, request = h.send(conversation(200))
        h.reject(request, "Prompt exceeds max length")
        _, request = h.send(conversation(200))
        assert h.report(request)["token_ratio"] >= TIGHTEN_STEP - 1e-3

    @pytest.mark.parametrize(
        "rule_id",
        ["glm.context_length", "mistral.context_length", "moonshot.context_length", "openai.responses.context_length"],
    )
    def test_an_overflow_litellm_does_not_map_tightens_at_once(
        self, harness: Callable[..., Harness], rule_id: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """LiteLLM raises BadRequestError, not ContextWindowExceededError, for these providers' overflow
        texts (so no context_window_fallbacks runs); calibration reads the text itself and tightens the
        very next request, and its log line names the deployment as the metrics do."""
        import litellm

        h = harness()
        _, request = h.send(conversation(200))
        used = h.report(request)["token_ratio"]
        text = RULES_BY_ID[rule_id].error.format_map(collections.defaultdict(lambda: "40000"))
        error = litellm.BadRequestError(message=text, model="up-cal", llm_provider="openai")
        with caplog.at_level(logging.INFO, logger="litellm_governance"):
            run(h.hook.async_post_call_failure_deployment_hook(request, error, None))
        _, request = h.send(conversation(200))
        report = h.report(request)
        assert report["ratio_source"].endswith(", tightened") and report["token_ratio"] > used, report
        logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("calibration:")]
        assert logged and logged[0].startswith("calibration: context-length rejection by deployment 'openai/up-cal'")
        assert deployment_label(request["model"], request.get("custom_llm_provider")) == "openai/up-cal"

    def test_other_failures_teach_nothing(self, harness: Callable[..., Harness]) -> None:
        """A rate limit or a broken pairing is no news about the tokenizer."""
        import litellm

        h = harness()
        call_id, request = h.send(conversation())
        error = litellm.RateLimitError(message="Rate limit reached", model="up-cal", llm_provider="openai")
        run(h.hook.async_post_call_failure_deployment_hook(request, error, None))
        run(h.hook.async_log_failure_event({"litellm_call_id": call_id, "exception": error}, None, None, None))
        assert "dep-1" not in h.hook._learning.store._learned

    def test_calibrate_false_learns_and_uses_nothing(self, harness: Callable[..., Harness]) -> None:
        """``calibrate: false``: the profile's ratio, always; nothing remembered."""
        h = harness(calibrate=False)
        for _ in range(MIN_SAMPLES + 1):
            _, request = h.send(conversation())
            h.succeed(request, 1.3)
            assert h.report(request)["ratio_source"] == "static"
        assert not h.hook._learning.store._learned and not h.hook._learning.store._in_flight

    def test_reset_forgets(self, harness: Callable[..., Harness]) -> None:
        """reset_calibration() makes this process start over."""
        h = harness()
        for _ in range(MIN_SAMPLES):
            _, request = h.send(conversation())
            h.succeed(request, 1.3)
        h.hook.reset_calibration()
        _, request = h.send(conversation())
        assert h.report(request)["ratio_source"] == "static"

    def test_nothing_of_the_conversation_is_logged(
        self, harness: Callable[..., Harness], caplog: pytest.LogCaptureFixture
    ) -> None:
        """Tightening logs figures; neither the messages nor the provider's text appear."""
        h = harness()
        with caplog.at_level(logging.DEBUG, logger="litellm_governance"):
            _, request = h.send(conversation(200))
            h.reject(request, f"prompt is too long: 30000 tokens > 16384 maximum ({SECRET})")
            _, request = h.send(conversation(200))
            h.succeed(request, 1.3)
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert "calibration: context-length rejection" in text and SECRET not in text
