"""The provider rules (docs/providers/) on the pure core: empty turns, mid-conversation system
messages, repeated tool-call ids, reasoning_content, Mistral, Bedrock, and the tools real agents
use — each per profile, in both shrinking modes (literal and cache_stable)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from litellm_governance import AGENT_TOOLS, NANOBOT_TOOLS, GovernanceConfig, govern, govern_anthropic
from litellm_governance._context import BRIDGE_CONTENT, SYNTHETIC_USER_CONTENT
from litellm_governance._ids import nine_char_id

from .builders import assistant, call, calling, long_text, result, system, user
from .validity import problems

MODES = pytest.mark.parametrize("stable", [False, True], ids=["literal", "cache_stable"])
BIG = 1_000_000


def config(stable: bool, window: int = BIG, **options: Any) -> GovernanceConfig:
    return GovernanceConfig(context_window_tokens=window, cache_stable=stable, **options)


class TestEmptyUserMessages:
    @MODES
    def test_an_empty_user_message_is_not_the_task(self, stable: bool) -> None:
        """Snipping keeps the latest user message with real content, not the empty one after it."""
        messages = [system(), user("THE REAL TASK")]
        for i in range(40):
            messages += [calling(f"c{i}", name="edit_file"), result(f"c{i}", long_text(1_200, str(i)))]
            if i == 20:
                messages.append(user(""))
        out = govern(messages, model="zai/glm-4.6", config=config(stable, 6_000, max_output_tokens=500))
        assert out.report.steps["snipped"] > 0
        # The task, with the note for the cut turns merged after it (GLM takes no two user turns in a row).
        assert out.messages[1]["role"] == "user"
        assert out.messages[1]["content"].startswith("THE REAL TASK\n\n[Context note: ")
        assert user("") not in out.messages
        assert problems(out.messages, "strict") == []

    @pytest.mark.parametrize(
        ("model", "kept"),
        [
            ("openai/gpt-4o", True),
            ("zai/glm-4.6", False),
            ("anthropic/claude-opus-4-6", False),
            ("gemini/gemini-2.5-pro", False),
        ],
    )
    def test_dropped_where_empty_text_is_rejected(self, model: str, kept: bool) -> None:
        """OpenAI takes an empty user turn; Anthropic, Gemini and the strict providers do not."""
        messages = [user("task"), assistant("ok"), user("   "), user("go on")]
        out = govern(messages, model=model, config=config(False))
        assert (user("   ") in out.messages) is kept

    def test_only_blank_text_parts_go(self) -> None:
        """A blank text part next to an image goes; the image stays."""
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        out = govern([user([{"type": "text", "text": ""}, image])], model="zai/glm-4.6", config=config(False))
        assert out.messages == [user([image])]

    @pytest.mark.parametrize("model", ["zai/glm-4.6", "deepseek/deepseek-reasoner", "anthropic/claude-opus-4-6"])
    def test_nothing_but_system_messages_left_gets_a_user_turn(self, model: str) -> None:
        """A request whose repairs leave system messages alone (a null assistant turn, orphan
        results) gets an ``(empty message)`` user turn: never the system prompt alone, which GLM
        answers with error 1214 and the other strict providers refuse (all three formats:
        tests/test_guarantees.py)."""
        messages = [
            {"role": "assistant", "content": None},
            {"role": "system", "content": [1, 2]},
            {"role": "tool", "tool_call_id": "gone", "content": None},
            {"role": "tool", "tool_call_id": "lost", "content": "x" * 500},
        ]
        out = govern(messages, model=model, config=config(False))
        assert out.messages == [messages[1], user("(empty message)")]
        assert out.report.steps["synthetic_user_inserted"] == 1
        assert problems(out.messages, out.report.profile) == []


class TestMidConversationSystem:
    MESSAGES = [system("S"), user("task"), assistant("done"), system("Keep answers short."), user("next")]

    @MODES
    def test_strict_turns_it_into_a_labelled_user_note(self, stable: bool) -> None:
        """GLM and vLLM templates reject it: it becomes a user note, merged with the next user turn."""
        out = govern(self.MESSAGES, model="zai/glm-4.6", config=config(stable))
        assert out.messages == [
            system("S"),
            user("task"),
            assistant("done"),
            user("[System note]\nKeep answers short.\n[/System note]\n\nnext"),
        ]
        assert out.report.steps["system_converted"] == 1
        assert problems(out.messages, "strict") == []

    def test_gemini_moves_it_up(self) -> None:
        """Gemini takes every system message as system_instruction: it joins the system prompt."""
        out = govern(self.MESSAGES, model="gemini/gemini-2.5-pro", config=config(False))
        assert [m["role"] for m in out.messages] == ["system", "system", "user", "assistant", "user"]

    def test_openai_keeps_it_in_place(self) -> None:
        """OpenAI accepts system messages anywhere."""
        assert govern(self.MESSAGES, model="openai/gpt-4o", config=config(False)).messages == self.MESSAGES

    @MODES
    def test_never_two_user_turns_once_system_is_set_aside(self, stable: bool) -> None:
        """user, system, user: after conversion the runs are merged, for every non-permissive profile."""
        messages = [user("a"), system("note"), user("b"), assistant("x"), system("n2"), assistant("y"), user("z")]
        for model, profile in (
            ("anthropic/claude-opus-4-6", "anthropic"),
            ("zai/glm-4.6", "strict"),
            ("mistral/mistral-large-latest", "mistral"),
        ):
            out = govern(messages, model=model, config=config(stable))
            assert problems(out.messages, profile) == [], model

    @MODES
    def test_snipping_keeps_the_note_like_the_system_prompt(self, stable: bool) -> None:
        """Once converted, a note is still an instruction: a second pass never cuts it (idempotent)."""
        messages = [system("S"), user("task")]
        for i in range(30):
            messages += [calling(f"c{i}", name="edit_file"), result(f"c{i}", long_text(1_000, str(i)))]
            if i == 3:
                messages.append(system("Remember: tests first."))
        cfg = config(stable, 5_000, max_output_tokens=500)
        out = govern(messages, model="zai/glm-4.6", config=cfg)
        assert any("Remember: tests first." in str(m["content"]) for m in out.messages)
        again = govern(out.messages, model="zai/glm-4.6", config=cfg)
        assert again.messages == out.messages


class TestToolCallIds:
    def test_repeats_inside_one_message_are_renamed_on_every_profile(self) -> None:
        """[c1, c1, c18]: which result answers which? Renamed on permissive too, results alike."""
        messages = [
            user(),
            assistant(None, call("c1"), call("c1"), call("c18")),
            result("c1", "A"),
            result("c1", "B"),
            result("c18", "C"),
        ]
        out = govern(messages, model="openai/gpt-4o", config=config(False))
        assert [c["id"] for c in out.messages[1]["tool_calls"]] == ["c1", "c1_2", "c18"]
        assert [m["tool_call_id"] for m in out.messages[2:]] == ["c1", "c1_2", "c18"]

    def test_permissive_keeps_ids_reused_across_turns(self) -> None:
        """The same id in two turns is fine for OpenAI: left alone."""
        messages = [user(), calling("c1"), result("c1"), user("again"), calling("c1"), result("c1")]
        assert govern(messages, model="openai/gpt-4o", config=config(False)).messages == messages

    def test_gemini_suffix_goes_before_the_thought_signature(self) -> None:
        """LiteLLM keeps Gemini's thought signature after `__thought__`: the suffix goes before it."""
        ident = "call_ab__thought__c2lnbmF0dXJl"
        messages = [user(), assistant(None, call(ident), call(ident)), result(ident, "A"), result(ident, "B")]
        out = govern(messages, model="gemini/gemini-2.5-pro", config=config(False))
        assert [c["id"] for c in out.messages[1]["tool_calls"]] == [ident, "call_ab_2__thought__c2lnbmF0dXJl"]

    @MODES
    def test_mistral_ids_are_nine_letters_and_digits_the_same_every_time(self, stable: bool) -> None:
        """ "Tool call id was … but must be a-z, A-Z, 0-9, with a length of 9": mapped, call and result alike."""
        messages = [
            user(),
            calling("call_Xy12", "toolu_01"),
            result("call_Xy12", "A"),
            result("toolu_01", "B"),
            assistant("done"),
            user("next"),
        ]
        first = govern(messages, model="mistral/mistral-large-latest", config=config(stable))
        again = govern(messages, model="mistral/mistral-large-latest", config=config(stable))
        ids = [c["id"] for c in first.messages[1]["tool_calls"]]
        assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids) and ids == [
            nine_char_id("call_Xy12"),
            nine_char_id("toolu_01"),
        ]
        assert [m["tool_call_id"] for m in first.messages[2:4]] == ids
        assert first.messages == again.messages
        assert problems(first.messages, "mistral") == []


class TestAssistantAfterToolResults:
    @pytest.mark.parametrize(
        "model",
        [
            "mistral/mistral-large-latest",
            "bedrock/meta.llama3-70b-instruct-v1:0",
            "bedrock/anthropic.claude-sonnet-4-5-v1",
        ],
    )
    @MODES
    def test_bridge_between_results_and_the_next_user_turn(self, model: str, stable: bool) -> None:
        """Mistral 3230 "Unexpected role 'user' after role 'tool'"; Bedrock "Conversation blocks and
        tool result blocks cannot be provided in the same turn"."""
        messages = [user(), calling("a"), result("a"), user("and now?")]
        out = govern(messages, model=model, config=config(stable))
        assert out.messages[3] == {"role": "assistant", "content": BRIDGE_CONTENT}
        assert out.report.steps["assistant_bridge_inserted"] == 1

    def test_not_where_no_provider_needs_it(self) -> None:
        """GLM and OpenAI take a user turn right after results: no synthetic turn there."""
        messages = [user(), calling("a"), result("a"), user("and now?")]
        for model in ("zai/glm-4.6", "openai/gpt-4o"):
            assert govern(messages, model=model, config=config(False)).messages == messages

    def test_hosted_vllm_mistral_models_get_mistral_rules(self) -> None:
        """vLLM serves Mistral models with Mistral's validator or template."""
        assert govern([user()], model="hosted_vllm/mistralai/Mistral-7B-Instruct-v0.3").report.profile == "mistral"
        assert govern([user()], model="hosted_vllm/Qwen/Qwen3-32B").report.profile == "strict"


class TestReasoningContent:
    @MODES
    def test_deepseek_every_assistant_message(self, stable: bool) -> None:
        """ "The reasoning_content in the thinking mode must be passed back to the API"."""
        thought = {
            **calling("a"),
            "thinking_blocks": [{"type": "thinking", "thinking": "look first", "signature": "s"}],
        }
        messages = [user(), thought, result("a"), assistant("done"), user("next")]
        out = govern(messages, model="deepseek/deepseek-chat", config=config(stable))
        assert [m.get("reasoning_content") for m in out.messages if m["role"] == "assistant"] == ["look first", " "]
        assert problems(out.messages, "deepseek") == []

    def test_kimi_only_tool_call_turns_and_existing_values_kept(self) -> None:
        """Kimi checks assistant tool-call turns; a value already there is kept as it is."""
        messages = [
            user(),
            {**calling("a"), "reasoning_content": "mine"},
            result("a"),
            calling("b"),
            result("b"),
            assistant("done"),
            user("x"),
        ]
        out = govern(messages, model="moonshot/kimi-k2-thinking", config=config(False))
        assert [m.get("reasoning_content") for m in out.messages if m["role"] == "assistant"] == ["mine", " ", None]

    def test_only_in_chat_requests(self) -> None:
        """The field exists only in chat: an Anthropic-format request to DeepSeek's Anthropic endpoint
        is not given one (its thinking blocks travel as they are)."""
        messages = [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "text", "text": "y"}]},
            {"role": "user", "content": "z"},
        ]
        out = govern_anthropic(messages, model="deepseek/deepseek-chat", config=config(False))
        assert out.messages == messages and not out.report.changed


class TestCompactableTools:
    @MODES
    def test_a_bash_session_is_compacted(self, stable: bool) -> None:
        """The issue's case: 40 `bash` rounds of 11k characters. Claude Code's Bash, OpenCode's bash:
        compacted by default, instead of losing whole turns to snipping."""
        messages = [system(), user("Make it pass.")]
        for i in range(40):
            messages += [calling(f"c{i}", name="bash"), result(f"c{i}", long_text(11_000, str(i)))]
        out = govern(messages, model="openai/gpt-4o", config=config(stable))
        assert out.report.steps["compacted"] >= 20
        assert "snipped" not in out.report.steps

    def test_default_is_todays_agents_and_nanobot_is_a_preset(self) -> None:
        """Claude Code, Codex, OpenHands, Cline, Gemini CLI names are in; Nanobot's eight too."""
        assert {
            "Read",
            "Bash",
            "Grep",
            "Glob",
            "shell",
            "execute_bash",
            "execute_command",
            "search_files",
            "run_shell_command",
        } <= AGENT_TOOLS
        assert NANOBOT_TOOLS <= AGENT_TOOLS and "TodoWrite" not in AGENT_TOOLS and "Task" not in AGENT_TOOLS
        assert GovernanceConfig(compactable_tools="nanobot").compactable_tools == NANOBOT_TOOLS
        assert GovernanceConfig(compactable_tools=["nanobot", "Bash"]).compactable_tools == NANOBOT_TOOLS | {"Bash"}

    def test_large_results_of_other_tools_are_named(self) -> None:
        """A tool not in the set, with large results: named in the report for the operator."""
        messages = [user()]
        for i in range(3):
            messages += [calling(f"c{i}", name="query_database"), result(f"c{i}", long_text(5_000, str(i)))]
        report = govern(messages, model="openai/gpt-4o").report
        assert report.large_uncompacted == {"query_database": 3}
        assert report.to_dict()["large_uncompacted"] == {"query_database": 3}

    def test_synthetic_user_text(self) -> None:
        """The inserted user turn says what it is (and is the same every time: prompt caches survive)."""
        out = govern([assistant("hi"), user("x")], model="zai/glm-4.6", config=config(False))
        assert out.messages[0] == user(SYNTHETIC_USER_CONTENT)
