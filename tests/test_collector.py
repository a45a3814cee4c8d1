"""The cyclic collector held off while a request is governed (`integration.collector`).

Holding it off is free only because a pass makes no reference cycles: everything it allocates is
freed by reference counting. The properties below hold the pipeline to that on all three formats;
the hook tests show the collector really is held off for the pass, and put back as it was.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceConfig, GovernanceHook, govern, govern_anthropic, govern_responses
from litellm_governance.integration.collector import collector_paused

from .builders import assistant, call, long_text, result, system, user
from .test_formats import ANTHROPIC_MODELS, GPT, anthropic_conversations, responses_inputs
from .test_formats import configs as format_configs
from .test_properties import CONFIGS, MODELS, conversations

PROPERTY = settings(suppress_health_check=[HealthCheck.too_slow], max_examples=60, deadline=None)


def cyclic_garbage(governing: Callable[[], object]) -> int:
    """Objects `governing` left unreachable but alive: reference cycles only the collector frees.
    The collector is off while it runs, so all it allocated is in the youngest generation."""
    was = gc.isenabled()
    gc.disable()
    try:
        gc.collect(0)
        governing()  # its result is dropped here: everything still alive is a cycle
        return gc.collect(0)
    finally:
        if was:
            gc.enable()


@PROPERTY
@given(messages=conversations(), model=st.sampled_from(MODELS), config=CONFIGS)
def test_governing_chat_makes_no_reference_cycles(
    messages: Any, model: tuple[str, str, bool], config: GovernanceConfig
) -> None:
    assert cyclic_garbage(lambda: govern(messages, model=model[0], config=config)) == 0


@PROPERTY
@given(messages=anthropic_conversations(), model=st.sampled_from(ANTHROPIC_MODELS), config=format_configs())
def test_governing_anthropic_messages_makes_no_reference_cycles(
    messages: Any, model: tuple[str, bool, str], config: GovernanceConfig
) -> None:
    governing = lambda: govern_anthropic(messages, model=model[0], system="You are Claude Code.", config=config)  # noqa: E731
    assert cyclic_garbage(governing) == 0


@PROPERTY
@given(items=responses_inputs(), config=format_configs())
def test_governing_responses_makes_no_reference_cycles(items: Any, config: GovernanceConfig) -> None:
    assert cyclic_garbage(lambda: govern_responses(items, model=GPT, instructions="You are Codex.", config=config)) == 0


def test_the_check_sees_a_cycle() -> None:
    """The measure above finds what it is for (else the properties could not fail)."""

    def leaks() -> None:
        a: dict[str, Any] = {}
        a["self"] = a

    assert cyclic_garbage(leaks) == 1


@pytest.fixture
def low_threshold() -> Iterator[list[int]]:
    """A young generation of 50 objects (a pass allocates thousands), and the collections run."""
    thresholds = gc.get_threshold()
    runs: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.enable()
    gc.collect()
    gc.set_threshold(50, thresholds[1], thresholds[2])
    gc.callbacks.append(count)
    try:
        yield runs
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*thresholds)


def agent_request(n: int = 120) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [system(), user()]
    for i in range(n):
        messages += [assistant(None, call(f"c{i}", path=f"src/m{i}.py")), result(f"c{i}", long_text(700, str(i)))]
    return {"model": "openai/gpt-4.1", "messages": messages, "max_tokens": 1024}


def test_the_hook_governs_with_the_collector_held_off(low_threshold: list[int]) -> None:
    """Governed through the hook, a request meets a few collections (the hook's own work around
    the pass); governed bare, the same request meets one every 50 objects it keeps alive."""
    from litellm.types.utils import CallTypes

    # (no conversation store: each pass governs the request in full, rather than the store's reuse
    # of the previous pass making it allocate less)
    hook = GovernanceHook(context_window_tokens=1_000_000, conversation_cache_size=0)
    raw = json.dumps(agent_request())
    loop = asyncio.new_event_loop()

    def through_hook() -> int:
        request = json.loads(raw)
        low_threshold.clear()
        governed = loop.run_until_complete(hook.async_pre_call_deployment_hook(request, CallTypes.acompletion))
        assert governed is not None and len(governed["messages"]) == len(request["messages"])  # it did govern
        return len(low_threshold)

    def bare() -> int:
        request = json.loads(raw)
        low_threshold.clear()
        govern(request["messages"], model="openai/gpt-4.1", config=hook.config)
        return len(low_threshold)

    try:
        through_hook()  # warm: the token counts are cached, the hook's first-call set-up done
        counts = [(bare(), through_hook()) for _ in range(3)]
    finally:
        loop.close()
    assert gc.isenabled()
    assert all(alone >= 10 and hooked < alone / 4 for alone, hooked in counts), counts


def test_the_collector_is_put_back_as_it_was() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pass still runs
    assert gc.isenabled()

    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a pass that fails")
    assert gc.isenabled()

    gc.disable()  # the application's own choice
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_passes_in_threads_share_the_switch() -> None:
    """A big request governed in a worker thread while the loop governs another: the collector
    comes back when the last of them is done, not the first."""
    gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def worker() -> None:
        with collector_paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert inside.wait(10)
        with collector_paused():
            pass
        assert not gc.isenabled()  # the worker's pass still runs
    finally:
        leave.set()
        thread.join(10)
    assert gc.isenabled()
