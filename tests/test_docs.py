"""The docs site: its generated pages are what `docs/generate.py` writes from the code now, the README
stays short and links only to what exists, and what the docs show as code is code."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from litellm_governance._config import AGENT_TOOLS, NANOBOT_TOOLS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def load_generator() -> ModuleType:
    """docs/generate.py as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_generate", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_generator()


class TestGeneratedPages:
    def test_committed_pages_are_current(self, generator: ModuleType) -> None:
        """Every generated page (options, steps, metrics, profiles, one page per provider, the nav) is what
        docs/generate.py writes from the code now: a new option, step or rule needs `make docs`."""
        stale = [str(p.relative_to(ROOT)) for p in generator.stale(generator.render())]
        assert not stale, f"stale generated docs, run `make docs`: {stale}"

    def test_a_stale_page_is_found(self, generator: ModuleType, tmp_path: Path) -> None:
        """The check is not vacuous: a page that differs from the rendering is reported."""
        rendered = generator.render()
        page = tmp_path / "page.md"
        page.write_text("old\n", encoding="utf-8")
        assert generator.stale({page: "new\n"}) == [page]
        assert generator.stale({page: "old\n"}) == []
        assert all(text.endswith("\n") for text in rendered.values())

    def test_every_option_rule_and_step_is_on_a_page(self, generator: ModuleType) -> None:
        """The generated parts name every option, every step and every emulated rule."""
        import dataclasses

        from litellm_governance import GovernanceConfig
        from litellm_governance._steps import STEPS
        from litellm_governance.testing.emulation.rules import RULES

        configuration = (DOCS / "configuration.md").read_text(encoding="utf-8")
        assert all(f"### `{f.name}`" in configuration for f in dataclasses.fields(GovernanceConfig))
        steps = (DOCS / "how-it-works.md").read_text(encoding="utf-8")
        assert all(f"| `{s.name}` |" in steps for s in STEPS)
        for rule in RULES:
            page = (DOCS / "providers" / f"{rule.provider}.md").read_text(encoding="utf-8")
            assert f"## `{rule.id}`" in page and rule.error in page, rule.id

    def test_every_rule_has_evidence(self, generator: ModuleType) -> None:
        """docs/providers/evidence.yaml says, for every rule of the emulator, what LiteLLM and the plugin do."""
        evidence = generator.load_evidence()
        for provider in evidence.values():
            for rule_id, entry in provider["rules"].items():
                assert entry["litellm"].strip() and entry["governance"].strip(), rule_id

    def test_every_rule_cites_what_a_reader_can_check(self) -> None:
        """A rule's source is public (a link a reader can open) or says it was not verified: never a
        private brief, nor a thread "not readable offline"; the GLM and DeepSeek rules once cited so
        each link a public thread now."""
        from litellm_governance.testing.emulation import RULES, RULES_BY_ID

        for rule in RULES:
            cited = f"{rule.source} {rule.note or ''}".lower()
            assert "brief" not in cited and "offline" not in cited, rule.id
        for rule_id in ("bedrock.first_user", "deepseek.reasoner_first_user", "glm.consecutive_assistant"):
            assert "https://github.com/" in RULES_BY_ID[rule_id].source, rule_id

    def test_no_generated_table_row_is_a_wall_of_text(self, generator: ModuleType) -> None:
        """Provider evidence is paragraphs, not table cells: no table row of a provider page over 300 characters."""
        for path, text in generator.render().items():
            if path.parent.name == "providers" and path.name != "index.md":
                long = [line[:60] for line in text.splitlines() if line.startswith("|") and len(line) > 300]
                assert not long, (path.name, long)


def test_compactable_tools_table_matches_the_presets() -> None:
    """The configuration page's table of compactable tools names exactly the tools of the presets."""
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    section = text.split("## Compactable tools", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    named = {name for row in rows for name in re.findall(r"`([^`]+)`", row[1])}
    assert named == set(AGENT_TOOLS | NANOBOT_TOOLS)


def test_docs_python_snippets_compile() -> None:
    """Every Python block of the docs is valid Python (top-level `await` as in an async function)."""
    for path in DOCS.rglob("*.md"):
        for snippet in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL):
            code = snippet
            if "await " in snippet:
                code = "async def _():\n" + "".join(f"    {line}\n" for line in snippet.splitlines())
            compile(code, str(path), "exec")


def test_readme_is_short_and_its_links_exist() -> None:
    """The README stays under 8,000 characters, and each relative link in it names a file that exists."""
    text = README.read_text(encoding="utf-8")
    assert len(text) < 8000
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local and all((ROOT / link).exists() for link in local), local


def test_readme_names_what_the_matrix_tests(generator: ModuleType) -> None:
    """The README's supported versions name every LiteLLM and Python the matrix runs, and the pinned one."""
    text = README.read_text(encoding="utf-8").split("## Supported versions", 1)[1].split("\n## ", 1)[0]
    entries = generator.matrix_entries()
    for _name, python, _mode, pins, _share in entries:
        assert generator.pinned_litellm(pins) in text and python in text, pins
    assert generator.pinned_litellm("constraints.txt") in text


def test_every_docs_page_is_in_the_navigation() -> None:
    """mkdocs.yml lists every page under docs/ (the strict build fails otherwise; this says which)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == set(re.findall(r"([\w/-]+\.md)", nav))


def test_the_runtime_never_imports_the_docs() -> None:
    """Nothing under litellm_governance imports docs/generate.py."""
    for path in (ROOT / "litellm_governance").rglob("*.py"):
        assert not re.search(r"^\s*(from|import)\s+(docs|generate)\b", path.read_text(encoding="utf-8"), re.M), path


def test_the_pages_say_what_the_code_does_on_an_overflow_and_a_scrape() -> None:
    """Calibration tightens on the overflow texts LiteLLM does not map (tests/test_calibration.py checks
    it), so no page says it learns from `usage` only there; the operations page says to scrape /metrics/
    (tests/e2e/test_metrics_e2e.py checks the 307)."""
    calibration = (DOCS / "calibration.md").read_text(encoding="utf-8")
    providers = (DOCS / "providers" / "index.md").read_text(encoding="utf-8")
    assert "from `usage` only" not in calibration and "learns from `usage` there instead" not in providers
    assert '"Prompt exceeds max length"' in calibration and "by deployment 'zai/glm-4.6'" in calibration
    assert "Scrape `/metrics/`" in (DOCS / "operations.md").read_text(encoding="utf-8")
