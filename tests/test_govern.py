"""`govern()` as a user calls it: the seed behaviours, budgets, profiles, the report, bad input."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from litellm_governance import (
    ConfigError,
    GovernanceConfig,
    InvalidRequestError,
    govern,
)
from litellm_governance._backfill import BACKFILL_CONTENT

from .builders import assistant, calling, long_text, result, system, user

GLM = "zai/glm-4.6"
ROOT = Path(__file__).resolve().parent.parent


def window(tokens: int, **options: Any) -> GovernanceConfig:
    return GovernanceConfig(context_window_tokens=tokens, **options)


def agent_loop(rounds: int, size: int = 3_000) -> list[dict[str, Any]]:
    """One task, then `rounds` tool rounds reading `size` characters each."""
    messages = [system("You are a coding agent. " * 40), user("Make the test suite pass.")]
    for i in range(rounds):
        name = ("read_file", "grep", "exec", "write_file")[i % 4]
        messages.append(calling(f"call_{i}", name=name, content="Next step." if i % 5 == 0 else None))
        messages.append(result(f"call_{i}", long_text(size, f"r{i}")))
    return messages


class TestSeedBehaviour:
    def test_broken_glm_conversation_is_repaired(self) -> None:
        """Missing, orphan and duplicate results, a role run and a trailing assistant: all fixed for GLM."""
        messages = [
            system(),
            user("task"),
            user("more detail"),
            calling("a", "b"),
            result("a", "A"),
            result("a", "A again"),
            result("zzz", "orphan"),
            assistant("I will now"),
        ]
        out = govern(messages, model=GLM, config=window(100_000))
        assert out.messages == [
            system(),
            user("task\n\nmore detail"),
            calling("a", "b"),
            result("a", "A"),
            {"role": "tool", "tool_call_id": "b", "name": "read_file", "content": BACKFILL_CONTENT},
        ]
        assert out.report.steps == {
            "backfilled": 1,
            "duplicates_dropped": 1,
            "merged": 1,
            "orphans_dropped": 1,
            "trailing_assistant_dropped": 1,
        }
        assert out.report.changed and not out.report.over_budget

    def test_same_conversation_for_openai_only_gets_pairing_repairs(self) -> None:
        """The permissive profile repairs pairing but keeps runs and the trailing assistant."""
        messages = [system(), user("task"), user("more"), calling("a"), assistant("prefill")]
        out = govern(messages, model="openai/gpt-4o", config=window(100_000))
        assert [m["role"] for m in out.messages] == ["system", "user", "user", "assistant", "tool", "assistant"]
        assert out.report.profile == "permissive"

    def test_long_agent_loop_fits_the_window_and_keeps_the_task(self) -> None:
        """400 messages into a 32k window: within budget, system prompt and task kept, newest rounds whole."""
        messages = agent_loop(200)
        out = govern(messages, model=GLM, config=window(32_000))
        report = out.report
        assert report.tokens_before > 150_000
        assert report.tokens_after <= report.budget
        assert out.messages[0] == messages[0]
        # The task, with GLM's rules merging the note for the cut turns into it (user -> user).
        assert out.messages[1]["content"].startswith(messages[1]["content"] + "\n\n[Context note: ")
        assert out.messages[-1] == messages[-1] and out.messages[-2] == messages[-2]
        assert report.steps["snipped"] > 0 and report.steps["compacted"] > 0 and report.steps["noted"] == 1
        assert sum(1 for m in out.messages if m["role"] == "user") == 1

    def test_no_window_means_no_snip_and_a_note(self) -> None:
        """An unknown model without a configured window is not snipped, and the report says why."""
        messages = agent_loop(20)
        out = govern(messages, model="zai/some-model-nobody-knows", config=GovernanceConfig(compactable_tools=[]))
        assert out.report.budget is None and out.report.steps.get("snipped") is None
        assert any("no context window" in note for note in out.report.notes)

    def test_default_window_applies_when_the_model_is_unknown(self) -> None:
        """default_context_window_tokens is the fallback window."""
        config = GovernanceConfig(default_context_window_tokens=8_000)
        out = govern(agent_loop(50), model="zai/some-model-nobody-knows", config=config)
        assert out.report.window_source == "default" and out.report.tokens_after <= out.report.budget

    def test_max_output_tokens_shrinks_the_budget(self) -> None:
        """budget = window - max output - 1024."""
        out = govern([user()], model=GLM, max_output_tokens=10_000, config=window(50_000))
        assert out.report.budget == 50_000 - 10_000 - 1_024

    def test_tool_schemas_count_against_the_budget(self) -> None:
        """Large tool schemas leave less room for history."""
        tools = [{"type": "function", "function": {"name": f"t{i}", "description": long_text(2_000)}} for i in range(5)]
        bare = govern(agent_loop(60), model=GLM, config=window(32_000))
        with_tools = govern(agent_loop(60), model=GLM, tools=tools, config=window(32_000))
        assert with_tools.report.messages_after < bare.report.messages_after
        assert with_tools.report.tokens_after <= with_tools.report.budget

    def test_over_budget_is_reported(self) -> None:
        """A latest user message bigger than the window cannot fit: kept anyway, and flagged."""
        messages = [system(), user(long_text(40_000))]
        out = govern(messages, model=GLM, config=window(4_000, max_output_tokens=100))
        assert out.messages == messages
        assert out.report.over_budget

    def test_huge_newest_result_is_truncated_rather_than_stubbed(self) -> None:
        """When the newest result alone overflows, it is cut down to fit — its head and tail kept
        with a marker saying what went — never replaced by a stub (the budget wins, the output stays)."""
        text = long_text(60_000)
        messages = [system(), user("task"), calling("a"), result("a", text)]
        out = govern(messages, model=GLM, config=window(8_000, max_output_tokens=1_000))
        assert not out.report.over_budget and out.report.steps["truncated"] == 1
        content = out.messages[-1]["content"]
        assert "omitted from context" not in content
        head, _, rest = content.partition("\n[… ")
        marker, _, tail = rest.partition("]\n")
        assert text.startswith(head) and text.endswith(tail) and len(head) > len(tail) > 500
        assert "omitted here to fit the context window" in marker and "Re-run with a narrower range" in marker


class TestReport:
    def test_to_dict_is_json(self) -> None:
        """The report is plain JSON with the documented keys."""
        report = govern(agent_loop(30), model=GLM, config=window(16_000)).report.to_dict()
        assert json.loads(json.dumps(report)) == report
        for key in ("profile", "budget", "tokens_before", "tokens_after", "steps", "over_budget", "changed"):
            assert key in report

    def test_summary_line(self) -> None:
        """The one-line summary carries counts, token figures, the profile and the budget only."""
        out = govern(agent_loop(40), model=GLM, config=window(16_000, cache_stable=False))
        summary = out.report.summary()
        assert summary.startswith("compacted=") and f"tokens={out.report.tokens_before}->" in summary
        assert summary.endswith(f"ratio=1.15 static; profile=strict; budget={out.report.budget}")

    def test_summary_of_an_unchanged_request(self) -> None:
        """Nothing changed: the summary says so, not "tokens=10->10"."""
        out = govern([user()], model=GLM, config=window(16_000))
        assert (
            out.report.summary()
            == (
                f"unchanged; tokens={out.report.tokens_after}; ratio=1.15 static; profile=strict; budget=10976"  # (4,000 reserved: a quarter of 16,000)
            )
        )
        assert govern([user()], model="openai/gpt-4o").report.summary().endswith("profile=permissive; budget=122880")

    @pytest.mark.litellm
    def test_no_output_from_litellm_lookups(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A model LiteLLM does not know (a proxy alias): nothing reaches the caller's stdout."""
        govern([user()], model="my-custom-model-for-the-stdout-test")
        assert capsys.readouterr().out == ""

    def test_unchanged_request(self) -> None:
        """A valid request within budget comes back equal, and the report says unchanged."""
        messages = [system(), user(), calling("a"), result("a"), assistant("done"), user("thanks")]
        out = govern(messages, model=GLM, config=window(100_000))
        assert out.messages == messages and out.messages is not messages
        assert not out.report.changed and out.report.steps == {}


@pytest.mark.litellm
class TestProfiles:
    @pytest.mark.parametrize(
        ("model", "profile"),
        [
            ("openai/gpt-4o", "permissive"),
            ("groq/llama-3.3-70b-versatile", "permissive"),
            ("anthropic/claude-sonnet-4-5", "anthropic"),
            ("bedrock/anthropic.claude-3-7-sonnet-20250219-v1:0", "bedrock_claude"),
            ("bedrock/invoke/anthropic.claude-3-7-sonnet-20250219-v1:0", "anthropic"),
            ("bedrock/meta.llama3-70b-instruct-v1:0", "bedrock"),
            ("vertex_ai/gemini-2.5-pro", "gemini"),
            ("vertex_ai/claude-opus-4-5", "anthropic"),
            ("gemini/gemini-2.5-flash", "gemini"),
            ("zai/glm-4.6", "strict"),
            ("deepseek/deepseek-reasoner", "deepseek"),
            ("moonshot/kimi-k2-thinking", "moonshot"),
            ("openrouter/anthropic/claude-sonnet-4.5", "anthropic"),
            ("openrouter/openai/gpt-4o", "permissive"),
            ("openrouter/google/gemini-2.5-pro", "gemini"),
            ("mistral/mistral-large-latest", "mistral"),
            ("hosted_vllm/Qwen/Qwen3-32B", "strict"),
            ("somebody-new/model", "strict"),
        ],
    )
    def test_profile_from_provider(self, model: str, profile: str) -> None:
        """The profile follows LiteLLM's provider string; unknown providers get strict."""
        assert govern([user()], model=model, config=window(10_000)).report.profile == profile

    def test_config_profile_wins(self) -> None:
        """An OpenAI-compatible deployment of GLM can be told it is strict."""
        config = window(10_000, profile="strict")
        assert govern([user()], model="openai/glm-4.6", config=config).report.profile == "strict"

    def test_deployment_model_info_names_the_profile_and_window(self) -> None:
        """model_info's governance_profile and max_input_tokens apply to that deployment."""
        out = govern(
            agent_loop(30),
            model="openai/glm-4.6",
            model_info={"governance_profile": "strict", "max_input_tokens": 8_000},
        )
        assert out.report.profile == "strict"
        assert (out.report.context_window, out.report.window_source) == (8_000, "deployment")

    def test_anthropic_ratio_keeps_estimates_conservative(self) -> None:
        """Claude counts more tokens than tiktoken: the same text gets a higher estimate."""
        messages = [user(long_text(4_000))]
        openai = govern(messages, model="openai/gpt-4o", config=window(100_000)).report
        claude = govern(messages, model="anthropic/claude-sonnet-4-5", config=window(100_000)).report
        assert claude.tokens_before > openai.tokens_before * 1.1


@pytest.mark.litellm
class TestWindowsFromLiteLLM:
    def test_known_model(self) -> None:
        """LiteLLM's model map gives GLM-4.6's window."""
        report = govern([user()], model=GLM).report
        assert (report.context_window, report.window_source) == (200_000, "litellm")

    def test_prefixed_name_litellm_does_not_map(self) -> None:
        """openrouter/... is not in get_model_info: the vendor's own entry is found by stripping."""
        report = govern([user()], model="openrouter/anthropic/claude-sonnet-4.5").report
        assert report.context_window is not None and report.window_source == "litellm"

    def test_claude_4_6_has_no_prefill(self) -> None:
        """Claude Opus 4.6 rejects prefill: a trailing assistant message is dropped."""
        out = govern([user(), assistant("{")], model="anthropic/claude-opus-4-6")
        assert out.messages == [user()]

    def test_claude_4_5_keeps_prefill(self) -> None:
        """Claude Sonnet 4.5 supports prefill: the trailing assistant message stays."""
        out = govern([user(), assistant("{")], model="anthropic/claude-sonnet-4-5-20250929")
        assert out.messages == [user(), assistant("{")]


class TestBadInput:
    @pytest.mark.parametrize(
        ("messages", "message"),
        [
            ("hello", "messages must be a list of message dicts, got str"),
            ({"role": "user"}, "messages must be a list of message dicts, got dict"),
            (None, "messages must be a list of message dicts, got NoneType"),
            ([user(), "hi"], "messages[1] must be a dict"),
            ([user(), None], "messages[1] must be a dict"),
        ],
    )
    def test_not_a_message_list(self, messages: Any, message: str) -> None:
        """Input that is not a list of dicts raises an error saying what and where."""
        with pytest.raises(InvalidRequestError, match=message.replace("[", r"\[").replace("]", r"\]")):
            govern(messages, model=GLM)

    def test_errors_are_type_and_value_errors(self) -> None:
        """Callers catching TypeError or ValueError catch the library's errors."""
        with pytest.raises(TypeError):
            govern("x", model=GLM)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            govern([], model=GLM, max_output_tokens=-1)

    def test_bad_model_and_tools(self) -> None:
        """model must be a string; tools a list."""
        with pytest.raises(InvalidRequestError, match="model"):
            govern([user()], model="")
        with pytest.raises(InvalidRequestError, match="tools"):
            govern([user()], model=GLM, tools={"a": 1})  # type: ignore[arg-type]

    def test_config_errors_name_the_field(self) -> None:
        """A bad option says which one and why."""
        with pytest.raises(ConfigError, match="keep_recent must be between 0"):
            GovernanceConfig(keep_recent=-1)
        with pytest.raises(ConfigError, match="unknown governance option"):
            GovernanceConfig.from_mapping({"keep_recnt": 3})
        with pytest.raises(ConfigError, match="profile must be one of"):
            GovernanceConfig(profile="lenient")

    def test_the_start_up_line_shows_effective_values(self) -> None:
        """`describe()` (the proxy's start-up line) says what applies, as the README's table does,
        never ``compact_batch=None``."""
        described = GovernanceConfig().describe()
        assert "compact_batch=1 (20 with cache_stable)" in described and "snip_watermark=derived" in described
        assert "profile=from the provider" in described and "context_window_tokens=the model's" in described
        assert "None" not in described
        chosen = GovernanceConfig(compact_batch=5, snip_watermark=0.5, profile="strict").describe()
        assert "compact_batch=5" in chosen and "snip_watermark=0.5" in chosen and "profile=strict" in chosen

    def test_input_is_never_mutated(self) -> None:
        """Every repair works on copies."""
        messages = [user(), calling("a", "a"), result("a"), user("x"), user("y"), assistant("z")]
        before = copy.deepcopy(messages)
        govern(messages, model="anthropic/claude-opus-4-6", config=window(100_000))
        assert messages == before


OFFLINE_SCRIPT = """
import socket, sys

def refuse(*args, **kwargs):
    raise OSError("network disabled by the test")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

from litellm_governance import GovernanceConfig, govern
from tests.test_govern import agent_loop

out = govern(agent_loop(50), model="openai/gpt-4o", config=GovernanceConfig(context_window_tokens=16_000))
assert out.report.tokens_after <= out.report.budget, out.report
out = govern(agent_loop(50), model="zai/glm-4.6")
assert out.report.window_source == "litellm", out.report
out = govern(agent_loop(5), model="anthropic/claude-opus-4-6")
print("offline ok", out.report.profile)
"""


def test_runs_with_the_network_refused(tmp_path: Any) -> None:
    """A fresh process with every connection refused loads tokenizers and model windows offline."""
    env = {k: v for k, v in os.environ.items() if k not in ("LITELLM_LOCAL_MODEL_COST_MAP", "TIKTOKEN_CACHE_DIR")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "offline ok anthropic" in done.stdout
