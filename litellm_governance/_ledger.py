"""The token ledger of a governed request: its tokens (tiktoken units) after each stage of the
pipeline (`_pipeline.run`), turned into the provider tokens each stage removed for the report."""

from __future__ import annotations

import math

from ._calls import is_stub
from ._context import Context
from ._messages import Message

__all__ = ["Ledger"]


class Ledger:
    """Tokens (tiktoken units) of the request after each stage, measured only where a stage changed
    the list; `removed` turns them into the provider tokens each stage removed, which add up to
    ``tokens_before - tokens_after`` exactly."""

    def __init__(self, ctx: Context, messages: list[Message]) -> None:
        self._ctx, self._last = ctx, messages
        #: Tokens before the first stage, and after the last measured.
        self.before = self.raw = ctx.request_tokens(messages)
        self._marks: list[tuple[str, int]] = [("", self.raw)]

    def after(self, stage: str, messages: list[Message]) -> None:
        if messages is not self._last:
            self.raw, self._last = self._ctx.request_tokens(messages), messages
        self._marks.append((stage, self.raw))

    def after_shrink(self, before: list[Message], after: list[Message]) -> None:
        """Compaction and snipping run interleaved (`_stable`): what the stubs in `after` save against
        the results they replace is compaction's, the rest snipping's."""
        self._marks.append(
            ("compaction", self.raw - (_stub_savings(before, after, self._ctx) if after is not before else 0))
        )
        self.after("snipping", after)

    def removed(self, ratio: float) -> dict[str, int]:
        """Provider tokens removed per stage (negative where a stage added more than it removed)."""
        out: dict[str, int] = {}
        previous = math.ceil(self._marks[0][1] * ratio)
        for stage, raw in self._marks[1:]:
            now = math.ceil(raw * ratio)
            if now != previous:
                out[stage] = out.get(stage, 0) + previous - now
            previous = now
        return out


def _stub_savings(before: list[Message], after: list[Message], ctx: Context) -> int:
    """Tokens the compaction stubs in `after` save against the results of `before` they replace."""
    kept = {id(m) for m in before}
    stubs = [m for m in after if id(m) not in kept and m.get("role") == "tool" and is_stub(m.get("content"))]
    wanted = {m.get("tool_call_id") for m in stubs}
    whole: dict[object, list[Message]] = {}
    for message in before:
        ident = message.get("tool_call_id")
        if isinstance(ident, str) and ident in wanted and not is_stub(message.get("content")):
            whole.setdefault(ident, []).append(message)
    saved = 0
    for message in stubs:
        originals = whole.get(message.get("tool_call_id"))
        if originals:
            saved += ctx.tokens(originals.pop(0)) - ctx.tokens(message)
    return saved
