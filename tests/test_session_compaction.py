"""The gateway's answer to Codex's remote compaction, pure side (`_session_compaction`): the token
round-trips, another server's compaction item is never decoded, the summary request is an ordinary
request that governance fits with its instruction last, and the note stands for the whole session."""

from __future__ import annotations

import base64
import copy
import json
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceConfig, govern_request
from litellm_governance._session_compaction import (
    INSTRUCTION,
    SUMMARY_OPENING,
    TOKEN_PREFIX,
    compaction_item,
    decode_summary,
    encode_summary,
    is_trigger_request,
    read_back,
    session_note,
    summary_of_answer,
    summary_request,
)

from .builders import examples, long_text

TRIGGER = {"type": "compaction_trigger"}
#: The events of a streamed answer Codex 0.169.0 accepts, in order (../shared/CLIENT_COMPACTION.md).
CODEX_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.output_item.done",
    "response.completed",
]
#: An item as OpenAI's Responses API issues it: its content is Fernet-like, opaque to everyone else.
OPENAI_ITEM = {"type": "compaction", "id": "cmp_0123", "encrypted_content": "gAAAAABo" + "x" * 80}


def message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def codex_session(rounds: int, chars: int = 10_000) -> list[dict[str, Any]]:
    items = [message("developer", "You are Codex."), message("user", "<environment_context/>")]
    items.append(message("user", "Fix the failing parser test."))
    for r in range(rounds):
        call = {"type": "function_call", "call_id": f"call_{r}", "name": "exec_command", "arguments": ""}
        call["arguments"] = json.dumps({"cmd": f"pytest tests/test_parser.py -k case{r}"})
        output = {"type": "function_call_output", "call_id": f"call_{r}", "output": long_text(chars, str(r))}
        items += [call, output]
    return items


def codex_compaction(rounds: int = 12) -> dict[str, Any]:
    tool = {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {}}}
    return {
        "model": "gpt-5.5",
        "input": [*codex_session(rounds), TRIGGER],
        "tools": [tool],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "stream": True,
        "store": False,
    }


class TestToken:
    @given(st.text(max_size=3_000))
    def test_a_summary_round_trips(self, summary: str) -> None:
        """Whatever the summary (any Unicode, empty too), its token decodes to it exactly."""
        assert decode_summary(encode_summary(summary)) == summary

    @given(st.text(max_size=300).filter(lambda text: not text.startswith(TOKEN_PREFIX)))
    def test_content_without_the_prefix_is_never_decoded(self, content: str) -> None:
        """Another server's content — whatever it holds — is not ours: nothing is read from it."""
        assert decode_summary(content) is None

    def test_another_servers_content_that_decodes_is_still_not_ours(self) -> None:
        """Base64 of compressed text, as ours is, but without the prefix: left alone."""
        foreign = base64.urlsafe_b64encode(zlib.compress(b"someone else's summary")).decode()
        assert decode_summary(foreign) is None
        assert decode_summary(encode_summary("ours")[len(TOKEN_PREFIX) :]) is None

    @pytest.mark.parametrize(
        "content",
        [
            TOKEN_PREFIX,
            TOKEN_PREFIX + "!!!not base64!!!",
            TOKEN_PREFIX + base64.urlsafe_b64encode(b"not zlib").decode(),
            encode_summary("cut short")[:-6],
            TOKEN_PREFIX + base64.urlsafe_b64encode(zlib.compress(b"\xff\xfe not utf-8")).decode(),
            TOKEN_PREFIX + base64.urlsafe_b64encode(zlib.compress(b"a" * 5_000_000)).decode(),  # a bomb
            None,
            42,
        ],
    )
    def test_a_broken_or_crafted_token_decodes_to_nothing(self, content: Any) -> None:
        """Corrupt, truncated, not UTF-8, or inflating past any summary's size: None, never an error."""
        assert decode_summary(content) is None

    def test_the_item_is_deterministic(self) -> None:
        """The same summary gives the same item (id included): no clock, no randomness."""
        item = compaction_item("the summary")
        assert item == compaction_item("the summary") != compaction_item("another summary")
        assert item["type"] == "compaction" and item["id"].startswith("cmp_")
        assert item["encrypted_content"].startswith(TOKEN_PREFIX)


class TestReadBack:
    def test_our_item_becomes_a_user_message_holding_the_summary(self) -> None:
        """What Codex sends after a compaction: the item becomes one user message, in its place."""
        item = compaction_item("ROUNDS-DONE=7. Next: fix the date parser.")
        items = [message("developer", "You are Codex."), message("user", "Fix it."), item, message("user", "Go on.")]
        before = copy.deepcopy(items)
        out = read_back(items)
        assert items == before  # the input is not touched
        assert out is not None and out[:2] == items[:2] and out[3] is items[3]
        assert out[2] == message("user", f"{SUMMARY_OPENING}\n\nROUNDS-DONE=7. Next: fix the date parser.")
        assert TOKEN_PREFIX not in json.dumps(out)

    @given(st.text(max_size=200).filter(lambda text: not text.startswith(TOKEN_PREFIX)))
    @settings(max_examples=examples(50))
    def test_another_servers_item_passes_as_it_came(self, content: str) -> None:
        """OpenAI's items (any content without our prefix) are the same objects after the read-back."""
        foreign = {**OPENAI_ITEM, "encrypted_content": content}
        items = [message("user", "Fix it."), foreign, message("user", "Go on.")]
        assert read_back(items) is None
        ours = compaction_item("ours")
        mixed = read_back([foreign, ours])
        assert mixed is not None and mixed[0] is foreign and mixed[1]["role"] == "user"

    def test_a_history_without_ours_is_left_alone(self) -> None:
        assert read_back(codex_session(3)) is None
        assert read_back("a string input") is None


class TestSummaryRequest:
    def test_the_trigger_becomes_an_ordinary_summary_request(self) -> None:
        """The history as sent, then the instruction as a user message; no tools, no tool choice, no
        reasoning; the rest (model, stream, store) as sent; the client's request untouched."""
        body = codex_compaction(4)
        before = copy.deepcopy(body)
        assert is_trigger_request(body) and not is_trigger_request({**body, "input": body["input"][:-1]})
        out = summary_request(body)
        assert body == before
        assert out["input"][:-1] == body["input"][:-1] and out["input"][-1] == message("user", INSTRUCTION)
        assert out["tools"] == [] and TRIGGER not in out["input"]
        assert not {"tool_choice", "parallel_tool_calls", "reasoning", "include"} & set(out)
        assert (out["model"], out["stream"], out["store"]) == ("gpt-5.5", True, False)

    def test_with_the_note_nothing_large_goes_on(self) -> None:
        """``note`` mode: the request carries the note alone (the answer needs no model)."""
        out = summary_request(codex_compaction(4), note="[Context note: ...]")
        assert out["input"] == [message("user", "[Context note: ...]"), message("user", INSTRUCTION)]

    @pytest.mark.parametrize("window", [128_000, 32_000, 16_000, 8_000])
    def test_the_summary_request_is_governed_to_fit_with_its_instruction_last(self, window: int) -> None:
        """Twelve rounds of 10k-character outputs (~40k tokens) to a GLM window of `window`: the
        governed summary request fits the budget, keeps the task, and ends with the instruction whole."""
        out = govern_request(
            summary_request(codex_compaction(12)),
            model="zai/glm-4.6",
            config=GovernanceConfig(context_window_tokens=window),
        )
        report = out.report
        assert not report.over_budget and report.tokens_after <= report.budget  # type: ignore[operator]
        assert out.request["input"][-1] == message("user", INSTRUCTION)
        assert "Fix the failing parser test." in json.dumps(out.request["input"])


class TestNote:
    def test_the_note_lists_the_whole_session(self) -> None:
        """Every call, its main argument and outcome, the user's task: deterministic, and sized."""
        first = session_note(codex_session(6), "zai/glm-4.6")
        assert first == session_note(codex_session(6), "zai/glm-4.6")
        assert first.note.startswith("[Context note:") and "Fix the failing parser test." in first.note
        assert all(f"case{r}" in first.note for r in range(6))
        assert first.tokens > 6 * 1_500  # six 10k-character outputs

    def test_a_compacted_session_goes_on_from_its_summary(self) -> None:
        """After a compaction the note opens with the earlier summary and lists only what came after."""
        earlier = read_back([compaction_item("EARLIER: rounds 1-6 done.")])
        assert earlier is not None
        later = codex_session(2)[3:]
        note = session_note([*codex_session(0), *earlier, *later], "zai/glm-4.6").note
        assert note.startswith("EARLIER: rounds 1-6 done.") and "case1" in note

    def test_the_note_is_bounded(self) -> None:
        """200 rounds: the oldest lines fold into counts within the note's room."""
        note = session_note(codex_session(200, chars=600), "zai/glm-4.6", tokens=500).note
        assert len(note) < 4_000 and "exec_command" in note


@pytest.mark.parametrize(
    ("answer", "summary"),
    [
        ("<analysis>thinking</analysis>\n<summary>\n The summary. \n</summary>", "The summary."),
        ("  Plain text summary.  ", "Plain text summary."),
        ("   ", None),
        (None, None),
    ],
)
def test_the_summary_in_a_models_answer(answer: Any, summary: str | None) -> None:
    """Its ``<summary>`` block if it wrote one, else its text; None when it wrote nothing."""
    assert summary_of_answer(answer) == summary


@pytest.mark.parametrize(("model", "answered"), [("zai/glm-4.6", True), ("openai/gpt-5.5", False)])
def test_explain_shows_what_the_gateway_does_with_a_compaction_request(
    model: str, answered: bool, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``explain`` on a saved Codex compaction request: for GLM, the summary request the gateway sends
    (the instruction last, no tools) and a line saying the gateway answers it; OpenAI compacts itself."""
    from litellm_governance.__main__ import main

    path = tmp_path / "compaction.json"
    path.write_text(json.dumps(codex_compaction(4)))
    output = tmp_path / "governed.json"
    assert main(["explain", str(path), "--model", model, "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    governed = json.loads(output.read_text())
    assert ("compacted_session" in printed) == answered
    assert (governed["input"][-1] == message("user", INSTRUCTION)) == answered
    assert (governed["input"][-1] == TRIGGER) != answered
