"""What the fast paths must not change: objects no step touched go out as the client's own,
output is a pure function of the request (same history, same bytes), the input is never mutated,
and the token cache's keys never change a count (bench/formats.py measures the speed; no test
here times anything)."""

from __future__ import annotations

import copy
import json
import operator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.ab import fuzz_loop
from bench.agent_shapes import to_claude_code, to_codex
from bench.sessions import make_session, make_tools, next_round
from litellm_governance import (
    PROFILES,
    GovernanceConfig,
    _anthropic,
    _calls,
    _microcompact,
    _responses,
    _stable,
    _trace,
    govern_request,
)
from litellm_governance._anthropic import AnthropicOutline
from litellm_governance._calls import call_info, calls_by_id, is_stub, looks_like_error
from litellm_governance._context import Context
from litellm_governance._conversations import conversations
from litellm_governance._ledger import Ledger
from litellm_governance._messages import ORIGIN, Origin, content_chars, is_blank_part, native_of, origin
from litellm_governance._microcompact import catalogue
from litellm_governance._reads import is_observation, read_target
from litellm_governance._responses import ResponsesOutline
from litellm_governance._roles import _without_blank_parts
from litellm_governance._tokens import TokenCache, TokenCounter, _message_pieces, fingerprint

from .test_formats import PROPERTY, anthropic_conversations, fc, fco, msg, responses_inputs, text, tool_result, tool_use

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


def test_responses_where_is_built_on_demand() -> None:
    items: list[Any] = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "reasoning", "id": "r1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "item_reference", "id": "x"},
    ]
    outline = ResponsesOutline(items, "Be brief.")
    assert [outline.where[id(m)] for m in outline.view] == [
        "instructions",
        "input[0]",
        "input[1..2]",
        "input[3]",
        "input[4]",
    ]
    single = ResponsesOutline("hello")
    assert list(single.where.values()) == ["input"]


def test_fingerprints_tell_json_values_apart() -> None:
    values: list[Any] = [1, 1.0, True, "1", None, [1], {"a": 1}, {"a": True}, ["a", 1], {"a": [1]}, [{"a": 1}]]
    keys = [hash(fingerprint(v)) for v in values]
    assert len(set(keys)) == len(values)
    assert fingerprint({"a": [1, {"b": "c"}]}) == fingerprint(json.loads('{"a": [1, {"b": "c"}]}'))
    assert not isinstance(fingerprint({"a": 1}), str)  # never a text's key
    # Numbers whose hashes collide by design (hash(-1) == hash(-2); ints equal modulo 2**61 - 1).
    for a, b in [(-1, -2), (5, 5 + 2**61 - 1), (0.5, 2**60)]:
        assert hash(fingerprint({"x": a})) != hash(fingerprint({"x": b}))


def test_cache_keys_never_change_a_count() -> None:
    """Counting through a shared, warm cache gives what a fresh counter gives, for messages that
    differ only in a value's type."""
    messages = [
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s" * 300}]},
        {"role": "assistant", "content": [{"type": "x", "value": 1}]},
        {"role": "assistant", "content": [{"type": "x", "value": True}]},
        {"role": "assistant", "content": [{"type": "x", "value": "1"}]},
        {"role": "assistant", "content": [{"type": "x", "value": [1, 2]}]},
        {"role": "assistant", "content": [{"type": "x", "value": -1}]},
        {"role": "assistant", "content": [{"type": "x", "value": -2}]},
        {"role": "assistant", "content": [{"type": "x", "value": 2**64 + 1}]},
        {"role": "assistant", "content": [{"type": "x", "value": 9}]},  # hash(2**64 + 1) == 9
    ]
    shared = TokenCounter("o200k_base", TokenCache())
    counts = [shared.message(m) for m in messages * 2]
    fresh = [TokenCounter("o200k_base", TokenCache()).message(m) for m in messages * 2]
    assert counts == fresh


def test_deeply_nested_blocks_are_still_counted() -> None:
    deep: Any = "x"
    for _ in range(5_000):
        deep = [deep]
    counter = TokenCounter("o200k_base", TokenCache())
    message = {"role": "assistant", "content": [{"type": "x", "value": deep}]}
    assert counter.message(message) == counter.message(copy.copy(message)) > 0


def test_call_info_is_the_same_cached_or_not() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "ls  -la\\n"}'}}
    parsed = {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": {"command": "ls  -la\n"}}}
    assert call_info(call) == call_info(parsed) == call_info(json.loads(json.dumps(call)))


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([1.0, 0.5, -1.0]), st.sampled_from(["1", "view", ""])
)
_ARGUMENT_VALUES = st.recursive(_SCALARS | st.text(max_size=6), lambda inner: st.lists(inner, max_size=3), max_leaves=6)
#: Argument objects of the tools whose calls `_reads` reads and of others, values of every JSON type.
_ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        key: _ARGUMENT_VALUES
        for key in ("command", "path", "file_path", "offset", "limit", "view_range", "start_line", "content")
    },
)


def _retyped(value: Any) -> Any:
    """`value` with its booleans as integers and its integers as floats: equal by ``==`` and hash
    (``True == 1 == 1.0``), different as JSON and to the read rules (a boolean is no line number)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_retyped(item) for item in value]
    if isinstance(value, dict):
        return {key: _retyped(item) for key, item in value.items()}
    return value


@PROPERTY
@given(
    st.lists(
        st.tuples(st.sampled_from(["Read", "str_replace_editor", "Bash", "Write"]), _ARGUMENTS, st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_calls_named_through_the_store_are_named_as_anew(calls: list[tuple[str, dict[str, Any], bool]]) -> None:
    """`call_info` remembers calls by a hash of their name and arguments (the text, or an object's
    fingerprint): what it gives is what naming the call anew gives — for arguments that differ only
    in a value's type (``1``, ``1.0``, ``True``, ``"1"``), as text or as an object, each named twice
    (the second time from the store), and whatever it named before."""
    named = [(name, arguments, as_text) for name, arguments, as_text in calls] + [
        (name, _retyped(arguments), as_text)
        for name, arguments, as_text in calls  # equal by ==, not as JSON
    ]
    for name, arguments, as_text in named * 2:
        raw: Any = json.dumps(arguments) if as_text else copy.deepcopy(arguments)
        call = {"id": "c", "type": "function", "function": {"name": name, "arguments": raw}}
        expected = _calls._call_info(name, _calls.parse_arguments(copy.deepcopy(raw)))
        assert repr(call_info(call)) == repr(expected)  # (1 == 1.0 == True: their reprs differ)
        assert (read_target(expected), is_observation(expected)) == (
            read_target(_calls.CallInfo(name, arguments=arguments)),
            is_observation(_calls.CallInfo(name, arguments=arguments)),
        )


def test_an_objects_call_is_named_once_across_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Claude Code call's ``input`` is a new object on every request: named once all the same."""
    named = []
    real = _calls._call_info
    monkeypatch.setattr(_calls, "_call_info", lambda *args: named.append(args) or real(*args))
    arguments = {"file_path": "src/app.py", "offset": 10, "limit": 20, "note": "x" * 40}
    first, second = (
        call_info({"id": "t", "function": {"name": "Read", "arguments": json.loads(json.dumps(arguments))}})
        for _ in range(2)
    )
    assert first == second and len(named) == 1
    assert first is not None and first.arguments == {"file_path": "src/app.py", "offset": 10, "limit": 20}


def test_next_turn_reuses_the_previous_governed_prefix() -> None:
    """Cache-stable replay: the next request of a session starts with what the previous one sent
    (the fast paths keep it a pure function of the history)."""
    session = make_session(200, seed=5)
    config = GovernanceConfig(context_window_tokens=1_000_000)
    body = {"model": "openai/gpt-4o", **to_codex(session)}
    following = {"model": "openai/gpt-4o", **to_codex(next_round(session, seed=5))}
    first = govern_request(body, config=config).request["input"]
    second = govern_request(following, config=config).request["input"]
    assert json.dumps(second[: len(first)]) == json.dumps(first)


def _slow_render(outline: AnthropicOutline) -> dict[str, Any]:
    return outline.render(list(outline.view))  # another list: the general path


@PROPERTY
@given(messages=anthropic_conversations())
def test_anthropic_render_of_an_untouched_outline_is_the_general_one(messages: list[dict[str, Any]]) -> None:
    """Rendering the outline itself (nothing changed) takes a shortcut; it writes what the general
    path writes, object for object."""
    for system in (None, "You are Claude Code.", ""):
        outline = AnthropicOutline(messages, system)
        fast, slow = outline.render(outline.view), _slow_render(outline)
        assert fast == slow
        sent = {id(m) for m in messages}  # the client's own objects where the general path has them
        assert [id(a) if id(a) in sent else None for a in fast["messages"]] == [
            id(b) if id(b) in sent else None for b in slow["messages"]
        ]
        assert fast.get("system", 0) is slow.get("system", 0)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        [  # results alone, then more results: rendered as one user message
            {"role": "assistant", "content": [tool_use("a"), tool_use("b")]},
            {"role": "user", "content": [tool_result("a")]},
            {"role": "user", "content": [tool_result("b")]},
        ],
        [  # results alone, then the user's text: folded together
            {"role": "assistant", "content": [tool_use("a")]},
            {"role": "user", "content": [tool_result("a")]},
            {"role": "user", "content": "go on"},
        ],
        [  # text before the results: moved
            {"role": "assistant", "content": [tool_use("a")]},
            {"role": "user", "content": [text("note"), tool_result("a")]},
        ],
    ],
)
def test_anthropic_render_shortcut_steps_aside_where_rendering_regroups(messages: list[dict[str, Any]]) -> None:
    outline = AnthropicOutline(messages, "sys")
    assert outline.render(outline.view) == _slow_render(outline)
    assert outline.render(outline.view)["messages"] != messages  # the general path regrouped them


@PROPERTY
@given(items=responses_inputs(), data=st.data())
def test_responses_render_of_runs_ending_with_their_calls_is_the_general_one(
    items: list[dict[str, Any]], data: st.DataObject
) -> None:
    """A run whose outputs all answer its last calls is rendered with its outputs after it, without
    placing them (`_responses._answers_last_calls`); that is what placing them gives, and the
    client's order where they are the client's own, untouched: the same items, object for object,
    and the same regrouping, whichever of a run's outputs a step replaced."""
    for _ in range(data.draw(st.integers(0, 3))):  # an assistant message among a run's items
        at = data.draw(st.integers(0, len(items)))
        items = [*items[:at], {"type": "message", "role": "assistant", "content": [text("so")]}, *items[at:]]
    outline = ResponsesOutline(items, "sys")
    governed = [
        {**m, "content": "[stub]"} if m.get("role") == "tool" and data.draw(st.booleans()) else m for m in outline.view
    ]
    for messages in (list(outline.view), governed):  # (another list: not the untouched outline's shortcut)
        fast = outline.render(messages)
        fast_regrouped = outline._regrouped
        general = _responses._answers_last_calls
        _responses._answers_last_calls = lambda run, outputs: False  # type: ignore[assignment]
        try:
            slow = outline.render(messages)
        finally:
            _responses._answers_last_calls = general
        assert fast == slow
        sent = {id(item) for item in items}  # the client's own objects where the general path has them
        assert [id(a) if id(a) in sent else None for a in fast["input"]] == [
            id(b) if id(b) in sent else None for b in slow["input"]
        ]
        assert fast_regrouped == outline._regrouped


@PROPERTY
@given(items=responses_inputs(), data=st.data())
def test_responses_render_of_an_untouched_outline_is_the_general_one(
    items: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Rendering the outline itself (nothing changed) gives back the client's items without walking
    them; it writes what the general path writes, object for object: also where an output is not of
    its call's kind, a compaction opens the input, or the history is stored upstream."""
    instructions = data.draw(st.sampled_from([None, "", "Be brief.", [{"type": "input_text", "text": "x"}]]))
    previous = data.draw(st.sampled_from([None, "", "resp_1"]))
    outline = ResponsesOutline(items, instructions, previous)
    fast = outline.render(outline.view)
    fast_regrouped = outline._regrouped
    slow = outline.render(list(outline.view))  # another list: the general path
    assert fast == slow
    assert list(fast) == list(slow)  # the same fields, in the same order
    sent = {id(item) for item in items}
    assert [id(a) if id(a) in sent else None for a in fast.get("input", ())] == [
        id(b) if id(b) in sent else None for b in slow.get("input", ())
    ]
    assert fast.get("instructions", 0) is slow.get("instructions", 0)
    assert fast_regrouped == outline._regrouped


def test_an_untouched_codex_body_goes_out_without_a_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Codex request nothing changes (a large window: nothing compacted or cut) goes out as the
    client's items without the render walking them: no output rendered, no run's order looked at."""
    walked: list[int] = []
    output = ResponsesOutline._output
    monkeypatch.setattr(ResponsesOutline, "_output", lambda self, *a: walked.append(1) or output(self, *a))
    monkeypatch.setattr(ResponsesOutline, "_in_client_order", lambda self, items: walked.append(1) or True)
    body = _bodies(40)["responses"]
    out = govern_request(body, config=GovernanceConfig(context_window_tokens=1_000_000, keep_recent=1_000))
    assert not out.report.changed
    assert len(out.request["input"]) == len(body["input"]) and all(
        map(operator.is_, out.request["input"], body["input"])
    )
    assert not walked


@PROPERTY
@given(items=responses_inputs(), data=st.data())
def test_responses_render_of_untouched_stretches_is_the_general_one(
    items: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Where a step changed some messages, the stretches of untouched ones that begin with a run go
    out as the client's items in a row (`ResponsesOutline._untouched_end`); that is what the general
    path writes, object for object, whichever messages were kept, dropped, stubbed, rebuilt or added."""
    for _ in range(data.draw(st.integers(0, 2))):  # an assistant message among a run's items
        at = data.draw(st.integers(0, len(items)))
        items = [*items[:at], {"type": "message", "role": "assistant", "content": [text("so")]}, *items[at:]]
    outline = ResponsesOutline(
        items, data.draw(st.sampled_from([None, "sys"])), data.draw(st.sampled_from([None, "r"]))
    )
    governed: list[Any] = []
    for message in outline.view:
        fate = data.draw(st.sampled_from(["keep", "keep", "keep", "drop", "edit", "add"]))
        if fate == "edit" and message.get("role") == "tool":
            governed.append({**message, "content": "[stub]"})
        elif fate == "edit":
            governed.append(dict(message))  # the same, but not the outline's own
        elif fate == "add":
            governed += [message, {"role": "user", "content": "go on"}]
        elif fate == "keep":
            governed.append(message)
    fast = outline.render(governed)
    fast_regrouped = outline._regrouped
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ResponsesOutline, "_untouched_end", lambda self, governed, start: (start, []))
        slow = outline.render(governed)
    assert fast == slow
    sent = {id(item) for item in items}
    assert [id(a) if id(a) in sent else None for a in fast.get("input", ())] == [
        id(b) if id(b) in sent else None for b in slow.get("input", ())
    ]
    assert fast_regrouped == outline._regrouped


def test_an_untouched_stretch_stops_short_of_a_run_whose_outputs_changed() -> None:
    """A run split by an assistant message whose second output was stubbed is placed anew (each
    output after its own call), so the stretch before it ends where the run begins."""
    items = [msg("user", "go"), fc("c0"), fco("c0"), fc("c1"), msg("assistant", "and"), fc("c2"), fco("c1"), fco("c2")]
    outline = ResponsesOutline(items, "sys")
    stub = {**outline.view[-1], "content": "[stub]"}
    rendered = outline.render([*outline.view[:-1], stub])["input"]
    assert rendered[:-1] == [*items[:4], items[6], *items[4:6]]  # c1's output after c1
    assert rendered[-1]["output"] == "[stub]" and outline._regrouped


def test_a_stretch_goes_on_past_an_output_stubbed_where_the_client_placed_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """An output a step rewrote in place (a stub: the same item and call id) whose run it answers
    the last calls of stays in the stretch: the client's items in a row, the stub rendered where
    the client's output sat. One stretch for the whole request; no output rendered on its own (the
    stretch ended before such a run, and the run and its outputs went through the general path)."""
    walked: list[str] = []
    output, untouched_end = ResponsesOutline._output, ResponsesOutline._untouched_end
    monkeypatch.setattr(ResponsesOutline, "_output", lambda self, *a: walked.append("output") or output(self, *a))
    monkeypatch.setattr(
        ResponsesOutline, "_untouched_end", lambda self, *a: walked.append("stretch") or untouched_end(self, *a)
    )
    items = [msg("user", "go"), fc("c0"), fco("c0"), fc("c1"), fco("c1"), msg("user", "more"), fc("c2"), fco("c2")]
    outline = ResponsesOutline(items, "sys")
    stub = {**outline.view[3], "content": "[stub]"}  # c0's output (after the instructions, the user, c0's run)
    rendered = outline.render([*outline.view[:3], stub, *outline.view[4:]])["input"]
    assert rendered[0] is items[0] and rendered[1] is items[1] and all(map(operator.is_, rendered[3:], items[3:]))
    assert rendered[2] == {**items[2], "output": "[stub]"} and not outline._regrouped
    assert walked == ["stretch"]


def test_a_codex_body_goes_out_in_one_stretch_past_its_stubs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 400-message Codex request at 1M, 100 of its old outputs stubbed, renders as one stretch of
    the client's items with the stubs in place: no output rendered on its own (130 stretches and 112
    outputs rendered one by one before)."""
    walked: list[str] = []
    output, untouched_end = ResponsesOutline._output, ResponsesOutline._untouched_end
    monkeypatch.setattr(ResponsesOutline, "_output", lambda self, *a: walked.append("output") or output(self, *a))
    monkeypatch.setattr(
        ResponsesOutline, "_untouched_end", lambda self, *a: walked.append("stretch") or untouched_end(self, *a)
    )
    body = _bodies(400)["responses"]
    out = govern_request(body, config=GovernanceConfig(context_window_tokens=1_000_000))
    assert out.report.steps["compacted"] >= 80
    assert walked == ["stretch"]
    sent = {id(item) for item in body["input"]}
    assert sum(id(item) not in sent for item in out.request["input"]) == out.report.steps["compacted"]


def test_a_stand_in_for_calls_stored_upstream_is_no_client_item() -> None:
    """With the history stored upstream, a stand-in holds the calls of outputs the input answers
    without them; it stands for no item, so untouched stretches are not taken there."""
    items = [fc("c1"), fco("c1"), fco("stored"), msg("user", "go on")]
    outline = ResponsesOutline(items, None, "resp_1")
    governed = [m for m in outline.view if m.get("tool_call_id") != "stored"]  # its output dropped
    assert outline.render(governed)["input"] == [items[0], items[1], items[3]]


def test_reading_a_body_makes_an_origin_only_where_it_says_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block or item an outline message or call stands for alone is held under `ORIGIN` as the
    object itself: reading a body makes an `Origin` only for what says more (an assistant turn's
    order, text that rode along with results, the system prompt or instructions). One was made for
    every outline message and call before: 657 and 774 for these 400-message bodies."""
    made: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Origin:
        made.append(1)
        return Origin(*args, **kwargs)

    monkeypatch.setattr(_anthropic, "Origin", counted)
    monkeypatch.setattr(_responses, "Origin", counted)
    bodies = _bodies(400)
    claude = bodies["anthropic"]["messages"]
    outline = AnthropicOutline(claude, bodies["anthropic"].get("system"))
    says_more = sum(m["role"] == "assistant" for m in claude) + sum(
        m["role"] == "user"
        and isinstance(m["content"], list)
        and len({b.get("type") == "tool_result" for b in m["content"]}) == 2
        for m in claude
    )
    assert 0 < len(made) <= says_more + 1 < _parts(outline.view) // 2
    made.clear()
    outline = ResponsesOutline(bodies["responses"]["input"], bodies["responses"].get("instructions"))
    runs = sum(m.get("role") == "assistant" for m in outline.view)
    assert 0 < len(made) <= runs + 1 < _parts(outline.view) // 2


def _parts(view: list[dict[Any, Any]]) -> int:
    """The outline messages and calls of `view`."""
    return len(view) + sum(len(m.get("tool_calls", ())) for m in view)


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


def test_the_replay_weighs_no_result_against_a_limit_no_unit_reaches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A result is compacted whatever its age when it costs more than half the room; where no unit
    of the request costs that much, no result does, and the cache-stable replay asks of none (it
    asked of every result before: 208 here at 1M)."""
    asked: list[int] = []
    oversized = _stable.is_oversized
    monkeypatch.setattr(_stable, "is_oversized", lambda *a: asked.append(1) or oversized(*a))
    session = make_session(400, seed=0)
    out = govern_request(
        {"model": "zai/glm-4.6", "messages": session},
        config=GovernanceConfig(context_window_tokens=1_000_000, cache_stable=True),
    )
    assert out.report.steps["compacted"] > 50 and not asked


def test_a_codex_body_is_rendered_past_its_untouched_stretches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Codex request whose old results compaction stubbed goes out with its untouched stretches
    (the messages after the last stub, and the runs between stubs) as the client's items in a row:
    most untouched outputs are not rendered one by one (all 208 were)."""
    rendered: list[int] = []
    output = ResponsesOutline._output
    monkeypatch.setattr(ResponsesOutline, "_output", lambda self, *a: rendered.append(1) or output(self, *a))
    body = _bodies(400)["responses"]
    out = govern_request(body, config=GovernanceConfig(context_window_tokens=1_000_000))
    outputs = sum(str(item.get("type")).endswith("_call_output") for item in body["input"])
    stubbed = out.report.steps["compacted"]
    assert 80 <= stubbed <= outputs - 80
    assert len(rendered) <= stubbed + (outputs - stubbed) // 4


@pytest.mark.parametrize("model", ["openai/gpt-4o", "zai/glm-4.6"])
def test_the_earliest_cut_estimates_the_note_only_where_the_rest_fits(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snipping looks for the earliest cut whose kept turns and note fit; a cut keeps at least its
    tail, so the cuts before the first whose tail fits are passed over without estimating their
    note (an estimate per cut unit before: 90-110 here). The request is the same either way."""
    estimated: list[int] = []
    estimate = _trace.TraceIndex.estimate
    monkeypatch.setattr(_trace.TraceIndex, "estimate", lambda self, *a: estimated.append(1) or estimate(self, *a))
    config = GovernanceConfig(context_window_tokens=32_768, cache_stable=False)
    governed = govern_request({"model": model, "messages": make_session(400, seed=0)}, config=config)
    assert governed.report.steps["snipped"] > 150
    assert 0 < len(estimated) <= 20


def test_a_codex_run_is_rendered_with_its_outputs_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex's runs (reasoning, then a call) with their outputs stubbed go out as the run, then the
    outputs: none is placed among the run's items."""
    placed: list[int] = []
    place = _responses._place_outputs
    monkeypatch.setattr(_responses, "_place_outputs", lambda run, outputs: placed.append(1) or place(run, outputs))
    body = _bodies(400)["responses"]
    out = govern_request(body, config=GovernanceConfig(context_window_tokens=1_000_000))
    assert out.report.steps.get("compacted")
    assert not placed


@pytest.mark.parametrize(
    "message",
    [
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 300},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "hello", "name": "ann"},
        {"role": "assistant", "content": "hello", "tool_calls": None},
        {"role": "assistant", "content": "hi", "reasoning_content": "because"},
        {"role": "tool", "tool_call_id": 7, "content": "x"},
    ],
)
def test_text_messages_keyed_without_pieces_count_as_the_general_path(message: dict[str, Any]) -> None:
    """The shortcut for text messages gives the count the pieces give (4 for the framing, and each piece)."""
    counter = TokenCounter("o200k_base", TokenCache())
    pieces: list[str] = []
    fixed = _message_pieces(message, pieces)
    expected = fixed + sum(counter.text(p) for p in pieces)
    assert counter.message(message) == counter.message(dict(message)) == expected


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_stub_token_counts_recorded_by_the_replay_are_exact(fmt: str) -> None:
    """StableShrink records each stub's tokens (the result's less what the stub saves) instead of
    counting it: a fresh count of every stub sent gives the same report."""
    body = _bodies(160, seed=2)[fmt]
    config = GovernanceConfig(context_window_tokens=1_000_000)
    governed = govern_request(body, config=config)
    assert governed.report.steps.get("compacted")
    again = govern_request(json.loads(json.dumps(governed.request)), config=config)  # stubs counted afresh
    assert again.report.tokens_before == governed.report.tokens_after


# Where the replay compacts (Claude Code's breakpoint protects its results until the budget cuts).
@pytest.mark.parametrize(("fmt", "window"), [("chat", 1_000_000), ("responses", 1_000_000), ("anthropic", 32_768)])
def test_replay_saving_is_what_the_ledger_would_find(fmt: str, window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """StableShrink tells the ledger what its stubs save; the ledger finding the stubs itself (as it
    does after Microcompact and Snip) gives the same tokens removed per stage."""
    body = _bodies(160, seed=4)[fmt]
    config = GovernanceConfig(context_window_tokens=window, cache_stable=True)
    told = govern_request(body, config=config).report
    assert told.tokens_removed.get("compaction")
    after_shrink = Ledger.after_shrink
    monkeypatch.setattr(
        Ledger, "after_shrink", lambda self, before, after, saved=None: after_shrink(self, before, after)
    )
    found = govern_request(json.loads(json.dumps(body)), config=config).report
    assert found.tokens_removed == told.tokens_removed
    assert found.to_dict() == told.to_dict()


# ---- what a request computes once (Context.memo) -------------------------------------------------


def _protected_catalogue(messages: list[dict[str, Any]], ctx: Context) -> tuple[list[tuple[Any, ...]], int]:
    """The reference: one scan that leaves out what the last breakpoint protects (how `catalogue`
    worked before it derived the protected catalogue from the whole one)."""
    protected = ctx.last_breakpoint(messages)
    calls = calls_by_id(messages)
    found: list[list[Any]] = []
    reads: dict[tuple[str, str], list[tuple[int, Any]]] = {}
    superseded: dict[int, int] = {}
    count = 0
    for index, message in enumerate(messages):
        if message.get("role") != "tool":
            continue
        info = calls.get(message["tool_call_id"])
        target = read_target(info)
        if target is not None and not looks_like_error(message):
            for ordinal, earlier in reads.get((target.tool, target.path), ()):
                if ordinal not in superseded and target.covers(earlier):
                    superseded[ordinal] = index
        chars = content_chars(message.get("content"))
        if not is_observation(info) or chars < ctx.config.min_chars or is_stub(message.get("content")):
            continue
        if index <= protected:
            count += 1
            continue
        if target is not None:
            reads.setdefault((target.tool, target.path), []).append((len(found), target))
        found.append([index, info.name if info is not None else None, info, None])
    for ordinal, later in superseded.items():
        found[ordinal][3] = later
    return [tuple(c) for c in found], count


@PROPERTY
@given(messages=st.randoms(use_true_random=False).map(fuzz_loop))
def test_the_protected_catalogue_is_the_one_a_protected_scan_finds(messages: list[dict[str, Any]]) -> None:
    """`catalogue` with a breakpoint respected is taken from the request's whole catalogue (made
    once for both shrinking attempts): the same candidates, supersessions and protected count as a
    scan that skips the protected results, and the whole one when the breakpoint is lifted. (The
    loops of `bench/ab.py --fuzz`: files read again with and without ranges, failing calls,
    breakpoints on results and user turns.)"""
    ctx = Context(
        config=GovernanceConfig(compactable_tools="*"),
        profile=PROFILES["permissive"],
        counter=TokenCounter("o200k_base", TokenCache(1_000)),
    )
    protected = catalogue(messages, ctx)
    lifted = catalogue(messages, ctx.with_(ignore_breakpoints=True))
    expected, count = _protected_catalogue(messages, ctx)
    assert [(c.index, c.name, c.call, c.superseded_by) for c in protected.candidates] == expected
    assert protected.protected == count
    assert lifted.protected == 0 and len(lifted.candidates) == len(expected) + count
    assert (protected.newest, protected.large_uncompacted) == (lifted.newest, lifted.large_uncompacted)


def test_a_request_names_its_calls_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Claude Code body cut at a small window: both shrinking attempts and the note of cut turns
    read the calls of one list; each message's calls are named once (three times before
    `Context.calls_by_id`): the catalogue names them in two stretches, those the conversation's next
    request may take from this one and the newest (`_conversations`), and the note reads those."""
    named: list[int] = []

    def counted(messages: Any) -> Any:
        named.append(len(messages))
        return calls_by_id(messages)

    monkeypatch.setattr(_calls, "calls_by_id", counted)
    monkeypatch.setattr(_microcompact, "calls_by_id", counted)
    body = _bodies(300, seed=2)["anthropic"]
    config = GovernanceConfig(context_window_tokens=32_768)
    conversations(config.conversation_cache_size).clear()  # nothing to take from an earlier request
    governed = govern_request(body, config=config)
    assert governed.report.steps.get("snipped") and governed.report.steps.get("compacted")
    assert len(named) == 2 and sum(named) == len(AnthropicOutline(body["messages"], body["system"]).view)


_PARTS = st.lists(
    st.one_of(
        st.sampled_from(["", " ", "\n", "text"]),
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["text", "input_text", "output_text", "image", "tool_use", None]),
                "text": st.one_of(st.none(), st.sampled_from(["", "  ", "\t\n", "words", " x "]), st.integers()),
            }
        ),
        st.fixed_dictionaries({"type": st.just("text")}),  # no "text" at all
        st.integers(),
    ),
    max_size=6,
)


@given(content=st.one_of(_PARTS, st.none(), st.sampled_from(["", " ", "text"])))
def test_blank_parts_dropped_as_the_plain_rule_says(content: Any) -> None:
    """The role rules' scan for blank text parts (a loop deciding the common blocks inline, as it runs
    on every message) drops exactly the parts `is_blank_part` names, and returns the content itself
    when there are none."""
    cleaned = _without_blank_parts(content)
    if isinstance(content, list) and any(is_blank_part(part) for part in content):
        assert cleaned == [part for part in content if not is_blank_part(part)]
    else:
        assert cleaned is content
