"""Tests of the benchmark session generator `bench.sessions` (fast: a few seconds in total)."""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from bench.sessions import LITELLM_DIR, make_session, make_tools, next_round, replay, session_tokens

ROOT = Path(__file__).resolve().parents[1]
ID_RE = re.compile(r"^call_[A-Za-z0-9]{24}$")
COMPACTABLE = {"read_file", "grep", "exec", "list_dir", "find_files", "web_fetch", "web_search"}


def check_structure(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every tool call is answered exactly once, in a contiguous block right after its assistant."""
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    assert all(m["role"] != "system" for m in messages[1:])
    tool_names = {t["function"]["name"]: t["function"]["parameters"] for t in make_tools()}
    seen_ids: set[str] = set()
    i = 2
    while i < len(messages):
        msg = messages[i]
        assert msg["role"] in {"user", "assistant"}, f"message {i}: unexpected {msg['role']}"
        assert msg["content"] is None or isinstance(msg["content"], str)
        calls = msg.get("tool_calls") or []
        if msg["role"] == "user" or not calls:
            assert isinstance(msg["content"], str) and msg["content"].strip()
            i += 1
            continue
        ids = []
        for call in calls:
            assert set(call) == {"id", "type", "function"}
            assert call["type"] == "function"
            assert ID_RE.match(call["id"]), call["id"]
            assert call["id"] not in seen_ids
            seen_ids.add(call["id"])
            ids.append(call["id"])
            name = call["function"]["name"]
            assert name in tool_names
            args = json.loads(call["function"]["arguments"])
            schema = tool_names[name]
            assert set(schema["required"]) <= set(args) <= set(schema["properties"])
        results = messages[i + 1 : i + 1 + len(calls)]
        assert [r["role"] for r in results] == ["tool"] * len(calls), f"results of message {i} incomplete"
        assert [r["tool_call_id"] for r in results] == ids
        for r, call in zip(results, calls, strict=True):
            assert isinstance(r["content"], str)
            assert r.get("name", call["function"]["name"]) == call["function"]["name"]
        i += 1 + len(calls)


def tool_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """(tool name, parsed arguments, result) of every tool message."""
    calls = {c["id"]: c["function"] for m in messages for c in m.get("tool_calls") or ()}
    return [
        (calls[m["tool_call_id"]]["name"], json.loads(calls[m["tool_call_id"]]["arguments"]), m["content"])
        for m in messages
        if m["role"] == "tool"
    ]


@pytest.fixture(scope="module")
def s400() -> list[dict[str, Any]]:
    return make_session(400, seed=0)


@pytest.fixture(scope="module")
def s2000() -> list[dict[str, Any]]:
    return make_session(2000, seed=0)


def test_deterministic(s400: list[dict[str, Any]]) -> None:
    assert make_session(400, seed=0) == s400
    assert make_session(400, seed=1) != s400
    assert make_session(300, seed=4, users_every=25) == make_session(300, seed=4, users_every=25)


def test_deterministic_across_processes_and_hash_seeds() -> None:
    code = textwrap.dedent(
        """
        import hashlib, json
        from bench.sessions import make_session, replay
        turns = list(replay(30, seed=7))
        blob = json.dumps([make_session(250, seed=3, users_every=20), turns[-1]], sort_keys=True)
        print(hashlib.sha256(blob.encode()).hexdigest())
        """
    )
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 10, 57, 101, 400])
def test_exact_length_and_structure(n: int) -> None:
    session = make_session(n, seed=n)
    assert len(session) == n
    check_structure(session)
    if n >= 4:
        assert session[-1]["role"] == "tool"


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        make_session(1)
    with pytest.raises(ValueError):
        make_session(10, users_every=0)


def test_long_session_structure_and_mix(s2000: list[dict[str, Any]]) -> None:
    assert len(s2000) == 2000
    check_structure(s2000)
    results = tool_results(s2000)
    names = [name for name, _, _ in results]
    counts = {name: names.count(name) for name in set(names)}
    assert max(counts, key=lambda k: counts[k]) == "read_file"
    assert {"read_file", "grep", "exec", "list_dir", "find_files", "edit_file", "write_file"} <= set(counts)
    assert counts.get("web_fetch", 0) + counts.get("web_search", 0) >= 1
    tool_msgs = [m for m in s2000 if m["role"] == "tool"]
    with_name = sum("name" in m for m in tool_msgs)
    assert 0 < with_name < len(tool_msgs) / 2  # mostly OpenAI format without `name`
    assistants = [m for m in s2000 if m["role"] == "assistant" and m.get("tool_calls")]
    assert sum(m["content"] is None for m in assistants) > len(assistants) / 2
    assert any(len(m["tool_calls"]) > 1 for m in assistants)
    assert any(m["role"] == "assistant" and not m.get("tool_calls") for m in s2000)  # plain text notes
    assert sum(m["role"] == "user" for m in s2000) == 1


def test_result_sizes(s2000: list[dict[str, Any]]) -> None:
    by_tool: dict[str, list[int]] = {}
    for name, _, result in tool_results(s2000):
        by_tool.setdefault(name, []).append(len(result))
    reads = by_tool["read_file"]
    assert sum(1_000 <= n <= 12_000 for n in reads) > len(reads) / 2
    assert max(reads) <= 45_000 and any(n > 12_000 for n in reads)
    assert 300 <= statistics.median(by_tool["grep"]) <= 6_000 and max(by_tool["grep"]) <= 6_200
    assert 500 <= statistics.median(by_tool["exec"]) <= 8_000 and max(by_tool["exec"]) <= 10_100
    for name in ("edit_file", "write_file", "todo_write"):
        assert max(by_tool[name]) < 300


def test_system_prompt_and_task(s400: list[dict[str, Any]]) -> None:
    system_tokens = session_tokens(s400[:1])
    assert 1_500 <= system_tokens <= 3_000
    assert len(s400[1]["content"]) > 200


def test_results_are_real_file_content(s400: list[dict[str, Any]]) -> None:
    site = LITELLM_DIR.parent
    checked = {"read_file": 0, "grep": 0}
    for name, args, result in tool_results(s400):
        if name == "read_file":
            lines = (site / args["path"]).read_text(encoding="utf-8").split("\n")
            for row in result.split("\n"):
                number, text = row.split("\t", 1)
                assert lines[int(number) - 1] == text
            if "offset" in args:
                assert int(result.split("\t", 1)[0]) == args["offset"]
            checked[name] += 1
        elif name == "grep" and args.get("output_mode") is None:
            word = re.compile(args["pattern"])
            for row in result.split("\n"):
                if row.startswith("[..."):
                    continue
                path, number, text = row.split(":", 2)
                assert (site / path).read_text(encoding="utf-8").split("\n")[int(number) - 1] == text
                assert word.search(text)
            checked[name] += 1
    assert checked["read_file"] > 10 and checked["grep"] > 3


def test_users_every() -> None:
    session = make_session(400, seed=2, users_every=20)
    assert len(session) == 400
    check_structure(session)
    users = [i for i, m in enumerate(session) if m["role"] == "user"]
    assert len(users) >= 5
    for i in users[1:]:  # a follow-up comes after the assistant reported back
        assert session[i - 1]["role"] == "assistant" and not session[i - 1].get("tool_calls")


def test_next_round_appends_one_round_without_mutation(s400: list[dict[str, Any]]) -> None:
    for session in (s400, make_session(120, seed=5, users_every=10), make_session(2, seed=9)):
        before = copy.deepcopy(session)
        longer = next_round(session, seed=0)
        assert session == before
        assert longer is not session and longer[: len(session)] == session
        assert all(a is b for a, b in zip(longer, session, strict=False))
        added = longer[len(session) :]
        assert added[0]["role"] == "assistant" and added[0]["tool_calls"]
        assert len(added) == 1 + len(added[0]["tool_calls"])
        check_structure(longer)
        assert next_round(session, seed=0) == longer


def test_replay_turns_are_growing_prefixes() -> None:
    turns = list(replay(40, seed=3))
    assert len(turns) == 41
    snapshot = json.dumps(turns)
    assert [m["role"] for m in turns[0]] == ["system", "user"]
    for k, (turn, nxt) in enumerate(itertools.pairwise(turns)):
        assert nxt[: len(turn)] == turn and nxt is not turn
        assert sum(1 for m in turn if m.get("tool_calls")) == k
        assert nxt == next_round(turn, seed=3)
    check_structure(turns[-1])
    assert json.dumps(turns) == snapshot  # nothing was mutated while replaying
    # Rounds are the same whichever entry point produced them (make_session adds text messages).
    rounds = [m for m in make_session(len(turns[-1]) + 40, seed=3) if m["role"] == "tool" or m.get("tool_calls")]
    assert rounds[: len(turns[-1]) - 2] == turns[-1][2:]


def test_tools_schema() -> None:
    tools = make_tools()
    names = [t["function"]["name"] for t in tools]
    assert len(names) == len(set(names)) == 10
    assert COMPACTABLE - {"web_search"} <= set(names)
    for tool in tools:
        assert tool["type"] == "function"
        params = tool["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
        assert len(tool["function"]["description"]) > 40
    assert make_tools() == tools and make_tools() is not tools


def test_token_targets(s400: list[dict[str, Any]], s2000: list[dict[str, Any]]) -> None:
    assert 80_000 <= session_tokens(s400) <= 150_000
    assert 400_000 <= session_tokens(s2000) <= 600_000
    for seed in (1, 2):
        assert 75_000 <= session_tokens(make_session(400, seed=seed)) <= 160_000


def test_session_tokens_counts_all_parts() -> None:
    base = [{"role": "user", "content": "hello world"}]
    assert session_tokens(base) > session_tokens([])
    with_call = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"pattern": "x"}'},
                }
            ],
        }
    ]
    assert session_tokens(with_call) > session_tokens([{"role": "assistant", "content": None}])
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello world"}]}]
    assert session_tokens(parts) == session_tokens(base)


def test_tokenizer_loads_offline_without_side_effects() -> None:
    """A dead proxy makes any download fail fast; the bundled BPE file must be used instead."""
    code = textwrap.dedent(
        """
        import os
        from bench.sessions import session_tokens
        n = session_tokens([{"role": "user", "content": "Counting tokens offline works."}])
        import tiktoken.registry
        assert 5 < n < 30, n
        assert "TIKTOKEN_CACHE_DIR" not in os.environ
        assert not tiktoken.registry.ENCODINGS
        print(n)
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in {"TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"}}
    dead = "http://127.0.0.1:9"
    env.update(PYTHONPATH=str(ROOT), HTTPS_PROXY=dead, HTTP_PROXY=dead, https_proxy=dead, http_proxy=dead)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
