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
