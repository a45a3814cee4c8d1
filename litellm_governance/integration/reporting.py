"""Where a pass's report goes: ``spend_logs_metadata.governance`` of the request's LiteLLM metadata
(kept by LiteLLM's standard logging payload, so every logging integration sees it), the proxy's
``x-litellm-governance`` response header, and one INFO log line per changed request. Counts and
token figures only, never content."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from .._report import GovernanceReport
from .._request import Format
from .fields import METADATA, spend_logs
from .logonce import LogOnce

__all__ = ["HEADER", "REPORT_KEY", "header", "log_report", "logger", "record", "report_slot", "with_notes"]

logger = logging.getLogger("litellm_governance")
# Deployments whose budget was 0 (warned about once each).
_no_budget = LogOnce(logger)

#: Response header the proxy adds to governed requests.
HEADER: Final = "x-litellm-governance"
#: Where the report lives in the request metadata (kept by LiteLLM's standard logging payload).
REPORT_KEY: Final = "governance"
# A format of each metadata field a report can be in (chat's ``metadata``, the others' ``litellm_metadata``).
_BY_METADATA: Final[Mapping[str, Format]] = {key: fmt for fmt, key in METADATA.items()}


def report_slot(request: dict[str, Any]) -> dict[str, Any] | None:
    """The report recorded in `request`, in whichever format's metadata it is."""
    for fmt in _BY_METADATA.values():
        spend = spend_logs(request, fmt, create=False)
        report = spend.get(REPORT_KEY) if spend is not None else None
        if isinstance(report, dict):
            return report
    return None


def record(request: dict[str, Any], fmt: Format, entry: dict[str, Any]) -> None:
    """Put `entry` at ``spend_logs_metadata.governance`` of the request's LiteLLM metadata, where
    LiteLLM's standard logging payload (every logging integration) and the header hook find it."""
    spend = spend_logs(request, fmt, create=True)
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
    """The one INFO line for a changed request (figures only), and a WARNING, once per deployment, when
    nothing of the window was left for the history (a max output the operator let the client keep)."""
    if report.budget == 0 and report.context_window:
        _no_budget.log(
            report.model,
            logging.WARNING,
            "no budget left for the history of requests to %s: max output %d of a %d-token window "
            "(set max_output_share, or fit_max_output: true)",
            report.model,
            report.max_output_tokens,
            report.context_window,
        )
    if report.changed:
        logger.info(
            "governed %s [%s, %s, %s]: %s", report.model, report.format, report.profile, stage, report.summary()
        )
