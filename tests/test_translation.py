"""What LiteLLM's translation adds, learned on translated routes (`integration.translation`), without a
proxy. Through a real proxy: ``tests/e2e/test_formats_e2e.py``
(``test_a_translated_route_learns_what_the_translation_adds``); shared by two proxies through a real
Redis: ``tests/e2e/test_calibration_e2e.py``."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceConfig
from litellm_governance.integration import calibration_store, translation
from litellm_governance.integration.translation import (
    FACTOR_STEP,
    MAX_FACTOR,
    MIN_FACTOR,
    TRANSLATION_KEY_PREFIX,
    Factor,
    Translations,
    budgeted,
)
from tests.test_calibration import FakeRedis

KEY = ("anthropic", ("zai", "glm-4.6", ()))
BUDGET = 30_000


def observed(*factors: float, into: Translations | None = None) -> Translations:
    """`factors` observed on requests that came near their budget."""
    learned = into or Translations()
    for factor in factors:
        learned.observe(KEY, 20_000, 20_000 * factor, budget=BUDGET, sent_tokens=BUDGET - 100)
    return learned


class TestFactor:
    def test_nothing_observed_means_no_factor(self) -> None:
        assert Translations().factor(KEY) is None

    def test_one_observation_gives_its_factor_rounded_up(self) -> None:
        """5 % more once translated: the pre-call pass fits for 6 % (never for less than was seen)."""
        assert observed(1.05).factor(KEY) == pytest.approx(1.06)

    def test_each_format_and_target_learns_its_own(self) -> None:
        learned = observed(1.05)
        assert learned.factor(("responses", KEY[1])) is None
        assert learned.factor(("anthropic", ("zai", "glm-4.5", ()))) is None

    def test_requests_far_from_their_budget_teach_nothing(self) -> None:
        """A short request is mostly framing; its factor is not the one that decides a full budget."""
        learned = Translations()
        learned.observe(KEY, 2_000, 2_600, budget=BUDGET, sent_tokens=BUDGET // 2 - 1)
        learned.observe(KEY, 0, 100, budget=BUDGET, sent_tokens=BUDGET)
        learned.observe(KEY, 20_000, 21_000, budget=None, sent_tokens=BUDGET)
        assert learned.factor(KEY) is None

    def test_a_translation_that_adds_nothing_gives_no_factor(self) -> None:
        assert observed(0.97, 1.0).factor(KEY) is None

    def test_a_translation_that_drops_gives_a_factor_below_one(self) -> None:
        """Codex to chat: LiteLLM drops the reasoning items' encrypted content, about half the body.
        The pre-call pass then fits a budget larger by the factor, rounded toward one (the largest
        of the ratios seen: what it fits still fits once translated)."""
        assert observed(0.52, 0.55, 0.5).factor(KEY) == pytest.approx(0.56)

    def test_the_factor_is_bounded(self) -> None:
        """A request of many tiny results translates to far more; the bound keeps the budget useful."""
        assert observed(3.0).factor(KEY) == pytest.approx(MAX_FACTOR)
        assert MIN_FACTOR <= observed(0.1).factor(KEY) <= MIN_FACTOR + FACTOR_STEP  # type: ignore[operator]

    def test_it_changes_rarely(self) -> None:
        """Observations that drift a little leave the factor as it is (each change moves the
        budget, and with it a ``cache_stable`` prefix); a rise past it moves it at once."""
        learned = observed(1.05)
        applied = learned.factor(KEY)
        for step in range(40):
            observed(1.04 + 0.01 * (step % 3), into=learned)  # 1.04 .. 1.06
            assert learned.factor(KEY) == applied
        observed(*[1.12] * 10, into=learned)
        assert learned.factor(KEY) is not None and learned.factor(KEY) > 1.1  # type: ignore[operator]

    def test_it_comes_down_when_the_translation_adds_less(self) -> None:
        learned = observed(1.12)
        assert learned.factor(KEY) == pytest.approx(1.12)
        observed(*[1.02] * 30, into=learned)
        assert 1.02 <= learned.factor(KEY) <= 1.02 + 2 * FACTOR_STEP  # type: ignore[operator]

    def test_targets_remembered_are_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The least recently observed target is forgotten first."""
        monkeypatch.setattr(translation, "_KEPT", 3)  # read when the store is made
        learned = Translations()
        for n in range(5):
            learned.observe(("anthropic", n), 20_000, 21_000, budget=BUDGET, sent_tokens=BUDGET)
        assert [learned.factor(("anthropic", n)) is not None for n in range(5)] == [False, False, True, True, True]

    @given(st.lists(st.floats(min_value=0.2, max_value=4.0), min_size=1, max_size=60))
    @settings(max_examples=200, deadline=None)
    def test_the_factor_covers_what_was_seen_last(self, factors: list[float]) -> None:
        """Never below the largest of the newest ratios seen (within the bounds), so that a pre-call
        output fitted with it fits once translated; never more than two steps above it."""
        learned = Translations()
        for index, factor in enumerate(factors):
            observed(factor, into=learned)
            newest = max(min(MAX_FACTOR, max(MIN_FACTOR, f)) for f in factors[max(0, index - 11) : index + 1])
            got = learned.factor(KEY) or 1.0
            assert newest - 1e-9 <= got <= newest + 2 * FACTOR_STEP + 1e-9
            assert MIN_FACTOR <= got <= MAX_FACTOR


class TestBudgeted:
    @pytest.mark.parametrize("factor", [0.5, 0.56, 1.02, 1.06, 1.3])
    def test_the_budget_is_divided_by_the_factor(self, factor: float) -> None:
        """What fits the budget fitted with fits the window once translated."""
        config = GovernanceConfig()
        window, max_output = 65_536, 4_096
        fitted = budgeted(config, window, max_output, factor)
        budget = window - max_output - config.safety_buffer_tokens
        smaller = fitted.context_window_tokens - max_output - config.safety_buffer_tokens  # type: ignore[operator]
        assert smaller * factor <= budget
        assert math.isclose(smaller * factor, budget, rel_tol=1e-3)

    def test_the_prompt_caching_mode_is_the_windows(self) -> None:
        """A smaller window would choose another mode (``auto``): the deployment's own stays."""
        config = GovernanceConfig()
        window = 65_536
        fitted = budgeted(config, window, 4_096, MAX_FACTOR)
        assert config.stable_for(fitted.context_window_tokens) is False  # (the smaller window's own mode)
        assert fitted.cache_stable is config.stable_for(window) is True
        assert budgeted(config.replace(cache_stable=False), window, 4_096, 1.1).cache_stable is False

    def test_no_budget_left_changes_nothing(self) -> None:
        config = GovernanceConfig()
        assert budgeted(config, 4_000, 4_000, 1.1) is config


class TestShared:
    """Where the proxy has Redis, every worker and instance fits with the same factor."""

    @pytest.fixture(autouse=True)
    def _quick_store(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(calibration_store, "_CALIBRATION_WRITE_INTERVAL", 0.0)
        monkeypatch.setattr(calibration_store, "_CALIBRATION_REFRESH", 0.0)

    @staticmethod
    async def settle(*learned: Translations) -> None:
        for _ in range(100):
            if not any(t._store._tasks for t in learned):
                return
            await asyncio.sleep(0.02)

    def test_what_one_process_learns_another_fits_with_at_once(self) -> None:
        redis = FakeRedis()

        async def scenario() -> tuple[float | None, float | None, float | None]:
            one, two = Translations(lambda: redis), Translations(lambda: redis)
            observed(1.03, 1.05, into=one)
            await self.settle(one)
            return one.factor(KEY), two.factor(KEY), await two.lookup(KEY)

        mine, before_reading, first_lookup = asyncio.run(scenario())
        assert mine == pytest.approx(1.06) and before_reading is None and first_lookup == mine
        (key,) = redis.data
        assert key.startswith(TRANSLATION_KEY_PREFIX + "anthropic:zai/glm-4.6:")
        assert Factor.from_value(redis.data[key]) == Factor((1.03, 1.05), 1.06)

    def test_news_from_two_processes_is_merged(self) -> None:
        """Each process applies its ratios on top of what it reads: the factor covers both's."""
        redis = FakeRedis()

        async def scenario() -> tuple[float | None, float | None]:
            one, two = Translations(lambda: redis), Translations(lambda: redis)
            for ratio in (1.03, 1.05, 1.02):
                observed(ratio, into=one)
                await self.settle(one)
                observed(ratio + 0.06, into=two)
                await self.settle(two)
            return await one.lookup(KEY), await two.lookup(KEY)

        one, two = asyncio.run(scenario())
        (value,) = redis.data.values()
        assert len(value["s"]) == 6 and one == two == pytest.approx(1.12)

    def test_another_routes_or_versions_value_is_not_read(self) -> None:
        redis = FakeRedis()
        asyncio.run(self._observe_and_settle(redis))
        (key,) = redis.data
        for damaged in ({**redis.data[key], "v": 0}, {**redis.data[key], "s": [9.0]}, {**redis.data[key], "a": "1.1"}):
            assert Factor.from_value(damaged) is None
            redis.data[key] = damaged
            assert asyncio.run(Translations(lambda: redis).lookup(KEY)) is None
        assert asyncio.run(Translations(lambda: redis).lookup(("responses", KEY[1]))) is None

    async def _observe_and_settle(self, redis: FakeRedis) -> None:
        learned = Translations(lambda: redis)
        observed(1.05, into=learned)
        await self.settle(learned)

    @given(st.lists(st.floats(min_value=0.2, max_value=4.0), min_size=1, max_size=30))
    @settings(max_examples=100, deadline=None)
    def test_the_shared_value_holds_the_state(self, ratios: list[float]) -> None:
        """What is written is read back as the very state (nothing lost on the way through JSON)."""
        state = Factor()
        for ratio in ratios:
            state = state.observe(ratio)
        assert Factor.from_value(state.to_value()) == state

    def test_a_failing_shared_cache_never_fails_a_request(self, caplog: pytest.LogCaptureFixture) -> None:
        """Whatever goes wrong reaching the shared cache (here: finding it raises), a request is
        fitted with this process's copy and its ratio is still learned: a warning naming the error's type
        and place, never its text."""

        def broken() -> object:
            raise RuntimeError("this LiteLLM keeps its cache elsewhere")

        learned = observed(1.05, into=Translations(lambda: None))
        learned._store._shared = broken
        with caplog.at_level(logging.WARNING, logger="litellm_governance"):
            assert asyncio.run(learned.lookup(KEY)) == pytest.approx(1.06)
            observed(1.09, into=learned)  # learned in this process before the cache is asked for
        assert learned.factor(KEY) == pytest.approx(1.1)
        assert "translation factor not read (RuntimeError at test_translation.py:" in caplog.text
        assert "keeps its cache elsewhere" not in caplog.text  # the type and the place, never the text
