"""SPEC §4 as Hypothesis properties, over generated conversations that include damage.

Damage generated: missing results, orphan and duplicate results, results before their call,
ids reused across turns, role runs, leading and trailing assistant messages, empty / null /
multimodal content, system messages mid-conversation, user messages between a call and its
results, and histories much larger than the window.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceConfig, govern
from litellm_governance._tokens import REPLY_PRIMING

from .builders import examples
from .validity import empty, problems, text_of

Messages = list[dict[str, Any]]

# (model, profile name, prefill supported)
MODELS = [
    ("openai/gpt-4o", "permissive", True),
    ("anthropic/claude-sonnet-4-5-20250929", "anthropic", True),
    ("anthropic/claude-opus-4-6", "anthropic", False),
    ("gemini/gemini-2.5-pro", "gemini", False),
    ("zai/glm-4.6", "strict", False),
    ("mistral/mistral-large-latest", "mistral", False),
    ("bedrock/meta.llama3-70b-instruct-v1:0", "bedrock", False),
    ("bedrock/anthropic.claude-opus-4-6-v1", "bedrock_claude", False),
    ("deepseek/deepseek-chat", "deepseek", False),
    ("moonshot/kimi-k2.5", "moonshot", False),
]

WORDS = st.sampled_from(["fix", "the", "test", "def", "return", "None", "é", "日本", "\n", "  ", "{", "}"])
TEXT = st.lists(WORDS, min_size=1, max_size=30).map(" ".join)
BIG_TEXT = st.integers(min_value=50, max_value=3_000).map(lambda n: ("payload line\n" * n)[: n * 5])
CONTENT = st.one_of(
    TEXT,
    TEXT,
    st.just(""),
    st.none(),
    st.lists(
        st.one_of(
            TEXT.map(lambda t: {"type": "text", "text": t}),
            st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
        ),
        min_size=1,
        max_size=3,
    ),
)
TOOL_NAMES = st.sampled_from(["read_file", "grep", "exec", "write_file", "web_fetch"])
IDS = st.sampled_from(["call_a", "call_b", "call_c", "call_d", "toolu_1", "toolu_2"])


@st.composite
def conversations(draw: st.DrawFn) -> Messages:
    messages: Messages = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(TEXT)})
    if draw(st.integers(0, 9)) == 0:
        messages.append({"role": "assistant", "content": draw(TEXT)})  # leading assistant
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "user", "assistant", "round", "round", "round", "system", "orphan"]))
        if kind == "user":
            messages.append({"role": "user", "content": draw(CONTENT)})
        elif kind == "assistant":
            messages.append({"role": "assistant", "content": draw(CONTENT)})
        elif kind == "system":
            messages.append({"role": "system", "content": draw(TEXT)})
        elif kind == "orphan":
            messages.append({"role": "tool", "tool_call_id": draw(IDS), "content": draw(TEXT)})
        else:
            ids = draw(st.lists(IDS, min_size=1, max_size=3))
            calls = [
                {"id": i, "type": "function", "function": {"name": draw(TOOL_NAMES), "arguments": "{}"}} for i in ids
            ]
            messages.append({"role": "assistant", "content": draw(st.one_of(st.none(), TEXT)), "tool_calls": calls})
            results: Messages = []
            for i in ids:
                fate = draw(st.sampled_from(["ok", "ok", "ok", "missing", "duplicate"]))
                if fate == "missing":
                    continue
                body = draw(st.one_of(TEXT, BIG_TEXT, st.none()))
                results.append({"role": "tool", "tool_call_id": i, "content": body})
                if fate == "duplicate":
                    results.append({"role": "tool", "tool_call_id": i, "content": "again"})
            if results and draw(st.integers(0, 5)) == 0:
                results.insert(draw(st.integers(0, len(results))), {"role": "user", "content": draw(TEXT)})
            messages.extend(results)
    if draw(st.booleans()):
        messages.append({"role": "user", "content": draw(TEXT)})
    if draw(st.integers(0, 4)) == 0:
        messages.append({"role": "assistant", "content": draw(TEXT)})  # trailing assistant
    return messages


CONFIGS = st.builds(
    lambda window, keep, batch, watermark, stable: GovernanceConfig(
        cache_stable=stable,
        context_window_tokens=window,
        max_output_tokens=200,
        safety_buffer_tokens=100,
        keep_recent=keep,
        compact_batch=batch,
        snip_watermark=watermark,
    ),
    window=st.sampled_from([600, 1_200, 3_000, 20_000, 1_000_000]),
    keep=st.sampled_from([0, 1, 3, 10]),
    batch=st.sampled_from([1, 1, 3]),
    watermark=st.sampled_from([None, None, 0.3, 0.5, 1.0]),
    stable=st.booleans(),
)

PROPERTY = settings(suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(messages=conversations(), model=st.sampled_from(MODELS), config=CONFIGS)
def test_output_is_valid_for_the_profile(
    messages: Messages, model: tuple[str, str, bool], config: GovernanceConfig
) -> None:
    """Whatever the damage, the output passes the provider's rules."""
    name, profile, prefill = model
    out = govern(messages, model=name, config=config)
    assert out.report.profile == profile
    assert problems(out.messages, profile, prefill=prefill) == []


@PROPERTY
@given(messages=conversations(), model=st.sampled_from(MODELS), config=CONFIGS)
def test_idempotent_deterministic_and_pure(
    messages: Messages, model: tuple[str, str, bool], config: GovernanceConfig
) -> None:
    """govern(govern(x)) == govern(x); a copy gives the same output; the input is untouched."""
    before = copy.deepcopy(messages)
    out = govern(messages, model=model[0], config=config)
    assert messages == before
    again = govern(out.messages, model=model[0], config=config)
    assert again.messages == out.messages
    assert not again.report.changed
    assert govern(copy.deepcopy(messages), model=model[0], config=config).messages == out.messages


@PROPERTY
@given(messages=conversations(), model=st.sampled_from(MODELS), config=CONFIGS)
def test_within_budget_unless_reported(
    messages: Messages, model: tuple[str, str, bool], config: GovernanceConfig
) -> None:
    """Within budget, or over_budget says so and the request is already the smallest tail."""
    out = govern(messages, model=model[0], config=config)
    report = out.report
    assert report.budget is not None
    assert report.over_budget == (report.tokens_after > report.budget)
    if report.over_budget:
        non_system = [m for m in out.messages if m["role"] not in ("system", "developer")]
        users = [i for i, m in enumerate(non_system) if m["role"] == "user"]
        # At most: the latest user message, then one assistant turn and its results.
        tail = non_system[users[-1] + 1 :] if users else non_system
        assert sum(1 for m in tail if m["role"] != "tool") <= 2


@PROPERTY
@given(messages=conversations(), model=st.sampled_from(MODELS), config=CONFIGS)
def test_system_prompt_and_latest_user_message_kept(
    messages: Messages, model: tuple[str, str, bool], config: GovernanceConfig
) -> None:
    """Every system message reaches the provider unchanged, in order; so does the latest user's text."""
    out = govern(messages, model=model[0], config=config)
    first = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    leading = messages[:first]
    assert out.messages[: len(leading)] == leading, "the system prompt is not first and whole"
    for message in messages[first:]:
        if message["role"] == "system":  # kept (permissive), moved up (gemini), or a user note
            if model[1] == "permissive":
                assert any(message is m for m in out.messages)
            elif model[1] == "gemini":
                assert any(message is m for m in out.messages if m["role"] == "system")
            else:
                assert kept_within(message["content"], [m for m in out.messages if m["role"] in ("system", "user")])
    users = [m for m in messages if m["role"] == "user" and not empty(m["content"])]
    if users:  # the task: the latest user message with real content
        assert kept_within(users[-1]["content"], [m for m in out.messages if m["role"] == "user"])


def kept_within(content: Any, candidates: Messages) -> bool:
    """Whether `content` reaches the provider whole (blank text parts aside, which providers that
    reject empty text do not get): equal, or inside a merged message."""
    for message in candidates:
        merged = message.get("content")
        if isinstance(content, list):
            parts = [
                p for p in content if not (isinstance(p, dict) and p.get("type") == "text" and not p["text"].strip())
            ]
            if isinstance(merged, list) and all(part in merged for part in parts):
                return True
        elif content is None or text_of(content) in text_of(merged):
            return True
    return False


@PROPERTY
@given(messages=conversations())
def test_nothing_lost_when_it_fits(messages: Messages) -> None:
    """With room to spare and no compaction, every user and assistant text reaches a permissive
    provider unchanged, and a strict one inside its merged message."""
    config = GovernanceConfig(context_window_tokens=1_000_000, compactable_tools=[])
    for model in ("openai/gpt-4o", "zai/glm-4.6"):
        out = govern(messages, model=model, config=config)
        texts_out = "\x00".join(visible_text(m.get("content")) for m in out.messages)
        end = len(messages)
        if model != "openai/gpt-4o":  # strict: trailing assistant messages (prefill) are dropped, so
            # only those followed by a user message (an empty one is no turn) or a tool-calling
            # turn must survive.
            while end and not (
                (messages[end - 1]["role"] == "user" and not empty(messages[end - 1]["content"]))
                or (messages[end - 1]["role"] == "assistant" and messages[end - 1].get("tool_calls"))
            ):
                end -= 1
        kept = [m for m in messages if m["role"] in ("user", "system")] + [
            m for m in messages[:end] if m["role"] == "assistant"
        ]
        for message in kept:
            if text_of(message.get("content")).strip():  # blank assistant messages carry nothing
                # (strict: blank text parts are dropped; the text around them is kept)
                assert visible_text(message.get("content")) in texts_out
        if model == "openai/gpt-4o":
            for message in messages:
                if message["role"] in ("user", "assistant", "system") and message.get("content") is not None:
                    blank = not text_of(message["content"]).strip()
                    if message["role"] == "assistant" and not message.get("tool_calls") and blank:
                        continue
                    assert any(message is m or same_but_ids(message, m) for m in out.messages), message


def visible_text(content: Any) -> str:
    """The text of `content` without blank text parts."""
    if isinstance(content, list):
        content = [
            p for p in content if not (isinstance(p, dict) and p.get("type") == "text" and not p["text"].strip())
        ]
    return text_of(content)


def same_but_ids(message: dict[str, Any], governed: dict[str, Any]) -> bool:
    """Equal, or equal but for tool-call ids renamed because they repeated inside the message."""
    if message == governed:
        return True
    calls, out_calls = message.get("tool_calls") or [], governed.get("tool_calls") or []
    ids = [c["id"] for c in calls]
    if len(ids) == len(set(ids)) or len(calls) != len(out_calls):
        return False
    strip = [{k: v for k, v in c.items() if k != "id"} for c in calls]
    return {**message, "tool_calls": strip} == {
        **governed,
        "tool_calls": [{k: v for k, v in c.items() if k != "id"} for c in out_calls],
    }


@settings(max_examples=examples(50), deadline=None)
@given(messages=conversations())
def test_tokens_after_matches_a_fresh_count(messages: Messages) -> None:
    """tokens_after is the count of what is sent (no stale cached figure)."""
    from litellm_governance._tokens import TokenCache, TokenCounter

    config = GovernanceConfig(context_window_tokens=3_000, max_output_tokens=200, safety_buffer_tokens=100)
    out = govern(messages, model="openai/gpt-4o", config=config)
    counter = TokenCounter("o200k_base", TokenCache(0))
    fresh = REPLY_PRIMING + sum(counter.message(m) for m in out.messages)
    assert out.report.tokens_after == fresh
