"""Anthropic Messages (`govern_anthropic`) and Responses (`govern_responses`): the same rules as
chat, in the client's own format, with whatever the rules do not understand passed verbatim."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceConfig, govern_anthropic, govern_request, govern_responses
from litellm_governance._backfill import BACKFILL_CONTENT
from litellm_governance._context import SYNTHETIC_USER_CONTENT

from .builders import examples, long_text
from .format_validity import anthropic_problems, responses_problems

CLAUDE = "anthropic/claude-sonnet-4-5-20250929"  # prefill supported
CLAUDE_46 = "anthropic/claude-opus-4-6"  # no prefill
GPT = "openai/gpt-4.1"
BIG = GovernanceConfig(context_window_tokens=1_000_000)


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


def thinking(t: str = "Let me look.", signature: str = "c2lnbmF0dXJl") -> dict[str, Any]:
    return {"type": "thinking", "thinking": t, "signature": signature}


def tool_use(ident: str, name: str = "Read", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": name, "input": inp or {"file_path": "/src/a.py"}}


def tool_result(ident: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": ident, "content": content, **extra}


def u(*blocks: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "content": list(blocks) if len(blocks) != 1 or not isinstance(blocks[0], str) else blocks[0],
    }


def a(*blocks: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": list(blocks) if len(blocks) != 1 or not isinstance(blocks[0], str) else blocks[0],
    }


class TestAnthropic:
    def test_valid_request_is_returned_as_it_came(self) -> None:
        """Nothing to do: the very same message objects, report unchanged."""
        messages = [u("Fix it."), a(thinking(), tool_use("t1")), u(tool_result("t1", "x"), text("go on")), a("Done")]
        out = govern_anthropic(messages, model=CLAUDE, system="You are Claude Code.", config=BIG)
        assert not out.report.changed and out.report.format == "anthropic"
        assert all(x is y for x, y in zip(out.messages, messages, strict=True))
        assert out.system == "You are Claude Code."

    def test_missing_result_is_backfilled_first_in_the_next_user_message(self) -> None:
        """A tool_use with no result gets an is_error tool_result, ahead of the user's text."""
        messages = [u("task"), a(tool_use("t1"), tool_use("t2")), u(tool_result("t1", "one"), text("and?"))]
        out = govern_anthropic(messages, model=CLAUDE, config=BIG)
        assert out.messages[2] == u(
            tool_result("t1", "one"),
            {"type": "tool_result", "tool_use_id": "t2", "content": BACKFILL_CONTENT, "is_error": True},
            text("and?"),
        )
        assert out.report.steps["backfilled"] == 1

    def test_results_move_to_the_front_of_their_message(self) -> None:
        """[text, tool_result] becomes [tool_result, text]: results must open the message."""
        messages = [u("task"), a(tool_use("t1")), u(text("note"), tool_result("t1", "one"))]
        out = govern_anthropic(messages, model=CLAUDE, config=BIG)
        assert out.messages[2]["content"] == [tool_result("t1", "one"), text("note")]
        assert anthropic_problems(out.messages, prefill=True) == []

    def test_orphan_result_is_dropped(self) -> None:
        """A tool_result answering no tool_use is dropped; the rest of its message stays."""
        messages = [u("task"), a("thinking aloud"), u(tool_result("nope", "stale"), text("next"))]
        out = govern_anthropic(messages, model=CLAUDE, config=BIG)
        assert out.messages[2] == u(text("next"))
        assert out.report.steps["orphans_dropped"] == 1

    def test_repeated_tool_use_ids_are_renamed_call_and_result_alike(self) -> None:
        """Anthropic rejects repeated tool_use ids: the repeat becomes <id>_2 on both sides."""
        messages = [
            u("task"),
            a(tool_use("t1"), tool_use("t1", file_path="/b")),
            u(tool_result("t1", "A"), tool_result("t1", "B")),
        ]
        out = govern_anthropic(messages, model=CLAUDE, config=BIG)
        assert [b["id"] for b in out.messages[1]["content"]] == ["t1", "t1_2"]
        assert [b["tool_use_id"] for b in out.messages[2]["content"]] == ["t1", "t1_2"]
        assert out.messages[1]["content"][0] is messages[1]["content"][0]  # the untouched block itself

    def test_compaction_stubs_the_result_content_and_keeps_its_flags(self) -> None:
        """Old Read results become a stub naming the call (here: the same file read again later,
        so the stub says the copy is stale); is_error and cache_control on the block survive (here
        the breakpoint is not respected, so that it can be compacted at all)."""
        config = GovernanceConfig(
            context_window_tokens=1_000_000, keep_recent=1, cache_stable=False, respect_cache_control=False
        )
        messages = [u("task")]
        for i in range(3):
            messages += [a(tool_use(f"t{i}")), u(tool_result(f"t{i}", long_text(2_000, str(i)), is_error=i == 0))]
        messages[2]["content"][0]["cache_control"] = {"type": "ephemeral"}
        out = govern_anthropic(messages, model=CLAUDE, config=config)
        first, second, third = (out.messages[i]["content"][0] for i in (2, 4, 6))
        assert first == {
            "type": "tool_result",
            "tool_use_id": "t0",
            "content": '[Read result omitted from context: Read(file_path="/src/a.py"), 42 lines — superseded by a later read]',
            "is_error": True,
            "cache_control": {"type": "ephemeral"},
        }
        assert second["content"] == first["content"]
        assert third is messages[6]["content"][0]

    def test_thinking_blocks_stay_in_their_turn_in_order(self) -> None:
        """Interleaved thinking, text and tool_use keep their order; signatures are untouched even
        when a call of the turn is renamed."""
        turn = a(thinking("first"), tool_use("t1"), text("between"), thinking("second", "c2ln"), tool_use("t1"))
        messages = [u("task"), turn, u(tool_result("t1", "A"), tool_result("t1", "B"))]
        out = govern_anthropic(messages, model=CLAUDE, config=BIG)
        blocks = out.messages[1]["content"]
        assert [b["type"] for b in blocks] == ["thinking", "tool_use", "text", "thinking", "tool_use"]
        assert blocks[0] is turn["content"][0] and blocks[3] is turn["content"][3]
        assert blocks[4]["id"] == "t1_2" and blocks[1] is turn["content"][1]

    def test_snipping_drops_whole_exchanges_and_keeps_the_task(self) -> None:
        """Over budget: the oldest tool exchanges go, the task stays first, pairs stay whole; the
        reminder text riding with results is not taken for the task."""
        messages = [u("THE TASK")]
        for i in range(30):
            messages += [
                a(tool_use(f"t{i}", name="Edit")),
                u(
                    tool_result(f"t{i}", long_text(1_500, str(i))),
                    text("<system-reminder>keep going</system-reminder>"),
                ),
            ]
        out = govern_anthropic(
            messages, model=CLAUDE, max_tokens=1_000, config=GovernanceConfig(context_window_tokens=8_000)
        )
        assert out.report.steps["snipped"] > 0 and not out.report.over_budget
        # The task, then (merged: Anthropic takes no two user turns in a row) the note for the cut turns.
        assert out.messages[0]["content"].startswith("THE TASK\n\n[Context note: ")
        assert anthropic_problems(out.messages, prefill=True) == []

    def test_leading_assistant_gets_a_user_turn_before_it(self) -> None:
        """The first message must be the user's."""
        out = govern_anthropic([a("Hello."), u("hi")], model=CLAUDE, config=BIG)
        assert out.messages[0] == {"role": "user", "content": SYNTHETIC_USER_CONTENT}

    def test_consecutive_user_messages_merge_losslessly(self) -> None:
        """A string and a block list merge into one block list, nothing dropped."""
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
        out = govern_anthropic([u("look"), u(image, text("at this"))], model=CLAUDE, config=BIG)
        assert out.messages == [u(text("look"), image, text("at this"))]
        assert out.messages[0]["content"][1] is image

    def test_blank_text_blocks_are_dropped(self) -> None:
        """ "text content blocks must be non-empty": a blank block goes, the rest stays."""
        out = govern_anthropic([u(text("  "), text("real"))], model=CLAUDE, config=BIG)
        assert out.messages == [u(text("real"))]

    @pytest.mark.parametrize(("model", "kept"), [(CLAUDE, True), (CLAUDE_46, False)])
    def test_prefill_only_where_the_model_supports_it(self, model: str, kept: bool) -> None:
        """Claude 4.6 takes no prefill; 4.5 does."""
        out = govern_anthropic([u("Write JSON."), a("{")], model=model, config=BIG)
        assert (out.messages[-1] == a("{")) is kept

    def test_unknown_blocks_and_system_blocks_pass_verbatim(self) -> None:
        """Blocks no rule is about — server tools, documents, future types — are the client's objects."""
        weird = {"type": "future_block", "payload": {"x": [1, 2]}, "cache_control": {"type": "ephemeral"}}
        server = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "x"}}
        found = {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []}
        doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}}
        system = [text("You are Claude Code.", cache_control={"type": "ephemeral"})]
        messages = [u(doc, text("read")), a(server, found, weird, text("ok")), u("a"), u("b")]
        out = govern_anthropic(messages, model=CLAUDE, system=system, config=BIG)
        assert out.system is system
        assert out.messages[0] is messages[0] and out.messages[1] is messages[1]
        assert out.messages[2] == u("a\n\nb")

    def test_library_entry_point_detects_the_format(self) -> None:
        """govern_request on an Anthropic body returns an Anthropic body."""
        body = {"model": CLAUDE, "system": "s", "max_tokens": 100, "messages": [u("task"), a(tool_use("t1"))]}
        out = govern_request(body, config=BIG)
        assert out.format == "anthropic"
        assert out.request["messages"][1] is body["messages"][1]
        assert out.request["messages"][2]["content"][0]["is_error"] is True


def fc(ident: str, name: str = "shell", arguments: str = '{"command":["ls"]}') -> dict[str, Any]:
    return {"type": "function_call", "call_id": ident, "name": name, "arguments": arguments}


def fco(ident: str, output: Any = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": ident, "output": output}


def msg(role: str, t: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": t}]}


REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB" + "x" * 300}


class TestResponses:
    def test_valid_input_is_returned_as_it_came(self) -> None:
        """Nothing to do: the very same items."""
        items = [msg("user", "Fix it."), REASONING, fc("c1"), fco("c1"), msg("assistant", "Done.")]
        out = govern_responses(items, model=GPT, instructions="You are Codex.", config=BIG)
        assert not out.report.changed and out.report.format == "responses"
        assert out.input is items or all(x is y for x, y in zip(out.input, items, strict=True))

    def test_each_call_kind_is_answered_by_its_own_output_kind(self) -> None:
        """function_call → function_call_output, custom_tool_call → custom_tool_call_output,
        local_shell_call → local_shell_call_output, all by call_id."""
        custom = {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"}
        shell = {
            "type": "local_shell_call",
            "id": "ls_1",
            "call_id": "c3",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"]},
        }
        items = [msg("user", "go"), fc("c1"), custom, shell, msg("user", "and?")]
        out = govern_responses(items, model=GPT, config=BIG)
        outputs = [(i["type"], i["call_id"]) for i in out.input if i.get("type", "").endswith("_output")]
        assert outputs == [
            ("function_call_output", "c1"),
            ("custom_tool_call_output", "c2"),
            ("local_shell_call_output", "c3"),
        ]
        assert responses_problems(out.input) == []

    def test_orphan_output_is_dropped(self) -> None:
        """ "No tool call found for function call output": an output for no visible call goes."""
        out = govern_responses([msg("user", "go"), fco("ghost"), msg("user", "next")], model=GPT, config=BIG)
        assert [i.get("type") for i in out.input] == ["message", "message"]

    def test_reasoning_stays_next_to_the_call_it_precedes(self) -> None:
        """Backfilling and renaming never move a reasoning item away from its call; it is verbatim."""
        items = [msg("user", "go"), REASONING, fc("c1"), fc("c1"), fco("c1")]
        out = govern_responses(items, model=GPT, config=BIG)
        kinds = [(i.get("type"), i.get("call_id")) for i in out.input]
        assert kinds[1:3] == [("reasoning", None), ("function_call", "c1")]
        assert out.input[1] is REASONING
        assert responses_problems(out.input) == []

    def test_previous_response_id_keeps_outputs_for_stored_calls(self) -> None:
        """With history held upstream, an output for a call not in the input answers a stored call."""
        items = [fco("call_stored", "result"), msg("user", "continue")]
        out = govern_responses(items, model=GPT, previous_response_id="resp_123", config=BIG)
        assert out.input is items or out.input == items
        assert any("previous_response_id" in note for note in out.report.notes)
        assert out.report.steps.get("orphans_dropped") is None

    def test_string_input_is_left_alone(self) -> None:
        """A plain string input is one user turn: nothing to govern."""
        out = govern_responses("hello", model=GPT, instructions="be brief", config=BIG)
        assert out.input == "hello" and out.instructions == "be brief" and not out.report.changed

    def test_instructions_count_like_a_system_message(self) -> None:
        """The instructions are part of the budget."""
        bare = govern_responses([msg("user", "hi")], model=GPT, config=BIG).report.tokens_before
        long = govern_responses([msg("user", "hi")], model=GPT, instructions="word " * 500, config=BIG)
        assert long.report.tokens_before > bare + 400

    def test_old_outputs_are_compacted_in_place(self) -> None:
        """Old shell outputs become the stub; the item keeps its call_id and other fields."""
        config = GovernanceConfig(context_window_tokens=1_000_000, keep_recent=1, cache_stable=False)
        items = [msg("user", "go")]
        for i in range(3):
            items += [fc(f"c{i}"), {**fco(f"c{i}", long_text(2_000, str(i))), "id": f"fco_{i}"}]
        out = govern_responses(items, model=GPT, config=config)
        assert out.input[2] == {
            "type": "function_call_output",
            "call_id": "c0",
            "output": '[shell result omitted from context: shell(command="ls"), 42 lines — call it again to see it]',
            "id": "fco_0",
        }
        assert out.input[6] is items[6]

    def test_snipping_keeps_the_task_and_whole_exchanges(self) -> None:
        """Over budget: oldest exchanges go, the task message stays first."""
        items = [msg("user", "THE TASK")]
        for i in range(30):
            items += [REASONING, fc(f"c{i}", name="apply_patch"), fco(f"c{i}", long_text(1_500, str(i)))]
        out = govern_responses(
            items, model=GPT, config=GovernanceConfig(context_window_tokens=8_000), max_output_tokens=1_000
        )
        assert out.report.steps["snipped"] > 0 and not out.report.over_budget
        assert out.input[0] is items[0]
        assert responses_problems(out.input) == []

    def test_unknown_items_pass_verbatim(self) -> None:
        """item_reference, compaction and server-tool items are the client's objects."""
        ref = {"type": "item_reference", "id": "msg_123"}
        compaction = {"type": "compaction", "encrypted_content": "enc"}
        search = {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "q"},
        }
        items = [compaction, ref, msg("user", "go"), search, msg("assistant", "found it"), fco("ghost")]
        out = govern_responses(items, model=GPT, config=BIG)
        assert out.input[:5] == items[:5] and all(x is y for x, y in zip(out.input, items[:5], strict=False))


# ---- properties -------------------------------------------------------------------------------

WORDS = st.sampled_from(["fix", "the", "test", "def", "日本", "  ", "\n", "x"])
TEXT = st.lists(WORDS, min_size=1, max_size=12).map(" ".join)
BIG_TEXT = st.integers(min_value=50, max_value=2_000).map(lambda n: ("payload line\n" * n)[: n * 5])
IDS = st.sampled_from(["toolu_1", "toolu_2", "toolu_3", "call_a"])
ANTHROPIC_MODELS = [(CLAUDE, True, "anthropic"), (CLAUDE_46, False, "anthropic"), ("zai/glm-4.6", False, "strict")]


@st.composite
def anthropic_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    opaque = st.sampled_from(
        [
            {"type": "future_block", "x": 1},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "redacted_thinking", "data": "ZW5j"},
        ]
    ).map(copy.deepcopy)  # distinct objects, as a parsed request has
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "user", "round", "round", "round", "assistant"]))
        if kind == "user":
            body = draw(st.one_of(TEXT, st.lists(st.one_of(TEXT.map(text), opaque), min_size=1, max_size=3)))
            messages.append({"role": "user", "content": body})
        elif kind == "assistant":
            messages.append({"role": "assistant", "content": draw(st.one_of(TEXT, st.just([text(" ")])))})
        else:
            ids = draw(st.lists(IDS, min_size=1, max_size=3))
            blocks: list[Any] = []
            if draw(st.booleans()):
                blocks.append(thinking(draw(TEXT), "sig-" + draw(TEXT)))
            for ident in ids:
                if draw(st.integers(0, 4)) == 0:
                    blocks.append(draw(opaque))
                blocks.append(tool_use(ident, name=draw(st.sampled_from(["Read", "Bash", "Edit"]))))
            messages.append({"role": "assistant", "content": blocks})
            results: list[Any] = []
            for ident in ids:
                fate = draw(st.sampled_from(["ok", "ok", "missing", "duplicate", "orphan"]))
                if fate == "missing":
                    continue
                extra = {"is_error": True} if draw(st.integers(0, 5)) == 0 else {}
                results.append(
                    tool_result("ghost" if fate == "orphan" else ident, draw(st.one_of(TEXT, BIG_TEXT)), **extra)
                )
                if fate == "duplicate":
                    results.append(tool_result(ident, "again"))
            if draw(st.booleans()):
                results.append(text(draw(TEXT)))  # a reminder riding along
            if draw(st.integers(0, 4)) == 0:
                results.reverse()  # text before the results
            if results:
                messages.append({"role": "user", "content": results})
    if draw(st.booleans()):
        messages.append({"role": "user", "content": draw(TEXT)})
    if draw(st.integers(0, 3)) == 0:
        messages.append({"role": "assistant", "content": draw(TEXT)})
    return messages


def configs() -> st.SearchStrategy[GovernanceConfig]:
    return st.builds(
        lambda window, keep, stable: GovernanceConfig(
            context_window_tokens=window,
            max_output_tokens=200,
            safety_buffer_tokens=100,
            keep_recent=keep,
            cache_stable=stable,
        ),
        window=st.sampled_from([800, 2_000, 6_000, 1_000_000]),
        keep=st.sampled_from([0, 1, 10]),
        stable=st.booleans(),
    )


def opaque_blocks(messages: list[dict[str, Any]]) -> list[Any]:
    """Blocks no rule is about (to be passed as the very same objects)."""
    kinds = {"thinking", "redacted_thinking", "future_block", "image"}
    return [
        b
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") in kinds
    ]


PROPERTY = settings(suppress_health_check=[HealthCheck.too_slow], max_examples=examples(200))


@PROPERTY
@given(messages=anthropic_conversations(), model=st.sampled_from(ANTHROPIC_MODELS), config=configs())
def test_anthropic_output_is_valid_idempotent_and_pure(
    messages: list[dict[str, Any]], model: tuple[str, bool, str], config: GovernanceConfig
) -> None:
    """Valid for the Messages API, within budget unless reported, idempotent, deterministic, input
    untouched; blocks no rule is about are the client's own objects, in their order."""
    name, prefill, profile = model
    before = copy.deepcopy(messages)
    out = govern_anthropic(messages, model=name, system="You are Claude Code.", config=config)
    assert messages == before
    assert out.report.profile == profile
    assert anthropic_problems(out.messages, prefill=prefill, unique_ids=profile == "anthropic") == []
    assert out.report.over_budget == (out.report.tokens_after > (out.report.budget or 0))
    again = govern_anthropic(out.messages, model=name, system=out.system, config=config)
    assert again.messages == out.messages and not again.report.changed
    assert (
        govern_anthropic(copy.deepcopy(messages), model=name, system="You are Claude Code.", config=config).messages
        == out.messages
    )
    kept = opaque_blocks(out.messages)
    originals = opaque_blocks(messages)
    assert all(any(k is o for o in originals) for k in kept), "a block no rule is about was rebuilt"
    positions = [next(i for i, o in enumerate(originals) if o is k) for k in kept]
    assert positions == sorted(positions), "blocks no rule is about changed order"
    json.dumps(out.messages)


@PROPERTY
@given(messages=anthropic_conversations())
def test_anthropic_nothing_opaque_lost_when_it_fits(messages: list[dict[str, Any]]) -> None:
    """With room to spare, every thinking, image and unknown block reaches Claude (4.5: prefill
    allowed, so no turn is dropped for being last)."""
    out = govern_anthropic(
        messages, model=CLAUDE, config=GovernanceConfig(context_window_tokens=1_000_000, compactable_tools=[])
    )
    kept = opaque_blocks(out.messages)
    assert all(any(o is k for k in kept) for o in opaque_blocks(messages))


@st.composite
def responses_inputs(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "round", "round", "round", "assistant", "opaque"]))
        if kind == "user":
            items.append(msg("user", draw(TEXT)))
        elif kind == "assistant":
            items.append(msg("assistant", draw(TEXT)))
        elif kind == "opaque":
            choices = [{"type": "item_reference", "id": "msg_1"}, {"type": "compaction", "encrypted_content": "e"}]
            items.append(copy.deepcopy(draw(st.sampled_from(choices))))
        else:
            ids = draw(st.lists(st.sampled_from(["c1", "c2", "c3"]), min_size=1, max_size=2))
            if draw(st.booleans()):
                items.append({"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": draw(TEXT)})
            for ident in ids:
                kind_of_call = draw(st.sampled_from(["function_call", "custom_tool_call"]))
                if kind_of_call == "function_call":
                    items.append(fc(ident, name=draw(st.sampled_from(["shell", "read_file", "update_plan"]))))
                else:
                    items.append({"type": "custom_tool_call", "call_id": ident, "name": "apply_patch", "input": "p"})
            for ident in ids:
                fate = draw(st.sampled_from(["ok", "ok", "missing", "duplicate", "orphan"]))
                if fate == "missing":
                    continue
                kind_of_output = (
                    "custom_tool_call_output" if items[-1].get("type") == "custom_tool_call" else "function_call_output"
                )
                items.append(
                    {
                        "type": kind_of_output,
                        "call_id": "zz" if fate == "orphan" else ident,
                        "output": draw(st.one_of(TEXT, BIG_TEXT)),
                    }
                )
                if fate == "duplicate":
                    items.append({"type": kind_of_output, "call_id": ident, "output": "again"})
    return items


@PROPERTY
@given(items=responses_inputs(), config=configs())
def test_responses_output_is_valid_idempotent_and_pure(items: list[dict[str, Any]], config: GovernanceConfig) -> None:
    """Every call answered by one output of its kind, no orphan outputs, within budget unless
    reported, idempotent, deterministic, input untouched, unknown items verbatim."""
    before = copy.deepcopy(items)
    out = govern_responses(items, model=GPT, instructions="You are Codex.", config=config)
    assert items == before
    assert responses_problems(out.input) == []  # ids reused across turns renamed: an output finds its call by id
    assert out.report.over_budget == (out.report.tokens_after > (out.report.budget or 0))
    again = govern_responses(out.input, model=GPT, instructions=out.instructions, config=config)
    assert again.input == out.input and not again.report.changed
    opaque = [i for i in out.input if i.get("type") in ("item_reference", "compaction", "reasoning")]
    assert all(any(o is i for i in items) for o in opaque)
