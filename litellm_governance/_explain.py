"""`explain`: what governance does to each message of a request — for the CLI's table, ``--json``
and ``--html``. Pure: no I/O.

The request is governed once with every input message tagged with its index (`TRACE`); steps
copy the tag along with the message (a merge keeps both), so each output message says which
input messages it stands for. What happened to each is then read off the two lists: kept as it
was, or the name of the step that acted on it (`_steps`: compacted, merged, snipped,
orphans_dropped, backfilled …).

The token figures come in one set: each side's ``totals`` break the report's ``tokens_before`` /
``tokens_after`` down into system messages, tool schemas, the other messages and the reply priming,
times the token ratio, so the rows add up to the report's figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._calls import is_stub
from ._config import GovernanceConfig
from ._context import Context
from ._formats import Format, detect_format, spec
from ._messages import TRACE, Message, call_id, call_name, is_empty_content, is_system, tool_calls
from ._models import Deployment
from ._pairing import DUPLICATE, ORPHAN, pair
from ._pipeline import run
from ._snip import is_task
from ._steps import KEPT
from ._tokens import REPLY_PRIMING
from ._trace import SUMMARY_START, is_note

__all__ = ["Explanation", "explain"]


@dataclass(frozen=True)
class Explanation:
    """The governed request and, per message, what happened (`as_dict` is the ``--json`` form)."""

    request: dict[str, Any]
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return self.data


def explain(
    request: Mapping[str, Any],
    *,
    model: str,
    format: Format | None = None,
    config: GovernanceConfig | None = None,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
) -> Explanation:
    """Govern `request` (a body of any of the three formats) and say what happened to each message."""
    fmt = detect_format(request) if format is None else format
    parsed = spec(fmt).read(request)
    outline = parsed.outline
    if fmt == "chat":  # the client's own dicts: tag copies
        outline.view = [{**m, TRACE: (i,)} for i, m in enumerate(outline.view)]
    else:  # the outline's own dicts: tag them in place, so rendering still finds them
        for i, message in enumerate(outline.view):
            message[TRACE] = (i,)
    originals = list(outline.view)
    where = getattr(outline, "where", {})
    outcome = run(parsed, Deployment(model, provider, dict(model_info) if model_info else None), config)
    governed, ctx, report = outcome.governed, outcome.context, outcome.report
    names = _call_names(originals)
    outputs: dict[int, list[int]] = {}
    for j, message in enumerate(governed):
        for i in message.get(TRACE, ()):
            outputs.setdefault(i, []).append(j)
    pairing = pair(originals)
    survivors = {i for i, m in enumerate(originals) if i in outputs and not is_system(m)}

    before: list[dict[str, Any]] = []
    highest = -1
    for i, message in enumerate(originals):
        found = outputs.get(i)
        at: int | None = None
        if found:
            at = found[0]
            fate, detail = _change(message, governed[at], ctx)
            if fate == KEPT and at < highest:
                fate, detail = "results_moved", "moved up to follow its call"
            highest = max(highest, at)
        else:
            fate, detail = _dropped(i, message, originals, pairing, survivors)
        before.append(
            {
                "index": i,
                "where": where.get(id(message), f"messages[{i}]"),
                "role": _role(message),
                "tool": _tool(message, names),
                "tokens": ctx.tokens(message),
                "fate": fate,
                "after": at,
                "detail": detail,
            }
        )
    after: list[dict[str, Any]] = []
    for j, message in enumerate(governed):
        sources = list(message.get(TRACE, ()))
        if sources:
            fate, detail = _change(originals[sources[0]], message, ctx, merged=len(sources) > 1)
        elif message.get("role") == "tool":
            fate, detail = "backfilled", "result stub for a call whose result was missing"
        elif is_note(message):
            summarized = str(message.get("content", "")).startswith(SUMMARY_START)
            fate = "summarized" if summarized else "noted"
            detail = (
                "note opening with the summary of earlier cut turns"
                if summarized
                else "note listing what the cut turns did"
            )
        elif message.get("role") == "assistant":
            fate, detail = "assistant_bridge_inserted", "assistant turn the provider's rules need after results"
        else:
            fate, detail = "synthetic_user_inserted", "user turn the provider's rules need first"
        after.append(
            {
                "index": j,
                "role": _role(message),
                "tool": _tool(message, names),
                "tokens": ctx.tokens(message),
                "fate": fate,
                "from": sources,
                "detail": detail,
            }
        )
    leading = [i for i, m in enumerate(originals) if is_system(m) and all(is_system(x) for x in originals[:i])]
    tasks = [i for i, m in enumerate(originals) if is_task(m)]
    ratio = report.token_ratio
    data = {
        "format": fmt,
        "model": model,
        "report": {**report.to_dict(), "summary": report.summary()},
        "totals": {
            "before": _totals(
                originals, before, ctx, tokens=report.tokens_before, in_body=report.messages_before, ratio=ratio
            ),
            "after": _totals(
                governed, after, ctx, tokens=report.tokens_after, in_body=report.messages_after, ratio=ratio
            ),
        },
        "system_kept": all(before[i]["fate"] == KEPT for i in leading),
        "task_kept": bool(tasks) and before[tasks[-1]]["fate"] in (KEPT, "merged", "results_moved"),
        "before": before,
        "after": after,
    }
    fields = {k: _untagged(v) for k, v in outcome.fields.items()}
    governed_request = dict(request)
    governed_request.update(fields)
    return Explanation(request=governed_request, data=data)


def _totals(
    messages: Sequence[Message],
    rows: Sequence[Mapping[str, Any]],
    ctx: Context,
    *,
    tokens: int,
    in_body: int,
    ratio: float,
) -> dict[str, Any]:
    """One side's token figures: what the rows add up to, split into system messages and the others,
    plus the tool schemas and the reply priming, times the ratio: the report's figure."""
    system = sum(row["tokens"] for message, row in zip(messages, rows, strict=True) if is_system(message))
    others = sum(row["tokens"] for row in rows) - system
    return {
        "entries": len(rows),
        "in_body": in_body,
        "system": system,
        "tools": ctx.tools_tokens,
        "messages": others,
        "reply_priming": REPLY_PRIMING,
        "counted": system + ctx.tools_tokens + others + REPLY_PRIMING,
        "ratio": ratio,
        "tokens": tokens,
    }


def _untagged(value: Any) -> Any:
    if isinstance(value, list) and any(isinstance(m, dict) and TRACE in m for m in value):
        return [{k: v for k, v in m.items() if k is not TRACE} if isinstance(m, dict) else m for m in value]
    return value


def _call_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in tool_calls(message):
            ident, name = call_id(call), call_name(call)
            if ident is not None and name is not None:
                names[ident] = name
    return names


def _role(message: Message) -> str:
    role = message.get("role")
    return role if isinstance(role, str) else type(role).__name__


def _tool(message: Message, names: Mapping[str, str]) -> str | None:
    if message.get("role") == "tool":
        name = message.get("name")
        if isinstance(name, str) and name:
            return name
        ident = message.get("tool_call_id")
        return names.get(ident) if isinstance(ident, str) else None
    calls = [n for c in tool_calls(message) if (n := call_name(c)) is not None]
    return ", ".join(calls) if calls else None


def _ids(message: Message) -> list[Any]:
    return [call_id(c) for c in tool_calls(message)]


def _change(original: Message, output: Message, ctx: Context, *, merged: bool | None = None) -> tuple[str, str]:
    """How `output` differs from the `original` it came from."""
    if merged is None:
        merged = len(output.get(TRACE, ())) > 1
    if output is original:
        return KEPT, ""
    if merged:
        return "merged", f"merged with input message(s) {', '.join(str(i) for i in output.get(TRACE, ()))}"
    role, was = output.get("role"), original.get("role")
    if role != was:
        if was == "assistant":
            return "recovered_as_user", "the only turn left, kept as the user's"
        return "system_converted", f"mid-conversation {was} message turned into a labelled {role} note"
    if role == "tool":
        content = output.get("content")
        if is_stub(content) and original.get("content") != content:
            if isinstance(content, str) and content.endswith(" — superseded by a later read]"):
                return (
                    "superseded",
                    f"stale copy of a file read again later: {ctx.tokens(original)} -> {ctx.tokens(output)} tokens",
                )
            return "compacted", f"{ctx.tokens(original)} -> {ctx.tokens(output)} tokens"
        if content != original.get("content") and output.get("tool_call_id") == original.get("tool_call_id"):
            return "truncated", f"newest result cut to fit: {ctx.tokens(original)} -> {ctx.tokens(output)} tokens"
        if output.get("tool_call_id") != original.get("tool_call_id"):
            return "tool_call_ids_renamed", "tool-call id made unique"
    if _ids(output) != _ids(original):
        if len(_ids(output)) < len(_ids(original)):
            return "malformed_calls_dropped", "tool calls without an id or a name dropped"
        return "tool_call_ids_renamed", "tool-call ids made unique"
    if "reasoning_content" in output and "reasoning_content" not in original:
        return "reasoning_content_filled", "reasoning_content the provider requires sent back"
    if original.get("content") is None and output.get("content") == "":
        return "null_content_filled", "null content replaced by an empty string"
    return "blank_text_dropped", "blank text parts dropped"


def _dropped(
    index: int, message: Message, originals: Sequence[Message], pairing: Any, survivors: set[int]
) -> tuple[str, str]:
    """Why an input message reaches no output."""
    reason = pairing.rejected.get(index)
    if reason == ORPHAN:
        return "orphans_dropped", "result for no earlier tool call"
    if reason == DUPLICATE:
        return "duplicates_dropped", "second result for the same call"
    role = message.get("role")
    if role == "assistant" and index in pairing.malformed and is_empty_content(message.get("content")):
        return "malformed_calls_dropped", "tool calls without an id or a name, and no text"
    if role in ("user", "assistant") and is_empty_content(message.get("content")) and not tool_calls(message):
        return "empty_messages_dropped", "no content"
    if role == "assistant" and not any(i > index for i in survivors):
        return "trailing_assistant_dropped", "trailing assistant message (the model takes no prefill)"
    return "snipped", "older history cut to fit the budget"
