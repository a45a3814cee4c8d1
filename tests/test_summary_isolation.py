"""A summary of cut turns is offered only to a request whose cut turns are the same, byte for byte:
its key digests what was cut, exactly (pure core); whose summaries a request may use — tenant,
deployment, summary model and prompt — the integration adds (`integration.summaries`)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from litellm_governance import GovernanceConfig, govern_request
from litellm_governance._calibration import Calibration, deployment_key
from litellm_governance.integration.summaries import Summaries, summary_scope

from .builders import assistant, call, long_text, result, system, user

CONFIG = GovernanceConfig(context_window_tokens=8_000, cache_stable=True)
SUMMARY = "SUMMARY OF A"


def conversation(secret: str, rounds: int, *, contents: str = "", ids: str = "call_") -> list[dict[str, Any]]:
    """An agent loop whose user turns say `secret` in the middle of a long text (the note shows a
    message's head and tail only), with calls `call_0`, `call_1` … reading `src/m<i>.py`."""
    filler = "Please keep the whole repository's conventions in mind while you work. " * 6
    history = [system(), user("Fix the parser.")]
    for i in range(rounds):
        if i % 5 == 4:
            history.append(user(f"{filler} The password of the tenant is {secret}. {filler}"))
        history.append(assistant(None, call(f"{ids}{i}", "Read", file_path=f"src/m{i}.py")))
        history.append(result(f"{ids}{i}", long_text(1_500, f"{contents}{i}")))
    return history


def replay(history_of: Any, summaries: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """The cut keys and the sent contexts of a session replayed turn by turn (30 to 90 rounds)."""
    keys, sent = [], []
    for rounds in range(30, 90):
        body = {"model": "gpt-4o", "messages": history_of(rounds)}
        governed = govern_request(body, config=CONFIG, summaries=summaries or {})
        if governed.cut is not None:
            keys.append(governed.cut.key)
        sent.append(json.dumps(governed.request["messages"]))
    return keys, sent


def summaries_of(keys: list[str]) -> dict[str, str]:
    return {key: f"{SUMMARY} ({key[:8]})" for key in keys}


class TestTheKeyIsWhatWasCut:
    def test_conversations_differing_only_inside_a_cut_user_message_share_no_summary(self) -> None:
        """B says another password in the middle of its user turns: none of A's summaries reaches B."""
        keys, _ = replay(lambda n: conversation("ALPHA-123", n))
        assert keys, "the session never cut"
        other, sent = replay(lambda n: conversation("BRAVO-999", n), summaries_of(keys))
        assert set(other).isdisjoint(keys)
        assert not any(SUMMARY in body for body in sent)

    def test_repeated_call_ids_reading_other_contents_share_no_summary(self) -> None:
        """The same ids (call_0, call_1 …) and paths, other file contents: none of A's summaries."""
        keys, _ = replay(lambda n: conversation("same", n, contents="a"))
        other, sent = replay(lambda n: conversation("same", n, contents="b"), summaries_of(keys))
        assert set(other).isdisjoint(keys)
        assert not any(SUMMARY in body for body in sent)

    def test_the_same_cut_turns_get_the_summary(self) -> None:
        """The same session again (a second process, a retry): its cut points find A's summaries."""
        keys, _ = replay(lambda n: conversation("ALPHA-123", n))
        again, sent = replay(lambda n: conversation("ALPHA-123", n), summaries_of(keys))
        assert again == keys
        assert any(SUMMARY in body and "[Context summary: " in body for body in sent)

    def test_the_key_is_a_full_sha256_digest(self) -> None:
        keys, _ = replay(lambda n: conversation("ALPHA-123", n))
        assert all(len(key) == 64 and int(key, 16) >= 0 for key in keys)


class TestWhoseSummaryARequestMayUse:
    SCOPE = {"summary_model": "summariser", "deployment": ("zai", "glm-4.6", "http://a"), "sharing": "team"}

    def scope(self, **changes: Any) -> str:
        options = {**self.SCOPE, "metadata": {"user_api_key_team_id": "team-a", "user_api_key_hash": "k1"}}
        options.update(changes)
        return summary_scope(**options)

    def test_each_part_of_the_scope_tells_summaries_apart(self) -> None:
        base = self.scope()
        assert self.scope(metadata={"user_api_key_team_id": "team-b", "user_api_key_hash": "k1"}) != base
        assert self.scope(deployment=("zai", "glm-4.6", "http://b")) != base
        assert self.scope(summary_model="other") != base
        # another key of the same team shares the team's summaries; with sharing "key" it does not
        same_team = {"user_api_key_team_id": "team-a", "user_api_key_hash": "k2"}
        assert self.scope(metadata=same_team) == base
        assert self.scope(metadata=same_team, sharing="key") != self.scope(sharing="key")
        # "all": shared by every tenant of the proxy, for the same deployment and summary model
        assert self.scope(sharing="all") == self.scope(sharing="all", metadata={"user_api_key_team_id": "t"})

    def test_a_key_without_a_team_is_its_own_tenant(self) -> None:
        one = self.scope(metadata={"user_api_key_hash": "k1"})
        assert one != self.scope(metadata={"user_api_key_hash": "k2"})
        assert one != self.scope(metadata={})

    def test_a_summary_kept_for_one_scope_is_not_offered_to_another(self) -> None:
        store = Summaries()
        store._keep(self.scope(), "cut-key", "written for team a")
        assert store.ready_for(self.scope()).get("cut-key") == "written for team a"
        other = self.scope(metadata={"user_api_key_team_id": "team-b"})
        assert store.ready_for(other).get("cut-key") is None
        assert "cut-key" not in store.ready_for(other)


class TestTheOtherSharedCache:
    """Calibration, the one other thing shared through Redis, is kept per deployment and holds
    numbers only: nothing of a request's content, and no secret of the deployment in its key."""

    def test_a_calibration_value_is_numbers_only(self) -> None:
        state = Calibration()
        for ratio in (1.1, 1.2, 1.15, 1.3, 1.25, 1.18):
            state = state.with_sample(ratio)
        state = replace(state, floor=1.4, floor_until=state.count + 5)
        value = state.to_value()
        assert set(value) <= {"v", "n", "s", "f", "u", "a"}
        samples = value["s"]
        assert isinstance(samples, list)
        numbers = [*(value[k] for k in value if k != "s"), *samples]
        assert numbers and all(type(n) in (int, float) for n in numbers)
        assert Calibration.from_value(json.loads(json.dumps(value))) == state

    def test_a_deployment_key_names_no_secret(self) -> None:
        secret = "sk-live-SECRET-in-the-url"
        key = deployment_key(None, "openai/gpt-4o", f"https://proxy.example/{secret}/v1")
        assert secret not in key and "SECRET" not in key
        assert deployment_key({"id": "c0ffee" * 10}, "x") == "c0ffee" * 10  # LiteLLM's id, as LiteLLM gives it
        assert "SECRET" not in deployment_key({"id": secret + " with spaces"}, "x")
