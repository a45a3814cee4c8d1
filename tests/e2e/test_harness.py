"""The e2e harness itself works: proxy -> recording upstream -> back, streaming included."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from litellm_governance.testing import RecordingUpstream

from ._proxy import ProxyProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bare_proxy(proxy_factory: Callable[..., ProxyProcess]) -> ProxyProcess:
    """A proxy with only the payload sink, so these tests do not depend on the governance hook."""
    return proxy_factory(callbacks=[])


def _marker() -> str:
    return f"harness-{uuid.uuid4().hex[:12]}"


def test_proxy_is_live(bare_proxy: ProxyProcess) -> None:
    with bare_proxy.client() as client:
        assert client.get("/health/liveliness").status_code == 200
    assert bare_proxy.alive()


def test_chat_reaches_upstream_and_returns(bare_proxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    upstream.set_reply("pong")
    marker = _marker()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"ping {marker}"}]
    try:
        with bare_proxy.client() as client:
            response = client.post("/v1/chat/completions", json={"model": "small", "messages": messages})
    finally:
        upstream.set_reply(RecordingUpstream.DEFAULT_REPLY)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["choices"][0]["message"]["content"] == "pong"
    assert body["usage"]["prompt_tokens"] > 0

    sent = upstream.bodies(model="up-small")
    assert len(sent) == 1
    assert sent[0]["messages"] == messages
    recorded = next(r for r in upstream.requests if r.path == "/v1/chat/completions")
    assert recorded.has_authorization  # the proxy sent the deployment's key ...
    assert "authorization" not in recorded.headers  # ... and the recording kept no secret


def test_streaming_through_proxy(bare_proxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    upstream.set_reply("one two three")
    payload = {
        "model": "small",
        "messages": [{"role": "user", "content": f"count {_marker()}"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    pieces: list[str] = []
    saw_done = False
    saw_usage = False
    try:
        with bare_proxy.client() as client, client.stream("POST", "/v1/chat/completions", json=payload) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[len("data: ") :]
                if data == "[DONE]":
                    saw_done = True
                    continue
                chunk = json.loads(data)
                saw_usage = saw_usage or bool(chunk.get("usage"))
                for choice in chunk.get("choices", []):
                    pieces.append(choice.get("delta", {}).get("content") or "")
    finally:
        upstream.set_reply(RecordingUpstream.DEFAULT_REPLY)
    assert "".join(pieces) == "one two three"
    assert saw_done
    assert saw_usage
    sent = upstream.bodies(model="up-small")
    assert len(sent) == 1 and sent[0]["stream"] is True


def test_fallback_after_context_error(bare_proxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    marker = _marker()
    with bare_proxy.client() as client:
        response = client.post(
            "/v1/chat/completions",
            json={"model": "failing", "messages": [{"role": "user", "content": marker}]},
        )
    assert response.status_code == 200, response.text
    attempts = [(r.model, r.status) for r in upstream.requests if r.path == "/v1/chat/completions"]
    assert attempts == [("up-failing", 400), ("up-big", 200)]


def test_payload_sink_records_standard_logging_metadata(bare_proxy: ProxyProcess) -> None:
    marker = _marker()
    with bare_proxy.client() as client:
        response = client.post(
            "/v1/chat/completions",
            json={"model": "small", "messages": [{"role": "user", "content": "hi"}], "metadata": {"tag": marker}},
        )
    assert response.status_code == 200

    def mine(record: dict[str, Any]) -> bool:
        metadata = record.get("metadata")
        requester = metadata.get("requester_metadata") if isinstance(metadata, dict) else None
        return isinstance(requester, dict) and requester.get("tag") == marker

    record = bare_proxy.wait_for_payload(mine, timeout=15)
    assert record is not None, bare_proxy.payloads()
    assert record["event"] == "success"
    assert record["model_group"] == "small"
    assert record["call_type"] == "acompletion"


@pytest.mark.smoke
def test_standard_proxy_chat(proxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """The standard proxy (default callbacks, e.g. the governance hook) serves a small chat unchanged."""
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"hello {_marker()}"}]
    with proxy.client() as client:
        response = client.post("/v1/chat/completions", json={"model": "small", "messages": messages})
    assert response.status_code == 200, response.text
    sent = upstream.bodies(model="up-small")
    assert len(sent) == 1
    assert sent[0]["messages"][-1] == messages[-1]


def test_recording_upstream_endpoints() -> None:
    """The upstream alone: models list, 404s, per-model failures, recorded headers without secrets."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post(url: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "authorization": "Bearer sk-secret"},
        )
        try:
            with opener.open(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    with RecordingUpstream(reply="hi", fail_models={"bad": 400, "down": 503}, models=["m1"]) as server:
        with opener.open(server.base_url + "/models", timeout=10) as response:
            assert [m["id"] for m in json.loads(response.read())["data"]] == ["m1"]
        status, body = post(server.base_url + "/chat/completions", {"model": "m1", "messages": []})
        assert status == 200 and body["choices"][0]["message"]["content"] == "hi"  # type: ignore[index]
        status, body = post(server.base_url + "/chat/completions", {"model": "bad", "messages": []})
        assert status == 400 and "maximum context length" in body["error"]["message"]  # type: ignore[index]
        status, _ = post(server.base_url + "/chat/completions", {"model": "down", "messages": []})
        assert status == 503
        status, _ = post(server.base_url + "/nowhere", {})
        assert status == 404
        status, body = post(server.base_url + "/completions", {"model": "m1", "prompt": "x"})
        assert status == 200 and body["object"] == "text_completion"
        status, body = post(server.base_url + "/responses", {"model": "m1", "input": "x"})
        assert status == 200 and body["object"] == "response"
        status, body = post(server.root_url + "/v1/messages", {"model": "m1", "messages": [], "max_tokens": 5})
        assert status == 200 and body["type"] == "message"
        recorded = server.requests
        assert [r.status for r in recorded] == [200, 200, 400, 503, 404, 200, 200, 200]
        assert all("authorization" not in r.headers for r in recorded)
        assert [r.has_authorization for r in recorded] == [False] + [True] * 7
        assert len(server.bodies()) == 3 and len(server.bodies("bad")) == 1
        server.clear()
        assert server.requests == []


def test_payload_records_being_written_are_not_read_yet(tmp_path: Any) -> None:
    """The sink appends a record while a test polls the file: a last line without its newline is a
    record still being written (a test once failed decoding half of one), not yet a record."""
    from types import SimpleNamespace

    log = tmp_path / "payloads.jsonl"
    whole = json.dumps({"event": "success", "end_user": "a"})
    log.write_text(whole + "\n" + whole[:20])
    assert ProxyProcess.payloads(SimpleNamespace(payload_log=log)) == [json.loads(whole)]  # type: ignore[arg-type]
    log.write_text(whole + "\n" + whole + "\n")
    assert len(ProxyProcess.payloads(SimpleNamespace(payload_log=log))) == 2  # type: ignore[arg-type]
