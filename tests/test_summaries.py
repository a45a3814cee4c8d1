"""A summary model for cut turns (``summary_model``), through the hook in the SDK: written in the
background (no request waits for it), used in the note's place once ready, kept while the cut
point stays, and its failure changes nothing."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Iterator, Mapping
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_governance import GovernanceHook  # noqa: E402
from litellm_governance.integration.summaries import SUMMARY_PROMPT  # noqa: E402
from litellm_governance.testing import RecordingUpstream  # noqa: E402

from .builders import assistant, call, long_text, result, system, user  # noqa: E402

pytestmark = pytest.mark.litellm

SUMMARY = "The agent read the modules one by one looking for the parser bug; nothing is changed yet."
PROMPT_START = SUMMARY_PROMPT.split("{", 1)[0]


class Summariser:
    """The upstream's replies: a summary for summary requests (held until released), else 'ok'."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked = threading.Event()
        self.fail = False

    def __call__(self, body: Mapping[str, Any]) -> str:
        messages = body.get("messages") or []
        if messages and str(messages[0].get("content", "")).startswith(PROMPT_START):
            self.asked.set()
            self.release.wait(30)
            if self.fail:
                raise RuntimeError("the summariser is down")
            return SUMMARY
        return "ok"


@pytest.fixture
def summariser() -> Iterator[tuple[RecordingUpstream, Summariser]]:
    replies = Summariser()
    with RecordingUpstream(reply=replies) as server:
        yield server, replies
    replies.release.set()


def loop(rounds: int) -> list[dict[str, Any]]:
    history = [system(), user("go")]
    for i in range(rounds):
        history += [
            assistant(None, call(f"c{i}", "Read", file_path=f"src/m{i}.py")),
            result(f"c{i}", long_text(1_200, str(i))),
        ]
    return history


def run(scenario: Awaitable[Any], seconds: float = 120.0) -> None:
    """Run `scenario` on a fresh event loop, failing (not hanging) when it takes over `seconds`.
    What is left on the loop afterwards (LiteLLM's logging worker, which on cancellation drains its
    queue) gets a bounded while to finish, and the loop is closed without joining its default
    executor: ``asyncio.run`` waits for both without a bound (the executor up to 300 s on 3.12+),
    which once held this test past pytest-timeout on CI's Python 3.13."""
    event_loop = asyncio.new_event_loop()
    try:
        event_loop.run_until_complete(asyncio.wait_for(scenario, seconds))
    except asyncio.TimeoutError:  # on Python 3.10 not the builtin TimeoutError
        pytest.fail(f"the scenario took over {seconds:.0f} s")
    finally:
        pending = [task for task in asyncio.all_tasks(event_loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            event_loop.run_until_complete(asyncio.wait(pending, timeout=5))
        event_loop.run_until_complete(
            asyncio.wait([event_loop.create_task(event_loop.shutdown_asyncgens())], timeout=5)
        )
        event_loop.close()


def sent_contexts(upstream: RecordingUpstream) -> list[str]:
    """The first user turn of every governed (non-summary) request the upstream received."""
    out = []
    for body in upstream.bodies():
        messages = body["messages"]
        if str(messages[0].get("content", "")).startswith(PROMPT_START):
            continue
        out.append(str(messages[1]["content"]))
    return out


def test_the_summary_is_written_off_the_request_path_and_then_used(
    summariser: tuple[RecordingUpstream, Summariser],
) -> None:
    """The request that reveals a new cut point goes out at once with the note (the summary request
    is still held by the upstream); while the cut point stays, requests keep that very note (the
    prompt cache holds); at the next cut point the note opens with the summary."""
    upstream, replies = summariser
    hook = GovernanceHook(
        context_window_tokens=10_000, max_output_share=0.5, cache_stable=True, summary_model="openai/summariser"
    )
    saved = list(litellm.callbacks)
    litellm.callbacks = [hook]

    async def ask(history: list[dict[str, Any]]) -> None:
        await litellm.acompletion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=history)

    async def scenario() -> None:
        await ask(loop(60))  # returns while the summary request is held: nothing waited for it
        assert await asyncio.to_thread(replies.asked.wait, 10), "no summary was asked for"
        assert not replies.release.is_set()
        replies.release.set()
        await hook._summaries.wait()
        await ask(loop(60))
        for rounds in range(61, 160):
            await ask(loop(rounds))
            await hook._summaries.wait()
            if SUMMARY in sent_contexts(upstream)[-1]:
                break

    try:
        litellm.api_base, litellm.api_key = upstream.base_url, "x"  # the summary request goes there too
        run(scenario())
    finally:
        litellm.callbacks = saved
        litellm.api_base = litellm.api_key = None
    contexts = sent_contexts(upstream)
    assert "[Context note: " in contexts[0] and contexts[1] == contexts[0]
    assert SUMMARY in contexts[-1] and "[Context summary: " in contexts[-1]
    assert all(SUMMARY not in c for c in contexts[:-1])


def test_a_failing_summariser_changes_nothing(
    summariser: tuple[RecordingUpstream, Summariser], caplog: pytest.LogCaptureFixture
) -> None:
    """The summary request fails: the requests keep the note, and one warning says so (no content)."""
    upstream, replies = summariser
    replies.fail = True
    replies.release.set()
    hook = GovernanceHook(
        context_window_tokens=10_000, max_output_share=0.5, cache_stable=True, summary_model="openai/summariser"
    )
    saved = list(litellm.callbacks)
    litellm.callbacks = [hook]

    async def scenario() -> None:
        for _ in range(2):
            await litellm.acompletion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=loop(60))
            await hook._summaries.wait()

    try:
        litellm.api_base, litellm.api_key = upstream.base_url, "x"
        with caplog.at_level(logging.WARNING, logger="litellm_governance"):
            run(scenario())
    finally:
        litellm.callbacks = saved
        litellm.api_base = litellm.api_key = None
    assert all("[Context note: " in text for text in sent_contexts(upstream))
    warnings = [r.getMessage() for r in caplog.records if "summary of cut turns" in r.getMessage()]
    assert len(warnings) == 1 and "src/m" not in warnings[0]


def test_literal_requests_ask_for_no_summary(summariser: tuple[RecordingUpstream, Summariser]) -> None:
    """With the literal rules the cut moves every turn: no summary would ever be used, none is asked."""
    upstream, replies = summariser
    replies.release.set()
    hook = GovernanceHook(
        context_window_tokens=10_000, max_output_share=0.5, cache_stable=False, summary_model="openai/summariser"
    )
    saved = list(litellm.callbacks)
    litellm.callbacks = [hook]
    try:
        litellm.api_base, litellm.api_key = upstream.base_url, "x"
        run(litellm.acompletion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=loop(60)))
    finally:
        litellm.callbacks = saved
        litellm.api_base = litellm.api_key = None
    assert not replies.asked.is_set()


def test_waiting_returns_once_every_summary_has_finished() -> None:
    """A summary task that has finished stays in the set until its done-callback runs, on a later turn
    of the loop; `wait` called in between spun for ever without yielding (the loop never got that
    turn), which held the first test here past pytest-timeout on CI's Python 3.13."""
    from litellm_governance.integration.summaries import Summaries

    summaries = Summaries()
    finished: list[bool] = []

    async def scenario() -> None:
        async def nothing() -> None:
            return None

        task = asyncio.get_running_loop().create_task(nothing())
        summaries._tasks.add(task)  # as `schedule` adds it, its done-callback not run yet below
        await asyncio.sleep(0)  # the task runs and finishes
        assert task.done()
        await summaries.wait()
        finished.append(True)

    # A spinning `wait` never yields, so asyncio cannot time it out: a thread bounds it instead.
    thread = threading.Thread(target=lambda: asyncio.run(scenario()), daemon=True)
    thread.start()
    thread.join(10)
    assert finished == [True], "wait() did not return for a finished task"
