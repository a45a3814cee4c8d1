"""The one vocabulary of what governance does, as data: every output names things from these tables.

`STEPS` holds each step's name exactly as the report counts it (``report.steps``) and as every output
shows it: the ``x-litellm-governance`` header and the log line (`GovernanceReport.summary`),
``explain``'s table, ``--json`` and ``--html`` (where a message's *fate* is the name of the step that
acted on it, or `KEPT`), and the metrics' labels. `STAGES` names the parts of the pipeline the token
figures are measured over (``report.tokens_removed``, the ``step`` label of
``litellm_governance_tokens_removed_total``); each step belongs to one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

__all__ = ["FATES", "KEPT", "STAGES", "STEPS", "Kind", "Stage", "Step", "describe", "step"]

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


#: Every step, in the order the one-line summary lists them.
STEPS: Final[tuple[Step, ...]] = (
    Step("compacted_session", "compaction", "shrunk", "a compaction request answered with a summary item"),
    Step("compacted", "compaction", "shrunk", "old results of compactable tools replaced by a stub naming the call"),
    Step("superseded", "compaction", "shrunk", "stale copies of a file read again later replaced by a stub"),
    Step("snipped", "snipping", "cut", "oldest messages dropped to fit the budget"),
    Step("noted", "snipping", "added", "a note listing what the cut turns did, in their place"),
    Step(
        "summarized",
        "snipping",
        "added",
        "the note for cut turns, opening with a summary model's summary of the earlier ones (summary_model)",
    ),
    Step("truncated", "truncation", "shrunk", "newest results cut to fit (they cannot fit whole)"),
    Step("orphans_dropped", "repair", "dropped", "tool results that answer no earlier tool call dropped"),
    Step("duplicates_dropped", "repair", "dropped", "second results for an already answered call dropped"),
    Step("backfilled", "repair", "added", "missing tool results filled with an 'unavailable' stub"),
    Step("results_moved", "repair", "repaired", "tool results moved up to follow their call"),
    Step("merged", "roles", "repaired", "consecutive same-role messages merged (nothing lost)"),
    Step("trailing_assistant_dropped", "roles", "dropped", "trailing assistant messages dropped (no prefill)"),
    Step("recovered_as_user", "roles", "repaired", "last assistant message kept as a user message (nothing else was)"),
    Step("synthetic_user_inserted", "roles", "added", "user message inserted before a leading assistant message"),
    Step("tool_call_ids_renamed", "repair", "repaired", "repeated or unacceptable tool-call ids renamed"),
    Step("malformed_calls_dropped", "repair", "dropped", "tool calls without an id or a function name dropped"),
    Step("empty_messages_dropped", "roles", "dropped", "messages with no content dropped"),
    Step("empty_user_kept", "roles", "kept", "an empty user message kept: it is the only user turn left"),
    Step("blank_text_dropped", "roles", "repaired", "blank text parts dropped (the provider rejects empty text)"),
    Step("system_converted", "roles", "repaired", "mid-conversation system messages turned into labelled user notes"),
    Step("system_hoisted", "roles", "repaired", "mid-conversation system messages moved up to the system prompt"),
    Step("assistant_bridge_inserted", "roles", "added", "assistant turn inserted between tool results and a user turn"),
    Step("reasoning_content_filled", "roles", "repaired", "reasoning_content filled in for a thinking-mode provider"),
    Step("outputs_retyped", "repair", "repaired", "Responses outputs given the kind their call needs"),
    Step(
        "thinking_off",
        "roles",
        "repaired",
        "thinking turned off: the tool loop's last assistant turn lost its signed thinking block on the way",
    ),
    Step("null_content_filled", "roles", "repaired", "null content replaced by an empty string", summary=False),
    Step(
        "compaction_skipped_for_cache",
        "compaction",
        "kept",
        "old results left whole before a cache_control breakpoint",
        summary=False,
    ),
)

#: The fate of a message no step touched.
KEPT: Final = "kept"
#: Every fate a message can have in ``explain``: `KEPT`, or the name of the step that acted on it.
FATES: Final[tuple[str, ...]] = (KEPT, *(s.name for s in STEPS if s.name != "compaction_skipped_for_cache"))

_BY_NAME: Final[Mapping[str, Step]] = {s.name: s for s in STEPS}
_STAGE_NAMES: Final = frozenset(s.name for s in STAGES)
assert all(s.stage in _STAGE_NAMES for s in STEPS), "every step belongs to a stage"


def step(name: str) -> Step | None:
    """The step called `name` (None for a name this version does not know)."""
    return _BY_NAME.get(name)


def describe(name: str) -> str:
    """What a step or stage of that name means ("" for a name this version does not know)."""
    found = _BY_NAME.get(name)
    if found is not None:
        return found.meaning
    return next((s.meaning for s in STAGES if s.name == name), "")
