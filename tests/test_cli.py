"""`python -m litellm_governance explain`: what governance would do to a saved request."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from litellm_governance.__main__ import main

from .builders import assistant, calling, result, system, user

BROKEN = [system(), user("task"), user("more"), calling("a"), result("zz", "orphan"), assistant("prefill")]


def test_explains_a_message_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bare message list: the readable summary names each step and why."""
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(BROKEN))
    assert main(["explain", str(path), "--model", "zai/glm-4.6", "--window", "32000"]) == 0
    out = capsys.readouterr().out
    assert "profile strict" in out and "budget 26,880" in out
    assert "orphans_dropped" in out and "tool results that answer no earlier tool call dropped" in out
    assert "backfilled" in out and "merged" in out and "trailing_assistant_dropped" in out


def test_explains_a_request_body_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A request body: model, tools and max_tokens come from it; --json prints the report."""
    path = tmp_path / "request.json"
    body = {"model": "openai/gpt-4o", "messages": BROKEN, "max_tokens": 1000, "tools": []}
    path.write_text(json.dumps(body))
    output = tmp_path / "governed.json"
    assert main(["explain", str(path), "--json", "--window", "50000", "--output", str(output)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"] == "permissive" and report["max_output_tokens"] == 1000
    assert report["budget"] == 50_000 - 1_000 - 1_024
    assert [m["role"] for m in json.loads(output.read_text())] == [
        "system",
        "user",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that is not a request says so and exits 2."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"no": "messages"}))
    assert main(["explain", str(path), "--model", "zai/glm-4.6"]) == 2
    assert "expected a JSON list of messages" in capsys.readouterr().err
    path.write_text(json.dumps(["not a message"]))
    assert main(["explain", str(path), "--model", "zai/glm-4.6"]) == 2
    assert "messages[0] must be a dict" in capsys.readouterr().err


def test_runs_as_a_module(tmp_path: Path) -> None:
    """`python -m litellm_governance explain FILE --model M` works from a shell."""
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(BROKEN))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "litellm_governance",
            "explain",
            str(path),
            "--model",
            "zai/glm-4.6",
            "--window",
            "9000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "tokens" in done.stdout and "profile strict" in done.stdout
