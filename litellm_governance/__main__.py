"""Command line: ``python -m litellm_governance explain FILE --model M [--json]``.

Shows what governance would do to a saved request body (``messages``, ``tools``,
``max_tokens``) or a bare message list, without sending anything anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._config import GovernanceConfig
from ._errors import GovernanceError
from ._pipeline import govern
from ._report import GovernanceReport

# Why each step count happened, for the readable summary.
_EXPLANATIONS = {
    "compacted": "old results of compactable tools replaced by a one-line stub",
    "snipped": "oldest messages dropped to fit the budget",
    "orphans_dropped": "tool results that answer no earlier tool call dropped",
    "duplicates_dropped": "second results for an already answered call dropped",
    "malformed_calls_dropped": "tool calls without an id or a function name dropped",
    "backfilled": "missing tool results filled with an 'unavailable' stub",
    "results_moved": "tool results moved up to follow their call",
    "null_content_filled": "null content replaced by an empty string",
    "empty_messages_dropped": "assistant messages with no content and no tool calls dropped",
    "merged": "consecutive same-role messages merged (nothing lost)",
    "trailing_assistant_dropped": "trailing assistant messages dropped (no prefill)",
    "recovered_as_user": "last assistant message kept as a user message (nothing else was left)",
    "synthetic_user_inserted": "user message inserted before a leading assistant message",
    "tool_call_ids_renamed": "repeated tool-call ids renamed (call and result alike)",
    "compaction_skipped_for_cache": "old results left whole before a cache_control breakpoint",
}


def _load(path: str) -> tuple[list[Any], list[Any] | None, int | None, str | None]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    data = json.loads(text)
    if isinstance(data, list):
        return data, None, None, None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        max_output = data.get("max_completion_tokens") or data.get("max_tokens")
        model = data.get("model")
        return (
            data["messages"],
            data.get("tools"),
            max_output if isinstance(max_output, int) else None,
            model if isinstance(model, str) else None,
        )
    raise GovernanceError(f"{path}: expected a JSON list of messages or an object with a 'messages' list")


def render(report: GovernanceReport) -> str:
    """The report as a few readable lines."""
    lines = [f"model {report.model}: provider {report.provider or '(unknown)'}, profile {report.profile}"]
    if report.budget is None:
        lines.append("no context window known: history not snipped")
    else:
        lines.append(
            f"window {report.context_window:,} ({report.window_source}) - max output "
            f"{report.max_output_tokens:,} - safety buffer = budget {report.budget:,} tokens"
        )
    lines.append(
        f"tokens {report.tokens_before:,} -> {report.tokens_after:,}; "
        f"messages {report.messages_before} -> {report.messages_after}"
    )
    for key, count in report.steps.items():
        lines.append(f"  {key:<30} {count:>6}  {_EXPLANATIONS.get(key, '')}")
    if not report.changed:
        lines.append("unchanged: the request already fits and follows the provider's rules")
    if report.over_budget:
        lines.append("OVER BUDGET: even the smallest valid request does not fit")
    if report.cache_prefix_rewritten:
        lines.append("note: messages before the last cache_control breakpoint were rewritten")
    lines.extend(f"note: {note}" for note in report.notes)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="litellm-governance", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    explain = commands.add_parser("explain", help="show what governance would do to a saved request")
    explain.add_argument("file", help="JSON request body or message list ('-' for stdin)")
    explain.add_argument("--model", help="LiteLLM model string (default: the body's 'model')")
    explain.add_argument("--json", action="store_true", help="print the report as JSON")
    explain.add_argument("--window", type=int, help="context window to assume (tokens)")
    explain.add_argument("--max-output", type=int, help="max output tokens to reserve")
    explain.add_argument("--profile", help="force a provider profile")
    explain.add_argument("--output", help="write the governed messages to this JSON file")
    args = parser.parse_args(argv)

    try:
        messages, tools, max_output, body_model = _load(args.file)
        model = args.model or body_model
        if not model:
            parser.error("--model is required when the file has no 'model'")
        config = GovernanceConfig(context_window_tokens=args.window, profile=args.profile)
        result = govern(
            messages,
            model=model,
            tools=tools,
            max_output_tokens=args.max_output if args.max_output is not None else max_output,
            config=config,
        )
    except (OSError, ValueError, GovernanceError) as exc:
        print(f"litellm-governance: {exc}", file=sys.stderr)
        return 2
    if args.output:
        Path(args.output).write_text(json.dumps(result.messages, ensure_ascii=False, indent=1), encoding="utf-8")
    if args.json:
        print(json.dumps(result.report.to_dict(), indent=2))
    else:
        print(render(result.report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
