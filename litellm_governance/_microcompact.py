"""Step: replace old results of compactable tools with a one-line stub that names the call.

The newest ``keep_recent`` results of compactable tools that are at least ``min_chars`` long stay
whole; older ones become a stub saying which call they answered, how large they were and how to
get them back::

    [Read result omitted from context: Read(file_path="src/app.py"), 412 lines — call it again to see it]

A read that a later read of the same file supersedes (`_reads`) is stubbed as soon as the newer
read exists, whatever its age (``… — superseded by a later read``). A result too big to share the
budget with anything else (over half the room for history) is compacted whatever its age.

The results the model is about to read — those after the last assistant turn, *the newest
exchange* — are never stubbed here: the budget is met from older history first, and a newest
result that cannot fit even alone is truncated (`_truncate`), never replaced by a stub.

The tool's name comes from the result's ``name`` or, as OpenAI-format results usually lack it,
from the call it answers; so does the call's main argument (`_calls`). A call of a multi-purpose
tool counts by what it did (an editor's ``view`` is an observation, its edits are not).

With ``compact_batch`` > 1, results are compacted ``compact_batch`` at a time, counted from the
start of the conversation, so the history is rewritten once per batch instead of on every turn.
Results before the last ``cache_control`` breakpoint are left alone unless the budget forces it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from ._calls import CallInfo, describe_size, is_stub, looks_like_error
from ._context import Context, Fate, StepResult, is_turn
from ._messages import Message, content_chars
from ._reads import ReadTarget, is_observation, read_target
from ._steps import COMPACTED, COMPACTION_SKIPPED_FOR_CACHE, SUPERSEDED

__all__ = [
    "AGAIN",
    "LARGE_RESULT_CHARS",
    "STALE",
    "Candidate",
    "Catalogue",
    "catalogue",
    "compact",
    "is_stub",
    "large_uncompactable",
    "microcompact",
    "newest_results",
    "stub_text",
]

#: A tool result this long (about 1,000 tokens) that no rule may compact is named in the report.
LARGE_RESULT_CHARS = 4_000
#: What a stub tells the agent to do, by why the result was omitted.
AGAIN: Final = "call it again to see it"
STALE: Final = "superseded by a later read"


def stub_text(tool_name: str, call: CallInfo | None, size: str, reason: str = AGAIN) -> str:
    """The text that replaces a compacted result of `tool_name`: the call, the size, what to do."""
    described = call.describe() if call is not None else f"{tool_name}()"
    return f"[{tool_name} result omitted from context: {described}, {size} — {reason}]"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A result that may be compacted."""

    index: int
    name: str
    call: CallInfo | None
    #: Index of the earliest later read that supersedes this one (None: not superseded).
    superseded_by: int | None = None


@dataclass(frozen=True)
class Catalogue:
    """The request's compactable results, oldest first, and what protects the others."""

    candidates: list[Candidate]
    #: Results behind the last cache_control breakpoint that would otherwise be candidates.
    protected: int
    #: Indexes of the newest exchange's results (after the last assistant turn): never stubbed.
    newest: frozenset[int]
    #: index -> tool name of large results no rule may compact (for the report).
    large_uncompacted: Mapping[int, str] = field(default_factory=dict)


def newest_results(messages: Sequence[Message], ctx: Context) -> frozenset[int]:
    """Indexes of the results after the last assistant turn: what the model is about to read. The
    bridge turn the rules put after results is no turn; where the rules drop trailing assistant
    text, neither is that text, nor what follows it and ends nothing (`Context.ends_turns`)."""
    last = len(messages) - 1
    if ctx.drops_trailing_assistant():
        while last >= 0 and (
            not ctx.ends_turns(messages[last])
            or (messages[last].get("role") == "assistant" and not messages[last].get("tool_calls"))
        ):
            last -= 1
    while last >= 0 and (messages[last].get("role") != "assistant" or not is_turn(messages[last])):
        last -= 1
    if last < 0:
        return frozenset()
    return frozenset(i for i in range(last + 1, len(messages)) if messages[i].get("role") == "tool")


def catalogue(messages: list[Message], ctx: Context) -> Catalogue:
    """The results that may be compacted, oldest first: results of compactable tools (by the tool
    and what the call did), at least ``min_chars`` long, not already stubs, not protected by a
    ``cache_control`` breakpoint (unless the budget lifted that protection); each with the later
    read that supersedes it, if any. Large results no rule may compact are noted for the report.
    A read behind the breakpoint supersedes nothing after it (reads supersede earlier ones only)."""
    config, calls = ctx.config, ctx.calls_by_id(messages)
    found: list[Candidate] = []
    large: dict[int, str] = {}
    reads: dict[tuple[str, str], list[tuple[int, ReadTarget]]] = {}  # (tool, path) -> [(ordinal, target)]
    for index, message in enumerate(messages):
        if message.get("role") != "tool":
            continue
        ident = message.get("tool_call_id")
        call = calls.get(ident) if isinstance(ident, str) else None
        name = message.get("name")
        if not isinstance(name, str) or not name:
            name = call.name if call is not None else None
        if name is None:
            continue
        target = read_target(call)
        # (a failed read supersedes nothing: whether it failed is asked only when it could)
        if (
            target is not None
            and (earlier_reads := reads.get((target.tool, target.path)))
            and not looks_like_error(message)
        ):
            for ordinal, earlier in earlier_reads:
                if found[ordinal].superseded_by is None and target.covers(earlier):
                    found[ordinal] = replace(found[ordinal], superseded_by=index)
        content = message.get("content")
        chars = content_chars(content)
        if not (config.is_compactable(name) and is_observation(call)):
            if chars >= LARGE_RESULT_CHARS:
                large[index] = name[:40]  # for the report: a tool to consider adding
        elif chars >= config.min_chars and not is_stub(content):  # (a stub: never counted, never again)
            if target is not None:
                reads.setdefault((target.tool, target.path), []).append((len(found), target))
            found.append(Candidate(index, name, call))
    newest = newest_results(messages, ctx)
    protected = -1
    if config.respect_cache_control and not ctx.ignore_breakpoints:
        protected = ctx.last_breakpoint(messages)
    kept = [c for c in found if c.index > protected]
    return Catalogue(kept, len(found) - len(kept), newest, large)


def large_uncompactable(large: Mapping[int, str], *, limit: int = 5) -> dict[str, int]:
    """Tools whose results are large but not compactable (not in ``compactable_tools``), with how
    many such results each has — what an operator may want to add. Collected by `catalogue`
    (index -> name); at most `limit` names, each cut to 40 characters."""
    found: dict[str, int] = {}
    for name in large.values():
        found[name] = found.get(name, 0) + 1
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0]))[:limit])


def is_oversized(message: Message, limit: int, ctx: Context) -> bool:
    """Whether a result costs more than `limit` tokens (a token is at least one UTF-8 byte, at
    most four per character: most results are ruled out without counting)."""
    return 4 * content_chars(message.get("content")) > limit and ctx.tokens(message) > limit


def compact(message: Message, candidate: Candidate, *, superseded: bool | None = None) -> Message:
    """A copy of the result `message` with its content replaced by the stub naming its call;
    `superseded` says why (default: whether a later read supersedes it)."""
    compacted = dict(message)
    if superseded is None:
        superseded = candidate.superseded_by is not None
    reason = STALE if superseded else AGAIN
    compacted["content"] = stub_text(candidate.name, candidate.call, describe_size(message.get("content")), reason)
    return compacted


def microcompact(messages: list[Message], ctx: Context, keep_recent: int | None = None) -> StepResult:
    """Compact what is older than the newest `keep_recent` current results (default: the config's;
    the shrinking attempts pass 0 when the budget demands it), in batches, and whatever is stale or
    oversized; never the newest exchange's results."""
    batch = ctx.config.compact_batch_for(ctx.stable) if keep_recent is None else 1
    keep = ctx.config.keep_recent if keep_recent is None else keep_recent
    found = catalogue(messages, ctx)
    candidates, newest = found.candidates, found.newest
    fates: list[Fate] = []
    if found.protected and len(candidates) + found.protected > keep:
        skipped = min(found.protected, len(candidates) + found.protected - keep)
        fates.append(Fate(COMPACTION_SKIPPED_FOR_CACHE, None, skipped))
    # Superseded reads go whatever their age; keep_recent counts the results still current.
    current = [c for c in candidates if c.superseded_by is None]
    excess = max(0, len(current) - keep)
    old = {c.index for c in current[: excess - excess % batch]}
    limit = ctx.oversized(messages)
    out = messages
    for c in candidates:
        stale = c.superseded_by is not None
        if c.index in newest or not (
            stale or c.index in old or (limit is not None and is_oversized(messages[c.index], limit, ctx))
        ):
            continue
        if out is messages:
            out = list(messages)
        out[c.index] = compact(messages[c.index], c)
        fates.append(Fate(SUPERSEDED if stale else COMPACTED, out[c.index]))
    return StepResult(out, tuple(fates), large_uncompacted=found.large_uncompacted)
