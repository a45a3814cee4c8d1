"""One vocabulary (`_steps`): every output names steps and stages as the report counts them, and the
token figures per stage add up to the report's totals."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from bench.agent_shapes import claude_code_body, codex_body
from bench.sessions import make_session
from litellm_governance import GovernanceConfig, govern, govern_request
from litellm_governance._explain import explain
from litellm_governance._html import FATE_COLOURS
from litellm_governance._steps import FATES, KEPT, STAGES, STEPS, describe, step

from .builders import assistant, calling, result, system, user

PACKAGE = Path(__file__).resolve().parent.parent / "litellm_governance"
STEP_NAMES = {s.name for s in STEPS}
STAGE_NAMES = [s.name for s in STAGES]
BROKEN = [system(), user("task"), user("more"), calling("a"), result("zz", "orphan"), assistant("prefill")]


def counted_names() -> set[str]:
    """Every string the core counts under (``counts["x"]``, ``parse_counts["x"]``), read from the source."""
    names: set[str] = set()
    for path in PACKAGE.glob("_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr in ("counts", "parse_counts")
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                names.add(node.slice.value)
    return names


def sessions() -> list[tuple[str, dict[str, Any], str, int]]:
    """(name, request body, model, window): damaged and long requests of every format."""
    chat = make_session(300, seed=3)
    chat.insert(3, {"role": "system", "content": "Keep answers short."})
    chat.append(result("gone", "orphan"))
    chat.append(assistant("prefill"))
    return [
        ("chat-glm", {"messages": chat}, "zai/glm-4.6", 24_000),
        ("chat-broken", {"messages": BROKEN}, "zai/glm-4.6", 32_000),
        ("claude-code-glm", claude_code_body(200, seed=4), "zai/glm-4.6", 16_000),
        ("claude-code-claude", claude_code_body(200, seed=5), "anthropic/claude-sonnet-4-5", 64_000),
        ("codex", codex_body(200, seed=6), "openai/gpt-4.1", 32_000),
        ("codex-mistral", codex_body(120, seed=7), "mistral/mistral-large-latest", 16_000),
    ]


SESSIONS = sessions()


class TestOneTable:
    def test_every_count_is_a_step(self) -> None:
        """Whatever the pipeline counts is named in the one table (so every output can name it)."""
        assert counted_names() <= STEP_NAMES, counted_names() - STEP_NAMES

    def test_every_step_and_stage_is_explained(self) -> None:
        """explain's list of steps and the HTML's legend describe each name from the table."""
        assert all(describe(name) for name in STEP_NAMES | set(STAGE_NAMES))
        assert describe("no-such-step") == "" and step("no-such-step") is None

    def test_every_fate_has_a_colour(self) -> None:
        """A message's fate is `kept` or a step's name, and the HTML page colours each one."""
        assert set(FATE_COLOURS) == set(FATES) and FATES[0] == KEPT
        assert set(FATES) - {KEPT} <= STEP_NAMES


class TestEveryOutputUsesIt:
    def test_the_header_names_steps_as_the_report_does(self) -> None:
        """The header said `orphans=1` where explain said `orphans_dropped`: now both say the latter."""
        report = govern(BROKEN, model="zai/glm-4.6").report
        summary = report.summary()
        assert "orphans_dropped=1" in summary and "trailing_assistant_dropped=1" in summary
        named = dict(part.split("=", 1) for part in summary.split("; ") if "=" in part)
        assert set(named) - {"tokens", "removed", "ratio", "profile", "budget"} == {
            k
            for k in report.steps
            if step(k) is not None and step(k).summary  # type: ignore[union-attr]
        }

    @pytest.mark.parametrize(("name", "body", "model", "window"), SESSIONS, ids=[s[0] for s in SESSIONS])
    def test_explain_fates_are_steps(self, name: str, body: dict[str, Any], model: str, window: int) -> None:
        """Each message's fate in explain (table, --json, --html) is `kept` or the name of a step the
        report counted."""
        data = explain(body, model=model, config=GovernanceConfig(context_window_tokens=window)).as_dict()
        fates = {row["fate"] for row in data["before"] + data["after"]}
        assert fates <= set(FATES), fates - set(FATES)
        counted = set(data["report"]["steps"])
        assert fates - {KEPT} <= counted | {"results_moved", "blank_text_dropped"}, (fates, counted)

    def test_the_cli_lists_steps_by_their_names(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from litellm_governance.__main__ import main

        path = tmp_path / "m.json"
        path.write_text(__import__("json").dumps(BROKEN))
        assert main(["explain", str(path), "--model", "zai/glm-4.6"]) == 0
        out = capsys.readouterr().out
        listed = re.findall(r"^  ([a-z_]+) +\d+  ", out, flags=re.MULTILINE)
        assert listed and set(listed) <= STEP_NAMES and "orphans_dropped" in listed


class TestTokensPerStage:
    @pytest.mark.parametrize(("name", "body", "model", "window"), SESSIONS, ids=[s[0] for s in SESSIONS])
    @pytest.mark.parametrize("cache_stable", [False, True])
    def test_they_add_up_to_the_totals(
        self, name: str, body: dict[str, Any], model: str, window: int, cache_stable: bool
    ) -> None:
        """What each stage removed adds up to tokens_before - tokens_after exactly, in pipeline order."""
        config = GovernanceConfig(context_window_tokens=window, cache_stable=cache_stable)
        report = govern_request({**body, "model": model}, config=config).report
        removed = report.tokens_removed
        assert list(removed) == [s for s in STAGE_NAMES if s in removed]
        assert sum(removed.values()) == report.tokens_before - report.tokens_after
        assert all(removed.values())
        if report.steps.get("snipped"):
            assert removed["snipping"] > 0
        assert report.to_dict()["tokens_removed"] == removed

    def test_compaction_is_what_the_stubs_saved(self) -> None:
        """Compaction without a cut: all the tokens removed are compaction's."""
        messages = make_session(120, seed=2)
        report = govern(messages, model="zai/glm-4.6", config=GovernanceConfig(keep_recent=2)).report
        assert report.steps["compacted"] > 0 and "snipped" not in report.steps
        assert set(report.tokens_removed) <= {"compaction", "roles", "repair"}
        assert report.tokens_removed["compaction"] > 0.9 * (report.tokens_before - report.tokens_after)

    def test_an_unchanged_request_removes_nothing(self) -> None:
        report = govern([user()], model="zai/glm-4.6").report
        assert report.tokens_removed == {} and "removed=" not in report.summary()

    def test_the_header_shows_them(self) -> None:
        report = govern(make_session(300, seed=3), model="zai/glm-4.6").report
        figures = re.search(r"removed=([a-z_:0-9,-]+)", report.summary())
        assert figures is not None
        parsed = {k: int(v) for k, v in (item.split(":") for item in figures.group(1).split(","))}
        assert parsed == report.tokens_removed

    def test_two_passes_add_up(self) -> None:
        """The proxy's pre-call and deployment reports combined: the stages' figures are summed."""
        first = govern(make_session(300, seed=3), model="zai/glm-4.6").report
        second = govern(make_session(120, seed=4), model="zai/glm-4.6").report
        both = first.then(second).tokens_removed
        for stage in STAGE_NAMES:
            assert both.get(stage, 0) == first.tokens_removed.get(stage, 0) + second.tokens_removed.get(stage, 0)
