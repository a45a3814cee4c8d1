"""Calibration through real proxies: budgets that learn each deployment's tokenizer.

The upstreams emulate OpenAI (and Anthropic) with a tokenizer that counts `token_rate` times what
tiktoken counts (1.3 and 0.8), report that count in ``usage`` and answer the provider's real
context-length error above the window (`litellm_governance.testing.emulation`). A long coding-agent loop
(`bench.sessions`) is replayed turn by turn, from its start and resumed mid-session on a freshly
started proxy, with calibration and without it (``calibrate: false``):

* with calibration, after a short warm-up no request is rejected and requests use at least 85 % of
  the true budget (``window - max_tokens - safety buffer`` in the provider's tokens);
* without, at 1.3x every request cut to the budget is rejected, and at 0.8x a quarter of the window
  is thrown away.

Then: a ``context_window_fallbacks`` fallback tightens the deployment that rejected; streaming,
``/v1/messages`` and ``/v1/responses`` learn too; and two proxies sharing a real ``redis-server``
share the token ratios they learn (skipped without the binary unless ``LITELLM_GOVERNANCE_REQUIRE_REDIS=1``).

Run with ``-s`` to see the figures (``calibration figures: ...`` lines).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from litellm.integrations.custom_logger import CustomLogger

from bench.agent_shapes import to_claude_code, to_codex
from bench.sessions import make_session, make_tools, next_round
from litellm_governance.integration.learning import CALIBRATION_KEY_PREFIX
from litellm_governance.testing import RecordingUpstream

from ._proxy import ProxyProcess
from ._redis import RedisServer
from .conftest import ProxyFactory

pytestmark = pytest.mark.e2e

WINDOW = 16_384
MAX_TOKENS = 1_024
SAFETY = 1_024  # GovernanceConfig.safety_buffer_tokens
TRUE_BUDGET = WINDOW - MAX_TOKENS - SAFETY  # provider tokens the prompt may use
SEED = 11
RESUME_AT = 260  # messages of the session when it is resumed on a fresh proxy
WARM_UP = 5  # requests a fresh deployment needs (calibration's MIN_SAMPLES)
TOOLS = make_tools()
CALIBRATED = {"governance": {"cache_stable": False}}
STATIC = {"governance": {"cache_stable": False, "calibrate": False}}
ROUTER = {"num_retries": 0, "context_window_fallbacks": [{"cw-small": ["cw-big"]}]}


# ---- upstreams and proxies ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, RecordingUpstream]]:
    servers = {
        "1.3": RecordingUpstream(emulate="openai", window=WINDOW, token_rate=1.3),
        "0.8": RecordingUpstream(emulate="openai", window=WINDOW, token_rate=0.8),
        "big": RecordingUpstream(emulate="openai", window=4 * WINDOW, token_rate=1.3),
        "anthropic": RecordingUpstream(emulate="anthropic", window=WINDOW, token_rate=1.5),
        "glm": RecordingUpstream(emulate="glm", window=2 * WINDOW),
    }
    for server in servers.values():
        server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def _entry(name: str, model: str, api_base: str, window: int = WINDOW) -> dict[str, Any]:
    return {
        "model_name": name,
        "litellm_params": {"model": model, "api_base": api_base, "api_key": "sk-emulated"},
        "model_info": {"max_input_tokens": window},
    }


def model_list(up: dict[str, RecordingUpstream]) -> list[dict[str, Any]]:
    return [
        _entry("r1.3", "openai/cal-13", up["1.3"].base_url),
        _entry("r0.8", "openai/cal-08", up["0.8"].base_url),
        _entry("stream", "openai/cal-stream", up["0.8"].base_url),
        _entry("cw-small", "openai/cal-cw", up["1.3"].base_url),
        _entry("cw-big", "openai/cal-cw-big", up["big"].base_url, window=4 * WINDOW),
        _entry("messages", "anthropic/claude-sonnet-4-5", up["anthropic"].root_url),
        _entry("responses", "openai/cal-responses", up["1.3"].base_url),
    ]


@pytest.fixture(scope="module")
def calibrated(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    """A proxy with calibration on (the default), no Redis."""
    return proxy_factory(model_list=model_list(upstreams), router_settings=ROUTER, callback_settings=CALIBRATED)


@pytest.fixture(scope="module")
def static(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    """The same proxy with ``calibrate: false``."""
    return proxy_factory(model_list=model_list(upstreams), router_settings=ROUTER, callback_settings=STATIC)


@pytest.fixture(scope="module")
def fresh(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    """Another calibrated proxy with the same config, started for the resumed loops (it has learned nothing)."""
    return proxy_factory(
        model_list=model_list(upstreams),
        router_settings=ROUTER,
        callback_settings=CALIBRATED,
        extra_env={"LITELLM_GOVERNANCE_E2E_INSTANCE": "fresh"},
    )


# ---- replaying an agent loop ----------------------------------------------------------------------


@dataclass
class Loop:
    """What each request of a replayed loop got: rejected or not, the provider's prompt count, cut or not."""

    name: str
    statuses: list[int] = field(default_factory=list)
    prompt_tokens: list[int | None] = field(default_factory=list)
    snipped: list[bool] = field(default_factory=list)
    seconds: float = 0.0

    def rejected(self, after: int = 0) -> int:
        return sum(1 for status in self.statuses[after:] if status != 200)

    def use(self, after: int = 0) -> list[float]:
        """Share of the true budget used by each accepted request that was cut to fit."""
        return [
            tokens / TRUE_BUDGET
            for status, tokens, cut in list(zip(self.statuses, self.prompt_tokens, self.snipped, strict=True))[after:]
            if status == 200 and cut and tokens is not None
        ]

    def figures(self, after: int) -> str:
        use = sorted(self.use(after))
        middle = use[len(use) // 2] if use else 0.0
        mean = sum(use) / len(use) if use else 0.0
        return (
            f"{self.name}: {len(self.statuses)} requests, {self.rejected()} rejected "
            f"({self.rejected(after)} after the first {after}); budget use of the {len(use)} cut requests "
            f"after them: mean {mean:.3f}, median {middle:.3f}, min {use[0] if use else 0.0:.3f}, "
            f"max {use[-1] if use else 0.0:.3f} [{self.seconds:.1f}s]; "
            + "".join("." if status == 200 else "x" for status in self.statuses)
        )


def is_context_rejection(status: int, text: str) -> bool:
    # LiteLLM before 1.100 does not map Anthropic's "prompt is too long" to ContextWindowExceededError.
    return status == 400 and any(s in text.lower() for s in ("context", "prompt is too long"))


def replay(proxy: ProxyProcess, group: str, start: list[dict[str, Any]], turns: int, name: str) -> Loop:
    """Send `turns` requests of the agent loop that begins with `start`, one tool round more each time."""
    loop = Loop(name)
    session = start
    began = time.monotonic()
    with proxy.client(timeout=120) as client:
        for _ in range(turns):
            body = {"model": group, "messages": session, "tools": TOOLS, "max_tokens": MAX_TOKENS}
            response = client.post("/v1/chat/completions", json=body)
            if response.status_code == 200:
                usage = response.json().get("usage") or {}
                loop.prompt_tokens.append(usage.get("prompt_tokens"))
            else:
                assert is_context_rejection(response.status_code, response.text), response.text[:500]
                loop.prompt_tokens.append(None)
            loop.statuses.append(response.status_code)
            loop.snipped.append("snipped=" in response.headers.get("x-litellm-governance", ""))
            session = next_round(session, seed=SEED)
    loop.seconds = time.monotonic() - began
    return loop


def report_of(proxy: ProxyProcess, user: str) -> dict[str, Any]:
    """The governance report of the request sent with ``user``, from LiteLLM's logging payload."""
    record = proxy.wait_for_payload(lambda r: r.get("end_user") == user)
    assert record is not None, proxy.log_tail()
    report: dict[str, Any] = record["metadata"]["spend_logs_metadata"]["governance"]
    return report


def last_report(proxy: ProxyProcess, group: str, successes: int) -> dict[str, Any]:
    """The report of the last of `successes` successful requests to model group `group`."""

    def done() -> list[dict[str, Any]]:
        return [r for r in proxy.payloads() if r.get("model_group") == group and r.get("event") == "success"]

    records = _wait(lambda: len(done()) >= successes and done(), timeout=10)
    assert records, proxy.log_tail()
    report: dict[str, Any] = records[-1]["metadata"]["spend_logs_metadata"]["governance"]
    return report


def learned_from(report: dict[str, Any]) -> int:
    """n of ``learned, n=…`` (-1 for the profile's ratio)."""
    source = str(report.get("ratio_source"))
    return int(source.split("n=", 1)[1].split(",", 1)[0]) if source.startswith("learned, n=") else -1


# Loop lengths: the 1.3x loop outgrows the window after ~15 turns, the 0.8x one after ~60.
FROM_START_TURNS = {"1.3": 80, "0.8": 100}
RESUMED_TURNS = 30


@pytest.mark.scale
@pytest.mark.parametrize("rate", ["1.3", "0.8"])
def test_loop_from_its_start(calibrated: ProxyProcess, static: ProxyProcess, rate: str) -> None:
    """From the first turn: calibration has learned the ratio before the history outgrows the window."""
    turns = FROM_START_TURNS[rate]
    learned = replay(calibrated, f"r{rate}", make_session(2, seed=SEED), turns, f"from start, {rate}x, calibrated")
    fixed = replay(static, f"r{rate}", make_session(2, seed=SEED), turns, f"from start, {rate}x, calibrate: false")
    print(f"\ncalibration figures: {learned.figures(WARM_UP)}\ncalibration figures: {fixed.figures(WARM_UP)}")
    use = learned.use(WARM_UP)
    assert len(use) >= 20, learned.figures(WARM_UP)
    assert learned.rejected() == 0
    assert sum(use) / len(use) >= 0.85
    if rate == "1.3":  # the profile's 1.0 undercounts: once the history outgrows the window, it is rejected
        # (all but the odd request whose cut happened to leave a whole unit's worth of room)
        first = fixed.statuses.index(400)
        assert fixed.rejected(first) >= 0.9 * (len(fixed.statuses) - first) >= 20
    else:  # it overcounts: a fifth of the budget (and more) is thrown away
        assert fixed.rejected() == 0
        assert max(fixed.use(WARM_UP)) <= 0.82


@pytest.mark.scale
@pytest.mark.parametrize("rate", ["1.3", "0.8"])
def test_loop_resumed_on_a_fresh_proxy(fresh: ProxyProcess, static: ProxyProcess, rate: str) -> None:
    """Mid-session on a proxy that has learned nothing: at 1.3x the first request is rejected, which
    tightens the ratio at once from the provider's own count; at 0.8x the first five requests use the
    profile's ratio. After that warm-up: no rejection, and the budget is used."""
    start = make_session(RESUME_AT, seed=SEED)
    learned = replay(fresh, f"r{rate}", start, RESUMED_TURNS, f"resumed, {rate}x, calibrated")
    fixed = replay(static, f"r{rate}", start, RESUMED_TURNS, f"resumed, {rate}x, calibrate: false")
    print(f"\ncalibration figures: {learned.figures(WARM_UP)}\ncalibration figures: {fixed.figures(WARM_UP)}")
    use = learned.use(WARM_UP)
    assert len(use) >= RESUMED_TURNS - WARM_UP - 2, learned.figures(WARM_UP)
    assert learned.rejected(WARM_UP) == 0
    assert sum(use) / len(use) >= 0.85
    if rate == "1.3":
        assert learned.statuses[0] == 400 and learned.rejected() == 1  # one rejection, then it fits
        assert fixed.rejected() >= 0.8 * RESUMED_TURNS
    else:
        assert learned.rejected() == 0
        assert fixed.rejected() == 0 and max(fixed.use()) <= 0.82


@pytest.mark.skipif(
    "async_post_call_failure_deployment_hook" not in vars(CustomLogger),
    reason="this LiteLLM has no failure hook per deployment: a rejection followed by a successful fallback "
    "is not seen (the plugin learns from requests that fail as a whole, through async_log_failure_event)",
)
def test_context_window_fallback_tightens_the_deployment_that_rejected(
    calibrated: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """cw-small rejects (it counts 1.3x); the context_window_fallbacks fallback (cw-big) answers the
    client, and cw-small's ratio was tightened by the rejection: its next request fits."""
    session = make_session(RESUME_AT, seed=SEED + 1)
    with calibrated.client(timeout=120) as client:
        first = client.post(
            "/v1/chat/completions",
            json={"model": "cw-small", "messages": session, "max_tokens": MAX_TOKENS, "user": "cw-1"},
        )
        assert first.status_code == 200, first.text[:300]
        received = [(r.model, r.status) for r in upstreams["1.3"].requests + upstreams["big"].requests if r.model]
        assert ("cal-cw", 400) in received and ("cal-cw-big", 200) in received
        upstreams["1.3"].clear()
        session = next_round(session, seed=SEED + 1)
        second = client.post(
            "/v1/chat/completions",
            json={"model": "cw-small", "messages": session, "max_tokens": MAX_TOKENS, "user": "cw-2"},
        )
        assert second.status_code == 200, second.text[:300]
    assert [(r.model, r.status) for r in upstreams["1.3"].requests if r.model] == [("cal-cw", 200)]
    report = report_of(calibrated, "cw-2")
    assert report["ratio_source"].startswith("learned, n=1") and report["token_ratio"] > 1.2
    assert (
        report["stage"] == "pre_call"
    )  # the model-group pass budgeted with it (the deployment pass had nothing to do)


def test_streaming_answers_teach_through_the_log_event(calibrated: ProxyProcess) -> None:
    """Streaming responses carry their usage to the log event, not to the deployment hook."""
    session = make_session(40, seed=SEED + 2)
    with calibrated.client(timeout=120) as client:
        for turn in range(WARM_UP + 1):
            body = {
                "model": "stream",
                "messages": session,
                "max_tokens": MAX_TOKENS,
                "stream": True,
                "stream_options": {"include_usage": True},
                "user": f"stream-{turn}",
            }
            response = client.post("/v1/chat/completions", json=body)
            assert response.status_code == 200 and "[DONE]" in response.text
            report_of(calibrated, f"stream-{turn}")  # the log event of this turn has run
            session = next_round(session, seed=SEED + 2)
    assert report_of(calibrated, "stream-0")["ratio_source"] == "static"
    last = report_of(calibrated, f"stream-{WARM_UP}")
    assert last["ratio_source"] == f"learned, n={WARM_UP}"
    assert 0.6 < last["token_ratio"] < 1.0  # counts 0.8x


def test_anthropic_messages_learn_from_input_tokens(
    calibrated: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """/v1/messages: Anthropic's "prompt is too long: N tokens > M maximum" tightens at once (the
    anthropic profile's 1.15 undercounts a 1.5x tokenizer); its usage (input_tokens) teaches after."""
    chat = make_session(RESUME_AT, seed=SEED + 3, users_every=40)
    statuses = []
    with calibrated.client(timeout=120) as client:
        for turn in range(WARM_UP + 2):
            body = {"model": "messages", "max_tokens": MAX_TOKENS, **to_claude_code(chat)}
            body["metadata"] = {"user_id": f"messages-{turn}"}
            response = client.post("/v1/messages", json=body)
            assert response.status_code == 200 or is_context_rejection(response.status_code, response.text), (
                response.text[:2000]
            )
            statuses.append(response.status_code)
            chat = next_round(chat, seed=SEED + 3)
    rules = [r.rule for r in upstreams["anthropic"].requests if r.rule]
    assert statuses[0] == 400 and rules == ["anthropic.context_length"], (statuses, rules)
    assert statuses[1:] == [200] * (len(statuses) - 1)
    report = last_report(calibrated, "messages", len(statuses) - 1)
    assert learned_from(report) >= WARM_UP and report["token_ratio"] > 1.25, report  # the count, then input_tokens


def test_responses_learn_without_a_count_in_the_error(
    calibrated: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """/v1/responses: OpenAI's "Your input exceeds the context window" gives no count, so each
    rejection steps the ratio up (x1.1) until the request fits; then usage (input_tokens) teaches."""
    chat = make_session(RESUME_AT, seed=SEED + 4, users_every=40)
    statuses = []
    upstreams["1.3"].clear()
    with calibrated.client(timeout=120) as client:
        for _ in range(WARM_UP + 4):
            body = {"model": "responses", "max_output_tokens": MAX_TOKENS, **to_codex(chat)}
            response = client.post("/v1/responses", json=body)
            assert response.status_code in {200, 400}, response.text[:300]
            statuses.append(response.status_code)
            chat = next_round(chat, seed=SEED + 4)
    rules = [r.rule for r in upstreams["1.3"].requests if r.rule]
    assert set(rules) <= {"openai.responses.context_length"}
    first_fit = statuses.index(200)
    assert 1 <= first_fit <= 3 and statuses[first_fit:] == [200] * (len(statuses) - first_fit), statuses
    report = last_report(calibrated, "responses", len(statuses) - first_fit)
    assert learned_from(report) >= WARM_UP, report  # input_tokens of each answer after the first fit


# ---- shared through Redis -------------------------------------------------------------------------


def test_two_proxies_share_what_they_learn_through_redis(
    proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream], redis_server: RedisServer
) -> None:
    """Proxy A (Redis from ``litellm_settings.cache``, response caching off by default) learns the
    1.3x deployment; proxy B (Redis from ``router_settings`` only) has never seen it, yet its first
    request is budgeted with what A learned, and fits. Then Redis goes away: B goes on with its copy."""
    host, port = redis_server.host, redis_server.port
    models = [_entry("shared", "openai/cal-shared", upstreams["1.3"].base_url)]
    a = proxy_factory(
        model_list=models,
        callback_settings=CALIBRATED,
        router_settings={"num_retries": 0},
        litellm_settings={
            "cache": True,
            "cache_params": {"type": "redis", "host": host, "port": port, "mode": "default_off"},
        },
    )
    b = proxy_factory(
        model_list=models,
        callback_settings=CALIBRATED,
        router_settings={"num_retries": 0, "redis_host": host, "redis_port": port},
    )
    session = make_session(RESUME_AT, seed=SEED)
    learned = replay(a, "shared", session, WARM_UP + 2, "redis, proxy A")
    assert learned.statuses[0] == 400 and learned.rejected() == 1, learned.figures(0)  # as the resumed loop
    client = redis.Redis(host=host, port=port, socket_timeout=1, decode_responses=True)
    keys = _wait(lambda: sorted(client.scan_iter(CALIBRATION_KEY_PREFIX + "*")), timeout=5)
    assert len(keys) == 1, keys
    value = _wait(lambda: json.loads(client.get(keys[0]) or "{}").get("n", 0) >= WARM_UP and client.get(keys[0]), 5)
    assert value, client.get(keys[0])
    assert json.loads(value)["v"] == 1 and 0 < client.ttl(keys[0]) <= 7 * 24 * 3600

    later = session
    for _ in range(WARM_UP + 2):  # the turn after A's last
        later = next_round(later, seed=SEED)
    with b.client(timeout=120) as client:
        body = {"model": "shared", "messages": later, "tools": TOOLS, "max_tokens": MAX_TOKENS, "user": "redis-b-1"}
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text[:300]
    report = report_of(b, "redis-b-1")
    assert report["ratio_source"].startswith("learned, n=") and report["token_ratio"] > 1.2, report
    assert "snipped=" in response.headers["x-litellm-governance"]
    print(
        f"\ncalibration figures: redis: B's first request used ratio {report['token_ratio']} ({report['ratio_source']})"
    )

    redis_server.stop()
    time.sleep(1.5)  # past B's refresh interval: its next lookup re-reads in the background, and fails
    with b.client(timeout=120) as client:
        for turn in range(2):
            later = next_round(later, seed=SEED)
            user = f"redis-b-{turn + 2}"
            body = {"model": "shared", "messages": later, "tools": TOOLS, "max_tokens": MAX_TOKENS, "user": user}
            began = time.monotonic()
            response = client.post("/v1/chat/completions", json=body)
            assert response.status_code == 200 and time.monotonic() - began < 5, response.text[:300]
            assert report_of(b, user)["ratio_source"].startswith("learned, n=")


def _wait(probe: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)
