"""The real agent CLIs, headless, for end-to-end tests: Claude Code (``claude -p``) and Codex CLI
(``codex exec``), pinned in ``tests/clients/package.json`` and installed by ``make clients``
(``npm ci``). Each run gets a throwaway home, talks only to the given 127.0.0.1 base URL, and has
every update check, telemetry and plugin sync turned off, so it needs no network at all.

What each setting is for (measured with both CLIs; see the issue note of #17):

* Claude Code: ``ANTHROPIC_BASE_URL`` without ``/v1`` (it posts ``/v1/messages?beta=true``), the
  key as ``Authorization: Bearer`` (``ANTHROPIC_AUTH_TOKEN``); ``--allowedTools Bash`` lets every
  shell command run (as root ``--dangerously-skip-permissions`` is refused); the four ``DISABLE_*``
  variables stop its calls home; ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` sets ``max_tokens`` (unset, as
  users run it: 32,000, which the plugin fits to the window); ``DISABLE_COMPACT=1`` makes a context-length
  rejection end the run instead of being summarised away.
* Codex: ``$CODEX_HOME/config.toml`` names a ``wire_api = "responses"`` provider at the base URL
  (``/v1`` appended: it posts ``/v1/responses``), no approvals and no sandbox, no retries (a
  failure fails fast), and ``[features]`` plugins off (else it reaches for github.com and
  chatgpt.com on every start); stdin is ``/dev/null`` (``codex exec`` appends piped stdin to the
  prompt). Or, as `CodexProvider` says, the same provider named "OpenAI", or the built-in provider
  at ``openai_base_url`` (both make Codex compact remotely).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

CLIENTS_DIR = Path(__file__).resolve().parents[1] / "clients"
BIN = CLIENTS_DIR / "node_modules" / ".bin"
#: Set (by CI) to make the real-client tests fail, rather than skip, when the clients are missing.
REQUIRE_ENV = "LITELLM_GOVERNANCE_REQUIRE_CLIENTS"
TASK = "Run the scripted shell commands the model gives you, one round at a time, until it says DONE."

Client = Literal["claude", "codex"]


def pinned_versions() -> dict[str, str]:
    """The versions ``tests/clients/package.json`` pins, by npm package."""
    manifest = json.loads((CLIENTS_DIR / "package.json").read_text())
    return dict(manifest["dependencies"])


def missing() -> str | None:
    """Why the real clients cannot run here (None: they can)."""
    if shutil.which("node") is None:
        return "Node.js is not installed (the Codex launcher needs it): install nodejs and npm, then `make clients`"
    for name in ("claude", "codex"):
        if not (BIN / name).exists():
            return f"{BIN / name} is missing: run `make clients` (npm ci in tests/clients)"
    return None


@dataclass
class AgentRun:
    """One finished run of an agent CLI."""

    client: Client
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    seconds: float
    home: Path
    command: list[str] = field(default_factory=list)

    def result(self) -> dict[str, Any] | None:
        """Claude Code's ``--output-format json`` result object (None for Codex or unparsable output)."""
        for line in reversed(self.stdout.strip().splitlines()):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and value.get("type") == "result":
                return value
        return None

    def events(self) -> list[dict[str, Any]]:
        """Codex's ``--json`` events (thread.started, item.completed, turn.completed, …)."""
        found = []
        for line in self.stdout.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
        return found

    def describe(self) -> str:
        """Exit code and the ends of the output, for assertion messages."""
        return f"{self.client} exit={self.returncode} in {self.seconds:.1f}s\nstdout: {self.stdout[-1500:]}\nstderr: {self.stderr[-1500:]}"


_BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "TERM": "dumb", "NO_PROXY": "127.0.0.1,localhost"}


def run_claude(
    base_url: str,
    key: str,
    model: str,
    workdir: Path,
    *,
    task: str = TASK,
    max_output_tokens: int | None = None,
    env: Mapping[str, str] | None = None,
    max_turns: int = 40,
    resume: bool = False,
    timeout: float = 120.0,
) -> AgentRun:
    """Run ``claude -p TASK`` against `base_url` (a proxy's root URL) with model `model`;
    `resume` continues the latest session run in `workdir` (``--continue``: ``task="/compact"``
    makes Claude Code summarise it)."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    variables = {
        **_BASE_ENV,
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_AUTH_TOKEN": key,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_output_tokens)} if max_output_tokens is not None else {}),
        **(env or {}),
    }
    command = [
        str(BIN / "claude"),
        "-p",
        task,
        "--model",
        model,
        "--output-format",
        "json",
        "--max-turns",
        str(max_turns),
        "--allowedTools",
        "Bash",
        *(["--continue"] if resume else []),
    ]
    return _run("claude", command, variables, workdir, home, timeout=timeout)


_CODEX_CONFIG = """\
model = {model}
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
{top}{extra}
{table}
[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false

[feedback]
enabled = false
"""
_CODEX_PROVIDER = """\
[model_providers.proxy]
name = {name}
base_url = {base_url}
env_key = "LITELLM_PROXY_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 120000
"""
#: How Codex is pointed at the proxy, which decides how it compacts (see docs/codex-compaction.md):
#: ``custom``, a provider of its own (local compaction: a summary request of its own); ``openai-named``,
#: the same provider named "OpenAI", and ``builtin``, the built-in provider with ``openai_base_url``
#: (remote compaction: ``compaction_trigger``, answered with a compaction item; ``builtin`` also tries
#: a Responses WebSocket first, and is logged in with the key in ``auth.json``).
CodexProvider = Literal["custom", "openai-named", "builtin"]


def codex_config(base_url: str, model: str, provider: CodexProvider, extra: Mapping[str, int | str]) -> str:
    """Codex's ``config.toml`` for the proxy at `base_url` (``/v1`` appended: it posts ``/v1/responses``)."""
    settings = "".join(f"{name} = {json.dumps(value)}\n" for name, value in extra.items())
    url = json.dumps(base_url + "/v1")
    if provider == "builtin":
        top, table = f"openai_base_url = {url}\n", ""
    else:
        top = 'model_provider = "proxy"\n'
        name = json.dumps("OpenAI" if provider == "openai-named" else "LiteLLM proxy")
        table = _CODEX_PROVIDER.format(name=name, base_url=url)
    return _CODEX_CONFIG.format(model=json.dumps(model), top=top, extra=settings, table=table)


def run_codex(
    base_url: str,
    key: str,
    model: str,
    workdir: Path,
    *,
    task: str = TASK,
    config: Mapping[str, int | str] | None = None,
    provider: CodexProvider = "custom",
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> AgentRun:
    """Run ``codex exec TASK`` against `base_url` (a proxy's root URL) with model `model`, configured
    as `provider` says; `config` adds top-level ``config.toml`` settings (e.g.
    ``model_auto_compact_token_limit``)."""
    home = workdir / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config(base_url, model, provider, config or {}))
    if provider == "builtin":  # what `codex login --with-api-key` writes
        (codex_home / "auth.json").write_text(json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": key}))
    variables = {**_BASE_ENV, "HOME": str(home), "CODEX_HOME": str(codex_home), "LITELLM_PROXY_KEY": key, **(env or {})}
    command = [str(BIN / "codex"), "exec", "--skip-git-repo-check", "--json", "--color", "never", task]
    return _run("codex", command, variables, workdir, home, timeout=timeout)


def _run(
    client: Client, command: list[str], env: dict[str, str], workdir: Path, home: Path, *, timeout: float
) -> AgentRun:
    cwd = workdir / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        stdout, stderr = process.communicate()
        code = None
    return AgentRun(client, code, stdout, stderr, time.monotonic() - started, home, command)
