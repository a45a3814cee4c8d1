"""The agent keeps what it needs (issue "Never take away what the agent needs"): the newest
exchange whole while it fits, truncated (never stubbed) when it cannot; stubs that name their
call; a note for cut turns; stale reads stubbed; multi-purpose tools compacted by what they did.

Properties on every profile and all three formats; examples for each rule."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceConfig, govern, govern_anthropic, govern_responses
from litellm_governance._calls import is_stub
from litellm_governance._explain import explain
from litellm_governance._tokens import TokenCache, TokenCounter, encoding_for_model
from litellm_governance._trace import EarlierNotes, earlier_notes

from .builders import assistant, call, examples, long_text, result, system, user
from .format_validity import anthropic_problems, responses_problems
from .test_formats import (
    CLAUDE,
    GPT,
    a,
    anthropic_conversations,
    responses_inputs,
    text,
    tool_result,
    tool_use,
    u,
)
from .test_formats import configs as format_configs
from .test_properties import CONFIGS, MODELS, conversations
from .validity import empty, problems

Messages = list[dict[str, Any]]
PROPERTY = settings(suppress_health_check=[HealthCheck.too_slow], max_examples=examples(200), deadline=None)
MARKER = re.compile(r"\n\[… [^\]\n]* omitted here to fit the context window: [^\]\n]*\]\n")
NOTE = "[Context note: "
#: Room to spare, Nanobot's rules on every request (no batches): compaction by age alone.
LITERAL = GovernanceConfig(context_window_tokens=1_000_000, cache_stable=False)


def run_output(lines: int, label: str) -> str:
    """What a test run prints: `lines` numbered lines (about 14 tokens each)."""
    return "".join(f"{label} tests/test_mod_{i % 37}.py::test_case_{i} PASSED [{i % 100:3d}%]\n" for i in range(lines))


# ---- the newest exchange: whole while it fits, truncated (never stubbed) when it cannot -----------


def _truncation_of(content: Any, original: Any) -> bool:
    """Whether `content` is `original` cut by the newest-result truncation: its head and its tail
    around one marker (in the longest text part, for block content)."""

    def cut(text: Any, whole: Any) -> bool:
        if not isinstance(text, str) or not isinstance(whole, str):
            return False
        found = MARKER.search(text)
        return (
            found is not None
            and whole.startswith(text[: found.start()])
            and whole.endswith(text[found.end() :])
            and len(text) - (found.end() - found.start()) < len(whole)
        )

    if isinstance(content, list) and isinstance(original, list) and len(content) == len(original):
        differing = [(c, o) for c, o in zip(content, original, strict=True) if c != o]
        return len(differing) == 1 and cut(differing[0][0].get("text"), differing[0][1].get("text"))
    return cut(content, original)


def _check_newest(newest_in: list[Any], newest_out: list[Any], report: Any, counter: TokenCounter) -> None:
    """Every newest result reaches the model whole, or truncated — never as a stub — and then
    only in the smallest request, which would not fit with them whole."""
    truncated = 0
    for original in newest_in:
        if original is None or original == "" or is_stub(original):
            continue
        if original in newest_out:
            continue
        match = [c for c in newest_out if _truncation_of(c, original)]
        assert match, f"a newest result was neither kept whole nor truncated: {str(original)[:80]!r}"
        truncated += 1
    assert not any(is_stub(c) and c not in newest_in for c in newest_out), "a newest result became a stub"
    if truncated:
        assert report.steps.get("truncated", 0) >= 1
        assert "noted" not in report.steps, "a note took room the newest exchange needed"


def _chat_newest(messages: Messages, *, prefill: bool = True, hoists: bool = False) -> list[Any]:
    """Contents of the results after the last assistant message (if it calls tools), first per id;
    without prefill, assistant text ending the request is no turn (the provider's rules drop it) —
    system messages after it end nothing only where the rules move them up (`hoists`: Gemini)."""
    end = len(messages)
    while (
        not prefill
        and end
        and (
            (hoists and messages[end - 1]["role"] == "system")
            or (messages[end - 1]["role"] == "assistant" and not messages[end - 1].get("tool_calls"))
        )
    ):
        end -= 1
    # An assistant message with nothing in it is no turn (every profile drops it).
    turns = [
        i
        for i, m in enumerate(messages[:end])
        if m.get("role") == "assistant" and (m.get("tool_calls") or not empty(m.get("content")))
    ]
    last = max(turns, default=-1)
    if last < 0 or not messages[last].get("tool_calls"):
        return []
    ids = {c.get("id") for c in messages[last]["tool_calls"]}
    seen: set[Any] = set()
    out = []
    for message in messages[last + 1 :]:
        ident = message.get("tool_call_id")
        if message.get("role") == "tool" and ident in ids and ident not in seen:
            seen.add(ident)
            out.append(message.get("content"))
    return out


def _chat_newest_out(messages: Messages) -> list[Any]:
    last = max(
        (
            i
            for i, m in enumerate(messages)
            if m.get("role") == "assistant" and (m.get("tool_calls") or m.get("content") != "(Tool results received.)")
        ),
        default=-1,
    )
    return [m.get("content") for m in messages[last + 1 :] if m.get("role") == "tool"]


@PROPERTY
@given(messages=conversations(), model=st.sampled_from(MODELS), config=CONFIGS)
def test_chat_newest_exchange_whole_or_truncated_never_stubbed(
    messages: Messages, model: tuple[str, str, bool], config: GovernanceConfig
) -> None:
    """Chat, every profile: the results the model is about to read are whole, or — when even the
    smallest request cannot hold them whole — truncated, never stubbed; the output stays valid."""
    name, profile, prefill = model
    out = govern(messages, model=name, config=config)
    counter = TokenCounter(encoding_for_model(name), TokenCache(0))
    newest = _chat_newest(messages, prefill=prefill, hoists=profile == "gemini")
    _check_newest(newest, _chat_newest_out(out.messages), out.report, counter)
    assert problems(out.messages, profile, prefill=prefill) == []


def _anthropic_newest(messages: Messages) -> list[Any]:
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    if last < 0 or last + 1 >= len(messages):
        return []
    ids = {
        b.get("id") for b in messages[last].get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"
    }
    nxt = messages[last + 1]
    blocks = nxt.get("content") if isinstance(nxt.get("content"), list) else []
    first: dict[Any, Any] = {}  # the first result per id (a second one is a duplicate, dropped)
    for b in blocks:
        if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in ids:
            first.setdefault(b.get("tool_use_id"), b.get("content"))
    return list(first.values())


def _anthropic_newest_out(messages: Messages) -> list[Any]:
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    if last < 0 or last + 1 >= len(messages):
        return []
    blocks = messages[last + 1].get("content")
    return [b.get("content") for b in blocks or [] if isinstance(b, dict) and b.get("type") == "tool_result"]


@PROPERTY
@given(
    messages=anthropic_conversations(),
    model=st.sampled_from([(CLAUDE, "anthropic"), ("zai/glm-4.6", "strict"), ("openai/gpt-4.1", "permissive")]),
    config=format_configs(),
)
def test_anthropic_newest_exchange_whole_or_truncated_never_stubbed(
    messages: Messages, model: tuple[str, str], config: GovernanceConfig
) -> None:
    """/v1/messages bodies, under three profiles: the same guarantee, on tool_result blocks."""
    name, _ = model
    out = govern_anthropic(messages, model=name, system="You are Claude Code.", config=config)
    counter = TokenCounter(encoding_for_model(name), TokenCache(0))
    _check_newest(_anthropic_newest(messages), _anthropic_newest_out(out.messages), out.report, counter)
    if model[1] == "anthropic":  # (the other profiles' rules are checked where they apply: test_formats)
        assert anthropic_problems(out.messages, prefill=True) == []


def _assistant_side(item: dict[str, Any]) -> bool:
    kind = str(item.get("type") or "message")
    return kind.endswith("_call") or kind == "reasoning" or (kind == "message" and item.get("role") == "assistant")


def _responses_newest(items: Messages) -> list[Any]:
    """Outputs answering the calls of the last run of assistant-side items, first per call id."""
    assistant_side = _assistant_side
    last = max((i for i, item in enumerate(items) if assistant_side(item)), default=-1)
    start = last
    while start > 0 and assistant_side(items[start - 1]):
        start -= 1
    ids = {item.get("call_id") for item in items[start : last + 1] if str(item.get("type")).endswith("_call")}
    first: dict[Any, Any] = {}
    for item in items[last + 1 :]:
        if str(item.get("type", "")).endswith("_call_output") and item.get("call_id") in ids:
            first.setdefault(item.get("call_id"), item.get("output"))
    return list(first.values()) if last >= 0 else []


def _responses_newest_out(items: Messages) -> list[Any]:
    last = max((i for i, item in enumerate(items) if _assistant_side(item)), default=-1)
    return [m.get("output") for m in items[last + 1 :] if str(m.get("type", "")).endswith("_call_output")]


@PROPERTY
@given(items=responses_inputs(), model=st.sampled_from([GPT, "zai/glm-4.6"]), config=format_configs())
def test_responses_newest_exchange_whole_or_truncated_never_stubbed(
    items: Messages, model: str, config: GovernanceConfig
) -> None:
    """/v1/responses inputs: the same guarantee, on *_call_output items."""
    out = govern_responses(items, model=model, instructions="You are Codex.", config=config)
    counter = TokenCounter(encoding_for_model(model), TokenCache(0))
    _check_newest(_responses_newest(items), _responses_newest_out(out.input), out.report, counter)


class TestNewestExchange:
    def six_bash_rounds(self) -> Messages:
        """The issue's reproduction: a task, then six Bash calls each answered with ~14.6k tokens."""
        messages: Messages = [system("You are Claude Code."), user("Make the test suite pass.")]
        for i in range(6):
            messages.append(assistant(None, call(f"b{i}", "Bash", command=f"pytest -x tests/ -k round{i}")))
            messages.append(result(f"b{i}", run_output(1_050, f"round{i}")))
        return messages

    @pytest.mark.parametrize("cache_stable", [False, True])
    def test_the_result_the_model_asked_for_reaches_it_whole(self, cache_stable: bool) -> None:
        """40k window, Claude: the newest ~14.6k-token Bash output is sent whole; older ones are
        stubbed or cut to make room (before: all six were stubbed, 102k tokens became 1.6k)."""
        messages = self.six_bash_rounds()
        config = GovernanceConfig(context_window_tokens=40_000, cache_stable=cache_stable)
        out = govern(messages, model="anthropic/claude-sonnet-4-5", config=config)
        assert out.messages[-1] == messages[-1]
        assert not out.report.over_budget and out.report.tokens_after <= out.report.budget
        assert out.report.tokens_after > 0.4 * out.report.budget  # the budget is used, not thrown away
        assert out.messages[1]["content"].startswith("Make the test suite pass.")

    def test_anthropic_body_keeps_the_newest_result_block_whole(self) -> None:
        """The same session as Claude Code sends it: the newest tool_result block is the client's own."""
        messages: Messages = [u(text("Make the test suite pass."))]
        for i in range(6):
            messages.append(a(tool_use(f"b{i}", "Bash", command=f"pytest -k r{i}")))
            messages.append(u(tool_result(f"b{i}", run_output(1_050, f"r{i}"))))
        out = govern_anthropic(
            messages, model="anthropic/claude-sonnet-4-5", config=GovernanceConfig(context_window_tokens=40_000)
        )
        assert out.messages[-1]["content"][0] is messages[-1]["content"][0]
        assert not out.report.over_budget

    def test_older_exchanges_give_way_first(self) -> None:
        """keep_recent=0 under pressure compacts every older result, never the newest."""
        messages = self.six_bash_rounds()
        config = GovernanceConfig(context_window_tokens=60_000, keep_recent=0, cache_stable=False)
        out = govern(messages, model="zai/glm-4.6", config=config)
        results = [m for m in out.messages if m.get("role") == "tool"]
        assert results[-1] == messages[-1]
        assert all(is_stub(r["content"]) for r in results[:-1])

    def test_a_newest_result_that_cannot_fit_is_truncated_with_a_marker(self) -> None:
        """Only when system + task + the newest exchange cannot fit: head and tail kept, and a
        marker saying how much went and how to see the rest; the request fits."""
        text_out = run_output(6_000, "huge")
        messages = [
            system(),
            user("Run the suite."),
            assistant(None, call("x", "Bash", command="pytest")),
            result("x", text_out),
        ]
        out = govern(messages, model="zai/glm-4.6", config=GovernanceConfig(context_window_tokens=16_000))
        sent = out.messages[-1]["content"]
        assert not out.report.over_budget and out.report.steps["truncated"] == 1
        assert _truncation_of(sent, text_out) and not is_stub(sent)
        marker = MARKER.search(sent)
        assert marker is not None
        assert re.search(
            r"\[… [\d,]+ lines \([\d,]+ characters\) omitted here to fit the context window: "
            r"the first [\d,]+ and the last [\d,]+ lines are shown\. Re-run with a narrower range "
            r"or a filter \(head, tail, grep\) to see the rest\.\]",
            marker.group(0),
        )
        again = govern(out.messages, model="zai/glm-4.6", config=GovernanceConfig(context_window_tokens=16_000))
        assert again.messages == out.messages and not again.report.changed

    def test_the_largest_of_several_newest_results_gives_way(self) -> None:
        """Two results in the newest turn: the huge one is cut, the short one stays whole."""
        big, small = run_output(6_000, "big"), run_output(40, "small")
        messages = [
            system(),
            user("go"),
            assistant(None, call("p", "Bash", command="pytest"), call("q", "Bash", command="git status")),
            result("p", big),
            result("q", small),
        ]
        out = govern(messages, model="zai/glm-4.6", config=GovernanceConfig(context_window_tokens=16_000))
        assert out.messages[-1]["content"] == small
        assert _truncation_of(out.messages[-2]["content"], big)

    @pytest.mark.parametrize("cache_stable", [False, True])
    def test_a_blank_user_message_the_rules_drop_ends_no_turn(self, cache_stable: bool) -> None:
        """Found by the chat property (Claude 4.6: no prefill; strict about empty text): assistant text
        then a blank user message end the request. The rules drop both, so the results before them
        are what the model reads next; compaction took the blank message for a turn boundary and
        stubbed the output the agent had just asked for, then the request ended with its stub."""
        output = run_output(40, "read")
        messages = [
            user("Fix the tests."),
            assistant(None, call("a", "read_file", path="a.py")),
            result("a", output),
            assistant("Reading it."),
            user("  "),
        ]
        config = GovernanceConfig(
            context_window_tokens=100_000, keep_recent=0, compact_batch=1, cache_stable=cache_stable
        )
        out = govern(messages, model="anthropic/claude-opus-4-6", config=config)
        assert out.messages[-1]["content"] == output
        assert out.report.steps == {"empty_messages_dropped": 1, "trailing_assistant_dropped": 1}
        # Where the text stays (OpenAI's profile allows prefill and blank text), it is the newest turn.
        other = govern(messages, model="openai/gpt-4.1", config=config)
        assert other.report.steps.get("compacted") == 1

    def test_a_blank_user_message_ends_no_turn_in_claude_code_and_codex_bodies(self) -> None:
        """The same rule on an Anthropic Messages and a Responses body (it lives in the outline)."""
        output = run_output(40, "read")
        config = GovernanceConfig(context_window_tokens=100_000, keep_recent=0, compact_batch=1, cache_stable=False)
        claude = govern_anthropic(
            [
                {"role": "user", "content": "Fix the tests."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "read_file", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": output}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Reading it."}]},
                {"role": "user", "content": "  "},
            ],
            model="anthropic/claude-opus-4-6",
            config=config,
        )
        assert claude.messages[-1]["content"][0]["content"] == output
        codex = govern_responses(
            [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the tests."}]},
                {"type": "function_call", "call_id": "a", "name": "read_file", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "a", "output": output},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading it."}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "  "}]},
            ],
            model="anthropic/claude-opus-4-6",
            config=config,
        )
        assert codex.input[-1]["output"] == output
        for report in (claude.report, codex.report):
            assert report.steps == {"empty_messages_dropped": 1, "trailing_assistant_dropped": 1}


# ---- stubs that name their call ------------------------------------------------------------------


class TestStubs:
    def read_rounds(self, count: int, lines: int = 412) -> Messages:
        body = "".join(f"{n:>6}\tline {n} of src/app.py\n" for n in range(1, lines + 1))
        out: Messages = [user("Refactor the app.")]
        for i in range(count):
            out.append(assistant(None, call(f"r{i}", "Read", file_path=f"src/app_{i}.py")))
            out.append(result(f"r{i}", body))
        return out

    def test_a_stub_names_the_tool_its_main_argument_and_the_size(self) -> None:
        """``[Read result omitted from context: Read(file_path="src/app_0.py"), 412 lines — call it again to see it]``."""
        out = govern(self.read_rounds(11), model="openai/gpt-4o", config=LITERAL)
        assert out.messages[2]["content"] == (
            '[Read result omitted from context: Read(file_path="src/app_0.py"), 412 lines — call it again to see it]'
        )

    @pytest.mark.parametrize(
        ("name", "arguments", "described"),
        [
            ("Bash", {"command": "pytest -x tests/", "description": "Run"}, 'Bash(command="pytest -x tests/")'),
            ("exec_command", {"cmd": "rg -n TODO src"}, 'exec_command(cmd="rg -n TODO src")'),
            ("shell", {"command": ["bash", "-lc", "ls -la"]}, 'shell(command="ls -la")'),
            ("Grep", {"pattern": "def main", "path": "src"}, 'Grep(path="src")'),
            ("WebFetch", {"url": "https://example.com/a", "prompt": "x"}, 'WebFetch(url="https://example.com/a")'),
            ("grep", {"regex": "a\nb"}, 'grep(regex="a b")'),
            ("list_dir", {}, "list_dir()"),
        ],
    )
    def test_main_argument_per_agent(self, name: str, arguments: dict[str, Any], described: str) -> None:
        """Each agent's observation tools are named by the argument that says what they did."""
        messages = [user("go")]
        for i in range(11):
            messages += [assistant(None, call(f"c{i}", name, **arguments)), result(f"c{i}", long_text(900, f"v{i}"))]
        out = govern(messages, model="openai/gpt-4o", config=LITERAL)
        assert out.messages[2]["content"].startswith(f"[{name} result omitted from context: {described}, ")

    def test_long_arguments_are_shortened_head_and_tail(self) -> None:
        """A long command keeps its start and its end (at most 80 characters, on one line)."""
        command = "python -m pytest " + " ".join(f"tests/unit/test_module_{i}.py" for i in range(20))
        messages = [user("go")]
        for i in range(11):
            messages += [assistant(None, call(f"c{i}", "Bash", command=command)), result(f"c{i}", long_text(900))]
        stub = govern(messages, model="openai/gpt-4o", config=LITERAL).messages[2]["content"]
        shown = json.loads(re.search(r"Bash\(command=(\".*?\")\)", stub).group(1))  # type: ignore[union-attr]
        assert len(shown) == 80 and "…" in shown
        assert command.startswith(shown.split("…")[0]) and command.endswith(shown.split("…")[1])

    def test_the_same_history_gives_the_same_stub_bytes(self) -> None:
        """Deterministic: governed twice, the stubs are equal byte for byte (the prompt cache)."""
        config = LITERAL
        first = govern(self.read_rounds(14), model="openai/gpt-4o", config=config).messages
        second = govern(copy.deepcopy(self.read_rounds(14)), model="openai/gpt-4o", config=config).messages
        assert json.dumps(first) == json.dumps(second)

    def test_block_content_size_counts_images(self) -> None:
        """A result made of blocks says its lines and its images."""
        from litellm_governance._calls import describe_size

        blocks = [{"type": "text", "text": "a\nb\nc"}, {"type": "image", "source": {}}, {"type": "image", "source": {}}]
        assert describe_size(blocks) == "3 lines, 2 images"
        assert describe_size("one line") == "8 characters"


# ---- superseded reads -----------------------------------------------------------------------


def read(ident: str, path: str, body: str, **ranges: Any) -> Messages:
    return [assistant(None, call(ident, "Read", file_path=path, **ranges)), result(ident, body)]


class TestSupersededReads:
    def test_a_file_read_again_leaves_the_stale_copy_as_a_stub(self) -> None:
        """No pressure and keep_recent=10, yet the older copy goes at once, saying why."""
        messages = [
            user("go"),
            *read("a", "src/app.py", long_text(2_000, "old")),
            *read("b", "src/app.py", long_text(2_000, "new")),
        ]
        out = govern(messages, model="openai/gpt-4o", config=LITERAL)
        assert out.messages[2]["content"] == (
            '[Read result omitted from context: Read(file_path="src/app.py"), 39 lines — superseded by a later read]'
        )
        assert out.messages[4] == messages[4]
        assert out.report.steps["superseded"] == 1

    @pytest.mark.parametrize(
        ("older", "newer", "stale"),
        [
            ({}, {}, True),
            ({"offset": 10, "limit": 50}, {}, True),  # the whole file covers a part
            ({"offset": 10, "limit": 50}, {"offset": 1, "limit": 100}, True),  # a wider range
            ({}, {"offset": 1, "limit": 100}, False),  # a part does not cover the whole
            ({"offset": 1, "limit": 50}, {"offset": 51, "limit": 50}, False),  # different parts
            ({"offset": 10, "limit": 50}, {"offset": 20, "limit": 50}, False),  # overlapping, not covering
        ],
    )
    def test_only_a_covering_range_supersedes(self, older: dict[str, int], newer: dict[str, int], stale: bool) -> None:
        """Claude Code's Read takes offset/limit: reads of different parts of a file supersede nothing."""
        messages = [
            user("go"),
            *read("a", "src/app.py", long_text(2_000, "a"), **older),
            *read("b", "src/app.py", long_text(2_000, "b"), **newer),
        ]
        out = govern(messages, model="openai/gpt-4o", config=LITERAL)
        assert is_stub(out.messages[2]["content"]) is stale

    def test_other_files_and_failed_rereads_supersede_nothing(self) -> None:
        """A read of another file, or a re-read that failed, leaves the copy the agent has."""
        failed = "<tool_use_error>File does not exist.</tool_use_error>"
        messages = [
            user("go"),
            *read("a", "src/app.py", long_text(2_000, "a")),
            *read("b", "src/other.py", long_text(2_000, "b")),
            *read("c", "src/app.py", failed),
        ]
        out = govern(messages, model="openai/gpt-4o", config=LITERAL)
        assert out.messages[2] == messages[2]

    def test_editor_views_supersede_on_view_range(self) -> None:
        """OpenHands' str_replace_editor: a later view of the whole file supersedes a partial view."""

        def view(ident: str, **extra: Any) -> Messages:
            return [
                assistant(None, call(ident, "str_replace_editor", command="view", path="/repo/a.py", **extra)),
                result(ident, long_text(2_000, ident)),
            ]

        messages = [user("go"), *view("v1", view_range=[10, 40]), *view("v2", view_range=[1, -1])]
        out = govern(messages, model="openai/gpt-4o", config=LITERAL)
        assert out.messages[2]["content"].endswith("— superseded by a later read]")

    def test_cache_stable_stubs_the_stale_copy_at_its_next_compaction_batch(self) -> None:
        """With cache_stable, a superseded read waits for the next batch (the prefix holds till then)."""
        config = GovernanceConfig(context_window_tokens=1_000_000, cache_stable=True)
        messages = [
            user("go"),
            *read("a", "src/app.py", long_text(2_000, "a")),
            *read("b", "src/app.py", long_text(2_000, "b")),
        ]
        assert govern(messages, model="openai/gpt-4o", config=config).messages[2] == messages[2]
        for i in range(30):  # thirty more results: a batch of twenty is compacted
            messages += [
                assistant(None, call(f"g{i}", "Grep", pattern=f"p{i}")),
                result(f"g{i}", long_text(900, f"g{i}")),
            ]
        out = govern(messages, model="openai/gpt-4o", config=config)
        assert out.messages[2]["content"].endswith("— superseded by a later read]")


class TestCompactionByWhatTheCallDid:
    def editor(self, ident: str, command: str, **arguments: Any) -> Messages:
        body = long_text(2_000, ident) if command == "view" else "The file /repo/a.py has been edited. " * 20
        return [
            assistant(None, call(ident, "str_replace_editor", command=command, path=f"/repo/{ident}.py", **arguments)),
            result(ident, body),
        ]

    def test_views_are_compacted_and_edit_confirmations_stay(self) -> None:
        """str_replace_editor view results are observations; str_replace / create results stay."""
        messages: Messages = [user("go")]
        for i in range(12):
            messages += self.editor(f"v{i}", "view")
            messages += self.editor(f"e{i}", "str_replace", old_str="a", new_str="b")
        out = govern(messages, model="openai/gpt-4o", config=LITERAL)
        stubbed = [m["tool_call_id"] for m in out.messages if m["role"] == "tool" and is_stub(m["content"])]
        assert stubbed == ["v0", "v1"]
        assert all(not is_stub(m["content"]) for m in out.messages if m.get("tool_call_id", "").startswith("e"))

    def test_anthropics_text_editor_tool_too(self) -> None:
        """str_replace_based_edit_tool: the same split."""
        messages: Messages = [user("go")]
        for i in range(11):
            messages += [
                assistant(None, call(f"v{i}", "str_replace_based_edit_tool", command="view", path=f"/a{i}.py")),
                result(f"v{i}", long_text(2_000)),
            ]
        out = govern(messages, model="openai/gpt-4o", config=LITERAL)
        assert out.messages[2]["content"].startswith(
            '[str_replace_based_edit_tool result omitted from context: str_replace_based_edit_tool(command="view"'
        )


# ---- the note for cut turns -----------------------------------------------------------------


def agent_session(rounds: int, *, size: int = 1_500, users: bool = False) -> Messages:
    messages: Messages = [system(), user("Make the suite pass.")]
    for i in range(rounds):
        if users and i == 5:
            messages += [assistant("The parser drops the timezone."), user("Keep the old API working too.")]
        name, args = [
            ("Read", {"file_path": f"src/m{i % 7}.py"}),
            ("Bash", {"command": f"pytest -k t{i}"}),
            ("Grep", {"pattern": f"p{i}"}),
        ][i % 3]
        body = long_text(size, f"o{i}") if i % 5 else "Error: 3 tests failed\n" + long_text(size, f"o{i}")
        messages += [assistant(None, call(f"c{i}", name, **args)), result(f"c{i}", body)]
    return messages


def note_of(messages: Messages) -> str:
    texts = [
        t
        for m in messages
        if m.get("role") == "user"
        for t in ([m["content"]] if isinstance(m["content"], str) else [p.get("text", "") for p in m["content"]])
        if NOTE in t
    ]
    assert len(texts) == 1, texts
    return texts[0][texts[0].index(NOTE) :]


class TestNote:
    def governed(self, messages: Messages, model: str = "openai/gpt-4o", window: int = 12_000, **options: Any) -> Any:
        config = GovernanceConfig(max_output_share=0.5, context_window_tokens=window, cache_stable=False, **options)
        return govern(messages, model=model, config=config)

    def test_cut_turns_leave_one_note_listing_what_they_did(self) -> None:
        """Each call's tool, main argument and outcome (size, error), what was said, what the user
        asked earlier (here the first task: a later one anchors the kept history), oldest first."""
        out = self.governed(agent_session(60, users=True))
        note = note_of(out.messages)
        assert out.report.steps["noted"] == 1 and out.report.steps["snipped"] > 0
        lines = note.splitlines()
        assert lines[0] == (
            "[Context note: 29 earlier turns were cut to fit the context window. What they did, oldest first "
            "(call a tool again to see its output):"
        )
        assert lines[1:6] == [
            '- user: "Make the suite pass."',
            '- Bash(command="pytest -k t1") → 30 lines',
            '- Grep(pattern="p2") → 30 lines',
            '- Bash(command="pytest -k t4") → 30 lines',
            '- said: "The parser drops the timezone."',
        ]
        assert '- Grep(pattern="p5") → 31 lines, error' in lines
        assert note.endswith('- Read(file_path="src/m6.py") → 29 lines (x2)]')
        kept_task = next(m for m in out.messages if m.get("content") == "Keep the old API working too.")
        assert out.messages.index(kept_task) < out.messages.index(
            next(m for m in out.messages if NOTE in str(m["content"]))
        )

    def test_the_note_stands_where_the_cut_turns_were_in_a_role_the_profile_takes(self) -> None:
        """OpenAI takes it as a user message of its own after the task; GLM's rules merge it into the task."""
        messages = agent_session(60)
        openai = self.governed(messages).messages
        assert openai[1] == messages[1] and openai[2]["content"].startswith(NOTE) and openai[3]["role"] == "assistant"
        glm = self.governed(messages, model="zai/glm-4.6").messages
        assert glm[1]["content"].startswith("Make the suite pass.\n\n" + NOTE)
        assert problems(glm, "strict") == []

    def test_repeats_of_a_call_are_one_line_at_their_latest_place(self) -> None:
        """The same call several times: one line, counted, where it last happened."""
        messages: Messages = [system(), user("go")]
        for i in range(60):
            messages += [
                assistant(None, call(f"c{i}", "Bash", command="pytest")),
                result(f"c{i}", long_text(1_500, str(i))),
            ]
        note = note_of(self.governed(messages).messages)
        assert note.count('Bash(command="pytest")') == 1
        assert re.search(r'\n- Bash\(command="pytest"\) → \d+ lines \(x\d+\)\]$', note)

    def test_the_oldest_lines_fold_into_counts_past_a_tenth_of_the_budget(self) -> None:
        """Hundreds of distinct calls: the note stays within 10 % of the budget; the oldest become
        counts, and what the user said stays."""
        messages: Messages = [system(), user("go")]
        for i in range(400):
            if i == 3:
                messages += [user("Only touch src/pkg.")]
            messages += [
                assistant(None, call(f"c{i}", "Read", file_path=f"src/pkg/module_{i}.py")),
                result(f"c{i}", long_text(1_000, str(i))),
            ]
        out = self.governed(messages, window=16_000)
        note = note_of(out.messages)
        counter = TokenCounter("o200k_base", TokenCache(0))
        assert counter.text(note) <= 0.1 * out.report.budget
        assert re.search(r"^- \(\+\d+ earlier: Read x\d+\)$", note, re.MULTILINE)
        assert '- user: "go"' in note
        assert "module_0.py" not in note and "module_399" not in note  # folded / kept whole
        assert not out.report.over_budget

    def test_the_note_changes_only_when_the_cut_point_moves(self) -> None:
        """cache_stable: consecutive requests with the same cut carry the same note, byte for byte."""
        config = GovernanceConfig(max_output_share=0.5, context_window_tokens=10_000, cache_stable=True)
        history: Messages = [system(), user("go")]
        by_cut: dict[str, set[str]] = {}
        for i in range(200):
            history = [
                *history,
                assistant(None, call(f"c{i}", "Read", file_path=f"src/m{i}.py")),
                result(f"c{i}", long_text(1_200, str(i))),
            ]
            out = govern(history, model="zai/glm-4.6", config=config)
            if out.report.steps.get("noted"):
                first_kept = next(m["tool_calls"][0]["id"] for m in out.messages if m.get("tool_calls"))
                by_cut.setdefault(first_kept, set()).add(note_of(out.messages))
        assert len(by_cut) >= 2, "the replay must cut more than once"
        assert all(len(notes) == 1 for notes in by_cut.values())

    def test_the_note_never_takes_the_newest_exchanges_room(self) -> None:
        """A window the newest exchange nearly fills: no note (or a smaller one), the newest whole."""
        messages = agent_session(60)
        big = long_text(20_000, "newest")
        messages += [assistant(None, call("n", "Bash", command="pytest")), result("n", big)]
        out = self.governed(messages)
        assert out.messages[-1]["content"] == big and not out.report.over_budget

    def test_notes_can_be_turned_off(self) -> None:
        """note_cut_turns: false — cut turns leave no trace (as before)."""
        out = self.governed(agent_session(60), note_cut_turns=False)
        assert out.report.steps["snipped"] > 0 and "noted" not in out.report.steps
        assert not any(NOTE in str(m.get("content")) for m in out.messages)

    def test_anthropic_note_goes_with_the_task_turn(self) -> None:
        """/v1/messages: the note is a text block after the task's (Claude takes no two user turns)."""
        messages: Messages = [u(text("<system-reminder>ctx</system-reminder>"), text("Make the suite pass."))]
        for i in range(60):
            messages += [
                a(tool_use(f"t{i}", "Bash", command=f"pytest -k t{i}")),
                u(tool_result(f"t{i}", long_text(1_500, str(i)))),
            ]
        out = govern_anthropic(
            messages,
            model=CLAUDE,
            config=GovernanceConfig(max_output_share=0.5, context_window_tokens=12_000, cache_stable=False),
        )
        first = out.messages[0]["content"]
        assert first[:2] == messages[0]["content"] and first[2]["text"].startswith(NOTE)
        assert '- Bash(command="pytest -k t39") → 30 lines' in first[2]["text"]
        assert anthropic_problems(out.messages, prefill=True) == []

    def test_responses_note_is_a_user_message_item(self) -> None:
        """/v1/responses: the note is an input message of the user's, before the kept calls."""
        items: Messages = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]
        for i in range(60):
            items += [
                {
                    "type": "function_call",
                    "call_id": f"c{i}",
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": f"rg x{i}"}),
                },
                {"type": "function_call_output", "call_id": f"c{i}", "output": long_text(1_500, str(i))},
            ]
        out = govern_responses(
            items,
            model=GPT,
            config=GovernanceConfig(max_output_share=0.5, context_window_tokens=12_000, cache_stable=False),
        )
        assert out.input[0] is items[0]
        assert out.input[1]["role"] == "user" and out.input[1]["content"].startswith(NOTE)
        assert 'exec_command(cmd="rg x0")' in out.input[1]["content"]
        assert responses_problems(out.input) == []

    # A second pass cuts further than the first: the proxy's deployment pass for a smaller deployment
    # (or a fallback), or the pass over the chat request LiteLLM translated a /v1/messages or
    # /v1/responses request into. The first pass's note must not be lost with the message it was in.

    @staticmethod
    def two_tasks_session() -> Messages:
        messages = agent_session(30, size=800)
        messages += [assistant("The parser drops the timezone."), user("Keep the old API working too.")]
        for i in range(30, 60):
            messages += [
                assistant(None, call(f"c{i}", "Bash", command=f"pytest -k t{i}")),
                result(f"c{i}", long_text(800, f"o{i}")),
            ]
        return messages

    @staticmethod
    def carried(first: str, second: str, *, task_cut: bool = True) -> None:
        """`second` (a later pass's note) keeps every line of `first` (an earlier one's), or counts it
        in its fold line, and quotes no note as words of the user's (the task's, where it was cut)."""
        lines = [line for line in first.removesuffix("]").splitlines()[1:] if line.startswith("- ")]
        missing = [line for line in lines if line not in second and line + "]" not in second]
        folded = re.search(r"^- \(\+(\d+) earlier: ", second, re.MULTILINE)
        assert len(missing) <= (int(folded.group(1)) if folded else 0), missing
        assert second.count(NOTE) == 1 and ('Make the suite pass."\n' in second) == task_cut  # quoted alone

    @pytest.mark.parametrize("model", ["zai/glm-4.6", "openai/gpt-4o"], ids=["merged-into-the-task", "own-message"])
    def test_a_later_pass_that_cuts_the_note_carries_it_forward(self, model: str) -> None:
        """GLM's rules merge the note into the task's text; OpenAI takes it as a message of its own.
        Either way, when a later pass with a smaller window cuts it, the new note stands for every
        turn cut so far (its count is the two passes' together) and keeps the earlier note's lines."""
        session = self.two_tasks_session()
        first = self.governed(session, model=model, window=20_000, keep_recent=100)
        second = self.governed(first.messages, model=model, window=12_000, keep_recent=100)
        note = note_of(second.messages)
        assert "Keep the old API working too." in str(second.messages[1]["content"])  # the newer task anchors now
        cut = sum(m["role"] == "assistant" for m in session) - sum(m["role"] == "assistant" for m in second.messages)
        earlier = int(re.findall(r"\d+", note_of(first.messages))[0])
        assert 0 < earlier < cut
        assert note.startswith(f"{NOTE}{cut} earlier turns were cut")
        self.carried(note_of(first.messages), note)
        assert problems(second.messages, "strict" if model.startswith("zai") else "permissive") == []
        both = first.report.then(second.report).steps  # as the proxy reports its two passes
        assert both["noted"] == 1  # one note in the request, not two
        texts = [str(m.get("content")) for m in second.messages]
        merged = [m for m in session if m["role"] == "user" and any(t.startswith(m["content"] + "\n\n") for t in texts)]
        kept = [m for m in session if m in second.messages] + merged
        assert both["snipped"] == len(session) - len(kept)  # the client's messages cut, no note among them

    def test_a_note_merged_into_the_task_a_later_pass_keeps_is_carried_too(self) -> None:
        """One task (GLM: the note merged into it): the later pass keeps the task and writes one note
        for both passes' cut turns, the task's own words back as the client sent them."""
        session = agent_session(60, size=800)
        first = self.governed(session, model="zai/glm-4.6", window=16_000, keep_recent=100)
        second = self.governed(first.messages, model="zai/glm-4.6", window=10_000, keep_recent=100)
        note = note_of(second.messages)
        cut = sum(m["role"] == "assistant" for m in session) - sum(m["role"] == "assistant" for m in second.messages)
        assert note.startswith(f"{NOTE}{cut} earlier turns were cut")
        assert second.messages[1]["content"] == "Make the suite pass.\n\n" + note
        self.carried(note_of(first.messages), note, task_cut=False)
        assert first.report.then(second.report).steps["noted"] == 1
        assert problems(second.messages, "strict") == []

    def test_a_kept_tasks_earlier_note_is_counted_once(self) -> None:
        """The note merged into a kept task is already counted with the task: the later pass does
        not count it again as new note room. Here compacting alone fits the smaller window; counted
        twice, the note made the pass cut 60 messages instead."""
        first = self.governed(agent_session(120, size=600), model="zai/glm-4.6", window=20_000, keep_recent=200)
        second = self.governed(first.messages, model="zai/glm-4.6", window=15_000, keep_recent=200)
        assert "snipped" not in second.report.steps and second.report.steps["compacted"] > 0
        assert len(second.messages) == len(first.messages) and not second.report.over_budget
        assert note_of(second.messages) == note_of(first.messages)

    def test_every_earlier_note_in_a_message_is_read_back(self) -> None:
        """Two notes merged into one task (a third pass), with the user's words around them: both
        notes' lines and turns, and the words alone."""
        older = '[Context note: 3 earlier turns were cut to fit the context window. What ...:\n- Read(file_path="a.py") → 2 lines]'
        newer = '[Context note: 1 earlier turn was cut to fit the context window. What ...:\n- said: "Done [1]"]'
        content = f"Make the suite pass.\n\n{older}\n\n{newer}\n\nAlso the docs."
        found = earlier_notes({"role": "user", "content": content})
        assert found == EarlierNotes(
            ('Read(file_path="a.py") → 2 lines', 'said: "Done [1]"'), 4, "Make the suite pass. Also the docs."
        )
        blocks = earlier_notes({"role": "user", "content": [text("Make the suite pass."), text(older)]})
        assert blocks is not None and blocks.turns == 3 and blocks.own == "Make the suite pass."
        assert earlier_notes({"role": "user", "content": "Quote: [Context note: not ours"}) is None
        assert earlier_notes({"role": "assistant", "content": older}) is None

    def test_an_anthropic_note_block_cut_by_a_later_pass_is_carried_forward(self) -> None:
        """/v1/messages: the note is a text block of the task's message; cut with it, it is carried."""
        messages: Messages = [u(text("<system-reminder>ctx</system-reminder>"), text("Make the suite pass."))]
        for i in range(60):
            if i == 30:
                messages += [a(text("The parser drops the timezone.")), u(text("Keep the old API working too."))]
            messages += [
                a(tool_use(f"t{i}", "Bash", command=f"pytest -k t{i}")),
                u(tool_result(f"t{i}", long_text(800, str(i)))),
            ]

        def governed(history: Messages, window: int) -> Any:
            config = GovernanceConfig(
                max_output_share=0.5, context_window_tokens=window, cache_stable=False, keep_recent=100
            )
            return govern_anthropic(history, model=CLAUDE, config=config)

        first = governed(messages, 20_000)
        second = governed(first.messages, 12_000)
        cut = sum(m["role"] == "assistant" for m in messages) - sum(m["role"] == "assistant" for m in second.messages)
        note = note_of(second.messages)
        assert int(re.findall(r"\d+", note_of(first.messages))[0]) < cut
        assert note.startswith(f"{NOTE}{cut} earlier turns were cut")
        self.carried(note_of(first.messages), note)
        assert anthropic_problems(second.messages, prefill=True) == []


# A session in the abstract: ("task", words) or ("call", tool, argument, output size), in order.
Step = tuple[Any, ...]


@st.composite
def two_pass_sessions(draw: st.DrawFn) -> tuple[list[Step], int, int]:
    """A long tool loop with a few tasks, and two windows: the first pass's, then a smaller one."""
    steps: list[Step] = [("task", "Make the suite pass.")]
    for i in range(draw(st.integers(20, 70))):
        if draw(st.integers(0, 14)) == 0:
            steps.append(("task", f"Also handle case {i}."))
        tool = draw(st.sampled_from(["Read", "Bash", "Grep"]))
        steps.append(("call", tool, f"a{draw(st.integers(0, 9))}", draw(st.integers(200, 2_500))))
    first = draw(st.integers(8_000, 40_000))
    return steps, first, draw(st.integers(5_000, first))


def chat_of(steps: list[Step]) -> Messages:
    messages: Messages = [system()]
    for i, step in enumerate(steps):
        if step[0] == "task":
            messages.append(user(step[1]))
        else:
            messages += [
                assistant(None, call(f"c{i}", step[1], arg=step[2])),
                result(f"c{i}", long_text(step[3], str(i))),
            ]
    return messages


def anthropic_of(steps: list[Step]) -> Messages:
    messages: Messages = []
    for i, step in enumerate(steps):
        if step[0] == "task":
            messages.append(u(text(step[1])))
        else:
            messages += [
                a(tool_use(f"t{i}", step[1], arg=step[2])),
                u(tool_result(f"t{i}", long_text(step[3], str(i)))),
            ]
    return messages


def responses_of(steps: list[Step]) -> Messages:
    items: Messages = []
    for i, step in enumerate(steps):
        if step[0] == "task":
            items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": step[1]}]})
        else:
            arguments = json.dumps({"arg": step[2]})
            items += [
                {"type": "function_call", "call_id": f"c{i}", "name": step[1], "arguments": arguments},
                {"type": "function_call_output", "call_id": f"c{i}", "output": long_text(step[3], str(i))},
            ]
    return items


def turns_of(history: Messages) -> int:
    """Assistant turns: assistant messages, or runs of assistant-side Responses items."""
    turns, run = 0, False
    for item in history:
        side = item.get("role") == "assistant" or str(item.get("type")).endswith("_call")
        turns += side and not run
        run = side
    return turns


def notes_in(history: Messages) -> list[int]:
    """The turn count of every note in `history`."""
    return [int(n) for n in re.findall(r"\[Context note: (\d+) earlier", json.dumps(history))]


@PROPERTY
@given(session=two_pass_sessions(), fmt=st.sampled_from(["chat-glm", "chat-gpt", "anthropic", "responses"]))
def test_a_later_smaller_pass_leaves_one_note_for_every_turn_cut(
    session: tuple[list[Step], int, int], fmt: str
) -> None:
    """Whatever a first pass cut, a second with a smaller window (a smaller deployment, or the
    translated call) leaves at most one note, and it stands for every turn cut by either pass."""
    steps, first_window, second_window = session

    def governed(history: Messages, window: int) -> Messages:
        config = GovernanceConfig(max_output_share=0.5, context_window_tokens=window, cache_stable=False)
        if fmt == "anthropic":
            return govern_anthropic(history, model=CLAUDE, config=config).messages
        if fmt == "responses":
            return govern_responses(history, model=GPT, config=config).input
        return govern(history, model="zai/glm-4.6" if fmt == "chat-glm" else "openai/gpt-4o", config=config).messages

    history = {"anthropic": anthropic_of, "responses": responses_of}.get(fmt, chat_of)(steps)
    second = governed(governed(history, first_window), second_window)
    notes = notes_in(second)
    assert len(notes) <= 1, notes
    if notes:
        assert notes[0] == turns_of(history) - turns_of(second)


# ---- small defects --------------------------------------------------------------------------


def test_responses_backfilled_output_comes_right_after_its_calls() -> None:
    """A missing output is backfilled right after its call's group, before the run's next item."""
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Running it."}]},
        {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "ok"},
    ]
    out = govern_responses(items, model=GPT, config=GovernanceConfig(context_window_tokens=100_000))
    kinds = [(i.get("type"), i.get("call_id")) for i in out.input]
    assert kinds == [
        ("message", None),
        ("function_call", "c1"),
        ("function_call_output", "c1"),
        ("message", None),
        ("function_call", "c2"),
        ("function_call_output", "c2"),
    ]
    assert out.input[4] is items[3] and out.input[5] is items[4]


def test_a_run_split_by_reasoning_reads_as_two_turns_and_governs_in_one_pass() -> None:
    """Found by the Responses property: one assistant run holds two groups of calls (a reasoning item
    between them) and a repeated call id; the output answers the second group's call (renamed). A turn ends
    with its group of calls, so the run reads as the two turns it renders as: the first group's calls
    get their outputs right after them, the newest exchange keeps its output whole, and governing the
    output again changes nothing (it once took a second pass, and compacted the newest output)."""
    shell = {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": '{"command":["ls"]}'}
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix"}]},
        shell,
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "p"},
        {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "x"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "p"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "payload line\n" * 40},
    ]
    config = GovernanceConfig(
        context_window_tokens=800, max_output_tokens=200, safety_buffer_tokens=100, keep_recent=0, cache_stable=False
    )
    out = govern_responses(items, model=GPT, config=config)
    again = govern_responses(out.input, model=GPT, instructions=out.instructions, config=config)
    assert again.input == out.input and not again.report.changed
    # The first group's two calls, answered right after them; the second c2 renamed with its output
    # (an output finds its call by id alone).
    assert out.report.steps == {"backfilled": 2, "tool_call_ids_renamed": 1}
    assert out.input[-1] == {**items[-1], "call_id": "c2_2"}  # the newest exchange's output, whole
    kinds = [(i.get("type"), i.get("call_id")) for i in out.input]
    assert kinds.index(("function_call_output", "c2")) < kinds.index(("reasoning", None))
    explained = explain({"model": GPT, "input": items}, model=GPT, config=config)
    assert explained.request["input"] == out.input


@pytest.mark.parametrize("model", ["zai/glm-4.6", "anthropic/claude-opus-4-6", "mistral/mistral-large-latest"])
def test_a_blank_only_request_keeps_a_user_turn(model: str) -> None:
    """Strict profiles drop blank user messages, but never the only one: GLM answers 1214 to a
    request of system messages alone."""
    out = govern(
        [system(), user("   ")],
        model=model,
        config=GovernanceConfig(max_output_share=0.5, context_window_tokens=10_000),
    )
    assert out.messages[-1] == {"role": "user", "content": "(empty message)"}
    assert out.report.steps["empty_user_kept"] == 1
    again = govern(
        out.messages, model=model, config=GovernanceConfig(max_output_share=0.5, context_window_tokens=10_000)
    )
    assert again.messages == out.messages


# ---- action recall (bench/recall.py) ----------------------------------------------------------


@pytest.mark.scale
def test_action_recall_meets_its_targets_on_replayed_loops() -> None:
    """Two replayed single-task coding-agent loops at 32k (bench/recall.py --single, quick): from the
    first cut on, the mean share of calls still recognisable is at least 0.9 and no loop's is below
    0.7 (without the note, measured in the same run: about 0.7); every request within budget, every
    newest result whole."""
    from bench import recall

    results = recall.measure(recall.SEEDS[:2], 150, single=True, processes=1)
    every = [r for requests in results.values() for r in requests]
    assert len(every) >= 100, "the loops must spend most turns with a history that no longer fits"
    means = [sum(r.recall for r in requests) / len(requests) for requests in results.values()]
    assert sum(r.recall for r in every) / len(every) >= 0.9
    assert min(means) >= 0.7
    without = sum(r.recall_without_note for r in every) / len(every)
    assert sum(r.recall for r in every) / len(every) - without >= 0.15  # the figure means something
    assert not any(r.over for r in every) and all(r.newest_whole for r in every)
    assert max(r.note_share for r in every) <= 0.1


def test_clients_may_turn_the_note_off_where_the_operator_allows_overrides() -> None:
    """metadata.governance.note_cut_turns is one of the per-request overrides."""
    from litellm_governance.integration.overrides import request_overrides

    config = GovernanceConfig(allow_request_overrides=True)
    updated, _, notes = request_overrides(config, {"governance": {"note_cut_turns": False}})
    assert notes == [] and updated.note_cut_turns is False


def test_explain_says_what_happened_to_each_message() -> None:
    """explain labels a stale read `superseded`, a cut-down newest result `truncated`, and the note
    `noted`."""
    from litellm_governance._explain import explain

    messages = [
        system(),
        user("go"),
        *read("a", "src/app.py", long_text(2_000, "a")),
        *read("b", "src/app.py", long_text(2_000, "b")),
    ]
    for i in range(60):
        messages += [
            assistant(None, call(f"g{i}", "Grep", pattern=f"p{i}")),
            result(f"g{i}", long_text(1_500, f"g{i}")),
        ]
    config = GovernanceConfig(max_output_share=0.5, context_window_tokens=12_000, cache_stable=False)
    data = explain({"model": "openai/gpt-4o", "messages": messages}, model="openai/gpt-4o", config=config).as_dict()
    assert "noted" in {row["fate"] for row in data["after"]}
    huge = [*messages, assistant(None, call("n", "Bash", command="pytest")), result("n", run_output(3_000, "huge"))]
    data = explain({"model": "openai/gpt-4o", "messages": huge}, model="openai/gpt-4o", config=config).as_dict()
    assert data["after"][-1]["fate"] == "truncated"
    small = explain(
        {"model": "openai/gpt-4o", "messages": messages[:6]}, model="openai/gpt-4o", config=LITERAL
    ).as_dict()
    assert small["before"][3]["fate"] == "superseded"


# ---- summaries written by a summary model (in the note's place) -----------------------------------


class TestSummaryInTheNotesPlace:
    def loop(self, rounds: int) -> Messages:
        history: Messages = [system(), user("go")]
        for i in range(rounds):
            history += [
                assistant(None, call(f"c{i}", "Read", file_path=f"src/m{i}.py")),
                result(f"c{i}", long_text(1_200, str(i))),
            ]
        return history

    CONFIG = GovernanceConfig(max_output_share=0.5, context_window_tokens=10_000, cache_stable=True)

    def governed(self, rounds: int, summaries: dict[str, str] | None = None) -> Any:
        from litellm_governance import govern_request

        body = {"model": "zai/glm-4.6", "messages": self.loop(rounds)}
        return govern_request(body, config=self.CONFIG, summaries=summaries)

    def cut_points(self) -> list[tuple[int, Any]]:
        """(rounds, cut turns) of the first request of each new cut point, replaying the loop."""
        out: list[tuple[int, Any]] = []
        for rounds in range(40, 110):
            cut = self.governed(rounds).cut
            if cut is not None and (not out or out[-1][1].key != cut.key):
                out.append((rounds, cut))
        return out

    def test_a_cut_point_has_one_key_while_it_stays(self) -> None:
        """The cut turns' key is the same on every request with the same cut point, and new when it moves."""
        keys = [c.key for c in (self.governed(n).cut for n in range(40, 110)) if c is not None]
        runs = [k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k]
        assert len(runs) >= 3 and len(runs) == len(set(keys)), "a key came back after the cut moved on"

    def test_the_summary_of_the_last_cut_point_opens_the_next_note(self) -> None:
        """Summaries roll: at a new cut point the note opens with the summary written for the last one
        and lists only the turns cut since; it is the same on every request while the cut point
        stays, and a second pass changes nothing."""
        (_, first), (rounds, second), *_ = self.cut_points()
        summary = "The agent read src/m0.py onwards looking for the parser bug; nothing changed yet."
        out = self.governed(rounds, {first.key: summary})
        assert out.cut is not None and out.cut.key == second.key and out.cut.previous == summary
        text = out.request["messages"][1]["content"]
        assert f"[Context summary: {second.turns} earlier turns were cut to fit the context window. " in text
        assert summary in text and NOTE not in text
        assert "What the turns after those did" in text
        assert out.report.steps.get("summarized") == 1 and "noted" not in out.report.steps
        assert self.governed(rounds + 1, {first.key: summary}).request["messages"][1] == out.request["messages"][1]
        from litellm_governance import govern_request

        again = govern_request(out.request, config=self.CONFIG)
        assert not again.report.changed

    def test_the_cut_turns_are_the_messages_the_cut_removed(self) -> None:
        """What a summary model is given: every message the cut removed, oldest first (the task it
        kept in front aside), and after a summary only those cut since its cut point."""
        (_, first), (rounds, second), *_ = self.cut_points()
        history = self.loop(rounds)
        out = self.governed(rounds)
        assert out.cut is not None
        assert out.report.steps["snipped"] == len(out.cut.messages) == 2 * out.cut.turns
        assert [m.get("tool_call_id") for m in out.cut.messages[1::2]] == [f"c{i}" for i in range(out.cut.turns)]
        assert out.cut.messages[0]["tool_calls"] == history[2]["tool_calls"]
        rolled = self.governed(rounds, {first.key: "A summary."}).cut
        assert rolled is not None and rolled.previous == "A summary."
        assert [m.get("tool_call_id") for m in rolled.messages[1::2]] == [
            f"c{i}" for i in range(first.turns, second.turns)
        ]

    def test_a_cut_points_own_summary_waits_for_the_next_cut(self) -> None:
        """The summary written for this very cut point changes nothing until the cut moves."""
        (_, first), *_ = self.cut_points()
        out = self.governed(self.cut_points()[0][0], {first.key: "A summary."})
        assert out.report.steps.get("noted") == 1 and "summarized" not in out.report.steps

    def test_a_summary_too_long_for_the_notes_room_is_not_used(self) -> None:
        """The note's room (a tenth of the budget) bounds the summary too: a longer one gives way to the note."""
        (_, first), (rounds, _), *_ = self.cut_points()
        out = self.governed(rounds, {first.key: "word " * 5_000})
        assert out.report.steps.get("noted") == 1

    def test_the_transcript_names_each_call_and_the_start_of_its_result(self) -> None:
        """What the summary model reads: who said what, each call, the head of each result."""
        from litellm_governance._cut_turns import transcript

        (_, first), *_ = self.cut_points()
        last = [m for m in first.messages if m.get("tool_calls")][-1]["tool_calls"][0]["id"]  # c<n>
        text = transcript(first.messages)
        assert f'[assistant calls] Read(file_path="src/m{last[1:]}.py")' in text
        assert f'[result of Read(file_path="src/m{last[1:]}.py")] {last[1:]} = compute' in text
        assert len(text) <= 60_001  # the newest of it, when it is longer
