"""`explain`: what governance does to each message of a request, for the CLI's table, ``--json``
and ``--html``. Pure: no I/O.

The request is governed once with every input message tagged with its index (`TRACE`); steps copy
the tag along (a merge keeps both), so each output message names the inputs it stands for. Each
message's fate is what the steps recorded (`_context.Fate`): the step that made, changed or
dropped it, or kept.
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
from ._report import GovernanceReport
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
    data = {
        "format": fmt,
        "model": model,
        "report": {**report.to_dict(), "summary": report.summary()},
        "totals": {
            "before": _totals(originals, before, ctx, report, "before"),
            "after": _totals(governed, after, ctx, report, "after"),
        },
        "system_kept": all(before[i]["fate"] == KEPT for i in leading),
        # The task reaches the provider (as it was, or merged with what the rules put next to it).
        "task_kept": bool(tasks) and before[tasks[-1]]["after"] is not None,
        "before": before,
        "after": after,
    }
    untagged = {k: [_untagged(m) for m in v] if isinstance(v, list) else v for k, v in outcome.fields.items()}
    return Explanation(request={**request, **untagged}, data=data)


class _Story:
    """What the steps recorded, read per message: the fate of each output message (the last step
    that made or changed it) and of each input message that reaches no output (the step that dropped it)."""

    def __init__(
        self, originals: Sequence[Message], governed: Sequence[Message], fates: Sequence[Fate], ctx: Context
    ) -> None:
        self.originals, self.governed, self.ctx = originals, governed, ctx
        self.names = {
            ident: name
            for m in originals
            for c in tool_calls(m)
            if (ident := call_id(c)) is not None and (name := call_name(c)) is not None
        }
        present = {id(m) for m in governed}
        self.made: dict[int, Fate] = {}  # id(output message) -> its last fate
        self.dropped: dict[int, Fate] = {}  # input index -> the fate that took it out
        for fate in fates:
            if fate.message is not None and id(fate.message) in present:
                self.made[id(fate.message)] = fate
            elif fate.message is not None:
                self.dropped.update(dict.fromkeys(fate.message.get(TRACE, ()), fate))
        self.outputs: dict[int, int] = {}  # input index -> the first output message standing for it
        for j, message in enumerate(governed):
            for i in message.get(TRACE, ()):
                self.outputs.setdefault(i, j)

    def input_row(self, i: int, where: str) -> dict[str, Any]:
        at = self.outputs.get(i)
        if at is not None:
            fate, detail = self._fate(self.originals[i], self.governed[at])
        elif (dropped := self.dropped.get(i)) is not None:
            fate, detail = dropped.step, describe(dropped.step)
        else:
            fate, detail = KEPT, ""
        return {"index": i, "where": where, **self._row(self.originals[i], fate), "after": at, "detail": detail}

    def output_row(self, j: int) -> dict[str, Any]:
        message = self.governed[j]
        sources = list(message.get(TRACE, ()))
        if sources:
            fate, detail = self._fate(self.originals[sources[0]], message)
        else:
            made = self.made.get(id(message))
            fate = made.step if made is not None else KEPT
            detail = describe(fate)
        return {"index": j, **self._row(message, fate), "from": sources, "detail": detail}

    def _row(self, message: Message, fate: str) -> dict[str, Any]:
        role = message.get("role")
        return {
            "role": role if isinstance(role, str) else type(role).__name__,
            "tool": _tool(message, self.names),
            "tokens": self.ctx.tokens(message),
            "fate": fate,
        }

    def _fate(self, original: Message, output: Message) -> tuple[str, str]:
        """The fate of `original`, which reached the request as `output`, and a line saying how."""
        made = self.made.get(id(output))
        if made is None:
            return KEPT, ""
        if made.step == MERGED:
            return MERGED, f"merged with input message(s) {', '.join(str(i) for i in output.get(TRACE, ()))}"
        found = step(made.step)
        if found is not None and found.kind == "shrunk":
            return made.step, f"{describe(made.step)}: {self.ctx.tokens(original)} -> {self.ctx.tokens(output)} tokens"
        return made.step, describe(made.step)


def _totals(
    messages: Sequence[Message], rows: Sequence[Mapping[str, Any]], ctx: Context, report: GovernanceReport, side: str
) -> dict[str, Any]:
    """One side's token figures: its rows split into system messages and the others, plus the tool
    schemas and the reply priming, times the ratio: the report's ``tokens_<side>``."""
    system = sum(row["tokens"] for message, row in zip(messages, rows, strict=True) if is_system(message))
    others = sum(row["tokens"] for row in rows) - system
    return {
        "entries": len(rows),
        "in_body": getattr(report, f"messages_{side}"),
        "system": system,
        "tools": ctx.tools_tokens,
        "messages": others,
        "reply_priming": REPLY_PRIMING,
        "counted": system + ctx.tools_tokens + others + REPLY_PRIMING,
        "ratio": report.token_ratio,
        "tokens": getattr(report, f"tokens_{side}"),
    }


def _untagged(value: Any) -> Any:
    return {k: v for k, v in value.items() if k is not TRACE} if isinstance(value, dict) and TRACE in value else value


def _tool(message: Message, names: Mapping[str, str]) -> str | None:
    if message.get("role") == "tool":
        name = message.get("name")
        if isinstance(name, str) and name:
            return name
        ident = message.get("tool_call_id")
        return names.get(ident) if isinstance(ident, str) else None
    calls = [n for c in tool_calls(message) if (n := call_name(c)) is not None]
    return ", ".join(calls) if calls else None
