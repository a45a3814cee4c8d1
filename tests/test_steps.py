"""Each pipeline step on its own: tables of (input, expected output) conversations."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from litellm_governance import PROFILES, GovernanceConfig
from litellm_governance._backfill import BACKFILL_CONTENT, backfill
from litellm_governance._context import SYNTHETIC_USER_CONTENT, Context
from litellm_governance._ids import unique_ids
from litellm_governance._microcompact import microcompact
from litellm_governance._orphans import drop_orphans
from litellm_governance._roles import enforce_roles
from litellm_governance._snip import snip
from litellm_governance._stable import stable_shrink
from litellm_governance._tokens import TokenCache, TokenCounter

from .builders import assistant, call, calling, long_text, result, system, user

Messages = list[dict[str, Any]]


def make_ctx(profile: str = "strict", budget: int | None = None, prefill: bool = False, **options: Any) -> Context:
    return Context(
        config=GovernanceConfig(**options),
        profile=PROFILES[profile],
        counter=TokenCounter("cl100k_base", TokenCache(10_000)),
        budget=budget,
        allow_prefill=prefill,
    )


def run(step: Any, messages: Messages, ctx: Context | None = None) -> Messages:
    """Run `step`, checking it neither mutates its input nor changes anything on a second run."""
    ctx = ctx or make_ctx()
    before = copy.deepcopy(messages)
    out = step(messages, ctx).messages
    assert messages == before, "the step mutated its input"
    again = step(out, ctx).messages
    assert again is out, "a second run changed something (not idempotent)"
    return out


def stub(ident: str, name: str = "read_file") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": ident, "name": name, "content": BACKFILL_CONTENT}


class TestDropOrphans:
    CASES = [
        pytest.param([user(), result("x")], [user()], id="result-answering-nothing"),
        pytest.param(
            [user(), calling("a"), result("a", "first"), result("a", "second")],
            [user(), calling("a"), result("a", "first")],
            id="duplicate-result",
        ),
        pytest.param(
            [user(), result("a", "early"), calling("a"), result("a")],
            [user(), calling("a"), result("a")],
            id="result-before-its-call",
        ),
        pytest.param(
            [user(), calling("a"), result("a"), user("again"), calling("a"), result("a")],
            [user(), calling("a"), result("a"), user("again"), calling("a"), result("a")],
            id="id-reused-in-a-later-turn",
        ),
        pytest.param(
            [user(), {"role": "tool", "content": "no id"}],
            [user()],
            id="result-without-tool_call_id",
        ),
        pytest.param(
            [user(), assistant(None, {"type": "function", "function": {"name": "grep"}}, call("b"))],
            [user(), assistant(None, call("b"))],
            id="call-without-id-removed",
        ),
        pytest.param(
            [user(), assistant(None, {"id": "a", "function": {"name": ""}})],
            [user()],
            id="message-with-only-malformed-calls-and-no-text-dropped",
        ),
        pytest.param(
            [user(), assistant("thinking", {"id": "a", "function": {}})],
            [user(), assistant("thinking")],
            id="malformed-calls-removed-text-kept",
        ),
        pytest.param(
            [user(), {"role": "assistant", "content": "hi", "tool_calls": []}],
            [user(), assistant("hi")],
            id="empty-tool_calls-list-removed",
        ),
        pytest.param(
            [user(), {"role": "assistant", "content": "hi", "tool_calls": {"id": "a"}}],
            [user(), assistant("hi")],
            id="tool_calls-not-a-list-removed",
        ),
    ]

    @pytest.mark.parametrize(("messages", "expected"), CASES)
    def test_table(self, messages: Messages, expected: Messages) -> None:
        """Orphan and duplicate results and malformed calls go; everything else stays."""
        assert run(drop_orphans, messages) == expected

    def test_unchanged_input_is_returned_itself(self) -> None:
        """A clean conversation comes back as the same list object (cheap second pass)."""
        messages = [system(), user(), calling("a"), result("a"), assistant("done")]
        assert drop_orphans(messages, make_ctx()).messages is messages


class TestBackfill:
    CASES = [
        pytest.param(
            [user(), calling("a", name="grep")],
            [user(), calling("a", name="grep"), stub("a", "grep")],
            id="missing-result-stubbed-with-tool-name",
        ),
        pytest.param(
            [user(), calling("a", "b"), result("b")],
            [user(), calling("a", "b"), result("b"), stub("a")],
            id="stub-after-the-other-results",
        ),
        pytest.param(
            [user(), calling("a", "b"), user("interrupt"), result("a"), result("b")],
            [user(), calling("a", "b"), result("a"), result("b"), user("interrupt")],
            id="user-between-call-and-results-moves-after-them",
        ),
        pytest.param(
            [user(), calling("a"), system("note"), result("a")],
            [user(), calling("a"), result("a"), system("note")],
            id="system-between-call-and-results",
        ),
        pytest.param(
            [user(), calling("a"), calling("b"), result("b"), result("a")],
            [user(), calling("a"), result("a"), calling("b"), result("b")],
            id="result-of-earlier-call-after-later-call",
        ),
        pytest.param(
            [user(), calling("a"), user("next"), assistant("answer")],
            [user(), calling("a"), stub("a"), user("next"), assistant("answer")],
            id="interrupted-call-mid-conversation",
        ),
    ]

    @pytest.mark.parametrize(("messages", "expected"), CASES)
    def test_table(self, messages: Messages, expected: Messages) -> None:
        """Every call ends with exactly one result, all in one block right after it."""
        assert run(backfill, messages) == expected

    def test_complete_conversation_is_returned_itself(self) -> None:
        """Nothing missing, nothing out of place: the same list object comes back."""
        messages = [user(), calling("a", "b"), result("b"), result("a"), assistant("done")]
        assert backfill(messages, make_ctx()).messages is messages


def reads(count: int, *, size: int = 600, name: str = "read_file", named: bool = False) -> Messages:
    """`count` tool rounds, each reading `size` characters."""
    rounds: Messages = []
    for i in range(count):
        rounds.append(calling(f"c{i}", name=name))
        rounds.append(result(f"c{i}", long_text(size, f"v{i}"), name=name if named else None))
    return rounds


def compacted_ids(messages: Messages) -> list[str]:
    return [m["tool_call_id"] for m in messages if m["role"] == "tool" and "omitted from context" in m["content"]]


class TestMicrocompact:
    def test_keeps_the_ten_newest(self) -> None:
        """12 long read_file results: the 2 oldest become stubs naming the call, 10 stay whole."""
        messages = [system(), user(), *reads(12)]
        out = run(microcompact, messages)
        assert compacted_ids(out) == ["c0", "c1"]
        assert (
            out[3]["content"]
            == "[read_file result omitted from context: read_file(), 12 lines — call it again to see it]"
        )
        assert [m for m in out if m["role"] == "tool"][2:] == [m for m in messages if m["role"] == "tool"][2:]

    def test_short_results_are_never_compacted(self) -> None:
        """Results under min_chars stay whole and do not count among the ten newest."""
        messages = [user(), *reads(3, size=600), *reads(20, size=100)]
        assert compacted_ids(run(microcompact, messages)) == []

    def test_name_taken_from_the_call_when_the_result_has_none(self) -> None:
        """OpenAI-format results carry no name: the matching tool call's name decides."""
        messages = [user(), *reads(11, name="grep")]
        out = run(microcompact, messages)
        assert out[2]["content"].startswith("[grep result omitted from context: grep(), ")

    def test_name_on_the_result_wins(self) -> None:
        """A result's own `name` is used when present."""
        messages = [user(), *reads(11, name="exec", named=True)]
        assert compacted_ids(run(microcompact, messages)) == ["c0"]

    def test_other_tools_are_never_compacted(self) -> None:
        """write_file is not in the compactable set."""
        messages = [user(), *reads(15, name="write_file")]
        assert compacted_ids(run(microcompact, messages)) == []

    def test_star_compacts_every_tool(self) -> None:
        """compactable_tools='*' makes every tool's old results compactable."""
        messages = [user(), *reads(12, name="write_file")]
        out = run(microcompact, messages, make_ctx(compactable_tools="*"))
        assert compacted_ids(out) == ["c0", "c1"]

    @pytest.mark.parametrize(("rounds", "expected"), [(14, 0), (15, 5), (19, 5), (20, 10)])
    def test_batches(self, rounds: int, expected: int) -> None:
        """With compact_batch=5, results are compacted five at a time, counted from the start."""
        messages = [user(), *reads(rounds)]
        out = run(microcompact, messages, make_ctx(compact_batch=5))
        assert len(compacted_ids(out)) == expected

    def test_cache_control_breakpoint_protects_what_precedes_it(self) -> None:
        """Results before the last cache_control breakpoint are left whole."""
        rounds = reads(14)
        marked = {
            "role": "user",
            "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}],
        }
        messages = [user(), *rounds[:4], marked, *rounds[4:]]
        out = run(microcompact, messages)
        assert compacted_ids(out) == ["c2", "c3"]

    def test_nothing_to_do_returns_the_input_itself(self) -> None:
        """Fewer than ten long results: the same list object comes back."""
        messages = [user(), *reads(10)]
        assert microcompact(messages, make_ctx()).messages is messages


def turn(i: int, size: int = 400) -> Messages:
    return [calling(f"t{i}", name="write_file"), result(f"t{i}", long_text(size, f"w{i}"))]


class TestSnip:
    def budget_for(self, messages: Messages, ctx: Context) -> int:
        return sum(ctx.tokens(m) for m in messages) + 3

    def test_fits_returns_the_input_itself(self) -> None:
        """Under budget nothing is dropped and the same list object comes back."""
        messages = [system(), user(), *turn(0)]
        ctx = make_ctx(budget=10_000)
        assert snip(messages, ctx).messages is messages

    def test_no_window_no_snip(self) -> None:
        """Without a budget (unknown window) history is left whole."""
        messages = [system(), user(), *turn(0, 100_000)]
        assert snip(messages, make_ctx(budget=None)).messages is messages

    def test_keeps_newest_whole_turns_starting_with_a_user_message(self) -> None:
        """Old turns go first; a call and its result are kept or dropped together."""
        ctx = make_ctx(note_cut_turns=False)
        messages = [system(), user("one"), *turn(0), user("two"), *turn(1), user("three"), *turn(2)]
        ctx = ctx.with_(budget=self.budget_for([system(), user("two"), *turn(1), user("three"), *turn(2)], ctx) + 5)
        out = run(snip, messages, ctx)
        assert out == [system(), user("two"), *turn(1), user("three"), *turn(2)]

    def test_single_task_loop_keeps_the_task(self) -> None:
        """One user message then many tool rounds: the task stays, then the newest rounds that fit."""
        ctx = make_ctx(note_cut_turns=False)
        rounds = [m for i in range(30) for m in turn(i)]
        messages = [system(), user("the task"), *rounds]
        ctx = ctx.with_(budget=self.budget_for([system(), user("the task"), *rounds[-10:]], ctx))
        out = run(snip, messages, ctx)
        assert out == [system(), user("the task"), *rounds[-10:]]

    def test_system_messages_are_always_kept_in_order(self) -> None:
        """A system message in the dropped part is kept, before the kept history."""
        ctx = make_ctx(note_cut_turns=False)
        messages = [system("a"), user("one"), *turn(0), system("b"), *turn(1), user("two"), *turn(2)]
        ctx = ctx.with_(budget=self.budget_for([system("a"), system("b"), user("two"), *turn(2)], ctx))
        out = run(snip, messages, ctx)
        assert out == [system("a"), system("b"), user("two"), *turn(2)]

    def test_over_budget_keeps_the_minimal_tail(self) -> None:
        """If even the latest user message and newest turn do not fit, those are kept and flagged."""
        ctx = make_ctx(budget=50)
        messages = [system(), user("one"), *turn(0), user("task"), *turn(1), *turn(2)]
        out = run(snip, messages, make_ctx(budget=50))
        assert out == [system(), user("task"), *turn(2)]
        assert snip(messages, ctx).over_budget

    def test_no_user_message_leaves_room_for_the_synthetic_one(self) -> None:
        """With no user message to start from, the tail starts at a call and reserves the synthetic user."""
        ctx = make_ctx(note_cut_turns=False)
        messages = [system(), *turn(0), *turn(1), *turn(2)]
        synthetic = ctx.synthetic_user_tokens()
        exact = self.budget_for([system(), *turn(1), *turn(2)], ctx)
        ctx = ctx.with_(budget=exact + synthetic)
        assert run(snip, messages, ctx) == [system(), *turn(1), *turn(2)]
        ctx = ctx.with_(budget=exact + synthetic - 1)
        assert run(snip, messages, ctx) == [system(), *turn(2)]


def prefix_breaks(outputs: list[Messages]) -> int:
    """How many times a request does not start with the whole previous one."""
    return sum(1 for a, b in itertools.pairwise(outputs) if b[: len(a)] != a)


class TestStableShrink:
    def grow(self, ctx: Context, step: Any, rounds: int, size: int = 2_000) -> list[Messages]:
        """Govern a loop turn by turn, returning each turn's governed history."""
        history: Messages = [system(), user("task")]
        outputs = []
        for i in range(rounds):
            history = [*history, *turn(i, size)]
            outputs.append(step(history, ctx).messages)
        return outputs

    def test_cut_stays_put_while_the_history_grows(self) -> None:
        """The literal cut moves every turn; the replayed cut jumps to the watermark and stays put."""
        literal = self.grow(make_ctx(budget=6_000), snip, 40)
        stable = self.grow(make_ctx(budget=6_000, cache_stable=True), stable_shrink, 40)
        assert prefix_breaks(literal) > 25
        assert prefix_breaks(stable) <= prefix_breaks(literal) / 3

    def test_each_turn_replays_the_previous_turns_decisions(self) -> None:
        """Between the turns where something is cut or compacted, each request extends the last."""
        ctx = make_ctx(budget=12_000, cache_stable=True)
        outputs = self.grow(ctx, stable_shrink, 60, size=1_500)
        breaks = [i for i, (a, b) in enumerate(itertools.pairwise(outputs)) if b[: len(a)] != a]
        assert 0 < len(breaks) <= 10
        for out in outputs:
            assert sum(ctx.tokens(m) for m in out) <= 12_000
            assert out[0] == system() and out[1] == user("task")

    def test_compacts_in_batches_without_a_budget(self) -> None:
        """No window known: results are compacted twenty at a time, after the ten newest."""
        messages = [user(), *reads(29)]
        assert compacted_ids(run(stable_shrink, messages, make_ctx(cache_stable=True))) == []
        messages = [user(), *reads(30)]
        out = run(stable_shrink, messages, make_ctx(cache_stable=True))
        assert compacted_ids(out) == [f"c{i}" for i in range(20)]

    def test_pressure_compacts_all_but_the_two_newest(self) -> None:
        """When the history outgrows the budget, old whole results become stubs before anything is cut."""
        ctx = make_ctx(cache_stable=True)
        messages = [system(), user("task"), *reads(12, size=3_000)]
        whole = sum(ctx.tokens(m) for m in messages)
        ctx = ctx.with_(budget=whole - 500)
        out = run(stable_shrink, messages, ctx)
        assert len(out) == len(messages)
        assert compacted_ids(out) == [f"c{i}" for i in range(10)]


class TestEnforceRoles:
    STRICT = [
        pytest.param([system(), user("a"), user("b")], [system(), user("a\n\nb")], id="user-run-merged"),
        pytest.param(
            [user(), assistant("a"), assistant("b"), user("c")],
            [user(), assistant("a\n\nb"), user("c")],
            id="assistant-run-merged",
        ),
        pytest.param([system(), user(), assistant("prefill")], [system(), user()], id="trailing-assistant-dropped"),
        pytest.param(
            [system(), assistant("only me")],
            [system(), {"role": "user", "content": "only me"}],
            id="system-then-assistant-recovered-as-user",
        ),
        pytest.param(
            [system(), assistant("hello"), user("hi")],
            [system(), user(SYNTHETIC_USER_CONTENT), assistant("hello"), user("hi")],
            id="leading-assistant-gets-synthetic-user",
        ),
        pytest.param(
            [
                user([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:x"}}]),
                user("and"),
            ],
            [
                user(
                    [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:x"}},
                        {"type": "text", "text": "and"},
                    ]
                )
            ],
            id="multimodal-merge-keeps-every-part",
        ),
        pytest.param(
            [user(), assistant("let me look"), calling("a"), result("a")],
            [user(), assistant("let me look", call("a")), result("a")],
            id="plain-text-before-tool-call-kept",
        ),
        pytest.param(
            [user(), {"role": "assistant", "content": None}, user("again")],
            [user("Fix the failing test.\n\nagain")],
            id="empty-assistant-dropped-then-users-merged",
        ),
        pytest.param(
            [
                system(),
                {"role": "user", "content": None},
                calling("a"),
                {"role": "tool", "tool_call_id": "a", "content": None},
            ],
            [system(), user(SYNTHETIC_USER_CONTENT), calling("a"), result("a", "")],
            id="null-user-dropped-null-result-becomes-empty-string",
        ),
    ]

    @pytest.mark.parametrize(("messages", "expected"), STRICT)
    def test_strict(self, messages: Messages, expected: Messages) -> None:
        """Nanobot's five rules, losslessly."""
        assert run(enforce_roles, messages, make_ctx("strict")) == expected

    PERMISSIVE = [
        pytest.param([user("a"), user("b")], [user("a"), user("b")], id="runs-kept"),
        pytest.param([user(), assistant("prefill")], [user(), assistant("prefill")], id="trailing-kept"),
        pytest.param([system(), assistant("hi")], [system(), assistant("hi")], id="leading-assistant-kept"),
    ]

    @pytest.mark.parametrize(("messages", "expected"), PERMISSIVE)
    def test_permissive(self, messages: Messages, expected: Messages) -> None:
        """OpenAI-like providers accept runs, prefill and a leading assistant: left alone."""
        assert run(enforce_roles, messages, make_ctx("permissive")) == expected

    def test_anthropic_renames_repeated_ids_on_call_and_result(self) -> None:
        """Anthropic rejects a tool_use id used twice: the repeat gets a new id, its result too."""
        messages = [
            user(),
            calling("a"),
            result("a", "1"),
            user("more"),
            calling("a", "a"),
            result("a", "2"),
            result("a", "3"),
        ]
        out = run(unique_ids, messages, make_ctx("anthropic"))
        assert [c["id"] for m in out for c in m.get("tool_calls", [])] == ["a", "a_2", "a_3"]
        assert [(m["tool_call_id"], m["content"]) for m in out if m["role"] == "tool"] == [
            ("a", "1"),
            ("a_2", "2"),
            ("a_3", "3"),
        ]

    def test_anthropic_new_ids_avoid_existing_ones(self) -> None:
        """A renamed id never collides with an id already in the request."""
        messages = [user(), calling("a"), result("a"), calling("a"), result("a"), calling("a_2"), result("a_2")]
        out = run(unique_ids, messages, make_ctx("anthropic"))
        ids = [c["id"] for m in out for c in m.get("tool_calls", [])]
        assert ids == ["a", "a_3", "a_2"]

    def test_anthropic_prefill_kept_only_where_supported(self) -> None:
        """A trailing assistant message survives only for models that accept prefill."""
        messages = [user(), assistant("{")]
        assert run(enforce_roles, messages, make_ctx("anthropic", prefill=True)) == messages
        assert run(enforce_roles, messages, make_ctx("anthropic", prefill=False)) == [user()]

    def test_gemini_never_rewrites_ids(self) -> None:
        """Gemini keeps thought signatures inside tool-call ids: repeats are left alone."""
        messages = [user(), calling("a"), result("a"), calling("a"), result("a")]
        assert run(unique_ids, messages, make_ctx("gemini")) is messages

    def test_gemini_function_call_turn_needs_a_user_turn_before_it(self) -> None:
        """A leading function-call turn gets a synthetic user turn in front."""
        messages = [system(), calling("a"), result("a")]
        out = run(enforce_roles, messages, make_ctx("gemini"))
        assert out == [system(), user(SYNTHETIC_USER_CONTENT), calling("a"), result("a")]
