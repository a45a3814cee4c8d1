"""Where a pass's report goes: ``spend_logs_metadata.governance`` of the request's LiteLLM metadata
(kept by LiteLLM's standard logging payload, so every logging integration sees it), the proxy's
``x-litellm-governance`` response header, and one INFO log line per changed request. Counts and
token figures only, never content."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Final

from .._report import GovernanceReport
from .._request import Format
from .fields import metadata_key

__all__ = ["HEADER", "REPORT_KEY", "header", "log_report", "logger", "record", "report_slot", "with_notes"]

logger = logging.getLogger("litellm_governance")

#: Response header the proxy adds to governed requests.
HEADER: Final = "x-litellm-governance"
#: Where the report lives in the request metadata (kept by LiteLLM's standard logging payload).
REPORT_KEY: Final = "governance"
# The formats whose metadata field a report can be in (chat's ``metadata``, the others' ``litellm_metadata``).
_REPORT_FORMATS: Final[tuple[Format, ...]] = ("chat", "anthropic")


def _spend_logs(request: dict[str, Any], fmt: Format, *, create: bool) -> dict[str, Any] | None:
    """``spend_logs_metadata`` in the request's LiteLLM metadata: the part of it LiteLLM's
    standard logging payload keeps."""
    key = metadata_key(request, fmt)
    metadata = request.get(key)
    if metadata is None and create:
        metadata = request[key] = {}
    if not isinstance(metadata, dict):
        return None
    spend = metadata.get("spend_logs_metadata")
    if isinstance(spend, dict):
        return spend
    if not create or spend is not None:
        return None
    spend = metadata["spend_logs_metadata"] = {}
    return spend


def report_slot(request: dict[str, Any]) -> dict[str, Any] | None:
    """The report recorded in `request`, in whichever format's metadata it is."""
    for fmt in _REPORT_FORMATS:
        spend = _spend_logs(request, fmt, create=False)
        report = spend.get(REPORT_KEY) if spend is not None else None
        if isinstance(report, dict):
            return report
    return None


def record(request: dict[str, Any], fmt: Format, entry: dict[str, Any]) -> None:
    """Put `entry` at ``spend_logs_metadata.governance`` of the request's LiteLLM metadata, where
    LiteLLM's standard logging payload (every logging integration) and the header hook find it."""
    spend = _spend_logs(request, fmt, create=True)
    if spend is not None:
        spend[REPORT_KEY] = entry


def header(request: dict[str, Any]) -> dict[str, str] | None:
    """The proxy's response header for `request`: the summary of its report, if it has one."""
    report = report_slot(request)
    summary = report.get("summary") if report else None
    return {HEADER: summary} if isinstance(summary, str) else None


def with_notes(report: GovernanceReport, notes: list[str]) -> GovernanceReport:
    """`report` with `notes` added (the same report when there are none)."""
    return replace(report, notes=(*report.notes, *notes)) if notes else report


def log_report(report: GovernanceReport, stage: str) -> None:
    """The one INFO line for a changed request (figures only)."""
    if report.changed:
        logger.info(
            "governed %s [%s, %s, %s]: %s", report.model, report.format, report.profile, stage, report.summary()
        )
