"""The README's promises: every name it imports is importable from where it says, `import *` works,
and its Python snippets run as written (against a local upstream standing in for the providers)."""

from __future__ import annotations

import asyncio
import importlib
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from litellm_governance.testing import RecordingUpstream

README = Path(__file__).resolve().parent.parent / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_star_import_exports_exactly_what_all_names() -> None:
    """`from litellm_governance import *` works: every name in __all__ exists."""
    namespace: dict[str, Any] = {}
    exec("from litellm_governance import *", namespace)
    module = importlib.import_module("litellm_governance")
    assert set(module.__all__) <= set(namespace)


def test_every_name_the_readme_imports_exists() -> None:
    """Each `from litellm_governance... import a, b` in the README imports."""
    statements = [
        line for snippet in SNIPPETS for line in snippet.splitlines() if line.startswith("from litellm_governance")
    ]
    assert statements, "the README shows no imports"
    for statement in statements:
        exec(statement, {})


PRELUDE = {
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find where the retry limit is set."},
        {"role": "user", "content": "Only look under src/."},
    ],
    "claude_messages": [
        {"role": "user", "content": "Fix the test."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
    ],
    "codex_input": [
        {"role": "user", "content": "Fix the test."},
        {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{}"},
    ],
}


@pytest.fixture
def providers_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingUpstream]:
    """Every provider the snippets name points at one local upstream (LiteLLM's own env vars)."""
    litellm = pytest.importorskip("litellm")
    with RecordingUpstream() as upstream:
        for name, value in {
            "ZAI_API_BASE": upstream.base_url,
            "ZAI_API_KEY": "sk-local",
            "ANTHROPIC_API_BASE": upstream.root_url,
            "ANTHROPIC_API_KEY": "sk-local",
            "OPENAI_API_BASE": upstream.base_url,
            "OPENAI_API_KEY": "sk-local",
        }.items():
            monkeypatch.setenv(name, value)
        saved = list(litellm.callbacks)
        try:
            yield upstream
        finally:
            litellm.callbacks = saved


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
@pytest.mark.litellm
def test_snippet_runs(snippet: str, providers_here: RecordingUpstream) -> None:
    """Each Python snippet runs as written (snippets with `await` inside an event loop)."""
    namespace: dict[str, Any] = {
        **{k: [dict(m) for m in v] for k, v in PRELUDE.items()},
        "request_body": {"model": "zai/glm-4.6", "messages": list(PRELUDE["messages"])},
    }
    if "await " in snippet:
        code = "async def __snippet__():\n" + textwrap.indent(snippet, "    ") + "\n    return locals()\n"
        exec(code, namespace)
        namespace.update(asyncio.run(namespace["__snippet__"]()))
    else:
        exec(snippet, namespace)
    requests = [r for r in providers_here.requests if r.method == "POST"]
    if "acompletion" in snippet:  # the hook governed what reached the "provider"
        chat = [r.body for r in requests if r.path.endswith("/chat/completions")]
        assert chat and [m["role"] for m in chat[0]["messages"]] == ["system", "user"]
        assert len(requests) == 3  # chat, /v1/messages translated to chat, /v1/responses
    if "govern(" in snippet:
        assert namespace["result"].report.changed and namespace["governed"].report.format == "chat"


def test_the_first_lines_are_the_two_commands() -> None:
    """A newcomer reads `make demo` and `make test` first, and nothing else in that block."""
    text = README.read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert text.startswith("# litellm-governance\n\n```bash\nmake demo ")
    assert [line.split()[:2] for line in block.splitlines()] == [["make", "demo"], ["make", "test"]]


def test_it_says_what_is_needed_and_how_long_it_takes() -> None:
    """The Python the package requires and make, every program a test looks for (its tests skip
    without it), the command the package installs, and measured durations of the two commands."""
    text = README.read_text(encoding="utf-8")
    head = text.split("\n## ", 1)[0]  # said before the first section
    pyproject = (README.parent / "pyproject.toml").read_text(encoding="utf-8")
    python = re.search(r'^requires-python = ">=([\d.]+)"', pyproject, flags=re.MULTILINE)
    assert python is not None and f"Python ≥ {python.group(1)}" in head and "`make`" in head
    tests = README.parent / "tests"
    looked_for = set()
    for path in tests.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        looked_for |= set(re.findall(r'shutil\.which\("([\w-]+)"\)', source))
        if "shutil.which(name)" in source:
            looked_for |= set(re.findall(r'for name in \(("[\w-]+")', source))
    looked_for = {name.strip('"') for name in looked_for}
    assert {"redis-server", "chromium"} <= looked_for
    for program in looked_for:
        assert f"`{program}`" in head, program
    assert "skip" in head and "Node.js" in head
    for command in ("make demo", "make test"):
        assert re.search(rf"`{command}` (about )?\d+(\.\d+)? min", head), command
    script = re.search(r'^([\w-]+) = "litellm_governance.__main__:main"', pyproject, flags=re.MULTILINE)
    assert script is not None and f"{script.group(1)} explain" in text


def test_make_test_is_offline_as_the_readme_says() -> None:
    """The README calls `make test`'s suite offline: its target installs nothing beyond .venv (setup,
    via lint); the real agent CLIs come from the npm registry only with `make clients`."""
    makefile = (README.parent / "Makefile").read_text(encoding="utf-8")
    prerequisites = re.search(r"^test: (.*)$", makefile, flags=re.MULTILINE)
    assert prerequisites is not None and prerequisites.group(1).split() == ["lint"]
    assert re.search(r"^lint: setup$", makefile, flags=re.MULTILINE)
    head = README.read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "(offline)" in head and "`make clients`" in head


def test_getting_started_gives_the_same_commands_and_figures() -> None:
    """One set of figures: docs/getting-started.md opens with the README's two commands and the README's
    paragraph on what they need, what `make test` runs and how long both take, word for word."""
    getting_started = (README.parent / "docs" / "getting-started.md").read_text(encoding="utf-8")

    def opening(text: str) -> tuple[str, str]:
        block = text.split("```bash\n", 1)[1].split("```", 1)[0]
        paragraph = text[text.index("What they need:") :].split("\n\n", 1)[0]
        return block, paragraph

    assert opening(getting_started) == opening(README.read_text(encoding="utf-8"))
