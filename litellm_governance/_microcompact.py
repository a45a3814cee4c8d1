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

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ._calls import CallInfo, calls_by_id, describe_size, is_stub, looks_like_error
from ._context import Context, StepResult, is_turn
from ._messages import Message, content_chars
from ._reads import is_observation, read_target

__all__ = [
    "AGAIN",
    "LARGE_RESULT_CHARS",
    "SUPERSEDED",
    "Candidate",
    "Catalogue",
    "Catalogued",
    "Microcompact",
    "catalogue",
    "compact",
    "is_stub",
    "large_uncompactable",
    "newest_results",
    "stub_text",
]

#: A tool result this long (about 1,000 tokens) that no rule may compact is named in the report.
LARGE_RESULT_CHARS = 4_000
#: What a stub tells the agent to do, by why the result was omitted.
AGAIN: Final = "call it again to see it"
SUPERSEDED: Final = "superseded by a later read"


def stub_text(tool_name: str, call: CallInfo | None, size: str, reason: str = AGAIN) -> str:
    """The text that replaces a compacted result of `tool_name`: the call, the size, what to do."""
    described = call.describe() if call is not None else f"{tool_name}()"
    return f"[{tool_name} result omitted from context: {described}, {size} — {reason}]"


@dataclass(slots=True)
class Candidate:
    """A result that may be compacted (never changed once made; not frozen: one is built per result
    on every request, and a frozen dataclass's constructor costs three times as much)."""

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


def newest_results(
    messages: Sequence[Message],
    *,
    drops_trailing: bool = False,
    ends_turns: Callable[[Message], bool] | None = None,
) -> frozenset[int]:
    """Indexes of the results after the last assistant turn: what the model is about to read (the
    assistant turn a provider's rules put between results and the next user message is no turn,
    nor, with `drops_trailing`, assistant text that ends the request: the rules drop it — and what
    follows it ends nothing where the rules drop or move it, `ends_turns` false: a system message
    Gemini's rules hoist, a blank user message strict profiles drop)."""
    last = len(messages) - 1
    if drops_trailing:
        while last >= 0 and (
            (ends_turns is not None and not ends_turns(messages[last]))
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

    The request's catalogue without protection is made once per list (`Context.memo`: a shrinking
    attempt that respects the breakpoint and one that lifts it read the same results) and the
    protected one taken from it: a read behind the breakpoint supersedes nothing after it (reads
    supersede earlier ones only), so the candidates after the breakpoint are the same, with the
    same supersessions; those up to it are what protection counts. Where the previous request of
    the conversation began this list (`Context.conversation`), its walk is resumed, not redone."""
    memo, rules = ctx.memo, (ctx.config, ctx.profile, ctx.allow_prefill)  # what else it reads
    if memo.catalogue is None or memo.catalogue[0] is not messages or memo.catalogue[1] != rules:
        shared = ctx.conversation(messages)
        before = shared[1].get("catalogue") if shared is not None else None
        found, walked = Catalogued.walk_over(
            messages,
            ctx,
            rules,
            before if isinstance(before, Catalogued) else None,
            shared[0] if shared is not None else None,
        )
        memo.catalogue = (messages, rules, found)
        if walked is not None:
            ctx.keep("catalogue", walked)
    whole = memo.catalogue[2]
    protected = -1
    if ctx.config.respect_cache_control and not ctx.ignore_breakpoints:
        protected = ctx.last_breakpoint(messages)
    if protected < 0 or not whole.candidates or whole.candidates[0].index > protected:
        return whole
    kept = [c for c in whole.candidates if c.index > protected]
    return Catalogue(kept, len(whole.candidates) - len(kept), whole.newest, whole.large_uncompacted)


@dataclass(slots=True)
class Catalogued:
    """Where the walk that catalogues a request's results stands after its first `end` messages:
    plain values only (indexes, names, the calls named), so that the next request of the same
    conversation, which begins with those messages (`_conversations`), resumes the walk there."""

    #: The rules the walk applied (config, profile, prefill).
    rules: tuple[object, ...]
    end: int
    #: call id -> the call it names, in the messages walked (`_calls.calls_by_id`).
    calls: dict[str, CallInfo]
    #: The candidates so far, as found (the later reads superseding them are in `superseded`).
    found: list[Candidate]
    large: dict[int, str]
    reads: dict[tuple[str, str], list[tuple[int, object]]]  # (tool, path) -> [(candidate ordinal, target)]
    superseded: dict[int, int]  # candidate ordinal -> index of the read superseding it

    @classmethod
    def walk_over(
        cls,
        messages: list[Message],
        ctx: Context,
        rules: tuple[object, ...],
        before: Catalogued | None,
        mark: int | None,
    ) -> tuple[Catalogue, Catalogued | None]:
        """The catalogue of `messages`, with no breakpoint protecting anything, resuming `before`
        (the walk over the messages they begin with) where nothing after those messages changes what
        it found; and a copy of the walk as it stood after the first `mark` messages (None where the
        messages after them could change it: a later call reusing an id)."""
        state = None
        if before is not None and before.rules == rules and before.end <= len(messages):
            state = before._copy(before.calls)
        start = state.end if state is not None else 0
        cut = mark if mark is not None and start <= mark <= len(messages) else len(messages)
        middle = calls_by_id(messages[start:cut])
        tail = calls_by_id(messages[cut:]) if cut < len(messages) else {}
        if state is not None and not (state.calls.keys().isdisjoint(middle) and state.calls.keys().isdisjoint(tail)):
            # A later call with the same id wins (`calls_by_id`): results walked may name another call.
            state, middle = None, calls_by_id(messages[:cut])
        if state is None:
            state = cls(rules, 0, {}, [], {}, {}, {})
        upto = {**state.calls, **middle} if state.calls else middle
        calls = {**upto, **tail} if tail else upto
        ctx.memo.calls = (messages, calls)  # every other reader of the calls (notes) takes them from here
        state._walk(messages, ctx, calls, cut)
        kept = state._copy(upto) if cut == mark and upto.keys().isdisjoint(tail) else None
        state._walk(messages, ctx, calls, len(messages))
        candidates = list(state.found)
        for ordinal, later in state.superseded.items():
            earlier = candidates[ordinal]
            candidates[ordinal] = Candidate(earlier.index, earlier.name, earlier.call, later)
        newest = newest_results(messages, drops_trailing=ctx.drops_trailing_assistant(), ends_turns=ctx.ends_turns)
        return Catalogue(candidates, 0, newest, dict(state.large)), kept

    def _copy(self, calls: dict[str, CallInfo]) -> Catalogued:
        reads = {key: list(found) for key, found in self.reads.items()}
        return Catalogued(self.rules, self.end, calls, list(self.found), dict(self.large), reads, dict(self.superseded))

    def _walk(self, messages: list[Message], ctx: Context, calls: Mapping[str, CallInfo], end: int) -> None:
        """Catalogue the messages from `end` up to `end` (the argument), naming calls from `calls`."""
        config = ctx.config
        compactable = config.compactable_tools
        found, large, reads, superseded = self.found, self.large, self.reads, self.superseded
        for index in range(self.end, end):
            message = messages[index]
            if message.get("role") != "tool":
                continue
            ident = message.get("tool_call_id")
            call = calls.get(ident) if isinstance(ident, str) else None
            name = message.get("name")
            if not isinstance(name, str) or not name:
                name = call.name if call is not None else None
            if name is None:
                continue
            content = message.get("content")
            target = read_target(call)
            if target is not None and not looks_like_error(message):
                for ordinal, earlier in reads.get((target.tool, target.path), ()):
                    if ordinal not in superseded and target.covers(earlier):  # type: ignore[arg-type]
                        superseded[ordinal] = index
            chars = content_chars(content)
            if not (compactable == "*" or name in compactable) or not is_observation(call):  # `is_compactable`
                if chars >= LARGE_RESULT_CHARS:
                    large[index] = name[:40]  # for the report: a tool to consider adding
                continue
            if chars < config.min_chars:
                continue
            if is_stub(content):
                continue  # already compacted (never counted, so a second pass changes nothing)
            if target is not None:
                reads.setdefault((target.tool, target.path), []).append((len(found), target))
            found.append(Candidate(index, name, call))
        self.end = end


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
    reason = SUPERSEDED if superseded else AGAIN
    compacted["content"] = stub_text(candidate.name, candidate.call, describe_size(message.get("content")), reason)
    return compacted


class Microcompact:
    name = "microcompact"

    def __init__(self, *, keep_recent: int | None = None) -> None:
        #: Overrides the config's keep_recent (the pipeline passes 0 when the budget demands it).
        self.keep_recent = keep_recent

    def __call__(self, messages: list[Message], ctx: Context) -> StepResult:
        keep_recent = ctx.config.keep_recent if self.keep_recent is None else self.keep_recent
        counts: Counter[str] = Counter()
        batch = ctx.config.compact_batch_for(ctx.stable) if self.keep_recent is None else 1
        found = catalogue(messages, ctx)
        candidates, newest = found.candidates, found.newest
        if found.protected and len(candidates) + found.protected > keep_recent:
            counts["compaction_skipped_for_cache"] += min(
                found.protected, len(candidates) + found.protected - keep_recent
            )
        # Superseded reads go whatever their age; keep_recent counts the results still current.
        current = [c for c in candidates if c.superseded_by is None]
        excess = max(0, len(current) - keep_recent)
        excess -= excess % batch
        old = {c.index for c in current[:excess]}
        limit = ctx.oversized(messages)
        chosen = [
            c
            for c in candidates
            if c.index not in newest
            and (
                c.superseded_by is not None
                or c.index in old
                or (limit is not None and is_oversized(messages[c.index], limit, ctx))
            )
        ]
        if not chosen:
            return StepResult(messages, counts, large_uncompacted=found.large_uncompacted)
        out = list(messages)
        for candidate in chosen:
            out[candidate.index] = compact(messages[candidate.index], candidate)
            counts["superseded" if candidate.superseded_by is not None else "compacted"] += 1
        return StepResult(out, counts, large_uncompacted=found.large_uncompacted)
