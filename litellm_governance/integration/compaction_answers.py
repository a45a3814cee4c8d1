"""Codex's remote compaction at the gateway, on the way out: the answer to a summary request the
gateway planned (`session_compaction.Plan`) becomes exactly one ``compaction`` output item — streamed
(`streamed`: ``response.created`` and ``.in_progress`` at once, then, once the deployment's answer is
read to its end, ``response.output_item.added``, ``.done`` and ``response.completed``; none of the
deployment's own events reach the client) or JSON (`answered`). The item holds the model's summary,
or the session's note in ``note`` mode and whenever the answer fails, breaks off or is empty: a
compaction answer never fails (Codex would exit). One INFO line per answer, and the same figures in
``spend_logs_metadata.governance_compaction`` (never content)."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Final

from .._session_compaction import compaction_item, summary_of_answer, text_tokens
from .._steps import COMPACTED_SESSION
from .failures import LogOnce, logger
from .fields import ANSWER_KEY, call_id_of, record
from .session_compaction import NOTE_ANSWER, Plan, plan_of

_FAILED: Final = frozenset({"response.failed", "response.incomplete", "error"})
#: The ``usage`` of an answer no model wrote (``note`` mode).
_NO_USAGE: Final = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
_once = LogOnce(logger)


class _Reading:
    """What the deployment answered to a summary request, read from its stream's events (dicts)."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.texts: list[str] = []
        self.usage: object = None
        self.failed: str | None = None

    def feed(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
            self.deltas.append(event["delta"])
        elif kind == "response.completed" and isinstance(event.get("response"), Mapping):
            response = event["response"]
            self.texts = _output_texts(response.get("output"))
            self.usage = response.get("usage")
        elif kind in _FAILED:
            self.failed = str(kind)

    def text(self) -> str:
        return "\n".join(self.texts) if self.texts else "".join(self.deltas)


def _output_texts(output: object) -> list[str]:
    """The texts of the assistant messages in a response's ``output``."""
    texts = []
    for found in output if isinstance(output, list) else ():
        item = _as_dict(found)
        if item.get("type") != "message":
            continue
        for block in item.get("content") or ():
            part = _as_dict(block)
            if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return texts


def _as_dict(value: object) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    found = dump() if callable(dump) else None
    return found if isinstance(found, dict) else {}


def _events(chunk: object, pending: list[str]) -> Iterable[dict[str, Any]]:
    """The events in one chunk of a stream: a pydantic event, a dict, or SSE text (bytes or str,
    possibly cut mid-event: `pending` holds the rest until the next chunk)."""
    if isinstance(chunk, (bytes, str)):
        pending.append(chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else chunk)
        text = "".join(pending)
        complete, _, rest = text.rpartition("\n\n")
        pending[:] = [rest]
        for frame in complete.split("\n\n"):
            for line in frame.splitlines():
                if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                    try:
                        yield _as_dict(json.loads(line[5:]))
                    except ValueError:
                        continue
        return
    yield _as_dict(chunk)


def _summary(plan: Plan, reading: _Reading | None, error: BaseException | None) -> tuple[str, str]:
    """The item's summary and the answer's outcome: ``model``, ``note``, or why the note stands in."""
    if plan.mode == "note":
        return plan.note, "note"
    if error is not None:
        return plan.note, f"note (the model's answer failed: {type(error).__name__})"
    if reading is not None and reading.failed is not None:
        return plan.note, f"note (the model's answer ended with {reading.failed})"
    summary = summary_of_answer(reading.text() if reading is not None else None)
    if summary is None:
        return plan.note, "note (the model wrote no summary)"
    if summary == NOTE_ANSWER:
        return plan.note, "note (the model's call failed: the gateway's own fallback answered)"
    return summary, "model"


def _answer(request: Mapping[str, Any], plan: Plan, summary: str, outcome: str) -> dict[str, Any]:
    """The compaction item that answers, after its log line and figures (never content; fails open)."""
    with _once.guard("compaction answer not logged (%s at %s)"):
        seconds = time.perf_counter() - plan.started
        after = text_tokens(summary, plan.model)
        model, before = request.get("model"), plan.tokens_before
        logger.info(
            "%s for %s: %s; %d -> %d tokens in %.2f s", COMPACTED_SESSION, model, outcome, before, after, seconds
        )
        if isinstance(request, dict):
            figures = {"mode": plan.mode, "outcome": outcome, "tokens_before": before, "tokens_after": after}
            record(request, "responses", {**figures, "seconds": round(seconds, 3)}, key=ANSWER_KEY)
    return compaction_item(summary)


async def streamed(request: Mapping[str, Any], response: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The proxy's stream for `request`: as it came, or, for a summary request the gateway planned,
    the compaction events (module docstring) once the deployment's own stream has been read."""
    plan = plan_of(request)
    if plan is None:
        async for chunk in response:
            yield chunk
        return
    ident = "resp_" + (call_id_of(request) or "gateway").replace("-", "")
    base = {"id": ident, "object": "response", "created_at": int(time.time()), "model": request.get("model")}
    numbers = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": next(numbers), **fields}
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

    opening: dict[str, Any] = {**base, "status": "in_progress", "output": []}
    yield event("response.created", response=opening) + event("response.in_progress", response=opening)
    reading, error, pending = _Reading(), None, [""]
    try:
        async for chunk in response:
            for found in _events(chunk, pending):
                reading.feed(found)
    except Exception as exc:  # noqa: BLE001 - the note stands in: a compaction answer never fails
        error = exc
    item = _answer(request, plan, *_summary(plan, reading, error))
    usage = reading.usage if plan.mode == "model" and isinstance(reading.usage, Mapping) else _NO_USAGE
    closing = {**base, "status": "completed", "output": [item], "usage": usage}
    yield (
        event("response.output_item.added", output_index=0, item=item)
        + event("response.output_item.done", output_index=0, item=item)
        + event("response.completed", response=closing)
    )


def answered(request: Mapping[str, Any], response: Any) -> Any:
    """A JSON answer to a summary request the gateway planned, with ``output: [item]`` (None:
    not such a request, or already answered)."""
    plan = plan_of(request)
    output = getattr(response, "output", None) if not isinstance(response, Mapping) else response.get("output")
    if plan is None or not isinstance(output, list):
        return None
    if len(output) == 1 and _as_dict(output[0]).get("type") == "compaction":
        return None  # answered by an earlier hook
    try:
        reading = _Reading()
        reading.texts = _output_texts(output)
        summary, outcome = _summary(plan, reading, None)
    except Exception as exc:  # noqa: BLE001 - the note stands in
        summary, outcome = _summary(plan, None, exc)
    item = _answer(request, plan, summary, outcome)
    if isinstance(response, Mapping):
        return {**response, "output": [item]}
    try:
        return response.model_copy(update={"output": [item]})
    except Exception as exc:  # noqa: BLE001 - a plain response, with the item, rather than none
        _once.failure(exc, "compaction answer sent as a plain response (%s at %s)")
        return {"id": getattr(response, "id", None), "object": "response", "status": "completed", "output": [item]}
