"""`python -m litellm_governance explain`: what governance would do to a saved request, message by
message, for any of the three formats; a proxy config resolves model groups; --json is pure JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from litellm_governance.__main__ import main
from litellm_governance._steps import describe

from .builders import assistant, calling, result, system, user

BROKEN = [system(), user("task"), user("more"), calling("a"), result("zz", "orphan"), assistant("prefill")]
ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # the whole stdout is one JSON document


def test_explains_each_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bare message list: totals, then one row per message saying what happened to it."""
    path = write(tmp_path, "messages.json", BROKEN)
    assert main(["explain", path, "--model", "zai/glm-4.6", "--window", "32000"]) == 0
    out = capsys.readouterr().out
    assert "chat request" in out and "profile strict" in out and "budget 26,880" in out
    assert "system prompt kept: yes; task kept: yes" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()[:1].isdigit() or line.strip()[:1] == "+"}
    assert "merged" in rows["1"] and "merged" in rows["2"]
    assert "orphans_dropped" in rows["4"] and "trailing_assistant_dropped" in rows["5"]
    assert "backfilled" in rows["+"]


def test_json_is_pure_and_complete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json: the report, per-message fates before and after, and whether system and task were kept."""
    body = {"model": "openai/gpt-4o", "messages": BROKEN, "max_tokens": 1000, "tools": []}
    output = tmp_path / "governed.json"
    data = run_json(["explain", write(tmp_path, "r.json", body), "--window", "50000", "--output", str(output)], capsys)
    report = data["report"]
    assert data["format"] == "chat" and report["profile"] == "permissive" and report["max_output_tokens"] == 1000
    assert report["budget"] == 50_000 - 1_000 - 1_024
    assert [row["fate"] for row in data["before"]] == ["kept", "kept", "kept", "kept", "orphans_dropped", "kept"]
    assert [row["fate"] for row in data["after"]] == ["kept", "kept", "kept", "kept", "backfilled", "kept"]
    assert data["system_kept"] and data["task_kept"]
    assert [m["role"] for m in json.loads(output.read_text())["messages"]] == [
        "system", "user", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip


def test_anthropic_and_responses_bodies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The format is read from the body and named; rows point into the client's own body."""
    anthropic = {
        "model": "anthropic/claude-opus-4-6",
        "system": "s",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "x"}]},
        ],
    }
    data = run_json(["explain", write(tmp_path, "a.json", anthropic), "--window", "100000"], capsys)
    assert data["format"] == "anthropic"
    assert [(row["where"], row["fate"]) for row in data["before"]] == [
        ("system", "kept"), ("messages[0]", "kept"), ("messages[1]", "kept"), ("messages[2].content[0]", "orphans_dropped"),
    ]  # fmt: skip
    responses = {
        "model": "openai/gpt-4.1",
        "input": [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{}"},
        ],
    }
    data = run_json(["explain", write(tmp_path, "r.json", responses)], capsys)
    assert data["format"] == "responses" and data["after"][-1]["fate"] == "backfilled"


def test_proxy_config_resolves_a_model_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--config: the group's widest deployment, its model_info and the plugin's options, as the proxy would."""
    config = tmp_path / "proxy_config.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: glm\n"
        "    litellm_params: {model: zai/glm-4.6, api_key: os.environ/ZAI_API_KEY}\n"
        "    model_info: {max_input_tokens: 20000}\n"
        "  - model_name: glm\n"
        "    litellm_params: {model: openai/glm-4.6, api_base: 'http://localhost:8000/v1'}\n"
        "    model_info: {max_input_tokens: 60000, governance_profile: strict}\n"
        "callback_settings:\n"
        "  governance: {keep_recent: 2, cache_stable: false}\n"
    )
    data = run_json(["explain", write(tmp_path, "m.json", BROKEN), "--model", "glm", "--config", str(config)], capsys)
    report = data["report"]
    assert report["model"] == "openai/glm-4.6" and report["profile"] == "strict" and report["context_window"] == 60_000
    assert main(["explain", write(tmp_path, "m2.json", BROKEN), "--model", "nope", "--config", str(config)]) == 2
    assert "no model group 'nope'" in capsys.readouterr().err


def test_html_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--html writes one self-contained page with a cell per message, before and after."""
    page = tmp_path / "report.html"
    assert main(["explain", write(tmp_path, "m.json", BROKEN), "--model", "zai/glm-4.6", "--html", str(page)]) == 0
    html = page.read_text()
    assert html.count('class="cell') >= len(BROKEN) + 4 and "http" not in html.replace("http-equiv", "")


def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that is not a request says so and exits 2."""
    assert main(["explain", write(tmp_path, "bad.json", {"no": "messages"}), "--model", "zai/glm-4.6"]) == 2
    assert "expected a JSON request body" in capsys.readouterr().err
    assert main(["explain", write(tmp_path, "bad2.json", ["not a message"]), "--model", "zai/glm-4.6"]) == 2
    assert "messages[0] must be a dict" in capsys.readouterr().err


def test_unknown_model_alias_keeps_stdout_pure(tmp_path: Path) -> None:
    """A proxy alias LiteLLM does not know (`glm`): no "Provider List" banner on stdout, valid JSON."""
    path = write(tmp_path, "m.json", BROKEN)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-m", "litellm_governance", "explain", path, "--model", "glm", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["report"]["profile"] == "strict" and "Provider List" not in done.stdout


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "litellm_governance", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`explain ... | head`: the reader goes away after a few lines; no BrokenPipeError traceback."""
    from bench.sessions import make_session

    path = write(tmp_path, "long.json", make_session(400, seed=1))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with subprocess.Popen(
        [sys.executable, "-m", "litellm_governance", "explain", path, "--model", "zai/glm-4.6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline()
        process.stdout.close()  # what `head -1` does
        err = process.stderr.read().decode()
        assert process.wait(timeout=120) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_html_says_where_it_wrote_and_leaves_out_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--html FILE: the summary and a line naming the file, not the 400-row table."""
    page, governed = tmp_path / "report.html", tmp_path / "governed.json"
    path = write(tmp_path, "m.json", BROKEN)
    assert main(["explain", path, "--model", "zai/glm-4.6", "--html", str(page), "--output", str(governed)]) == 0
    out = capsys.readouterr().out
    assert f"wrote the HTML report to {page}" in out and f"wrote the governed request to {governed}" in out
    assert "orphans_dropped" in out  # the steps are listed
    assert "messages[4]" not in out and "detail" not in out  # no table rows
    assert page.exists() and governed.exists()


def test_the_table_labels_its_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every column has a heading, the legend says what `to #` is, and each row has its detail."""
    assert main(["explain", write(tmp_path, "m.json", BROKEN), "--model", "zai/glm-4.6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    heading = next(line for line in lines if line.split()[:1] == ["#"])
    assert heading.split() == ["#", "where", "role", "tool", "tokens", "fate", "to", "#", "detail"]
    legend = "\n".join(lines)
    assert "#: position in the request" in legend and "to #: its position in the governed request" in legend
    orphan = next(line for line in lines if "orphans_dropped" in line and "messages[4]" in line)
    assert orphan.endswith(describe("orphans_dropped"))
    assert all(line == line.rstrip() for line in lines)


def test_a_proxy_group_without_config_gets_a_hint(tmp_path: Path) -> None:
    """`--model glm` (a proxy's model group) without --config: say how to resolve it, not only that
    no window is known."""
    done = cli("explain", write(tmp_path, "m.json", BROKEN), "--model", "glm")
    assert done.returncode == 0, done.stderr
    assert "no context window known" in done.stdout
    assert "hint:" in done.stdout and "--config proxy_config.yaml" in done.stdout
    known = cli("explain", write(tmp_path, "m2.json", BROKEN), "--model", "zai/glm-4.6")
    assert "hint:" not in known.stdout


def test_input_that_is_not_json_says_what_was_expected(tmp_path: Path) -> None:
    path = tmp_path / "request.txt"
    path.write_text("model: glm\nmessages: []\n")
    done = cli("explain", str(path), "--model", "zai/glm-4.6")
    assert done.returncode == 2
    assert f"{path} is not JSON" in done.stderr and "line 1, column 1" in done.stderr
    assert "request body" in done.stderr and "list of messages" in done.stderr


def test_help_has_no_markup() -> None:
    """--help is plain text: no reST double backticks; the subcommand's help shows examples."""
    for args in (["--help"], ["explain", "--help"]):
        done = cli(*args)
        assert done.returncode == 0 and "``" not in done.stdout, done.stdout
    assert "litellm-governance explain request.json" in cli("explain", "--help").stdout


def test_a_recording_of_the_testing_upstream_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file ``python -m litellm_governance.testing --record-dir`` wrote (the request as a client sent
    it, in its ``body``) is explained as the body itself."""
    from litellm_governance.testing import RecordingUpstream

    body = {"model": "glm-4.6", "messages": BROKEN}
    with RecordingUpstream(record_dir=tmp_path / "sent") as upstream:
        request = urllib.request.Request(
            upstream.base_url + "/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"}
        )
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as answer:
            assert answer.status == 200
    recording = str(tmp_path / "sent" / "000001.json")
    assert json.loads(Path(recording).read_text())["body"] == body
    data = run_json(["explain", recording, "--model", "zai/glm-4.6"], capsys)
    assert data["format"] == "chat" and len(data["before"]) == len(BROKEN)
    assert data == run_json(["explain", write(tmp_path, "body.json", body), "--model", "zai/glm-4.6"], capsys)
