"""`explain`: what governance does to each message of a request — for the CLI's table, ``--json``
and ``--html``. Pure: no I/O.

The request is governed once with every input message tagged with its index (`TRACE`); steps
copy the tag along with the message (a merge keeps both), so each output message says which
input messages it stands for. What happened to each is what the steps recorded (`_context.Fate`):
the step that made, changed or dropped it (`_steps`: compacted, merged, snipped, orphans_dropped,
backfilled …), or kept as it was. Nothing is inferred from the messages' shapes.

The token figures come in one set: each side's ``totals`` break the report's ``tokens_before`` /
``tokens_after`` down into system messages, tool schemas, the other messages and the reply priming,
times the token ratio, so the rows add up to the report's figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._config import GovernanceConfig
from ._context import Context, Fate
from ._formats import Format, detect_format, spec
from ._messages import TRACE, Message, call_id, call_name, is_system, tool_calls
from ._models import Deployment
from ._pipeline import run
from ._snip import is_task
from ._steps import KEPT, MERGED, describe, step
from ._tokens import REPLY_PRIMING

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
    # Tag each message with its index: the outline's own dicts in place (rendering finds them), copies
    # of the client's own.
    if not outline.owns_view:
        outline.view = [dict(m) for m in outline.view]
    for i, message in enumerate(outline.view):
        message[TRACE] = (i,)
    originals = list(outline.view)
    where = getattr(outline, "where", {})
    outcome = run(parsed, Deployment(model, provider, dict(model_info) if model_info else None), config)
    governed, ctx, report = outcome.governed, outcome.context, outcome.report
    story = _Story(originals, governed, outcome.fates, ctx)
    before = [story.input_row(i, where.get(id(m), f"messages[{i}]")) for i, m in enumerate(originals)]
    after = [story.output_row(j) for j in range(len(governed))]
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
        # The task reaches the provider (as it was, or merged with what the rules put next to it).
        "task_kept": bool(tasks) and before[tasks[-1]]["after"] is not None,
        "before": before,
        "after": after,
    }
    governed_request = dict(request)
    governed_request.update({k: _untagged(v) for k, v in outcome.fields.items()})
    return Explanation(request=governed_request, data=data)


class _Story:
    """What the steps recorded, read per message: the fate of each output message (the last step
    that made or changed it) and of each input message that reaches no output (the step that dropped it)."""

    def __init__(
        self, originals: Sequence[Message], governed: Sequence[Message], fates: Sequence[Fate], ctx: Context
    ) -> None:
        self.originals, self.governed, self.ctx = originals, governed, ctx
        self.names = _call_names(originals)
        self.made: dict[int, Fate] = {}  # id(output message) -> its last fate
        present = {id(m) for m in governed}
        self.dropped: dict[int, Fate] = {}  # input index -> the fate that took it out
        for fate in fates:
            if fate.message is None:
                continue
            if id(fate.message) in present:
                self.made[id(fate.message)] = fate
            else:
                for index in fate.message.get(TRACE, ()):
                    self.dropped[index] = fate
        self.outputs: dict[int, list[int]] = {}  # input index -> the output messages standing for it
        for j, message in enumerate(governed):
            for i in message.get(TRACE, ()):
                self.outputs.setdefault(i, []).append(j)

    def input_row(self, i: int, where: str) -> dict[str, Any]:
        original = self.originals[i]
        found = self.outputs.get(i)
        at = found[0] if found else None
        if at is not None:
            fate, detail = self._fate(original, self.governed[at])
        else:
            dropped = self.dropped.get(i)
            fate = dropped.step if dropped is not None else KEPT
            detail = describe(fate) if dropped is not None else ""
        return {
            "index": i,
            "where": where,
            "role": _role(original),
            "tool": _tool(original, self.names),
            "tokens": self.ctx.tokens(original),
            "fate": fate,
            "after": at,
            "detail": detail,
        }

    def output_row(self, j: int) -> dict[str, Any]:
        message = self.governed[j]
        sources = list(message.get(TRACE, ()))
        if sources:
            fate, detail = self._fate(self.originals[sources[0]], message)
        else:
            made = self.made.get(id(message))
            fate = made.step if made is not None else KEPT
            detail = describe(fate)
        return {
            "index": j,
            "role": _role(message),
            "tool": _tool(message, self.names),
            "tokens": self.ctx.tokens(message),
            "fate": fate,
            "from": sources,
            "detail": detail,
        }

    def _fate(self, original: Message, output: Message) -> tuple[str, str]:
        """The fate of `original`, which reached the request as `output`, and a line saying how."""
        made = self.made.get(id(output))
        if made is None:
            return KEPT, ""
        sources = output.get(TRACE, ())
        if made.step == MERGED:
            return MERGED, f"merged with input message(s) {', '.join(str(i) for i in sources)}"
        found = step(made.step)
        if found is not None and found.kind == "shrunk":
            return made.step, f"{describe(made.step)}: {self.ctx.tokens(original)} -> {self.ctx.tokens(output)} tokens"
        return made.step, describe(made.step)


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
