"""The one vocabulary of what governance does, as data: every output names things from these tables.

`STEPS` names each step as the report counts it (``report.steps``) and as every output shows it: the
header and log line, ``explain`` (where a message's *fate* is the step that acted on it, or `KEPT`),
the HTML page and the metrics. `STAGES` are the parts of the pipeline the token figures are measured
over (``report.tokens_removed``); each step belongs to one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

__all__ = ["FATES", "KEPT", "STAGES", "STEPS", "Kind", "Stage", "Step", "describe", "step"]  # and the step names

#: What a step does to the messages it touches (the HTML report colours messages by it).
Kind: TypeAlias = Literal["kept", "shrunk", "cut", "dropped", "repaired", "added"]


@dataclass(frozen=True)
class Stage:
    """A part of the pipeline, in order; the tokens each removes are measured around it."""

    name: str
    meaning: str


#: The pipeline's parts, in the order they run (see `_pipeline`).
STAGES: Final[tuple[Stage, ...]] = (
    Stage("repair", "tool-call pairing repaired: orphan and duplicate results dropped, missing ones backfilled"),
    Stage("compaction", "old tool results replaced by one-line stubs"),
    Stage("snipping", "oldest turns cut to fit the budget (less the note listing what they did)"),
    Stage("truncation", "the newest results cut to fit, when even the smallest request does not"),
    Stage("roles", "the provider's role rules: runs merged, trailing or empty messages dropped, turns inserted"),
)


@dataclass(frozen=True)
class Step:
    """One thing governance does to a request, counted in the report under `name`."""

    name: str
    stage: str
    kind: Kind
    #: One line for ``explain``: what a count of it means.
    meaning: str
    #: Shown in the one-line summary (header and log line); the others are in the full report only.
    summary: bool = True


# Step names: every module names a step with these constants, never a string of its own.
COMPACTED_SESSION: Final = "compacted_session"
COMPACTED: Final = "compacted"
SUPERSEDED: Final = "superseded"
SNIPPED: Final = "snipped"
NOTED: Final = "noted"
SUMMARIZED: Final = "summarized"
TRUNCATED: Final = "truncated"
ORPHANS_DROPPED: Final = "orphans_dropped"
DUPLICATES_DROPPED: Final = "duplicates_dropped"
BACKFILLED: Final = "backfilled"
RESULTS_MOVED: Final = "results_moved"
MERGED: Final = "merged"
TRAILING_ASSISTANT_DROPPED: Final = "trailing_assistant_dropped"
RECOVERED_AS_USER: Final = "recovered_as_user"
SYNTHETIC_USER_INSERTED: Final = "synthetic_user_inserted"
TOOL_CALL_IDS_RENAMED: Final = "tool_call_ids_renamed"
MALFORMED_CALLS_DROPPED: Final = "malformed_calls_dropped"
EMPTY_MESSAGES_DROPPED: Final = "empty_messages_dropped"
EMPTY_USER_KEPT: Final = "empty_user_kept"
BLANK_TEXT_DROPPED: Final = "blank_text_dropped"
SYSTEM_CONVERTED: Final = "system_converted"
SYSTEM_HOISTED: Final = "system_hoisted"
ASSISTANT_BRIDGE_INSERTED: Final = "assistant_bridge_inserted"
REASONING_CONTENT_FILLED: Final = "reasoning_content_filled"
OUTPUTS_RETYPED: Final = "outputs_retyped"
THINKING_OFF: Final = "thinking_off"
NULL_CONTENT_FILLED: Final = "null_content_filled"
COMPACTION_SKIPPED_FOR_CACHE: Final = "compaction_skipped_for_cache"

#: Every step, in the order the one-line summary lists them.
STEPS: Final[tuple[Step, ...]] = (
    Step(COMPACTED_SESSION, "compaction", "shrunk", "a compaction request answered with a summary item"),
    Step(COMPACTED, "compaction", "shrunk", "old results of compactable tools replaced by a stub naming the call"),
    Step(SUPERSEDED, "compaction", "shrunk", "stale copies of a file read again later replaced by a stub"),
    Step(SNIPPED, "snipping", "cut", "oldest messages dropped to fit the budget"),
    Step(NOTED, "snipping", "added", "a note listing what the cut turns did, in their place"),
    Step(
        SUMMARIZED,
        "snipping",
        "added",
        "the note for cut turns, opening with a summary model's summary of the earlier ones (summary_model)",
    ),
    Step(TRUNCATED, "truncation", "shrunk", "newest results cut to fit (they cannot fit whole)"),
    Step(ORPHANS_DROPPED, "repair", "dropped", "tool results that answer no earlier tool call dropped"),
    Step(DUPLICATES_DROPPED, "repair", "dropped", "second results for an already answered call dropped"),
    Step(BACKFILLED, "repair", "added", "missing tool results filled with an 'unavailable' stub"),
    Step(RESULTS_MOVED, "repair", "repaired", "tool results moved up to follow their call"),
    Step(MERGED, "roles", "repaired", "consecutive same-role messages merged (nothing lost)"),
    Step(TRAILING_ASSISTANT_DROPPED, "roles", "dropped", "trailing assistant messages dropped (no prefill)"),
    Step(RECOVERED_AS_USER, "roles", "repaired", "last assistant message kept as a user message (nothing else was)"),
    Step(SYNTHETIC_USER_INSERTED, "roles", "added", "user message inserted before a leading assistant message"),
    Step(TOOL_CALL_IDS_RENAMED, "repair", "repaired", "repeated or unacceptable tool-call ids renamed"),
    Step(MALFORMED_CALLS_DROPPED, "repair", "dropped", "tool calls without an id or a function name dropped"),
    Step(EMPTY_MESSAGES_DROPPED, "roles", "dropped", "messages with no content dropped"),
    Step(EMPTY_USER_KEPT, "roles", "kept", "an empty user message kept: it is the only user turn left"),
    Step(BLANK_TEXT_DROPPED, "roles", "repaired", "blank text parts dropped (the provider rejects empty text)"),
    Step(SYSTEM_CONVERTED, "roles", "repaired", "mid-conversation system messages turned into labelled user notes"),
    Step(SYSTEM_HOISTED, "roles", "repaired", "mid-conversation system messages moved up to the system prompt"),
    Step(ASSISTANT_BRIDGE_INSERTED, "roles", "added", "assistant turn inserted between tool results and a user turn"),
    Step(REASONING_CONTENT_FILLED, "roles", "repaired", "reasoning_content filled in for a thinking-mode provider"),
    Step(OUTPUTS_RETYPED, "repair", "repaired", "Responses outputs given the kind their call needs"),
    Step(
        THINKING_OFF,
        "roles",
        "repaired",
        "thinking turned off: the tool loop's last assistant turn lost its signed thinking block on the way",
    ),
    Step(NULL_CONTENT_FILLED, "roles", "repaired", "null content replaced by an empty string", summary=False),
    Step(
        COMPACTION_SKIPPED_FOR_CACHE,
        "compaction",
        "kept",
        "old results left whole before a cache_control breakpoint",
        summary=False,
    ),
)

#: The fate of a message no step touched.
KEPT: Final = "kept"
#: Every fate a message can have in ``explain``: `KEPT`, or the name of the step that acted on it.
FATES: Final[tuple[str, ...]] = (KEPT, *(s.name for s in STEPS if s.name != COMPACTION_SKIPPED_FOR_CACHE))

_BY_NAME: Final[Mapping[str, Step]] = {s.name: s for s in STEPS}
assert {s.stage for s in STEPS} <= {s.name for s in STAGES}, "every step belongs to a stage"


def step(name: str) -> Step | None:
    """The step called `name` (None for a name this version does not know)."""
    return _BY_NAME.get(name)


def describe(name: str) -> str:
    """What a step or stage of that name means ("" for a name this version does not know)."""
    found = _BY_NAME.get(name)
    return found.meaning if found is not None else next((s.meaning for s in STAGES if s.name == name), "")
