"""Summaries of cut turns through real proxies with two teams' keys and a shared redis-server: a
summary is found only by the same cut turns of the same team (in either proxy), never by another
team's identical conversation nor by the same team's other conversation; and the summary request is
charged to the key that caused it."""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from litellm_governance.testing import RecordingUpstream

from ._proxy import TEAM_AUTH, ProxyProcess
from ._redis import RedisServer
from .conftest import ProxyFactory

ASK = "Summarize them for the agent"


class Summariser:
    """Numbers its summaries: ``SUMMARY #n`` says which request wrote the summary a context carries."""

    def __init__(self) -> None:
        self.count = itertools.count(1)
        self.lock = threading.Lock()
        self.written: list[str] = []

    def __call__(self, body: Any) -> str:
        first = (body.get("messages") or [{}])[0]
        if ASK not in str(first.get("content")):
            return "ok"
        with self.lock:
            self.written.append(f"SUMMARY #{next(self.count)}.")
            return self.written[-1]


def session(rounds: int, secret: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find the parser bug."},
    ]
    for i in range(rounds):
        arguments = json.dumps({"file_path": f"src/m{i}.py"})
        calls = [{"id": f"call_{i}", "type": "function", "function": {"name": "Read", "arguments": arguments}}]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"{secret} = {i}\n" * 90})
    return messages


def replay(
    proxy: ProxyProcess, key: str, secret: str, upstream: RecordingUpstream, until: Callable[[str], bool]
) -> list[str]:
    """The contexts GLM received for one conversation replayed turn by turn with `key`, until one passes `until`."""
    seen: list[str] = []
    with proxy.client() as client:
        client.headers["Authorization"] = f"Bearer {key}"
        for rounds in range(60, 200):
            body = {"model": "glm-10k", "messages": session(rounds, secret), "user": f"{key}-{secret}-{rounds}"}
            response = client.post("/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text[:300]
            seen.append(str(upstream.bodies(model="glm-4.6")[-1]["messages"][1]["content"]))
            if until(seen[-1]):
                break
            time.sleep(0.05)
    return seen


def test_a_summary_is_shared_only_by_the_same_cut_turns_of_the_same_team(
    proxy_factory: ProxyFactory, own_redis_server: RedisServer
) -> None:
    summariser = Summariser()
    with RecordingUpstream(reply=summariser) as upstream:
        models = [
            {
                "model_name": "glm-10k",
                "litellm_params": {"model": "zai/glm-4.6", "api_base": upstream.base_url, "api_key": "x"},
                "model_info": {"max_input_tokens": 10_000},
            },
            {
                "model_name": "summariser",
                "litellm_params": {"model": "openai/summ", "api_base": upstream.base_url, "api_key": "x"},
            },
        ]
        redis = {"type": "redis", "host": own_redis_server.host, "port": own_redis_server.port, "mode": "default_off"}
        proxies = [
            proxy_factory(
                model_list=models,
                # (calibration off: both proxies cut the same conversation at the same points)
                callback_settings={
                    "governance": {"summary_model": "summariser", "cache_stable": True, "calibrate": False}
                },
                litellm_settings={"cache": True, "cache_params": redis},
                general_settings={"custom_auth": TEAM_AUTH},
                extra_env={"E2E_PROXY_NAME": name},  # two processes sharing the redis-server
            )
            for name in ("one", "two")
        ]
        summarised = lambda text: "[Context summary: " in text  # noqa: E731

        team_a = replay(proxies[0], "sk-team-a-1", "alpha", upstream, summarised)
        assert summarised(team_a[-1]), "team a's conversation never got a summary"
        written_for_a = set(summariser.written)

        # Team b, the very same conversation, in the other proxy: never one of team a's summaries.
        team_b = replay(proxies[1], "sk-team-b-1", "alpha", upstream, summarised)
        assert not any(s in text for s in written_for_a for text in team_b)
        # Team a, another conversation: none of them either.
        other = replay(proxies[0], "sk-team-a-1", "bravo", upstream, summarised)
        assert not any(s in text for s in written_for_a for text in other)
        # Team a's other key, the same conversation, in the other proxy: a summary proxy one wrote for
        # team a (through Redis: proxy two never wrote it).
        again = replay(proxies[1], "sk-team-a-2", "alpha", upstream, lambda t: any(s in t for s in written_for_a))
        assert any(s in again[-1] for s in written_for_a)

        # The summary request was charged to the key (and team) whose request caused it.
        record = proxies[0].wait_for_payload(lambda r: r.get("model_group") == "summariser", timeout=10)
        assert record is not None
        metadata = record["metadata"]
        assert metadata.get("user_api_key_hash") == hashlib.sha256(b"sk-team-a-1").hexdigest()  # as LiteLLM logs keys
        assert metadata.get("user_api_key_team_id") == "team-a"
