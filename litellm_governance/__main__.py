"""The command line, ``python -m litellm_governance explain FILE --model M`` (installed as
``litellm-governance``): what governance would do to a saved request, message by message."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._config import GovernanceConfig
from ._errors import ConfigError, GovernanceError
from ._explain import Explanation, explain
from ._formats import FORMATS, detect_format
from ._models import widest_deployment
from ._session_compaction import for_explain
from ._steps import describe

DESCRIPTION = (
    "Show what litellm-governance would do to a saved request (a chat completions, Anthropic\n"
    "/v1/messages or OpenAI /v1/responses body, or a bare list of messages), message by message,\n"
    "without sending anything anywhere."
)
EXPLAIN_EPILOG = (
    "examples:\n"
    "  litellm-governance explain request.json --model zai/glm-4.6\n"
    "  litellm-governance explain request.json --model glm --config proxy_config.yaml\n"
    "  litellm-governance explain request.json --model zai/glm-4.6 --html report.html --output governed.json\n"
    "  litellm-governance explain request.json --model zai/glm-4.6 --json | jq .report"
)
# The table's legend.
_COLUMNS = (
    "#: position in the request as sent; where: the field of the body it is in; fate: kept, or the step that\n"
    "acted on it; to #: its position in the governed request (blank: not sent; + rows: added by governance)"
)


def _load(path: str) -> tuple[dict[str, Any], bool]:
    """The request body in `path` (a body, or a recording of ``python -m litellm_governance.testing
    --record-dir``, whose ``body`` it is), and whether the file held a bare message list."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        name = "standard input" if path == "-" else path
        raise GovernanceError(
            f"{name} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): explain reads a request "
            "body (with 'messages' or 'input') or a list of messages, saved as JSON"
        ) from None
    if isinstance(data, list):
        return {"messages": data}, True
    if isinstance(data, dict) and isinstance(data.get("body"), dict) and "messages" not in data and "input" not in data:
        data = data["body"]  # a recording
    if isinstance(data, dict) and ("messages" in data or "input" in data):
        return data, False
    raise GovernanceError(f"{path}: expected a JSON request body (with 'messages' or 'input') or a list of messages")


def _proxy_target(path: str, group: str) -> tuple[str, str | None, Mapping[str, Any] | None, GovernanceConfig]:
    """Resolve a model group and the plugin's options from a proxy config, as the proxy would."""
    import yaml  # a dependency of LiteLLM

    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise GovernanceError(f"cannot read proxy config {path}: {exc}") from None
    if not isinstance(document, Mapping):
        raise GovernanceError(f"{path}: a proxy config is a YAML mapping")
    settings = document.get("callback_settings") or {}
    try:
        config = GovernanceConfig.from_mapping(settings.get("governance") if isinstance(settings, Mapping) else None)
    except ConfigError as exc:
        raise GovernanceError(f"{path}: callback_settings.governance: {exc}") from None
    entries = [e for e in document.get("model_list") or [] if isinstance(e, Mapping)]
    deployment = widest_deployment([e for e in entries if e.get("model_name") == group], config)
    if deployment is None:
        known = sorted({str(e.get("model_name")) for e in entries})
        raise GovernanceError(f"{path}: no model group {group!r} in model_list (groups: {', '.join(known) or 'none'})")
    return deployment.model, deployment.provider, deployment.model_info, config


def render(explanation: Explanation, *, table: bool = True, hints: Sequence[str] = ()) -> str:
    """The explanation as readable lines: the budget, the totals and what each step did, then (with
    `table`) one row per message. `hints` are printed after the budget line."""
    data = explanation.as_dict()
    report = data["report"]
    lines = [*_budget_lines(report), *(f"hint: {hint}" for hint in hints), *_totals_lines(data)]
    if table:
        lines += ["", *_table_lines(data)]
    if not report["changed"]:
        lines.append("unchanged: the request already fits and follows the provider's rules")
    if report["over_budget"]:
        lines.append("OVER BUDGET: even the smallest valid request does not fit")
    if report["cache_prefix_rewritten"]:
        lines.append("note: messages before the last cache_control breakpoint were rewritten")
    if report["large_uncompacted"]:
        named = ", ".join(f"{name} ({count})" for name, count in report["large_uncompacted"].items())
        lines.append(f"note: large results of tools that are not compactable: {named} (see compactable_tools)")
    lines.extend(f"note: {note}" for note in report["notes"])
    return "\n".join(lines)


def _budget_lines(report: Mapping[str, Any]) -> list[str]:
    lines = [
        f"{report['format']} request for {report['model']}: provider {report['provider'] or '(unknown)'}, "
        f"profile {report['profile']}, token ratio {report['token_ratio']} ({report['ratio_source']})"
    ]
    if report["budget"] is None:
        return [*lines, "no context window known: history not snipped"]
    asked = report.get("max_output_lowered_from")
    lowered = f" (max_output {asked:,}->{report['max_output_tokens']:,}: lowered to fit)" if asked else ""
    lines.append(
        f"window {report['context_window']:,} ({report['window_source']}) - max output "
        f"{report['max_output_tokens']:,}{lowered} - safety buffer = budget {report['budget']:,} tokens"
        + (" (cache_stable)" if report["cache_stable"] else "")
    )
    return lines


def _totals_lines(data: Mapping[str, Any]) -> list[str]:
    report = data["report"]
    lines = [
        f"tokens {report['tokens_before']:,} -> {report['tokens_after']:,}; "
        f"messages {report['messages_before']} -> {report['messages_after']}"
    ]
    for side in ("before", "after"):
        totals = data["totals"][side]
        lines.append(
            f"  {side:<6} = (system {totals['system']:,} + tools {totals['tools']:,} + messages "
            f"{totals['messages']:,} + reply priming {totals['reply_priming']}) x ratio {totals['ratio']} "
            f"= {totals['tokens']:,}"
        )
    if report.get("tokens_removed"):
        removed = (f"{k} {n:,}" if n > 0 else f"{k} added {-n:,}" for k, n in report["tokens_removed"].items())
        lines.append("tokens removed: " + ", ".join(removed))
    yes = {True: "yes", False: "NO"}
    lines.append(f"system prompt kept: {yes[data['system_kept']]}; task kept: {yes[data['task_kept']]}")
    lines.extend(f"  {key:<30} {count:>6}  {describe(key)}" for key, count in report["steps"].items())
    return lines


def _table_lines(data: Mapping[str, Any]) -> list[str]:
    def line(at: object, where: str, row: Mapping[str, Any], to: object) -> str:
        return (
            f"{at:>5}  {where[:24]:<24} {row['role'][:10]:<10} {str(row['tool'] or '')[:18]:<18} {row['tokens']:>7}  "
            f"{row['fate']:<26} {to:>5}  {row['detail']}".rstrip()
        )

    lines = [
        _COLUMNS,
        f"{'#':>5}  {'where':<24} {'role':<10} {'tool':<18} {'tokens':>7}  {'fate':<26} {'to #':>5}  detail",
    ]
    lines += [line(r["index"], str(r["where"]), r, "" if r["after"] is None else r["after"]) for r in data["before"]]
    return lines + [line("+", "", r, r["index"]) for r in data["after"] if not r["from"]]


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status (2: bad input)."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as other command-line tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="litellm-governance", description=DESCRIPTION, formatter_class=raw)
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser(
        "explain",
        help="show what governance would do to a saved request",
        description=DESCRIPTION,
        epilog=EXPLAIN_EPILOG,
        formatter_class=raw,
    )
    cmd.add_argument(
        "file", help="JSON request body, message list or --record-dir recording of the testing upstream ('-': stdin)"
    )
    cmd.add_argument("--model", help="LiteLLM model string, or a model group of --config (default: the body's)")
    cmd.add_argument("--config", help="proxy config YAML: resolve --model as a model group, read the plugin's options")
    cmd.add_argument("--format", choices=list(FORMATS), help="request format (default: detected from the body)")
    cmd.add_argument("--json", action="store_true", help="print the explanation as JSON (nothing else on stdout)")
    cmd.add_argument("--html", help="write a self-contained HTML report to this file (the table is then not printed)")
    cmd.add_argument("--window", type=int, help="context window to assume (tokens)")
    cmd.add_argument("--max-output", type=int, help="max output tokens to reserve")
    cmd.add_argument("--profile", help="force a provider profile")
    cmd.add_argument("--output", help="write the governed request to this JSON file")
    return parser


def _explain(args: argparse.Namespace, body: dict[str, Any], model: str) -> tuple[Explanation, list[str]]:
    """Explain `body` as the arguments say, and the hints to print with it."""
    provider, model_info, config = None, None, GovernanceConfig()
    if args.config:
        model, provider, model_info, config = _proxy_target(args.config, model)
    changes = {"context_window_tokens": args.window, "profile": args.profile}
    config = config.replace(**{k: v for k, v in changes.items() if v is not None})
    fmt = args.format or detect_format(body)
    hints: list[str] = []
    if FORMATS[fmt].session_compaction:  # Codex's compaction requests, and the items the proxy answered them with
        body, hints = for_explain(body, model, provider)
    if args.max_output is not None:
        body = {**body, FORMATS[fmt].max_output[0]: args.max_output}
    # LiteLLM prints banners to stdout when asked about a name it does not know: keep stdout ours.
    with contextlib.redirect_stdout(sys.stderr):
        explanation = explain(body, model=model, format=fmt, config=config, provider=provider, model_info=model_info)
    if explanation.as_dict()["report"]["window_source"] == "unknown" and not args.config:
        hints.append(
            f"LiteLLM knows no window for {model!r}: if it is a model group of your proxy, add --config "
            "proxy_config.yaml to resolve it as the proxy does (or give --window N)"
        )
    return explanation, hints


def _main(argv: Sequence[str] | None) -> int:
    # Our own process: LiteLLM (imported for its model map) uses its bundled map instead of fetching one.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        body, bare = _load(args.file)
        model = args.model or body.get("model")
        if not isinstance(model, str) or not model:
            parser.error("--model is required when the file has no 'model'")
        explanation, hints = _explain(args, body, model)
    except (OSError, ValueError, GovernanceError) as exc:
        print(f"litellm-governance: {exc}", file=sys.stderr)
        return 2
    wrote: list[str] = []
    if args.output:
        governed = explanation.request["messages"] if bare else explanation.request
        Path(args.output).write_text(json.dumps(governed, ensure_ascii=False, indent=1), encoding="utf-8")
        wrote.append(f"wrote the governed request to {args.output}")
    if args.html:
        from ._html import render_html

        Path(args.html).write_text(render_html(explanation.as_dict()), encoding="utf-8")
        wrote.append(f"wrote the HTML report to {args.html} (open it in a browser)")
    if args.json:
        print(json.dumps(explanation.as_dict(), indent=1, ensure_ascii=False))
        for line in [*hints, *wrote]:
            print(f"litellm-governance: {line}", file=sys.stderr)
    else:
        print(render(explanation, table=not args.html, hints=hints))
        for line in wrote:
            print(line)
    sys.stdout.flush()  # a closed pipe shows here, inside main's handler, not at interpreter exit
    return 0


if __name__ == "__main__":
    sys.exit(main())
