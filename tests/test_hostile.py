"""Hostile input (SPEC §4, issue #5): `govern()` rejects what is not a message list with a clear
error, and governs every list of dicts, however damaged, without raising, mutating the input or
taking unbounded time; the proxy hooks never let a failure escape (fail-open).

What "valid" means for messages with an unknown role (``"wizard"``, ``5``, ``None``, a missing
role): governance has no rule for them, so it must pass them through untouched (the very objects,
in their order; snipping may drop them like any other message) and the provider is left to judge
them; their other fields declare nothing (a "tool_calls" list on one is not a call). Every other rule
of the profile still holds around them (`tests/validity.py`), except "the first non-system message is
a user message" when that first message is itself of an unknown role: inserting a synthetic user
message before a message governance cannot interpret would be a guess.

Known gap, pinned by the xfail tests in `TestDamagedMessageLists`: a system, user or tool message
with no "content" key at all is left without one (only content=None becomes ""), so the generated
messages with those roles always carry a content key.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.sessions import make_session
from litellm_governance import GovernanceConfig, GovernanceResult, InvalidRequestError, govern

from .builders import assistant, call, calling, examples, result, system, user
from .validity import problems

Messages = list[dict[str, Any]]
ROOT = Path(__file__).resolve().parent.parent

# (model, profile, whether the model accepts a trailing assistant message)
MODELS = [
    ("openai/gpt-4o", "permissive", True),
    ("anthropic/claude-opus-4-6", "anthropic", False),
    ("gemini/gemini-2.5-pro", "gemini", False),
    ("zai/glm-4.6", "strict", False),
]
MODEL_IDS = [m[1] for m in MODELS]
REAL_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def tight(window: int | None) -> GovernanceConfig:
    """A config whose budget is `window` minus a little (None: the model's own window)."""
    return GovernanceConfig(context_window_tokens=window, max_output_tokens=16, safety_buffer_tokens=8)


def snapshot(value: Any) -> str:
    """A deep, exact fingerprint of a JSON-like value (NaN-safe, unlike ==)."""
    return json.dumps(value, default=repr, ensure_ascii=True, allow_nan=True)


def garbage_role(message: Any) -> bool:
    role = message.get("role")
    return not (isinstance(role, str) and role in REAL_ROLES)


def profile_problems(out: Messages, profile: str, prefill: bool) -> list[str]:
    """`validity.problems`, with unknown-role messages judged as the module docstring says."""
    found = problems(out, profile, prefill=prefill)
    non_system = [m for m in out if m.get("role") not in ("system", "developer")]
    if non_system and garbage_role(non_system[0]):
        found = [p for p in found if not p.startswith("first non-system message is")]
    if "tool-call ids repeat" in found:
        calls = [c for m in out if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
        ids = [c.get("id") for c in calls if isinstance(c, dict)]
        if len(ids) == len(set(ids)):  # only an unknown-role message's "tool_calls" (which declare nothing) repeat
            found.remove("tool-call ids repeat")
    return found


def governed_or_named(messages: Any, model: str, profile: str, prefill: bool, **kwargs: Any) -> None:
    """`check_governed`, or the one error any input may get: a field no provider takes as it is (a
    list as a part's type), named by an InvalidRequestError (`TestFieldsOfEveryType`)."""
    try:
        govern(copy.deepcopy(messages), model=model, **kwargs)
    except InvalidRequestError as exc:
        assert " must be a string, not a list or an object" in str(exc), str(exc)
        return
    check_governed(messages, model, profile, prefill, **kwargs)


def check_governed(messages: Any, model: str, profile: str, prefill: bool, **kwargs: Any) -> GovernanceResult:
    """Govern and assert every §4 guarantee that holds for any input: no exception, input untouched,
    valid for the profile, unknown roles passed through, JSON report, idempotent, deterministic."""
    before = snapshot(messages)
    try:
        out = govern(messages, model=model, **kwargs)
    except BaseException as exc:
        raise AssertionError(f"govern() raised {type(exc).__module__}.{type(exc).__name__}: {exc!s:.300}") from exc
    assert snapshot(messages) == before, "the input was mutated"
    assert out.report.profile == profile
    assert profile_problems(out.messages, profile, prefill) == []
    strays = [m for m in out.messages if garbage_role(m)]
    originals = [m for m in messages if garbage_role(m)]
    assert all(any(s is o for o in originals) for s in strays), "a message with an unknown role was rewritten"
    assert [id(s) for s in strays] == [id(o) for o in originals if any(o is s for s in strays)]
    json.dumps(out.report.to_dict(), allow_nan=False)
    again = govern(out.messages, model=model, **kwargs)
    assert snapshot(again.messages) == snapshot(out.messages), "not idempotent"
    assert not again.report.changed
    assert snapshot(govern(copy.deepcopy(messages), model=model, **kwargs).messages) == snapshot(out.messages)
    return out


# ---- not a list of message dicts ---------------------------------------------------------


def _generator() -> Any:
    yield {"role": "user", "content": "hi"}


class TestNotAMessageList:
    @pytest.mark.parametrize(
        ("messages", "expected"),
        [
            pytest.param("a string", "got str", id="str"),
            pytest.param(b"bytes", "got bytes", id="bytes"),
            pytest.param(42, "got int", id="int"),
            pytest.param(4.2, "got float", id="float"),
            pytest.param(None, "got NoneType", id="None"),
            pytest.param(True, "got bool", id="bool"),
            pytest.param({"role": "user", "content": "hi"}, "got dict", id="dict"),
            pytest.param({"role", "user"}, "got set", id="set"),
            pytest.param(_generator(), "got generator", id="generator"),
            pytest.param([1, 2], "messages[0]", id="list-of-int"),
            pytest.param([{"role": "user", "content": "a"}, "b"], "messages[1]", id="str-element"),
            pytest.param([{"role": "user", "content": "a"}, None], "messages[1]", id="None-element"),
            pytest.param([[{"role": "user", "content": "a"}]], "messages[0]", id="nested-list"),
        ],
    )
    def test_clear_error_that_says_what_and_where(self, messages: Any, expected: str) -> None:
        """Anything but a sequence of dicts raises InvalidRequestError naming the culprit."""
        with pytest.raises(InvalidRequestError) as caught:
            govern(messages, model="openai/gpt-4o")
        assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)
        assert "messages" in str(caught.value) and expected in str(caught.value)

    @pytest.mark.parametrize(
        ("kwargs", "expected"),
        [
            ({"tools": "x"}, "tools"),
            ({"tools": {"type": "function"}}, "tools"),
            ({"tools": 5}, "tools"),
            ({"model": ""}, "model"),
            ({"model": None}, "model"),
            ({"model": 5}, "model"),
            ({"max_output_tokens": -1}, "max_output_tokens"),
            ({"max_output_tokens": "100"}, "max_output_tokens"),
            ({"max_output_tokens": True}, "max_output_tokens"),
            ({"max_output_tokens": 1.5}, "max_output_tokens"),
            ({"config": {"keep_recent": 1}}, "config"),
        ],
        ids=repr,
    )
    def test_other_arguments_are_checked_too(self, kwargs: dict[str, Any], expected: str) -> None:
        """A bad tools, model, max_output_tokens or config argument is named in the error."""
        arguments: dict[str, Any] = {"model": "openai/gpt-4o", **kwargs}
        with pytest.raises(InvalidRequestError, match=expected):
            govern([user()], **arguments)

    @settings(max_examples=examples(100), deadline=None)
    @given(
        messages=st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
            lambda children: (
                st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
            ),
            max_leaves=8,
        ).filter(lambda v: not (isinstance(v, list) and all(isinstance(m, dict) for m in v)))
    )
    def test_any_other_json_value_is_rejected_cleanly(self, messages: Any) -> None:
        """Every JSON value that is not a list of objects gets InvalidRequestError, nothing else."""
        with pytest.raises(InvalidRequestError, match="messages"):
            govern(messages, model="zai/glm-4.6")

    @pytest.mark.parametrize(
        "kwargs",
        [{"model_info": [1]}, {"model_info": "x"}, {"provider": 5}, {"provider": ["openai"]}],
        ids=repr,
    )
    def test_provider_and_model_info_are_checked(self, kwargs: dict[str, Any]) -> None:
        """A provider that is not a string, or a model_info that is not a mapping, is named in an
        InvalidRequestError like the other arguments."""
        with pytest.raises(InvalidRequestError, match=next(iter(kwargs))):
            govern([user()], model="openai/gpt-4o", **kwargs)

    def test_sequences_other_than_lists_are_accepted(self) -> None:
        """A tuple of message dicts is a message list (the output is a new list)."""
        out = govern((user("hi"),), model="openai/gpt-4o")
        assert out.messages == [user("hi")]


# ---- damaged lists of dicts --------------------------------------------------------------


def _fn(ident: Any = "a", name: Any = "read_file", arguments: Any = "{}", **extra: Any) -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}, **extra}


DAMAGED: dict[str, Messages] = {
    "unknown roles": [{"role": "wizard", "content": "x"}, user(), {"role": "model", "content": "y"}],
    "missing role": [{"content": "x"}, user()],
    "numeric role": [{"role": 5}, user()],
    "null role and content": [{"role": None, "content": None}, user()],
    "garbage first, then assistant": [system(), {"role": "function", "content": "x"}, assistant("hi")],
    "empty message dicts": [{}, {}, user(), {}],
    "empty list": [],
    "only a system message": [system()],
    "only an assistant message": [assistant("hi")],
    "tool_calls is a dict": [user(), {"role": "assistant", "content": None, "tool_calls": _fn()}],
    "tool_calls is a string": [user(), {"role": "assistant", "content": "x", "tool_calls": "read_file"}],
    "tool_calls is a number": [user(), {"role": "assistant", "tool_calls": 3}, result("a")],
    "tool_calls is null": [user(), {"role": "assistant", "content": None, "tool_calls": None}],
    "tool_calls of non-dicts": [user(), {"role": "assistant", "tool_calls": [1, "x", None, [_fn()], True]}],
    "function is None": [user(), {"role": "assistant", "tool_calls": [{"id": "a", "function": None}]}, result("a")],
    "arguments is a dict": [user(), assistant(None, _fn(arguments={"path": "x"})), result("a")],
    "name is a number": [user(), assistant(None, _fn(name=5)), result("a")],
    "id is a number": [user(), assistant(None, _fn(ident=5)), {"role": "tool", "tool_call_id": 5, "content": "r"}],
    "id is empty": [user(), assistant(None, _fn(ident="")), result("")],
    "non-string tool_call_ids": [
        user(),
        calling("a"),
        *({"role": "tool", "tool_call_id": v, "content": "r"} for v in (None, 1, 1.5, True, ["a"], {"a": 1}, "")),
        result("a"),
    ],
    "missing tool_call_id": [user(), calling("a"), {"role": "tool", "content": "r"}],
    "duplicate ids within a message": [user(), assistant(None, _fn("a"), _fn("a", "grep")), result("a"), result("a")],
    "duplicate ids across messages": [
        user(),
        calling("a"),
        result("a", "1"),
        calling("a", name="grep"),
        result("a", "2"),
        result("a", "3"),
        user("again"),
        calling("a"),
    ],
    "renamed id already taken": [user(), calling("a"), result("a"), calling("a", "a_2"), result("a"), result("a_2")],
    "results before their call": [user(), result("a", "early"), result("b"), calling("a", "b"), user("more")],
    "user between call and results": [user(), calling("a", "b"), user("wait"), result("b"), system("s"), result("a")],
    "content of every JSON type": [
        {"role": "user", "content": 5},
        {"role": "user", "content": {"a": [1, {"b": None}]}},
        {"role": "assistant", "content": [[1, [2]], True, None, {"type": "text"}]},
        {"role": "user", "content": True},
        {"role": "assistant", "content": False},
        {"role": "assistant", "content": 0},
        {"role": "user", "content": 1.5e308},
        {"role": "system", "content": [1, "two"]},
        {"role": "tool", "tool_call_id": "a", "content": {"x": 1}},
    ],
    "NaN and infinity": [{"role": "user", "content": math.nan}, {"role": "user", "content": -math.inf}],
    "lone surrogates": [
        user("\ud800"),
        user("\udfff" * 300),
        assistant("x\ud800y", call("\ud800", "read_\udfff")),
        result("\ud800", {"k": "\ud800" * 100}),
        {"role": "user", "content": [{"type": "text", "text": "\udc00" * 70}], "name": "\ud800"},
    ],
    "huge unicode": [user("日本語😀" * 50_000), assistant("é" * 100_000), user("\U0010ffff" * 10_000)],
    "null and empty content everywhere": [
        {"role": "system", "content": None},
        {"role": "user", "content": None},
        {"role": "user", "content": ""},
        {"role": "user", "content": []},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": "   "},
        assistant([], call("a")),
        {"role": "tool", "tool_call_id": "a", "content": None},
        {"role": "user", "content": [{"type": "text", "text": ""}]},
    ],
    "odd names and extra keys": [
        {"role": "user", "content": "x", "name": 5, "cache_control": [1], "extra": {"deep": [None]}},
        {"role": "assistant", "content": "a", "reasoning_content": 5, "thinking_blocks": [1, {"x": None}]},
        {"role": "assistant", "content": "b", "reasoning_content": {"x": 1}, "thinking_blocks": "t"},
        {"role": "tool", "tool_call_id": "zz", "name": ["read_file"], "content": "y" * 2_000},
        user("end"),
    ],
    "compactable result with a non-string name": [
        user(),
        *(m for i in range(12) for m in (calling(f"c{i}"), {**result(f"c{i}", "x" * 1_000), "name": i})),
    ],
    "text editor calls with commands of every type": [
        user(),
        *(
            m
            for i, command in enumerate([["view"], {"view": 1}, None, 5, "view", "create"])
            for m in (
                assistant(None, _fn(f"e{i}", "str_replace_editor", json.dumps({"command": command, "path": "a.py"}))),
                result(f"e{i}", "x" * 1_000),
            )
        ),
    ],
    "cache_control of every type": [
        {"role": "system", "content": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "u", "cache_control": "yes"},
        {"role": "user", "content": [{"type": "text", "text": "v", "cache_control": 0}, "raw", 7]},
    ],
    "multimodal merges with odd parts": [
        user([1, 2]),
        user(5),
        user([{"type": "image_url", "image_url": None}]),
        assistant({"a": 1}),
        assistant([{"type": "text", "text": "x"}]),
    ],
}


class TestDamagedMessageLists:
    @pytest.mark.parametrize("window", [None, 40, 2_000], ids=["model-window", "tiny", "small"])
    @pytest.mark.parametrize(("model", "profile", "prefill"), MODELS, ids=MODEL_IDS)
    @pytest.mark.parametrize("name", list(DAMAGED))
    def test_governed_without_error(self, name: str, model: str, profile: str, prefill: bool, window: int) -> None:
        """Every damaged conversation is governed: valid, untouched input, idempotent, deterministic."""
        check_governed(DAMAGED[name], model, profile, prefill, config=tight(window))

    @pytest.mark.parametrize(("model", "profile", "prefill"), MODELS, ids=MODEL_IDS)
    @pytest.mark.parametrize(
        "tools",
        [[], [None, 1, "x", {"type": "function"}], [{"function": {"name": "\ud800", "parameters": {"x": [math.inf]}}}]],
        ids=["empty", "garbage", "odd-schema"],
    )
    def test_garbage_tool_schemas_are_counted_not_rejected(
        self, model: str, profile: str, prefill: bool, tools: list[Any]
    ) -> None:
        """A list of odd tool schemas is the provider's business: governance only counts it."""
        check_governed([system(), user()], model, profile, prefill, tools=tools, config=tight(3_000))

    @pytest.mark.parametrize("role", [["user"], {"name": "user"}], ids=["list", "dict"])
    @pytest.mark.parametrize(("model", "profile", "prefill"), MODELS, ids=MODEL_IDS)
    def test_container_roles(self, model: str, profile: str, prefill: bool, role: Any) -> None:
        """A role that is a JSON array or object is an unknown role like any other."""
        check_governed([system(), {"role": role, "content": "x"}, user()], model, profile, prefill)

    @pytest.mark.parametrize(("model", "profile", "prefill"), MODELS, ids=MODEL_IDS)
    def test_missing_content_is_filled(self, model: str, profile: str, prefill: bool) -> None:
        """A system, user or tool message with no content key gets "" like one with content None."""
        messages = [
            {"role": "system"},
            {"role": "user"},
            assistant(None, call("a")),
            {"role": "tool", "tool_call_id": "a"},
        ]
        out = govern(messages, model=model)
        assert problems(out.messages, profile, prefill=prefill) == []

    @pytest.mark.parametrize(("model", "profile", "prefill"), MODELS[1:], ids=MODEL_IDS[1:])
    def test_merging_messages_without_content(self, model: str, profile: str, prefill: bool) -> None:
        """Two user messages with no content merge into a valid message, and a second pass changes nothing."""
        check_governed([{"role": "user"}, {"role": "user"}], model, profile, prefill)

    @pytest.mark.parametrize(("model", "profile", "prefill"), MODELS, ids=MODEL_IDS)
    def test_deeply_nested_content(self, model: str, profile: str, prefill: bool) -> None:
        """Content nested 2,000 levels deep (a Python caller can build it) is governed, not a RecursionError."""
        nested_list: Any = "leaf"
        nested_dict: Any = "leaf"
        for _ in range(2_000):
            nested_list, nested_dict = [nested_list], {"k": nested_dict}
        messages = [user(nested_list), user(nested_dict), user("end")]
        out = govern(messages, model=model, config=tight(1_000_000))
        assert out.messages[-1]["role"] == "user"


@pytest.mark.scale
class TestHugeInputs:
    @pytest.mark.timeout(120)
    @pytest.mark.parametrize(("model", "profile", "prefill"), MODELS, ids=MODEL_IDS)
    def test_five_megabyte_tool_result(self, model: str, profile: str, prefill: bool) -> None:
        """A 5 MB tool result (one long token-dense line, and varied text) is governed in bounded time."""
        dense = "x" * 5_000_000
        varied = "".join(f"line {i}: déjà vu 日本 {i * 7919 % 10007}\n" for i in range(200_000))[:5_000_000]
        for body in (dense, varied):
            messages = [system(), user(), calling("a", content="Reading."), result("a", body), user("summarise")]
            for window in (None, 2_000, 10_000_000):
                out = check_governed(messages, model, profile, prefill, config=tight(window))
                # The task last (after the note for the cut turn, where the profile merges them).
                assert out.messages[-1]["role"] == "user" and out.messages[-1]["content"].endswith("summarise")

    @pytest.mark.timeout(120)
    @pytest.mark.parametrize(("model", "profile", "prefill"), MODELS, ids=MODEL_IDS)
    def test_twenty_thousand_messages(self, model: str, profile: str, prefill: bool) -> None:
        """A 20,000-message agent session, and 20,000 alternating short turns, govern in bounded time."""
        session = make_session(20_000, seed=1)
        turns = [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(20_000)]
        for messages in (session, turns):
            for window in (None, 8_000):
                out = govern(messages, model=model, config=tight(window))
                assert profile_problems(out.messages, profile, prefill) == []

    @pytest.mark.timeout(120)
    def test_twenty_thousand_damaged_messages(self) -> None:
        """20,000 messages of pure damage (role runs, orphans, reused ids) stay bounded too."""
        messages: Messages = []
        for i in range(5_000):
            messages += [user(f"u{i}"), calling(f"id{i % 7}"), result(f"id{(i + 3) % 7}"), assistant(None)]
        for model, profile, prefill in MODELS:
            out = govern(messages, model=model, config=tight(1_000_000))
            assert profile_problems(out.messages, profile, prefill) == []

    @pytest.mark.timeout(120)
    @pytest.mark.parametrize("blank", [" ", "\t"], ids=["spaces", "tabs"])
    def test_a_megabyte_of_blanks(self, blank: str) -> None:
        """A message of one million spaces (o200k_base's regex overflows on it) is governed like any text."""
        check_governed([system(), user(blank * 1_000_000)], "openai/gpt-4o", "permissive", True)


# ---- the hooks: fail-open --------------------------------------------------------------------


HOSTILE_BODIES: dict[str, dict[str, Any]] = {
    "messages is a string": {"messages": "a string"},
    "messages is a number": {"messages": 42},
    "messages is null": {"messages": None},
    "messages of numbers": {"messages": [1, 2]},
    "numeric role": {"messages": [{"role": 5}]},
    "list role": {"messages": [{"role": ["user"], "content": "x"}]},
    "no messages": {},
    "tools is a string": {"messages": [user()], "tools": "x"},
    "metadata is a string": {"messages": [user(), user()], "metadata": "m"},
    "spend_logs_metadata is a list": {"messages": [user(), user()], "metadata": {"spend_logs_metadata": [1]}},
    "max_tokens is a string": {"messages": [user(), user()], "max_tokens": "lots"},
    "model_info is a list": {"messages": [user(), user()], "metadata": {"model_info": [1]}},
}


def run_hooks(body: dict[str, Any], model: Any = "zai/glm-4.6") -> list[Any]:
    """The proxy's pre-call hook and the deployment hook on a copy of `body` each; their returns."""
    from litellm_governance import GovernanceHook

    hook = GovernanceHook()

    async def both() -> list[Any]:
        first = await hook.async_pre_call_hook(None, None, {"model": model, **copy.deepcopy(body)}, "completion")
        second = await hook.async_pre_call_deployment_hook({"model": model, **copy.deepcopy(body)}, "acompletion")
        return [first, second]

    return asyncio.run(both())


# ---- names that are not strings, in every format --------------------------------------------

# A request of each format with every kind of part, block and item the rules read.
_EVERY_FIELD: dict[str, dict[str, Any]] = {
    "chat": {
        "model": "openai/gpt-4o",
        "messages": [
            {"role": "system", "content": "s"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "t"}, {"type": "image_url", "image_url": {"url": "u"}}],
            },
            {"role": "assistant", "content": "ok", "tool_calls": [_fn("c1", "read_file", '{"path": "a"}')]},
            {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "x " * 500},
            {"role": "user", "content": "go"},
        ],
    },
    "anthropic": {
        "model": "anthropic/claude-sonnet-4-5",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "t"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "sig"},
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "x " * 500}]},
                    {"type": "text", "text": "go"},
                ],
            },
        ],
    },
    "responses": {
        "model": "openai/gpt-4o",
        "instructions": "s",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "t"}]},
            {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "s"}]},
            {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": '{"path": "a"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "x " * 500},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            {"role": "user", "content": "go"},
        ],
    },
}


def _every_field(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for key, inner in value.items() for p in [(*path, key), *_every_field(inner, (*path, key))]]
    if isinstance(value, list):
        return [p for index, inner in enumerate(value) for p in _every_field(inner, (*path, index))]
    return []


class TestFieldsOfEveryType:
    @pytest.mark.parametrize("fmt", list(_EVERY_FIELD))
    def test_any_field_a_list_or_an_object_is_governed_or_named(self, fmt: str) -> None:
        """Every field of a request of each format (a type, a role, an id, a text...), made a list or
        an object in turn: the request is governed, or `govern_request` raises InvalidRequestError
        naming the field — never another exception (a list as a block's type made a rule's set lookup
        raise TypeError: the library's error named nothing, and the hook failed open as on a bug)."""
        from litellm_governance import govern_request

        body = _EVERY_FIELD[fmt]
        named = set()
        for path in _every_field(body):
            if path == ("model",):
                continue
            for odd in ([1], {"a": 1}):
                damaged = copy.deepcopy(body)
                holder = damaged
                for key in path[:-1]:
                    holder = holder[key]
                holder[path[-1]] = odd
                for window in (None, 300):
                    try:
                        govern_request(damaged, model_info={"max_input_tokens": window} if window else None)
                    except InvalidRequestError as error:
                        where = "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)[1:]
                        assert str(error).startswith(where), (path, str(error))  # the field, or within it
                        if str(error).startswith(f"{where} must be a string"):
                            named.add(path[-1])
        assert "type" in named  # the damage this guards against occurred

    @pytest.mark.parametrize(
        ("call", "where"),
        [
            (
                lambda: govern([user([{"type": ["text"], "text": "x"}])], model="openai/gpt-4o"),
                "messages[0].content[0].type",
            ),
            (
                lambda: _anthropic([{"role": "user", "content": [{"type": {"a": 1}, "text": "x"}]}]),
                "messages[0].content[0].type",
            ),
            (
                lambda: _responses([{"type": "function_call", "call_id": ["c"], "name": "f", "arguments": "{}"}]),
                "input[0].call_id",
            ),
        ],
        ids=["govern", "govern_anthropic", "govern_responses"],
    )
    def test_each_entry_point_names_the_field(self, call: Any, where: str) -> None:
        with pytest.raises(
            InvalidRequestError, match=rf"^{where.replace('[', '.').replace(']', '.')} must be a string"
        ):
            call()

    @pytest.mark.parametrize("role", [["system"], {"name": "user"}], ids=["list", "dict"])
    def test_a_container_role_is_an_unknown_role_in_a_body_too(self, role: Any) -> None:
        """As with `govern` (`test_container_roles`), a chat body whose first message has a list or an
        object as its role is governed: telling the body's format compared the role with a set."""
        from litellm_governance import govern_request

        body = {"model": "openai/gpt-4o", "messages": [{"role": role, "content": "x"}, user()]}
        out = govern_request(copy.deepcopy(body))
        assert out.format == "chat" and out.request["messages"][0] == body["messages"][0]


def _anthropic(messages: Messages) -> Any:
    from litellm_governance import govern_anthropic

    return govern_anthropic(messages, model="anthropic/claude-sonnet-4-5")


def _responses(items: list[Any]) -> Any:
    from litellm_governance import govern_responses

    return govern_responses(items, model="openai/gpt-4o")


@pytest.mark.litellm
class TestHooksFailOpen:
    @pytest.mark.parametrize("name", list(HOSTILE_BODIES))
    def test_hooks_never_raise(self, name: str) -> None:
        """A malformed request body is let through (None or a dict), never an exception."""
        for returned in run_hooks(HOSTILE_BODIES[name]):
            assert returned is None or isinstance(returned, dict)

    @pytest.mark.parametrize("model", [None, 5, "", "no-such-provider/x"], ids=repr)
    def test_hooks_tolerate_a_bad_model(self, model: Any) -> None:
        """A missing or odd model name fails open too."""
        for returned in run_hooks({"messages": [user(), user()]}, model=model):
            assert returned is None or isinstance(returned, dict)

    @pytest.mark.timeout(120)
    def test_hooks_survive_a_tokenizer_panic(self) -> None:
        """Even a panic inside the tokenizer lets the original request through."""
        try:
            returned = run_hooks({"messages": [user(" " * 1_000_000)]}, model="openai/gpt-4o")
        except BaseException as exc:
            raise AssertionError(f"a hook raised {type(exc).__name__}") from exc
        assert all(r is None or isinstance(r, dict) for r in returned)


def governed_with_override(override: Any) -> dict[str, Any]:
    """The deployment hook, where the operator allows overrides, on a strict request with a user run;
    returns the report recorded in the request's metadata."""
    from litellm_governance import GovernanceHook

    hook = GovernanceHook(allow_request_overrides=True)
    data = {"model": "zai/glm-4.6", "messages": [user("a"), user("b")], "metadata": {"governance": override}}
    returned = asyncio.run(hook.async_pre_call_deployment_hook(data, "acompletion"))
    assert returned is None or isinstance(returned, dict)
    spend = (returned or data)["metadata"].get("spend_logs_metadata") or {}
    return spend.get("governance") or {}


@pytest.mark.litellm
class TestHostileOverrides:
    @pytest.mark.parametrize(
        "override",
        [
            {"profile": 5},
            {"keep_recent": 10**30},
            {"snip_watermark": math.nan},
            {"compactable_tools": "x"},
            {"compactable_tools": [None]},
            {"context_window_tokens": "9"},
            {"context_window_tokens": -1},
            {"cache_stable": "yes"},
            {"enabled": "no"},
            {"unknown": 1, "": None},
            [1],
            "text",
            42,
        ],
        ids=repr,
    )
    def test_odd_overrides_are_ignored_with_a_note(self, override: Any) -> None:
        """Where the operator allows overrides, an unusable one is ignored (and noted), never raised."""
        report = governed_with_override(override)
        assert report["steps"] == {"merged": 1}
        assert any("overrides ignored" in note for note in report["notes"])

    @pytest.mark.parametrize("value", ["false", "no", [0]], ids=repr)
    def test_disable_must_be_a_boolean(self, value: Any) -> None:
        """disable: "false" does not disable governance (as enabled: "no" is rejected, not obeyed)."""
        report = governed_with_override({"disable": value})
        assert report.get("steps") == {"merged": 1}

    def test_report_stays_small_whatever_the_override(self) -> None:
        """A megabyte-long override value does not end up in the report (and so in every logging integration)."""
        report = governed_with_override({"profile": "p" * 1_000_000, "k" * 100_000: 1})
        assert len(json.dumps(report)) < 10_000


@pytest.mark.litellm
class TestCallerMetadata:
    def test_callers_metadata_stays_json(self) -> None:
        """An SDK caller's metadata dict, reused across requests as apps do, stays JSON-serialisable:
        the hook's private pass state does not end up in it."""
        import litellm

        from litellm_governance import GovernanceHook
        from litellm_governance.testing import RecordingUpstream

        shared_metadata: dict[str, Any] = {"app": "agent"}
        saved = list(litellm.callbacks)
        litellm.callbacks = [GovernanceHook()]
        try:
            with RecordingUpstream() as server:
                asyncio.run(
                    litellm.acompletion(
                        model="hosted_vllm/private",
                        api_base=server.base_url,
                        api_key="sk-fake",
                        messages=[user("a"), user("b")],
                        metadata=shared_metadata,
                    )
                )
                assert server.bodies()[-1]["messages"] == [user("a\n\nb")]
        finally:
            litellm.callbacks = saved
        json.dumps(shared_metadata)


# ---- Hypothesis: hostile conversations -------------------------------------------------------

SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=6)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
ODD_TEXT = st.sampled_from(["", " ", "\ud800", "x\udfffy", "日本語😀", "\x00", "read_file", "a" * 600])
IDS = st.sampled_from(["a", "b", "c", "a_2"]) | st.sampled_from(["", None, 0, 1.5, True, ["a"], {"id": "a"}])
NAMES = st.sampled_from(["read_file", "grep", "exec", "write_file"]) | st.sampled_from(["", None, 5, ["grep"]]) | JSON
TEXT = st.sampled_from(["fix it", "the test", "ok", "Reading.", "def f(): pass"]) | ODD_TEXT
BIG = st.integers(600, 5_000).map(lambda n: ("x = compute(y)  # long line\n" * 200)[:n])
CONTENT = st.one_of(
    TEXT,
    TEXT,
    BIG,
    st.none(),
    st.just(""),
    st.lists(st.one_of(TEXT.map(lambda t: {"type": "text", "text": t}), JSON), max_size=3),
    JSON,
)
GOOD_CALL = st.builds(
    lambda i, n, a: {"id": i, "type": "function", "function": {"name": n, "arguments": a}},
    st.sampled_from(["a", "b", "c", "a_2"]),
    st.sampled_from(["read_file", "grep", "exec", "write_file"]),
    st.just("{}") | st.just('{"path": "x.py"}'),
)
ODD_CALL = st.one_of(
    st.builds(
        lambda i, f: {"id": i, "type": "function", "function": f},
        IDS,
        st.none() | JSON | st.fixed_dictionaries({"name": NAMES, "arguments": JSON | TEXT}),
    ),
    JSON,
)
TOOL_CALLS = st.one_of(
    st.lists(GOOD_CALL, min_size=1, max_size=3),
    st.lists(GOOD_CALL, min_size=1, max_size=3),
    st.lists(st.one_of(GOOD_CALL, ODD_CALL), max_size=3),
    JSON,
)
# Roles as clients send them, and as they should not (hashable JSON scalars; containers: test_container_roles).
ROLES = st.one_of(
    st.sampled_from(["system", "developer", "user", "user", "assistant", "assistant", "tool"]),
    st.sampled_from(["", "USER", "function", "model", "human", "wizard", None, 0, 1.5, True]),
    st.text(max_size=4),
)
FIELDS = st.sampled_from(["content", "tool_calls", "tool_call_id", "name", "cache_control", "reasoning_content", "x"])


@st.composite
def hostile_messages(draw: st.DrawFn) -> dict[str, Any]:
    """One message: any role, any subset of the usual fields, each well-formed or arbitrary JSON."""
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["role"] = draw(ROLES)
    extra = draw(st.dictionaries(FIELDS, JSON, max_size=2))
    message.update(extra)
    if draw(st.booleans()) or message.get("role") in ("system", "developer", "user", "tool"):
        message["content"] = draw(CONTENT)
    if message.get("role") == "assistant" and draw(st.booleans()):
        message["tool_calls"] = draw(TOOL_CALLS)
    if message.get("role") == "tool":
        message["tool_call_id"] = draw(IDS)
    return message


@st.composite
def hostile_conversations(draw: st.DrawFn) -> Messages:
    """Conversations mixing plausible agent turns with damage: results before their calls, users
    between calls and results, reused ids, empty and null content, and arbitrary messages."""
    messages: Messages = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "system", "round", "round", "round", "orphan", "hostile"]))
        if kind in ("user", "assistant", "system"):
            messages.append({"role": kind, "content": draw(CONTENT)})
        elif kind == "orphan":
            messages.append({"role": "tool", "tool_call_id": draw(IDS), "content": draw(CONTENT)})
        elif kind == "hostile":
            messages.append(draw(hostile_messages()))
        else:
            calls = draw(TOOL_CALLS)
            messages.append({"role": "assistant", "content": draw(st.none() | TEXT), "tool_calls": calls})
            results = []
            for c in calls if isinstance(calls, list) else []:
                ident = c.get("id") if isinstance(c, dict) else None
                for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2]))):
                    results.append({"role": "tool", "tool_call_id": ident, "content": draw(CONTENT)})
            if results and draw(st.integers(0, 3)) == 0:
                results.insert(draw(st.integers(0, len(results))), draw(hostile_messages()))
            where = len(messages)
            if results and draw(st.integers(0, 4)) == 0:
                where = draw(st.integers(0, len(messages) - 1))  # results before their call
            messages[where:where] = results
    return messages


HOSTILE_CONFIGS = st.builds(
    lambda window, output, keep, stable, batch: GovernanceConfig(
        context_window_tokens=window,
        max_output_tokens=output,
        safety_buffer_tokens=50,
        keep_recent=keep,
        cache_stable=stable,
        compact_batch=batch,
    ),
    window=st.sampled_from([None, 1, 60, 400, 1_500, 8_000, 1_000_000]),
    output=st.sampled_from([0, 100, 4_096]),
    keep=st.sampled_from([0, 1, 10]),
    stable=st.booleans(),
    batch=st.sampled_from([None, 1, 3]),
)
HOSTILE = settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestHostileProperties:
    @HOSTILE
    @given(
        messages=hostile_conversations(),
        config=HOSTILE_CONFIGS,
        tools=st.none() | st.lists(JSON, max_size=2),
        max_output=st.none() | st.integers(0, 300),
    )
    def test_every_profile_governs_any_conversation(
        self, messages: Messages, config: GovernanceConfig, tools: Any, max_output: int | None
    ) -> None:
        """For every profile: no exception, valid output, idempotent, deterministic, input untouched,
        JSON report — or, for a part whose type is a list (found here: ``{"type": []}``), the field
        named by an InvalidRequestError, as `TestFieldsOfEveryType` holds."""
        for model, profile, prefill in MODELS:
            governed_or_named(
                messages, model, profile, prefill, tools=tools, max_output_tokens=max_output, config=config
            )

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(messages=st.lists(hostile_messages(), max_size=8), window=st.sampled_from([None, 30, 2_000]))
    def test_every_profile_governs_arbitrary_dicts(self, messages: Messages, window: int | None) -> None:
        """Lists of arbitrary message dicts (no plausible structure at all) are governed too."""
        for model, profile, prefill in MODELS:
            governed_or_named(messages, model, profile, prefill, config=tight(window))

    def test_a_result_cut_beside_other_content_is_cut_once(self) -> None:
        """Found by the property above: a result holding a long text part and something else (here a
        list of numbers) in a request far over budget was cut again each time it was governed: the
        cut was sized by the message's tokens, the other content included. It is sized by the text's
        own tokens: governing the output again changes nothing."""
        call = {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        content = [
            {"type": "text", "text": "fix it"},
            {"type": "text", "text": "a" * 600},
            {"numbers": list(range(100))},
        ]
        messages: Messages = [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "a", "content": content},
            {"role": "user", "content": "fix it"},
        ]
        config = GovernanceConfig(context_window_tokens=1, max_output_tokens=0, safety_buffer_tokens=50)
        for model, profile, prefill in MODELS:
            check_governed(messages, model, profile, prefill, config=config)

    def test_an_empty_first_user_message_is_no_task_to_start_from(self) -> None:
        """Found by the property above: a request opening with an empty user message that the
        profile drops (Gemini's) then starts with an assistant turn and gets a synthetic user turn;
        the budget did not count that turn, so the request went out over budget and was truncated
        only when governed again. The turn is counted: the first pass fits, the second changes nothing."""
        call = {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        messages: Messages = [
            {"role": "user", "content": None},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {},
            {"role": "tool", "tool_call_id": "a", "content": ("x = compute(y)  # long line\n" * 200)[:770]},
            {"role": "user", "content": "fix it"},
            {"role": "user", "content": "fix it"},
        ]
        config = GovernanceConfig(
            context_window_tokens=400, max_output_tokens=0, safety_buffer_tokens=50, keep_recent=0, cache_stable=False
        )
        for model, profile, prefill in MODELS:
            check_governed(messages, model, profile, prefill, config=config)

    def test_a_breakpoint_on_a_message_the_rules_drop_protects_no_result(self) -> None:
        """Found by the property above: an empty user message with ``cache_control`` after a result
        kept the result whole as cached; the profile dropped the empty message, breakpoint and all,
        and governing the output again compacted the result (not idempotent). A breakpoint on a
        message the rules drop protects nothing, in the first pass as in the second."""
        call = {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        messages: Messages = [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "user", "content": "", "cache_control": 1},
            {"role": "tool", "tool_call_id": "a", "content": ("x = compute(y)  # long line\n" * 200)[:600]},
            {"role": "assistant", "content": "fix it"},
            {"role": "user", "content": "fix it"},
        ]
        config = GovernanceConfig(
            context_window_tokens=None, max_output_tokens=0, safety_buffer_tokens=50, keep_recent=0, cache_stable=False
        )
        for model, profile, prefill in MODELS:
            check_governed(messages, model, profile, prefill, config=config)

    def test_a_system_messages_breakpoint_protects_no_result(self) -> None:
        """Found by the property above: a trailing system message with ``cache_control`` made the
        results before it count as cached, so they were kept; the profile moved the system message up,
        and governing the output again compacted them (not idempotent). A system or developer
        message's breakpoint marks the system prompt, cached ahead of every message: it protects no
        result, in the first pass as in the second."""
        long = ("x = compute(y)  # long line\n" * 200)[:600]

        def read_call() -> list[dict[str, Any]]:
            return [{"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]

        messages: Messages = [
            {"role": "assistant", "content": None, "tool_calls": read_call()},
            {"role": "tool", "tool_call_id": "a", "content": long},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": None, "tool_calls": read_call()},
            {"role": "tool", "tool_call_id": "a", "content": "fix it"},
            {"role": "user", "content": "fix it"},
            {"role": "system", "cache_control": True, "content": None},
        ]
        config = GovernanceConfig(
            context_window_tokens=None, max_output_tokens=0, safety_buffer_tokens=50, keep_recent=0, cache_stable=False
        )
        for model, profile, prefill in MODELS:
            check_governed(messages, model, profile, prefill, config=config)
            first = govern(messages, model=model, config=config)
            assert first.report.steps.get("compacted") == 1, (model, first.report.steps)


# ---- determinism across processes ------------------------------------------------------------

_GOVERN_IN_CHILD = """
import json, sys
from litellm_governance import GovernanceConfig, govern
cases = json.loads(sys.stdin.read())
out = []
for messages in cases:
    for model in ("openai/gpt-4o", "anthropic/claude-opus-4-6", "gemini/gemini-2.5-pro", "zai/glm-4.6"):
        for window in (60, 1000000):
            config = GovernanceConfig(context_window_tokens=window, max_output_tokens=16, safety_buffer_tokens=8)
            result = govern(messages, model=model, config=config)
            out.append([result.messages, result.report.to_dict()])
print(json.dumps(out))
"""


@pytest.mark.scale
def test_same_output_under_any_hash_seed() -> None:
    """No set- or dict-order dependence: two processes with different hash seeds agree exactly."""
    corpus = [m for name, m in DAMAGED.items() if name != "NaN and infinity"]  # NaN != NaN
    payload = json.dumps(corpus)
    runs: list[Any] = []
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        done = subprocess.run(
            [sys.executable, "-c", _GOVERN_IN_CHILD],
            input=payload,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2_000:]
        runs.append(json.loads(done.stdout))
    assert runs[0] == runs[1]
