"""The real agents through a real LiteLLM proxy: Claude Code and Codex CLI (pinned in
``tests/clients``) run a scripted task against an upstream that plays their model
(`litellm_governance.testing.ScriptedModel`) while emulating the provider behind each route — its
rules, its error bodies and a window small enough that the history overflows within a few rounds.

Every route runs twice, through two proxies with the same models: one without callbacks and one
with the governance hook. Without the plugin each route shows what goes wrong (context-length
rejections, GLM's 1214); with it every run finishes every round with no rejection, and every
request the provider received carries the task and the newest result whole.

Codex also runs configured the two ways that make it compact remotely (``openai_base_url``, and a
provider named "OpenAI": `_agents.CodexProvider`), through the proxy with the plugin only, on GLM,
Anthropic and OpenAI's own Responses API (the emulating upstream compacts natively there): every
compaction request must get exactly one compaction item back, or Codex exits.

The runs are made once per session, a few at a time (the clients mostly wait on the proxy), in one
xdist worker (``xdist_group``); each test then checks one route's runs. They skip when Node.js or
the clients are missing (``make clients``), and fail instead where ``$LITELLM_GOVERNANCE_REQUIRE_CLIENTS``
is set (CI).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from litellm_governance.testing import RecordedRequest, RecordingUpstream, ScriptedModel

from . import _agents
from ._proxy import ProxyProcess
from .conftest import GOVERNANCE_CALLBACK, ProxyFactory

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("real_clients")]

#: The script every run follows: 6 rounds (8 calls of ~10k characters), then a final text.
SCRIPT = ScriptedModel(rounds=6, chars=10_000)
#: The window of the Claude Code routes: a self-hosted model's (vLLM ``--max-model-len 32768``), where
#: Claude Code's default 32,000 output tokens leave its ~11k-token system prompt and tools no room.
CLAUDE_WINDOW = 32_768


@dataclass(frozen=True)
class Route:
    """One client → deployment route: the proxy model group the client asks for, the deployment
    behind it, the provider the upstream emulates and its window (the deployment's
    ``max_input_tokens`` too)."""

    name: str
    client: _agents.Client
    group: str
    model: str  # LiteLLM's provider/model of the deployment
    emulate: str
    window: int
    root: bool = False  # api_base is the upstream's root (Anthropic) instead of .../v1
    #: Rules whose rejection without the plugin shows the route's failure.
    failures: frozenset[str] = frozenset()
    params: dict[str, Any] = field(default_factory=dict)
    #: Codex ``config.toml`` settings for this route.
    codex_config: dict[str, int | str] = field(default_factory=dict)
    #: Which proxies the route runs through.
    variants: tuple[str, ...] = ("plain", "governed")
    #: The model the upstream plays.
    script: ScriptedModel = SCRIPT
    #: After the task, ask the client to summarise the session (Claude Code's ``/compact``).
    compact_after: bool = False
    #: How Codex is pointed at the proxy (`_agents.CodexProvider`: it decides how Codex compacts).
    codex_provider: _agents.CodexProvider = "custom"


CONTEXT = "context_length"
ROUTES = (
    Route(
        "claude-anthropic",
        "claude",
        "claude-sonnet-4-5-anthropic",
        "anthropic/claude-sonnet-4-5",
        "anthropic",
        CLAUDE_WINDOW,
        root=True,
        failures=frozenset({"anthropic.context_length"}),
    ),
    Route(
        "codex-openai",
        "codex",
        "gpt-4.1",
        "openai/gpt-4.1",
        "openai",
        24_000,
        failures=frozenset({"openai.responses.context_length"}),
    ),
    Route(
        "claude-zai",
        "claude",
        "claude-sonnet-4-5-zai",
        "zai/glm-4.6",
        "glm",
        CLAUDE_WINDOW,
        failures=frozenset({"glm.context_length", "glm.system_not_first"}),
    ),
    Route(
        "codex-zai",
        "codex",
        "gpt-5.5-zai",
        "zai/glm-4.6",
        "glm",
        24_000,
        failures=frozenset({"glm.context_length", "glm.system_not_first"}),
    ),
    Route(
        "claude-openai",
        "claude",
        "claude-sonnet-4-5-openai",
        "openai/gpt-5.1",
        "openai",
        CLAUDE_WINDOW,
        failures=frozenset({"openai.responses.context_length"}),
    ),
    Route(
        # LiteLLM sends Claude 64,000 max_tokens here once thinking is off: a window of the real size.
        # Without the plugin Claude refuses the second turn (the bridge lost its thinking block).
        "codex-anthropic",
        "codex",
        "gpt-5.5-anthropic",
        "anthropic/claude-sonnet-4-5",
        "anthropic",
        200_000,
        root=True,
        failures=frozenset({"anthropic.thinking_first"}),
    ),
    Route(
        "codex-reasoning",
        "codex",
        "gpt-5.5",
        "openai/gpt-5.5",
        "openai",
        24_000,
        failures=frozenset({"openai.responses.context_length"}),
    ),
)
#: Codex summarising its own history (its compaction request) once its own estimate of the history
#: passes a limit set above the budget: its summary request is one the plugin must cut down.
COMPACTING = Route(
    "codex-compacting",
    "codex",
    "gpt-4.1-compacting",
    "openai/gpt-4.1",
    "openai",
    20_000,
    codex_config={"model_auto_compact_token_limit": 16_000},
    variants=("governed",),
)
#: Claude Code summarising its session (``claude -p --continue /compact``) after the task, on GLM.
CLAUDE_COMPACTING = Route(
    "claude-compacting",
    "claude",
    "claude-sonnet-4-5-compacting",
    "zai/glm-4.6",
    "glm",
    CLAUDE_WINDOW,
    variants=("governed",),
    compact_after=True,
)
#: Codex compacting remotely (``compaction_trigger``), configured both ways that make it do so, on GLM and
#: Anthropic (the plugin answers) and on OpenAI's Responses API (the emulating upstream compacts itself):
#: 12 short rounds, a compaction every two or three.
REMOTE_SCRIPT = ScriptedModel(rounds=12, chars=10_000)
REMOTE_COMPACTING = tuple(
    Route(
        f"codex-remote-{kind}-{provider}",
        "codex",
        f"gpt-5.5-remote-{kind}-{provider}",
        model,
        emulate,
        window,
        root=kind == "anthropic",
        codex_config={"model_auto_compact_token_limit": 12_000},
        variants=("governed",),
        script=REMOTE_SCRIPT,
        codex_provider=provider,
    )
    for kind, model, emulate, window in (
        ("zai", "zai/glm-4.6", "glm", 24_000),
        ("anthropic", "anthropic/claude-sonnet-4-5", "anthropic", 200_000),
        ("openai", "openai/gpt-5.5", "openai", 24_000),
    )
    for provider in ("builtin", "openai-named")
)
BY_NAME = {route.name: route for route in (*ROUTES, COMPACTING, CLAUDE_COMPACTING, *REMOTE_COMPACTING)}
VARIANTS = ("plain", "governed")


@dataclass
class Outcome:
    """One client run through one proxy (and its `/compact` run, if any), and every request its
    upstream received."""

    route: Route
    variant: str
    run: _agents.AgentRun
    requests: list[RecordedRequest]
    compact: _agents.AgentRun | None = None

    @property
    def posts(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST" and isinstance(r.body, dict)]

    @property
    def rejections(self) -> list[RecordedRequest]:
        return [r for r in self.posts if r.status != 200]

    def report(self) -> str:
        """What happened, one line per upstream request, for assertion messages."""
        lines = [f"{self.route.name} [{self.variant}]: {self.run.describe()}"]
        for number, record in enumerate(self.posts, 1):
            newest = SCRIPT.newest_result(record.body)
            lines.append(f"  {number:3d} {record.path} {record.status} {record.rule or record.answer} newest={newest}")
        return "\n".join(lines)


def _skip_or_fail() -> None:
    reason = _agents.missing()
    if reason is None:
        return
    if os.environ.get(_agents.REQUIRE_ENV):
        pytest.fail(f"{_agents.REQUIRE_ENV} is set but the real clients cannot run: {reason}")
    pytest.skip(reason)


def _claim_the_runs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Fail when another xdist worker of this run has already made the runs: the group mark is not
    honoured, and every worker would run all the clients again (pytest 9.2.0 with pytest-xdist 3.8.0
    drops ``xdist_group``: they cost a minute of CI each time; constraints.txt pins pytest 9.1.1)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    # In the folder the run's workers share, named for the run: no other run's marker can match it.
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "run")
    marker = tmp_path_factory.getbasetemp().parent / f"real-clients-{run}.made-by"
    try:
        with marker.open("x") as file:
            file.write(os.environ["PYTEST_XDIST_WORKER"])
    except FileExistsError:
        pytest.fail(
            f"the real-client runs were already made by {marker.read_text() or 'another worker'}: "
            "xdist_group('real_clients') is not honoured (pytest -n needs --dist loadgroup, and a pytest "
            "and pytest-xdist that keep it working together, as constraints.txt pins them)"
        )


@pytest.fixture(scope="session")
def outcomes(proxy_factory: ProxyFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    """Every route run without and with the plugin, a few at a time; keyed ``<route>/<variant>``."""
    _skip_or_fail()
    _claim_the_runs(tmp_path_factory)
    upstreams = {
        (route.name, variant): RecordingUpstream(script=route.script, emulate=route.emulate, window=route.window)
        for route in BY_NAME.values()
        for variant in route.variants
    }
    for server in upstreams.values():
        server.start()
    try:
        proxies = {
            variant: proxy_factory(
                callbacks=[GOVERNANCE_CALLBACK] if variant == "governed" else [],
                payload_sink=False,
                model_list=[
                    _model_entry(route, upstreams[route.name, variant])
                    for route in BY_NAME.values()
                    if variant in route.variants
                ],
                router_settings={"num_retries": 0},
            )
            for variant in VARIANTS
        }
        root = tmp_path_factory.mktemp("agents")
        jobs = [(route, variant) for route in BY_NAME.values() for variant in route.variants]
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            runs = list(pool.map(lambda job: _run(job[0], proxies[job[1]], root / f"{job[0].name}-{job[1]}"), jobs))
        print(f"\nreal clients: {len(jobs)} runs in {time.monotonic() - started:.1f}s")
        yield {
            f"{route.name}/{variant}": Outcome(route, variant, run[0], upstreams[route.name, variant].requests, run[1])
            for (route, variant), run in zip(jobs, runs, strict=True)
        }
    finally:
        for server in upstreams.values():
            server.stop()


def _model_entry(route: Route, upstream: RecordingUpstream) -> dict[str, Any]:
    params = {
        "model": route.model,
        "api_base": upstream.root_url if route.root else upstream.base_url,
        "api_key": "sk-upstream",
        **route.params,
    }
    return {"model_name": route.group, "litellm_params": params, "model_info": {"max_input_tokens": route.window}}


def _run(route: Route, proxy: ProxyProcess, workdir: Path) -> tuple[_agents.AgentRun, _agents.AgentRun | None]:
    """The route's run, and its ``/compact`` run (Claude Code) when the route asks for one."""
    key, group = proxy.master_key, route.group
    if route.client == "codex":
        config, provider = route.codex_config, route.codex_provider
        return _agents.run_codex(proxy.base_url, key, group, workdir, config=config, provider=provider), None
    run = _agents.run_claude(proxy.base_url, key, group, workdir)  # Claude Code's own max output: 32,000
    if not route.compact_after or run.returncode != 0:
        return run, None
    compact = _agents.run_claude(proxy.base_url, key, group, workdir, task="/compact", resume=True)
    return run, compact


def _task_in(record: RecordedRequest) -> bool:
    return _agents.TASK in str(record.body)


# ---- the tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [route.name for route in ROUTES])
def test_without_the_plugin_the_route_fails(outcomes: dict[str, Outcome], name: str) -> None:
    """Without the plugin the provider rejects the grown history (or GLM its shape) within a few rounds."""
    outcome = outcomes[f"{name}/plain"]
    rules = {r.rule for r in outcome.rejections}
    assert rules & outcome.route.failures, outcome.report()


@pytest.mark.parametrize("name", [route.name for route in ROUTES])
def test_with_the_plugin_every_round_is_done(outcomes: dict[str, Outcome], name: str) -> None:
    """With the plugin the client exits 0 after every round and the final text, with no rejection."""
    outcome = outcomes[f"{name}/governed"]
    assert outcome.run.returncode == 0, outcome.report()
    assert outcome.rejections == [], outcome.report()
    answers = [r.answer or "" for r in outcome.posts]
    assert f"final after {SCRIPT.rounds} rounds" in answers, outcome.report()
    for round in range(1, SCRIPT.rounds + 1):
        assert any(a.startswith(f"round {round}:") for a in answers), outcome.report()


@pytest.mark.parametrize("name", [route.name for route in ROUTES])
def test_with_the_plugin_every_request_keeps_the_task_and_the_newest_result(
    outcomes: dict[str, Outcome], name: str
) -> None:
    """Every request the provider received (the agent's own summary requests aside) carries the
    task, and the newest round's output whole."""
    outcome = outcomes[f"{name}/governed"]
    for record in outcome.posts:
        if record.answer == "summary":
            continue
        assert _task_in(record), outcome.report()
        newest = SCRIPT.newest_result(record.body)
        assert newest == "-" or set(newest.split(",")) == {"intact"}, outcome.report()


NOTE_START = "[Context note:"  # what the plugin leaves in place of the turns it cut (_trace.NOTE_START)


def test_codex_summarises_its_history_through_the_plugin(outcomes: dict[str, Outcome]) -> None:
    """Codex's own compaction request (its whole history, then "CONTEXT CHECKPOINT COMPACTION"),
    sent once its history outgrew the budget, is cut down like any other: it fits, keeps its
    instruction, and Codex goes on to finish the task."""
    outcome = outcomes[f"{COMPACTING.name}/governed"]
    assert outcome.run.returncode == 0 and outcome.rejections == [], outcome.report()
    summaries = [r for r in outcome.posts if r.answer == "summary"]
    assert summaries, outcome.report()
    for record in summaries:
        assert "CONTEXT CHECKPOINT COMPACTION" in json.dumps(record.body["input"][-1]), outcome.report()
        assert NOTE_START in json.dumps(record.body), outcome.report()  # the plugin cut it to fit
    assert f"final after {SCRIPT.rounds} rounds" in [r.answer for r in outcome.posts], outcome.report()


def test_claude_code_summarises_its_session_through_the_plugin(outcomes: dict[str, Outcome]) -> None:
    """Claude Code's own summary request (``/compact``: the session, then "create a detailed
    summary of the conversation so far" riding with the last tool results, and its default 32,000
    output tokens) is cut down to fit GLM's 32k window and keeps its instruction."""
    outcome = outcomes[f"{CLAUDE_COMPACTING.name}/governed"]
    assert outcome.compact is not None and outcome.compact.returncode == 0, outcome.report()
    assert outcome.rejections == [], outcome.report()
    (summary,) = [r for r in outcome.posts if r.answer == "summary"]
    last = summary.body["messages"][-1]
    assert last["role"] == "user" and "summary of the conversation so far" in json.dumps(last), outcome.report()
    results = sum(m["role"] == "tool" for m in summary.body["messages"])
    assert results < SCRIPT.total_calls(), outcome.report()  # the plugin cut the session's older rounds to fit
    assert summary.body["max_tokens"] == CLAUDE_WINDOW // 4  # Claude Code's 32,000, fitted


TOKEN_PREFIX = "litellm-governance.compaction.v1:"  # the gateway's compaction token (_session_compaction)
OPENING = "[Session summary:"  # the message it becomes (_session_compaction.SUMMARY_OPENING)
OPENAIS_ITEM = "emu-cmp:"  # the emulated OpenAI's own compaction content


@pytest.mark.parametrize("name", [route.name for route in REMOTE_COMPACTING])
def test_codex_compacting_remotely_finishes_every_round(outcomes: dict[str, Outcome], name: str) -> None:
    """Codex 0.169.0 requires exactly one compaction item in answer to its ``compaction_trigger`` and exits
    on anything else. With the plugin it finishes all 12 rounds, with no rejection (every request valid and
    within the window), after at least one compaction: where the deployment has none (GLM, Anthropic) the
    provider receives a summary request and, on the next request, the summary as a message — never the
    gateway's token; OpenAI's own compaction passes both ways untouched."""
    outcome = outcomes[f"{name}/governed"]
    assert outcome.run.returncode == 0 and outcome.rejections == [], outcome.report()
    answers = [r.answer or "" for r in outcome.posts]
    assert f"final after {REMOTE_SCRIPT.rounds} rounds" in answers, outcome.report()
    assert all(any(a.startswith(f"round {n}:") for a in answers) for n in range(1, 13)), outcome.report()
    dumps = [json.dumps(r.body) for r in outcome.posts]
    assert not any(TOKEN_PREFIX in dump for dump in dumps), outcome.report()
    if outcome.route.emulate == "openai":
        compactions = [n for n, a in enumerate(answers) if a == "compaction"]
        assert compactions and all(OPENAIS_ITEM in dumps[n + 1] for n in compactions), outcome.report()
        assert not any(OPENING in dump for dump in dumps), outcome.report()
        return
    summaries = [n for n, a in enumerate(answers) if a == "summary"]
    assert summaries, outcome.report()
    for n in summaries:
        # No tool of the agent's (LiteLLM gives Claude a placeholder tool where the history holds tool uses).
        offered = {t.get("name") or t.get("function", {}).get("name") for t in outcome.posts[n].body.get("tools") or []}
        assert offered <= {"dummy_tool"} and "CONTEXT CHECKPOINT COMPACTION" in dumps[n], outcome.report()
        assert "compaction_trigger" not in dumps[n], outcome.report()
        assert OPENING in dumps[n + 1] and "ROUNDS-DONE=" in dumps[n + 1], outcome.report()


def test_without_the_clients_these_tests_skip_saying_why_or_fail_where_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No installed clients: a skip that says what to run; a failure where CI requires them."""
    monkeypatch.setattr(_agents, "BIN", tmp_path)
    monkeypatch.delenv(_agents.REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="make clients"):
        _skip_or_fail()
    monkeypatch.setenv(_agents.REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=_agents.REQUIRE_ENV):
        _skip_or_fail()
