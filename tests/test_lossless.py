"""What governing keeps of the client's request: objects no step touched go out as the client's
own, every outline message says which of the client's objects it stands for, output is a pure function
of the request (same history, same bytes), and the input is never mutated."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given

from bench.agent_shapes import to_claude_code, to_codex
from bench.sessions import make_session, make_tools
from litellm_governance import GovernanceConfig, _anthropic, _responses, govern_request
from litellm_governance._anthropic import AnthropicOutline
from litellm_governance._messages import ORIGIN, Origin, native_of, origin
from litellm_governance._responses import ResponsesOutline
from litellm_governance._tokens import TokenCache, TokenCounter

from .test_formats import PROPERTY, anthropic_conversations, fc, fco, msg, responses_inputs

WINDOWS = (1_000_000, 32_768)


def _bodies(n: int, seed: int = 0) -> dict[str, dict[str, Any]]:
    session = make_session(n, seed=seed)
    return {
        "chat": {"model": "openai/gpt-4o", "messages": session, "tools": make_tools()},
        "anthropic": {"model": "anthropic/claude-sonnet-4-5", "max_tokens": 4096, **to_claude_code(session)},
        "responses": {"model": "openai/gpt-4o", **to_codex(session)},
    }


def _history(body: dict[str, Any]) -> list[Any]:
    return body["input"] if "input" in body else body["messages"]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("fmt", ["chat", "anthropic", "responses"])
def test_same_history_same_bytes_and_input_untouched(fmt: str, window: int) -> None:
    body = _bodies(160)[fmt]
    pristine = copy.deepcopy(body)
    config = GovernanceConfig(context_window_tokens=window)
    first = govern_request(body, config=config)
    again = govern_request(json.loads(json.dumps(body)), config=config)  # warm cache, new objects
    assert json.dumps(first.request, sort_keys=True) == json.dumps(again.request, sort_keys=True)
    assert first.report.to_dict() == again.report.to_dict()
    assert body == pristine


@pytest.mark.parametrize("fmt", ["chat", "anthropic", "responses"])
def test_untouched_objects_are_the_clients_own(fmt: str) -> None:
    """At a window that compacts and cuts, every message or item that goes out unchanged is the
    very object the client sent; with nothing to do, the request itself comes back."""
    body = _bodies(160, seed=3)[fmt]
    sent = {id(m) for m in _history(body)}
    governed = govern_request(body, config=GovernanceConfig(context_window_tokens=32_768))
    assert governed.report.changed
    out = _history(governed.request)
    for message in out:
        if id(message) not in sent:
            assert not any(message == original for original in _history(body)), "an unchanged object was copied"
    kept = [m for m in out if id(m) in sent]
    assert kept, "nothing of the client's went out as it came"
    untouched = govern_request(body, config=GovernanceConfig(context_window_tokens=1_000_000))
    if not untouched.report.changed:
        assert untouched.request is body


def test_anthropic_read_in_one_pass_keeps_compaction_and_order_repairs() -> None:
    dead = {"role": "user", "content": "an old task"}
    turn = {
        "role": "assistant",
        "content": [
            {"type": "compaction", "content": "Summary of the earlier work."},
            {"type": "text", "text": "Continuing."},
        ],
    }
    late = {
        "role": "user",
        "content": [{"type": "text", "text": "note"}, {"type": "tool_result", "tool_use_id": "t1", "content": "x"}],
    }
    outline = AnthropicOutline([dead, turn, late])
    assert outline.dead == [dead]
    assert outline.parse_counts == {"results_moved": 1}  # a result after text: rendered results first
    assert [m["role"] for m in outline.view] == ["assistant", "tool", "user"]
    rendered = outline.render(outline.view)["messages"]
    assert rendered[0] is dead and rendered[1] is turn
    assert [b["type"] for b in rendered[2]["content"]] == ["tool_result", "text"]


def test_deeply_nested_blocks_are_still_counted() -> None:
    deep: Any = "x"
    for _ in range(5_000):
        deep = [deep]
    counter = TokenCounter("o200k_base", TokenCache())
    message = {"role": "assistant", "content": [{"type": "x", "value": deep}]}
    assert counter.message(message) == counter.message(copy.copy(message)) > 0


def test_a_stand_in_for_calls_stored_upstream_is_no_client_item() -> None:
    """With the history stored upstream, a stand-in holds the calls of outputs the input answers
    without them; it stands for no item, so untouched stretches are not taken there."""
    items = [fc("c1"), fco("c1"), fco("stored"), msg("user", "go on")]
    outline = ResponsesOutline(items, None, "resp_1")
    governed = [m for m in outline.view if m.get("tool_call_id") != "stored"]  # its output dropped
    assert outline.render(governed)["input"] == [items[0], items[1], items[3]]


@PROPERTY
@given(messages=anthropic_conversations(), items=responses_inputs())
def test_every_outline_message_and_call_says_which_of_the_clients_objects_it_stands_for(
    messages: list[dict[str, Any]], items: list[dict[str, Any]]
) -> None:
    """Whether `ORIGIN` holds an `Origin` or the object alone, `origin` and `native_of` say the same:
    one of the client's own messages, blocks or items (or the system prompt's or instructions'
    marker), and nothing more where the object is held alone."""
    for outline, natives in (
        (
            AnthropicOutline(messages, "sys"),
            [*messages, *(b for m in messages if isinstance(m["content"], list) for b in m["content"])],
        ),
        (ResponsesOutline(items, "sys"), items),
    ):
        ids = {id(native) for native in natives}
        for part in [*outline.view, *(c for m in outline.view for c in m.get("tool_calls", ()))]:
            found, held = origin(part), part.get(ORIGIN)
            assert isinstance(found, Origin)
            assert found.native is native_of(part)
            if not isinstance(held, Origin):
                assert found == Origin(held)
            if found.native is None:  # a Codex assistant run: its items
                assert found.order and all(id(piece) in ids for piece in found.order)
            else:
                assert id(found.native) in ids or any(
                    found.native is m for m in (_anthropic._SYSTEM, _responses._INSTRUCTIONS)
                )
