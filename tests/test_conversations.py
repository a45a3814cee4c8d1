"""The conversation memo (`_conversations`): a request reuses what the previous request of its
conversation counted and walked, and that changes nothing: the same bytes and report as governing the
request afresh, whatever the client did to its history in between (grew it, edited or retyped an old
value, reordered a message's keys, dropped its newest message, moved its breakpoint)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.ab import _FUZZ_MODELS, _as_anthropic, _as_responses, fuzz_loop
from bench.agent_shapes import to_claude_code, to_codex
from bench.sessions import make_session, make_tools, next_round
from litellm_governance import (
    ConfigError,
    GovernanceConfig,
    GovernedRequest,
    _pipeline,
    _roles,
    _snip,
    _trace,
    govern_request,
)
from litellm_governance._calls import is_stub
from litellm_governance._conversations import Conversations, Recall, conversations
from litellm_governance._microcompact import Catalogued
from litellm_governance._pairing import PairingWalk
from litellm_governance._profiles import PROFILES
from litellm_governance._request import detect_format, read_request
from litellm_governance._snip import LayoutWalk
from litellm_governance._tokens import TokenCounter
from litellm_governance._trace import is_note

FORMATS = ("chat", "anthropic", "responses")
#: The store these tests use (a size of its own: `conversations(size)` is one store per size).
SIZE = 20_000


def _shape(fmt: str, messages: list[dict[str, Any]], model: str, rng: random.Random) -> dict[str, Any]:
    """`messages` (a `fuzz_loop`) as a request body in `fmt`; an Anthropic one with Claude Code's
    breakpoint on its newest block, which moves there on every request."""
    if fmt == "chat":
        body: dict[str, Any] = {"messages": messages, "max_tokens": 100}
    elif fmt == "anthropic":
        body = _as_anthropic(messages)
        last = body["messages"][-1] if body["messages"] else None
        if last is not None and isinstance(last["content"], list) and rng.random() < 0.7:
            last["content"][-1] = {**last["content"][-1], "cache_control": {"type": "ephemeral"}}
    else:
        body = _as_responses(messages)
    body["model"] = model
    return json.loads(json.dumps(body))  # as a proxy parses it: no object shared with the next request


def _grow(messages: list[dict[str, Any]], rng: random.Random, turn: int) -> list[dict[str, Any]]:
    """One more tool round (what an agent sends next), sometimes with user text after it."""
    calls = []
    for n in range(rng.randint(1, 2)):
        tool = rng.choice(("read_file", "Read", "exec"))
        arguments: dict[str, Any] = {"file_path" if tool == "Read" else "path": rng.choice(("a.py", "b.py"))}
        if rng.random() < 0.5:
            arguments["limit"] = rng.choice((10, 100))
        calls.append(
            {"id": f"g{turn}_{n}", "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
        )
    grown = [*messages, {"role": "assistant", "content": None, "tool_calls": calls}]
    for call in calls:
        grown.append({"role": "tool", "tool_call_id": call["id"], "content": "row\n" * rng.randint(1, 400)})
    if rng.random() < 0.2:
        grown.append({"role": "user", "content": "go on"})
    return grown


def _reuse_an_id(messages: list[dict[str, Any]], rng: random.Random, turn: int) -> list[dict[str, Any]]:
    """One more tool round whose call takes the id of an earlier call (a later call with the same id
    wins: the earlier results now name it), or a round answered only after the user spoke."""
    grown = _grow(messages, rng, turn)
    earlier = [call["id"] for m in messages for call in m.get("tool_calls") or ()]
    round_ = next(i for i in range(len(grown) - 1, -1, -1) if grown[i].get("tool_calls"))
    assistant = grown[round_]
    if earlier and rng.random() < 0.7:
        ident = rng.choice(earlier)
        call = {**assistant["tool_calls"][0], "id": ident}
        grown[round_] = {**assistant, "tool_calls": [call, *assistant["tool_calls"][1:]]}
        grown[round_ + 1] = {**grown[round_ + 1], "tool_call_id": ident}
    else:  # its results after a user message (scattered: what the pairing repairs)
        grown.insert(round_ + 1, {"role": "user", "content": "also check b.py"})
    return grown


def _edit(messages: list[dict[str, Any]], rng: random.Random, turn: int) -> list[dict[str, Any]]:
    """What a client may do to its history between two requests."""
    edits = ["grow"] * 4 + ["text", "keys", "retype", "drop", "same", "reuse"]
    edit = rng.choice(edits)
    old = rng.randrange(1, max(2, len(messages) - 2))
    if edit == "reuse":
        return _reuse_an_id(messages, rng, turn)
    if edit == "grow" or old >= len(messages):
        return _grow(messages, rng, turn)
    edited = [dict(m) for m in messages]
    target = edited[old]
    if edit == "text" and isinstance(target.get("content"), str):
        target["content"] += "!"
    elif edit == "keys":
        edited[old] = dict(reversed(list(target.items())))  # the same message, keys in another order
    elif edit == "retype" and target.get("tool_calls"):
        call = target["tool_calls"][0]
        arguments = json.loads(call["function"]["arguments"])
        if "limit" in arguments:
            arguments["limit"] = float(arguments["limit"])  # 100 == 100.0: equal, but not the same request
        else:
            arguments["limit"] = True
        function = {**call["function"], "arguments": json.dumps(arguments)}
        target["tool_calls"] = [{**call, "function": function}, *target["tool_calls"][1:]]
    elif edit == "drop" and len(edited) > 3:
        edited.pop()
    return _grow(edited, rng, turn) if rng.random() < 0.5 else edited


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FORMATS), st.randoms(use_true_random=False))
def test_a_conversation_governs_as_if_each_request_came_alone(fmt: str, rng: random.Random) -> None:
    """Request after request of a conversation the client grows and edits, every format, profile and
    budget: governed with the memo, the same body and report as governed with none."""
    options = {
        "context_window_tokens": rng.choice((1_500, 3_000, 6_000, 1_000_000)),
        "max_output_tokens": 100,
        "safety_buffer_tokens": 50,
        "keep_recent": rng.choice((0, 1, 3)),
        "cache_stable": rng.random() < 0.7,
        "compact_batch": rng.choice((None, 1, 3)),
        "respect_cache_control": rng.random() < 0.7,
    }
    remembering = GovernanceConfig(**options, conversation_cache_size=SIZE)  # type: ignore[arg-type]
    afresh = remembering.replace(conversation_cache_size=0)
    model = rng.choice(_FUZZ_MODELS)
    messages = fuzz_loop(rng)
    for turn in range(rng.randint(2, 6)):
        body = _shape(fmt, messages, model, rng)
        governed = govern_request(json.loads(json.dumps(body)), config=remembering)
        expected = govern_request(json.loads(json.dumps(body)), config=afresh)
        assert json.dumps(governed.request, sort_keys=True, default=repr) == json.dumps(
            expected.request, sort_keys=True, default=repr
        )
        assert governed.report == expected.report
        messages = _edit(messages, rng, turn)


def _bodies(session: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        "chat": {"model": "openai/gpt-4o", "messages": session, "tools": make_tools()},
        "anthropic": {"model": "anthropic/claude-sonnet-4-5", "max_tokens": 4096, **to_claude_code(session)},
        "responses": {"model": "openai/gpt-4o", **to_codex(session)},
    }


@pytest.mark.parametrize("window", [1_000_000, 16_384])
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_next_request_counts_and_walks_only_what_it_added(
    fmt: str, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next request of an agent loop counts and walks its newest messages only: the rest it takes
    from what the previous request left. With no memo, it counts and walks them all. At a small
    window (compaction, then snipping: no ``cache_stable``) too, where the units are those of the
    compacted request: the request's own, with the stubs' tokens."""
    session = make_session(160, seed=4)
    grown = next_round(session, seed=4)
    first, second = _bodies(session)[fmt], _bodies(grown)[fmt]
    walked: list[int] = []

    def spy(cls: type[Any], name: str, span: Any) -> None:
        original = getattr(cls, name)

        def counted(self: Any, *args: Any) -> Any:
            start = self.end if hasattr(self, "end") else self.index
            result = original(self, *args)
            walked.append(span(self, args) - start)
            return result

        monkeypatch.setattr(cls, name, counted)

    keyed: list[dict[str, Any]] = []
    key = TokenCounter._key
    monkeypatch.setattr(TokenCounter, "_key", lambda self, message: keyed.append(message) or key(self, message))
    spy(PairingWalk, "walk", lambda self, args: args[1])
    spy(Catalogued, "_walk", lambda self, args: args[3])
    spy(LayoutWalk, "walk", lambda self, args: self.index)

    def second_request(size: int) -> tuple[int, int, int]:
        config = GovernanceConfig(context_window_tokens=window, conversation_cache_size=size)
        assert config.stable_for(window) == (window == 1_000_000)
        conversations(size).clear()
        govern_request(json.loads(json.dumps(first)), config=config)
        keyed.clear()
        walked.clear()
        govern_request(json.loads(json.dumps(second)), config=config)
        theirs = [m for m in keyed if not is_stub(m.get("content")) and not is_note(m)]  # not the plugin's own
        return len(theirs), sum(walked), len(read_request(second, detect_format(second))[0].view)

    counted, walks, history = second_request(SIZE)
    assert 0 < counted < history / 10
    assert 0 < walks < history / 3  # three walks (pairing, catalogue, units), each over the newest few
    counted_afresh, walks_afresh, _ = second_request(0)
    assert counted_afresh >= history * 0.9  # (those not counted are the same objects counted once)
    assert walks_afresh >= 3 * history * 0.9  # each walk over the whole request


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_next_request_reads_the_note_lines_of_what_it_added_only(
    fmt: str, stable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the window cuts, the next request of an agent loop reads the note's lines (what each cut
    unit did) of its newest units only, with snipping and with ``cache_stable``'s replay alike, and
    looks for instructions among its newest messages only (what assembling the cut request keeps of
    the dropped ones): the rest it takes from what the previous request read. With no memo, it reads
    those of every unit it cuts and looks at every message it drops, and the request is the same either way."""
    session = make_session(160, seed=4)
    grown = next_round(session, seed=4)
    first, second = _bodies(session)[fmt], _bodies(grown)[fmt]
    read: list[int] = []
    looked: list[int] = []
    lines = _trace.unit_entries

    def counted(messages: Any, start: int, end: int, **kwargs: Any) -> Any:
        read.append(end - start)
        return lines(messages, start, end, **kwargs)

    monkeypatch.setattr(_trace, "unit_entries", counted)
    for module in (_trace, _snip):  # (the two modules that ask it on the way to a cut request)
        asked = module.is_instruction
        monkeypatch.setattr(module, "is_instruction", lambda m, asked=asked: looked.append(1) or asked(m))

    def second_request(size: int) -> tuple[int, int, GovernedRequest]:
        config = GovernanceConfig(context_window_tokens=16_384, cache_stable=stable, conversation_cache_size=size)
        conversations(size).clear()
        govern_request(json.loads(json.dumps(first)), config=config)
        read.clear()
        looked.clear()
        governed = govern_request(json.loads(json.dumps(second)), config=config)
        return sum(read), len(looked), governed

    remembered, remembered_looks, governed = second_request(SIZE)
    afresh, afresh_looks, expected = second_request(0)
    assert governed.report.steps.get("noted") or governed.report.steps.get("summarized")  # a note for cut turns
    assert governed.request == expected.request
    assert afresh >= governed.report.steps["snipped"]  # a line for every unit cut (and what it reads after)
    assert remembered <= 12  # the newest round's messages and those the cut moved past
    assert afresh_looks >= governed.report.steps["snipped"]  # every message dropped
    assert remembered_looks <= 12


@pytest.mark.parametrize("model", ["zai/glm-4.6", "openai/gpt-4o"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_next_request_tokenizes_no_note_it_counted_the_lines_of(
    fmt: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the window cuts and the note's room moves with every request (snipping, no
    ``cache_stable``), the next request's note is new text, and so is the turn a strict provider's
    role rules merge it into (GLM). Neither is tokenized whole: both are counted from their lines'
    counts and the turn's (`TokenCounter.compose`), which the previous request left in the cache.
    The request is the same as one whose texts are all tokenized."""
    session = make_session(400, seed=0)
    first = {**_bodies(session)[fmt], "model": model}
    second = {**_bodies(next_round(session, seed=0))[fmt], "model": model}
    encoded: list[str] = []
    encode = TokenCounter._encode
    monkeypatch.setattr(TokenCounter, "_encode", lambda self, text: encoded.append(text) or encode(self, text))
    config = GovernanceConfig(context_window_tokens=32_768, cache_stable=False)
    conversations(config.conversation_cache_size).clear()
    _pipeline.token_cache(config.token_cache_size).clear()  # (no note text counted by an earlier test)
    govern_request(json.loads(json.dumps(first)), config=config)
    encoded.clear()
    governed = govern_request(json.loads(json.dumps(second)), config=config)
    assert governed.report.steps.get("noted")
    whole = [text for text in encoded if _trace.NOTE_START in text and "\n- " in text]
    assert not whole, f"{len(whole)} texts holding the note and its lines tokenized whole"

    monkeypatch.setattr(TokenCounter, "compose", lambda self, parts: "".join(parts))  # every text tokenized
    conversations(config.conversation_cache_size).clear()
    _pipeline.token_cache(config.token_cache_size).clear()
    govern_request(json.loads(json.dumps(first)), config=config)
    expected = govern_request(json.loads(json.dumps(second)), config=config)
    assert json.dumps(governed.request) == json.dumps(expected.request)
    assert governed.report == expected.report


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-5", "zai/glm-4.6"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_next_request_applies_the_role_rules_to_what_it_added_only(
    fmt: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where nothing is cut, the next request of an agent loop applies the provider's role rules to its
    newest messages only (the previous request kept how many first messages the rules left as they
    were); with no memo, to all of them. The same body and report either way."""
    session = make_session(160, seed=4)
    first = {**_bodies(session)[fmt], "model": model}
    second = {**_bodies(next_round(session, seed=4))[fmt], "model": model}
    looked: list[int] = []  # the messages the first rule looked at, per request
    normalize = _roles._normalize_empty

    def counted(messages: list[Any], ctx: Any, counts: Any, clean: int = 0) -> Any:
        looked.append(len(messages) - clean)
        return normalize(messages, ctx, counts, clean)

    monkeypatch.setattr(_roles, "_normalize_empty", counted)

    def second_request(size: int) -> tuple[int, GovernedRequest]:
        config = GovernanceConfig(context_window_tokens=1_000_000, conversation_cache_size=size)
        conversations(size).clear()
        govern_request(json.loads(json.dumps(first)), config=config)
        looked.clear()
        governed = govern_request(json.loads(json.dumps(second)), config=config)
        (count,) = looked
        return count, governed

    looked_at, governed = second_request(SIZE)
    looked_afresh, expected = second_request(0)
    assert governed.request == expected.request and governed.report == expected.report
    assert 0 < looked_at < looked_afresh / 10


def _rule_breaks(rng: random.Random, turn: int) -> list[dict[str, Any]]:
    """Messages one of the role rules changes (`_roles`), of a kind drawn at random."""
    kind = rng.choice(("system", "empty", "null", "blank", "users", "assistant"))
    if kind == "system":  # mid-conversation: converted or hoisted
        return [{"role": rng.choice(("system", "developer")), "content": f"Note {turn}."}]
    if kind == "empty":  # an assistant message with nothing in it: dropped
        return [{"role": "assistant", "content": None}]
    if kind == "null":  # filled, or dropped where empty text is refused
        return [{"role": "user", "content": None}]
    if kind == "blank":  # a blank part, dropped where empty text is refused
        return [{"role": "user", "content": [{"type": "text", "text": "  "}, {"type": "text", "text": "go"}]}]
    if kind == "users":  # merged
        return [{"role": "user", "content": "and"}, {"role": "user", "content": "then"}]
    return [{"role": "assistant", "content": "Let me look."}]  # merged with the calls after it


def _break_rules(messages: list[dict[str, Any]], rng: random.Random, turn: int) -> list[dict[str, Any]]:
    """`messages` with `_rule_breaks` before one of its rounds (older or newest) or at the end; after
    results, a user message is what Mistral's and Bedrock's rule bridges."""
    rounds = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    at = rng.choice(rounds) if rounds and rng.random() < 0.8 else len(messages)
    return [*messages[:at], *_rule_breaks(rng, turn), *messages[at:]]


def test_the_role_rules_take_a_stub_for_the_result_it_stands_for_and_nothing_else() -> None:
    """What the rules decide of a message is from its role and content; of a tool result, from whether
    it has content only. So a result compaction stubbed is one the rules skip where they skipped the
    result, and any other message they skip must be the very object."""
    result = {"role": "tool", "tool_call_id": "c1", "content": "x" * 900}
    stub = {**result, "content": "[read_file a.py: 900 characters, compacted]"}
    said = {"role": "assistant", "content": "Done."}
    original = [{"role": "user", "content": "Go."}, result, said, result]
    assert _roles._alike([original[0], stub, said, stub], original, 4) == 4
    assert _roles._alike([original[0], stub, {**said}, stub], original, 4) == 2  # an equal copy: not the same
    assert _roles._alike([original[0], {**result, "content": None}, said], original, 3) == 1
    assert _roles._alike([original[0], said, said], original, 3) == 1
    assert _roles._alike(original[:2], original, 4) == 2


def test_what_the_rules_left_alone_under_one_profile_is_looked_at_again_under_another() -> None:
    """A conversation whose next request goes to a provider with stricter rules (a fallback): a blank
    part the permissive profile kept in an old message is dropped under the strict one, as afresh."""
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": [{"type": "text", "text": "  "}, {"type": "text", "text": "Fix it."}]},
        *fuzz_loop(random.Random(3))[2:],
    ]
    grown = _grow(messages, random.Random(4), 0)
    for profile, history in (("permissive", messages), ("strict", grown)):
        config = GovernanceConfig(profile=profile, context_window_tokens=1_000_000, conversation_cache_size=SIZE)
        body = json.dumps({"model": "openai/gpt-4o", "messages": history})
        governed = govern_request(json.loads(body), config=config)
        assert (
            governed.request
            == govern_request(json.loads(body), config=config.replace(conversation_cache_size=0)).request
        )
    assert governed.request["messages"][1]["content"] == [{"type": "text", "text": "Fix it."}]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PROFILES)), st.randoms(use_true_random=False))
def test_the_role_rules_govern_a_conversation_as_if_each_request_came_alone(profile: str, rng: random.Random) -> None:
    """Chat requests of a conversation holding messages each role rule changes, old and new ones, under
    every profile, and sometimes another profile for the next request (a fallback to another provider):
    with the memo (the rules skip the first messages they left as they were in the previous request,
    under the same rules), the same body and report as governed with none."""
    options = {
        "context_window_tokens": rng.choice((3_000, 1_000_000, 1_000_000)),
        "max_output_tokens": 100,
        "safety_buffer_tokens": 50,
        "cache_stable": rng.random() < 0.5,
        "respect_cache_control": rng.random() < 0.7,
    }
    model = rng.choice(_FUZZ_MODELS)  # (the profile is forced: the model gives the encoding)
    messages = fuzz_loop(rng)
    if rng.random() < 0.5:  # (reasoning kept: what DeepSeek's and Kimi's rule fills is there)
        messages = [{**m, "reasoning_content": "Hmm."} if m["role"] == "assistant" else m for m in messages]
    for turn in range(rng.randint(2, 6)):
        if turn and rng.random() < 0.25:
            profile = rng.choice(sorted(PROFILES))
        remembering = GovernanceConfig(**options, profile=profile, conversation_cache_size=SIZE)  # type: ignore[arg-type]
        afresh = remembering.replace(conversation_cache_size=0)
        if rng.random() < 0.6:
            messages = _break_rules(messages, rng, turn)
        body = json.dumps({"model": model, "messages": messages, "max_tokens": 100})
        governed = govern_request(json.loads(body), config=remembering)
        expected = govern_request(json.loads(body), config=afresh)
        assert json.dumps(governed.request, sort_keys=True, default=repr) == json.dumps(
            expected.request, sort_keys=True, default=repr
        )
        assert governed.report == expected.report
        messages = _edit(messages, rng, turn)


@pytest.mark.parametrize(("window", "stable"), [(16_384, False), (32_768, True), (131_072, True)])
@pytest.mark.parametrize("fmt", FORMATS)
def test_an_agent_loop_the_window_cuts_governs_as_if_each_request_came_alone(
    fmt: str, window: int, stable: bool
) -> None:
    """Twelve requests of a long agent loop the window cuts, each one tool round longer: with the memo
    (which reuses the previous request's note lines, and its note where the cut, the anchor and the
    room are the same), the same body and report as with none."""
    session = make_session(240 if window < 100_000 else 1_400, seed=6)
    remembering = GovernanceConfig(context_window_tokens=window, cache_stable=stable, conversation_cache_size=SIZE)
    afresh = remembering.replace(conversation_cache_size=0)
    conversations(SIZE).clear()
    noted = 0
    for turn in range(12):
        body = _bodies(session)[fmt]
        governed = govern_request(json.loads(json.dumps(body)), config=remembering)
        expected = govern_request(json.loads(json.dumps(body)), config=afresh)
        assert governed.request == expected.request, f"request {turn}"
        assert governed.report == expected.report
        noted += bool(governed.report.steps.get("noted"))
        session = next_round(session, seed=turn)
    assert noted == 12  # every request cut turns and wrote a note for them


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_note_is_taken_from_the_previous_request_only_for_the_same_room(fmt: str) -> None:
    """The same history asked for with less room for output each time (``max_tokens``): the cut stays
    while the note's room shrinks, and the note folds more of its oldest lines. Governed with the memo,
    each request gets the note its own room gives, as with none."""
    session = make_session(400, seed=8)
    remembering = GovernanceConfig(context_window_tokens=16_384, conversation_cache_size=SIZE)
    afresh = remembering.replace(conversation_cache_size=0)
    conversations(SIZE).clear()
    bodies = set()
    for output in range(2_000, 3_000, 25):
        body = {**_bodies(session)[fmt], "max_tokens": output}
        if fmt == "responses":
            body["max_output_tokens"] = body.pop("max_tokens")
        governed = govern_request(json.loads(json.dumps(body)), config=remembering)
        expected = govern_request(json.loads(json.dumps(body)), config=afresh)
        assert governed.request == expected.request, f"max_tokens {output}"
        history = expected.request.get("messages", expected.request.get("input"))
        bodies.add(json.dumps(history, sort_keys=True))
    assert len(bodies) >= 4  # (the note changed with the room)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_new_call_reusing_a_cut_calls_id_renames_it_in_the_note(fmt: str) -> None:
    """The next request's new call takes the id of a call the window cut (a later call with the same
    id wins, as LiteLLM and the providers read it): the note's line for that cut call now names the
    new one. Governed with the memo, which kept that line from the previous request, the request is
    the same as governed with none."""
    session = make_session(240, seed=6)
    config = GovernanceConfig(context_window_tokens=16_384, conversation_cache_size=SIZE)
    conversations(SIZE).clear()
    govern_request(json.loads(json.dumps(_bodies(session)[fmt])), config=config)
    grown = next_round(session, seed=0)
    cut = session[2]["tool_calls"][0]["id"]
    new = grown[len(session)]
    grown[len(session)] = {**new, "tool_calls": [{**new["tool_calls"][0], "id": cut}]}
    grown[len(session) + 1] = {**grown[len(session) + 1], "tool_call_id": cut}
    body = _bodies(grown)[fmt]
    governed = govern_request(json.loads(json.dumps(body)), config=config)
    expected = govern_request(json.loads(json.dumps(body)), config=config.replace(conversation_cache_size=0))
    assert governed.report.steps.get("noted")
    assert governed.request == expected.request


def test_an_equal_value_of_another_type_is_not_taken_for_the_same() -> None:
    """``100`` and ``100.0`` are equal in Python but not the same request (they count differently):
    a history whose old call input changed type is counted afresh, not from the previous request."""
    session = make_session(40, seed=5)
    body = _bodies(session)["anthropic"]
    calls = [b for m in body["messages"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    calls[0]["input"] = {**calls[0]["input"], "limit": 100}
    retyped = json.loads(json.dumps(body))
    retyped_calls = [
        b for m in retyped["messages"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    retyped_calls[0]["input"]["limit"] = 100.0
    config = GovernanceConfig(context_window_tokens=1_000_000, conversation_cache_size=SIZE)
    afresh = config.replace(conversation_cache_size=0)
    assert retyped_calls[0]["input"] == calls[0]["input"]
    first = govern_request(json.loads(json.dumps(body)), config=afresh).report.tokens_before
    assert govern_request(json.loads(json.dumps(retyped)), config=afresh).report.tokens_before != first
    conversations(SIZE).clear()
    govern_request(json.loads(json.dumps(body)), config=config)
    again = govern_request(json.loads(json.dumps(retyped)), config=config)
    assert again.report == govern_request(json.loads(json.dumps(retyped)), config=afresh).report


def _recalled(body: dict[str, Any], config: GovernanceConfig, monkeypatch: pytest.MonkeyPatch) -> Recall | None:
    """What governing `body` found of its conversation."""
    found: list[Recall | None] = []
    recall = Conversations.recall
    monkeypatch.setattr(Conversations, "recall", lambda self, *a: found.append(recall(self, *a)) or found[-1])
    govern_request(body, config=config)
    monkeypatch.setattr(Conversations, "recall", recall)
    return found[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_conversation_is_found_whatever_objects_its_values_share(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous request is found by the values its messages hold, not by which objects hold
    them: a client (or a callback before the plugin) that sent one object twice, or one string
    object in many places, is found by the next request parsed anew, and the other way round."""
    config = GovernanceConfig(context_window_tokens=1_000_000, conversation_cache_size=SIZE)
    session = make_session(40, seed=6)
    body = json.loads(json.dumps(_bodies(session)[fmt]))
    history = body["messages" if fmt != "responses" else "input"]
    history[3] = history[5] = history[7]  # one object thrice, as sent; its strings shared too
    shared = json.loads(json.dumps(body))
    shared["messages" if fmt != "responses" else "input"][3:8:2] = [history[7]] * 3
    grown = json.loads(json.dumps(_bodies(next_round(json.loads(json.dumps(session)), seed=6))[fmt]))
    grown_history = grown["messages" if fmt != "responses" else "input"]
    grown_history[3] = grown_history[5] = grown_history[7]
    for first, second in ((body, json.loads(json.dumps(grown))), (json.loads(json.dumps(body)), grown)):
        conversations(SIZE).clear()
        govern_request(first, config=config)
        recalled = _recalled(second, config, monkeypatch)
        assert recalled is not None and recalled.seen is not None and recalled.reuse > len(history) // 2


@pytest.mark.parametrize(("items", "then"), [(3, 6), (4, 9), (999, 1_004), (1_000, 1_003), (1_001, 1_010)])
def test_a_conversation_is_found_at_any_length(items: int, then: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request whose history kept one item, or a thousand give or take (where the written form of
    a list marks a batch), is found by the next one."""
    config = GovernanceConfig(context_window_tokens=1_000_000, conversation_cache_size=SIZE)
    history = [{"role": "system", "content": "sys"}]
    history += [{"role": "user" if n % 2 else "assistant", "content": f"turn {n}"} for n in range(then)]
    conversations(SIZE).clear()
    govern_request({"model": "openai/gpt-4o", "messages": history[:items]}, config=config)
    recalled = _recalled({"model": "openai/gpt-4o", "messages": json.loads(json.dumps(history))}, config, monkeypatch)
    assert recalled is not None and recalled.seen is not None
    assert recalled.reuse == items - 2  # all the previous request kept: all but its two newest


def test_at_most_size_messages_are_kept_and_none_with_zero() -> None:
    """The store keeps the most recent conversations whose messages fit in its size, and nothing at 0."""
    size = 70  # two of these conversations (30 messages each, 28 kept: all but the two newest)
    conversations(size).clear()
    for n, seed in enumerate((11, 12, 13)):
        session = make_session(30, seed=seed)
        session[1] = {**session[1], "content": f"task {n}"}  # another conversation
        govern_request(_bodies(session)["chat"], config=GovernanceConfig(conversation_cache_size=size))
        govern_request(_bodies(session)["chat"], config=GovernanceConfig(conversation_cache_size=0))
    assert len(conversations(size)) == 2
    assert conversations(size).messages == 56
    assert len(conversations(0)) == 0
    big = make_session(80, seed=14)
    govern_request(_bodies(big)["chat"], config=GovernanceConfig(conversation_cache_size=size))
    assert len(conversations(size)) == 2  # a conversation bigger than the store is not kept


def test_the_size_is_checked() -> None:
    with pytest.raises(ConfigError, match="conversation_cache_size"):
        GovernanceConfig(conversation_cache_size=-1)
