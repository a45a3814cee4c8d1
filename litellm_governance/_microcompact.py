"""Step: replace old results of compactable tools with a one-line stub.

The newest ``keep_recent`` results of compactable tools that are at least ``min_chars`` long stay
whole; older ones become ``[<tool> result omitted from context]``. A result too big to share the
budget with anything else (over half the room for history) is compacted whatever its age. The tool's name comes from the
result's ``name`` or, as OpenAI-format results usually lack it, from the call it answers.

With ``compact_batch`` > 1, results are compacted ``compact_batch`` at a time, counted from the
start of the conversation, so the history is rewritten once per batch instead of on every turn.
Results before the last ``cache_control`` breakpoint are left alone unless the budget forces it.
"""

from __future__ import annotations

from ._context import Context
from ._messages import Message, call_id, call_name, content_chars, tool_calls

__all__ = ["LARGE_RESULT_CHARS", "Microcompact", "compact", "compactable_results", "large_uncompactable", "stub_for"]

#: A tool result this long (about 1,000 tokens) that no rule may compact is named in the report.
LARGE_RESULT_CHARS = 4_000


def stub_for(tool_name: str) -> str:
    """The text that replaces a compacted result of `tool_name`."""
    return f"[{tool_name} result omitted from context]"


def compactable_results(messages: list[Message], ctx: Context) -> tuple[list[tuple[int, str]], int]:
    """(index, tool name) of every result that may be compacted, oldest first: results of
    compactable tools, at least ``min_chars`` long, not already stubs, not protected by a
    ``cache_control`` breakpoint (unless the budget lifted that protection); and how many such
    results the breakpoint protects."""
    config = ctx.config
    protected = -1
    if config.respect_cache_control and not ctx.ignore_breakpoints:
        protected = ctx.last_breakpoint(messages)
    names: dict[str, str] = {}
    found: list[tuple[int, str]] = []
    protected_count = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            for call in tool_calls(message):
                ident, name = call_id(call), call_name(call)
                if ident is not None and name is not None:
                    names[ident] = name
        elif role == "tool":
            name = message.get("name")
            if not isinstance(name, str) or not name:
                ident = message.get("tool_call_id")
                name = names.get(ident) if isinstance(ident, str) else None
            if name is None:
                continue
            if not config.is_compactable(name):
                if content_chars(message.get("content")) >= LARGE_RESULT_CHARS:
                    ctx.large_uncompacted[index] = name[:40]  # for the report: a tool to consider adding
                continue
            content = message.get("content")
            stub = stub_for(name)
            if content == stub:
                continue  # already compacted (never counted, so a second pass changes nothing)
            chars = content_chars(content)
            if chars >= config.min_chars and chars > len(stub):
                if index <= protected:
                    protected_count += 1
                else:
                    found.append((index, name))
    return found, protected_count


def large_uncompactable(ctx: Context, *, limit: int = 5) -> dict[str, int]:
    """Tools whose results are large but not compactable (not in ``compactable_tools``), with how
    many such results each has — what an operator may want to add. Collected by
    `compactable_results`; at most `limit` names, each cut to 40 characters."""
    found: dict[str, int] = {}
    for name in ctx.large_uncompacted.values():
        found[name] = found.get(name, 0) + 1
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0]))[:limit])


def is_oversized(message: Message, limit: int, ctx: Context) -> bool:
    """Whether a result costs more than `limit` tokens (a token is at least one UTF-8 byte, at
    most four per character: most results are ruled out without counting)."""
    return 4 * content_chars(message.get("content")) > limit and ctx.tokens(message) > limit


def compact(message: Message, tool_name: str) -> Message:
    """A copy of the result `message` with its content replaced by the stub."""
    compacted = dict(message)
    compacted["content"] = stub_for(tool_name)
    return compacted


class Microcompact:
    name = "microcompact"

    def __init__(self, *, keep_recent: int | None = None) -> None:
        #: Overrides the config's keep_recent (the pipeline passes 0 when the budget demands it).
        self.keep_recent = keep_recent

    def __call__(self, messages: list[Message], ctx: Context) -> list[Message]:
        keep_recent = ctx.config.keep_recent if self.keep_recent is None else self.keep_recent
        batch = ctx.config.compact_batch_for(ctx.stable) if self.keep_recent is None else 1
        candidates, protected = compactable_results(messages, ctx)
        if protected and len(candidates) + protected > keep_recent:
            ctx.counts["compaction_skipped_for_cache"] += min(protected, len(candidates) + protected - keep_recent)
        excess = max(0, len(candidates) - keep_recent)
        excess -= excess % batch
        limit = ctx.oversized(messages)
        chosen = [
            (index, name)
            for ordinal, (index, name) in enumerate(candidates)
            if ordinal < excess or (limit is not None and is_oversized(messages[index], limit, ctx))
        ]
        if not chosen:
            return messages
        out = list(messages)
        for index, name in chosen:
            out[index] = compact(messages[index], name)
        ctx.counts["compacted"] += len(chosen)
        return out
