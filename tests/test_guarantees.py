"""The guarantees (SPEC §4) as properties of `govern_request`, with the same strength on all three
formats and every provider profile: the governed body is valid for the format and the profile,
within budget (or the report says it is not), deterministic to the byte, idempotent, the input
untouched, the latest user text kept, and the report honest about what it sent.

The histories come with damage (missing, orphan and duplicate results, call ids reused across
turns, role runs, empty and null content, leading and trailing assistant turns) from the
generators of the per-format tests; validity is judged by rules written from the providers'
documented errors (`validity`, `format_validity`), not by the implementation.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceConfig, govern_request
from litellm_governance._formats import FORMATS

from .format_validity import anthropic_problems, responses_problems
from .test_formats import anthropic_conversations, responses_inputs
from .test_properties import CONFIGS, MODELS, conversations
from .validity import empty, problems, text_of

HISTORIES = {"chat": conversations(), "anthropic": anthropic_conversations(), "responses": responses_inputs()}


def body_of(fmt: str, history: list[dict[str, Any]], model: str) -> dict[str, Any]:
    if fmt == "chat":
        return {"model": model, "messages": history}
    if fmt == "anthropic":
        return {"model": model, "messages": history, "system": "You are Claude Code.", "max_tokens": 200}
    return {"model": model, "input": history, "instructions": "You are Codex.", "max_output_tokens": 200}


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, Any], tuple[str, str, bool], GovernanceConfig]:
    fmt = draw(st.sampled_from(sorted(HISTORIES)))
    model = draw(st.sampled_from(MODELS))
    return fmt, body_of(fmt, draw(HISTORIES[fmt]), model[0]), model, draw(CONFIGS)


def invalid(fmt: str, body: dict[str, Any], profile: str, prefill: bool) -> list[str]:
    """What the format's API and the profile's provider would refuse in `body`."""
    if fmt == "chat":
        return problems(body["messages"], profile, prefill=prefill)
    if fmt == "anthropic":
        # The Messages API's own rules hold where the provider takes the body as it is (LiteLLM
        # translates it for every other provider, whose rules are the profile's).
        native = profile in ("anthropic", "bedrock_claude")
        found = anthropic_problems(body["messages"], prefill=prefill, unique_ids=True) if native else []
    else:
        found = responses_problems(body["input"])
    # The provider's rules on the conversation the body holds (as LiteLLM hands it on).
    view = FORMATS[fmt].reader(body).view  # type: ignore[index]
    # (items no rule is about, e.g. an item_reference, go verbatim: the provider's rules do not judge them)
    chat = [m for m in view if m.get("role") in ("system", "developer", "user", "assistant", "tool")]
    if len(chat) < len(view):
        # Items no rule is about (an item_reference) stand for turns of unknown role: only the
        # rules every provider shares (pairing, content) can judge what is around them.
        profile = "permissive"
    # (reasoning_content is a chat field: on a translated route the chat call LiteLLM makes is
    # governed, and gets it there)
    judged = [p for p in problems(chat, profile, prefill=prefill) if "reasoning_content" not in p]
    return found + [f"as chat: {p}" for p in judged]


PROPERTY = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None)


@PROPERTY
@given(case=requests())
def test_valid_within_budget_deterministic_idempotent_and_pure(
    case: tuple[str, dict[str, Any], tuple[str, str, bool], GovernanceConfig],
) -> None:
    fmt, body, (_, profile, prefill), config = case
    before = copy.deepcopy(body)
    out = govern_request(body, config=config)
    report = out.report
    assert body == before, "the input was changed"
    assert report.format == fmt and report.profile == profile
    assert invalid(fmt, out.request, profile, prefill) == []
    # Within budget, or the report says not.
    assert report.budget is not None and report.over_budget == (report.tokens_after > report.budget)
    # Deterministic to the byte (the provider's prompt cache reads bytes).
    again = govern_request(copy.deepcopy(body), config=config)
    assert json.dumps(again.request, sort_keys=False) == json.dumps(out.request, sort_keys=False)
    assert again.report == report
    # Idempotent: the governed body governs to itself.
    twice = govern_request(copy.deepcopy(out.request), config=config)
    assert twice.request == out.request and not twice.report.changed
    # Honest: "changed" says whether the body changed, messages_after how many items were sent, and
    # tokens_after is what a fresh count of the sent body gives: exactly, in chat; never less in
    # the others (the budget holds for what is sent), where a message the rules made is counted
    # as they made it (an assistant turn kept as the user's, before it becomes input text).
    assert report.changed == (out.request != body)
    history = out.request.get("messages", out.request.get("input"))
    assert not isinstance(history, list) or report.messages_after == len(history)
    assert twice.report.estimated_tokens <= report.estimated_tokens
    assert fmt != "chat" or twice.report.tokens_before == report.tokens_after


def task(fmt: str, body: dict[str, Any]) -> str | None:
    """The text of the latest user turn of the client's own with content (not text riding along with
    tool results)."""
    history = body.get("messages", body.get("input"))
    for index in range(len(history) - 1, -1, -1):  # what a compaction replaced is not read: not looked at
        content = history[index].get("content")
        blocks = content if isinstance(content, list) else []
        if history[index].get("type") == "compaction" or any(
            isinstance(b, dict) and b.get("type") == "compaction" for b in blocks
        ):
            history = history[index:]
            break
    for message in reversed(history):
        if message.get("role") != "user" or (fmt == "responses" and message.get("type") not in (None, "message")):
            continue
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "tool_result" for p in content):
            continue
        if not empty(content):  # the latest user turn with something in it (an image alone counts)
            return text_of(content).strip() or None
    return None


@PROPERTY
@given(case=requests())
def test_the_latest_user_text_reaches_the_model(
    case: tuple[str, dict[str, Any], tuple[str, str, bool], GovernanceConfig],
) -> None:
    """The task — the latest user message with text — is sent whole, however little room is left."""
    fmt, body, _, config = case
    said = task(fmt, body)
    out = govern_request(body, config=config)
    if said is not None:
        view = FORMATS[fmt].reader(out.request).view  # type: ignore[index]
        sent = "\n".join(text_of(m.get("content")) for m in view if m.get("role") == "user")
        assert all(piece.strip() in sent for piece in said.split("\n") if piece.strip())
