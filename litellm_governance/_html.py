"""`render_html`: one self-contained HTML page showing what governance did to one request.

Input: the ``explain`` JSON (figures, and per message its role, tool, tokens and fate; never content),
every string escaped (roles, tool names and fates come from the client). The page loads nothing: its
CSS and script (``_html.css``, ``_html.js``) are inline, the script pinned by a CSP hash. The header,
legend, strips ("before" and "after", one cell per message, width by tokens) and tables are rendered
here; the script only adds the hover card, the counterpart highlight and click-to-row.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from html import escape
from importlib.resources import files
from typing import Any, Final

from ._steps import FATES, SUPERSEDED, TRUNCATED, Kind, step

__all__ = ["FATE_COLOURS", "FATE_PATTERNS", "KIND_COLOURS", "OTHER_COLOUR", "PATTERNS", "render_html"]

_CSS: Final = files("litellm_governance").joinpath("_html.css").read_text(encoding="utf-8")
_SCRIPT: Final = files("litellm_governance").joinpath("_html.js").read_text(encoding="utf-8")
_CSP: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; "
    f"script-src 'sha256-{base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()}'; "
    "base-uri 'none'; form-action 'none'"
)

# Colours by what a step does to a message (`_steps.Kind`): the Okabe-Ito palette, whose colours
# readers with any common colour-vision deficiency can tell apart (tests/test_html_report.py checks).
KIND_COLOURS: Final[Mapping[Kind, str]] = {
    "kept": "#56B4E9",  # sky blue
    "shrunk": "#E69F00",  # orange: compacted, superseded, truncated
    "cut": "#D55E00",  # vermillion: snipped
    "dropped": "#CC79A7",  # reddish purple: removed as invalid
    "repaired": "#0072B2",  # blue: changed in place
    "added": "#009E73",  # bluish green: backfilled, inserted, the note for cut turns
}
#: Colour of a fate this module does not know (shown with its own name in the legend).
OTHER_COLOUR: Final = "#333333"
#: Patterns drawn over a cell's colour (CSS background images: gradients, nothing loaded).
PATTERNS: Final[Mapping[str, str]] = {
    "stripes": "repeating-linear-gradient(135deg,rgba(255,255,255,.8) 0 2px,transparent 2px 5px)",
    "bars": "repeating-linear-gradient(0deg,rgba(31,41,51,.6) 0 2px,transparent 2px 6px)",
}
#: Shrunk fates told apart at a glance: the stage by the hue (truncation the palette's yellow), the
#: fate by a pattern, which a reader who sees no colour still sees. Other fates are plain.
FATE_PATTERNS: Final[Mapping[str, str]] = {SUPERSEDED: "stripes", TRUNCATED: "bars"}
_FATE_HUES: Final[Mapping[str, str]] = {TRUNCATED: "#F0E442"}  # yellow
#: Every fate's colour, in legend order: `KEPT`, then the steps in their order (`_steps`).
FATE_COLOURS: Final[Mapping[str, str]] = {
    fate: _FATE_HUES.get(fate) or KIND_COLOURS[found.kind if (found := step(fate)) is not None else "kept"]
    for fate in FATES
}
# Roles that get a dark underline in the strips, so the system prompt and user turns stand out.
_MARKED_ROLES = {"system": " r-sys", "developer": " r-sys", "user": " r-user"}
_FLAGS: Final[Mapping[Any, str]] = {
    True: '<span class="yes">kept ✓</span>',
    False: '<span class="no">not kept ✗</span>',
}
# The strips wrap: at most this many full rows of tokens (cells' minimum width may add a few more).
_MAX_ROWS = 40
# The breakdown's columns: key in a side's totals -> heading.
_BREAKDOWN = {"system": "system", "tools": "tool schemas", "messages": "messages", "reply_priming": "reply priming"}

Row = Mapping[str, Any]


def _links(before: Sequence[Row], after: Sequence[Row]) -> tuple[list[list[int]], list[list[int]]]:
    """Each side's counterparts in the other strip (an output's ``from`` names its inputs)."""
    links: tuple[list[list[int]], list[list[int]]] = ([[] for _ in before], [[] for _ in after])
    for b, a in sorted({(i, j) for j, row in enumerate(after) for i in row["from"]}):
        links[0][b].append(a)
        links[1][a].append(b)
    return links


def _num(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def _fate_class(fate: str) -> str:
    return f"f-{fate}" if fate in FATE_COLOURS else "f-other"


def _row_tokens(window: int | None, total: int) -> tuple[int, str]:
    """Tokens one full strip row stands for, and what that number is."""
    if window is not None and 0 < window <= total:
        if window * _MAX_ROWS >= total:
            return window, "the context window"
        n, what = total / _MAX_ROWS, f"so that the request takes about {_MAX_ROWS} rows"
    else:
        n, what = total * 1.1, "the larger side, with room for the cells' minimum width"
    step = int(10 ** max(0, len(str(math.ceil(n))) - 2))  # rounded up to two significant digits: a readable scale
    return math.ceil(n / step) * step, what


def _strip(side: str, rows: Sequence[Row], links: list[list[int]], row_tokens: int) -> str:
    cells = "".join(
        f'<span class="cell {_fate_class(row["fate"])}{_MARKED_ROLES.get(row["role"], "")}" '
        f'data-index="{row["index"]}" data-fate="{escape(row["fate"])}" data-tokens="{row["tokens"]}" '
        f'data-link="{" ".join(map(str, linked))}" '
        f'style="width:{min(100.0, 100.0 * row["tokens"] / row_tokens):.3f}%"></span>'
        for row, linked in zip(rows, links, strict=True)
    )
    return (
        f'<h2>{side.title()} <small>{len(rows):,} entries · <span class="strip-tokens">'
        f"{sum(r['tokens'] for r in rows):,}</span> tokens of system and messages, before the ratio</small></h2>"
        f'<div class="strip" id="strip-{side}">{cells}</div>'
    )


def _table(side: str, rows: Sequence[Row]) -> str:
    before = side == "before"
    heads = ["#", "where", "role", "tool", "tokens", "fate", "after" if before else "from", "detail"]
    if not before:
        heads.remove("where")
    out = []
    for position, row in enumerate(rows):
        targets = ([] if row["after"] is None else [row["after"]]) if before else row["from"]
        cols = [
            f'<td class="num">{row["index"]}</td>',
            f'<td class="mono">{escape(row["where"])}</td>' if before else "",
            f"<td>{escape(row['role'])}</td>",
            f"<td>{escape(row['tool'] or '')}</td>",
            f'<td class="num">{row["tokens"]:,}</td>',
            f'<td><i class="sw {_fate_class(row["fate"])}"></i> {escape(row["fate"])}</td>',
            f'<td class="num">{", ".join(map(str, targets)) or ("—" if before else "— (new)")}</td>',
            f"<td>{escape(row['detail'])}</td>",
        ]
        out.append(
            f'<tr id="{side[0]}-{position}" data-index="{row["index"]}" data-fate="{escape(row["fate"])}" '
            f'data-tokens="{row["tokens"]}">{"".join(cols)}</tr>'
        )
    title = "Input messages" if before else "Governed messages"
    return (
        f"<details{' open' if before else ''}><summary>{title} ({len(rows):,})</summary>"
        f'<table class="msgs" id="table-{side}"><thead><tr>{"".join(f"<th>{h}</th>" for h in heads)}</tr></thead>'
        f"<tbody>{''.join(out)}</tbody></table></details>"
    )


def _fate_css() -> str:
    """One rule per fate: its colour, and its pattern where it has one (`FATE_PATTERNS`)."""
    rules = []
    for fate, colour in FATE_COLOURS.items():
        pattern = PATTERNS.get(FATE_PATTERNS.get(fate, ""))
        rules.append(f".f-{fate}{{background-color:{colour}" + (f";background-image:{pattern}}}" if pattern else "}"))
    return "".join(rules) + f".f-other{{background-color:{OTHER_COLOUR}}}"


def _legend(before: Sequence[Row], after: Sequence[Row]) -> str:
    counts_before, counts_after = Counter(r["fate"] for r in before), Counter(r["fate"] for r in after)
    seen = counts_before | counts_after
    items = [
        f'<li data-fate="{escape(fate)}" data-before="{counts_before[fate]}" data-after="{counts_after[fate]}">'
        f'<i class="sw {_fate_class(fate)}"></i>{escape(fate)}'
        f'<span class="n">{counts_before[fate]:,} in · {counts_after[fate]:,} out</span></li>'
        for fate in [f for f in FATE_COLOURS if f in seen] + [f for f in seen if f not in FATE_COLOURS]
    ]
    what = (
        '<p class="what" id="legend-what">Messages by fate, as the strips and tables show them: cells in the '
        "request · in the governed request (one fate each: the step that acted on it, or kept).</p>"
    )
    return f'{what}<ul class="legend" id="legend">{"".join(items)}</ul>'


def _gauge(before: int | None, after: int | None, budget: int | None, window: int | None) -> str:
    top = max(n for n in (before, after, budget, window, 1) if n is not None)

    def pct(n: int) -> str:
        return f"{min(100.0, 100.0 * n / top):.2f}%"

    bars = "".join(
        f'<div class="bar {name}"><span>{name}</span><span class="track">'
        f'<span class="fill" style="width:{pct(n)}"></span></span><span class="v">{n:,}</span></div>'
        for name, n in (("before", before), ("after", after))
        if n is not None
    )
    ticks = "".join(
        f'<i class="tick {name}" style="left:{pct(n)}"><b>{name} {n:,}</b></i>'
        for name, n in (("budget", budget), ("window", window))
        if n is not None and 0 < n <= top
    )
    return f'<div class="gauge">{bars}<div class="ticks">{ticks}</div></div>'


def _header(explain: Row, report: Row) -> str:
    before, after = report.get("tokens_before"), report.get("tokens_after")
    window, budget, source = report.get("context_window"), report.get("budget"), report.get("window_source")
    saved = ""
    if before and after is not None:
        saved = f' <span class="muted">({100.0 * (after - before) / before:+.0f}%)</span>'
    facts = [
        ("format", escape(explain.get("format") or "unknown")),
        ("profile", escape(report.get("profile") or "unknown")),
        ("context window", _num(window) + (f' <span class="muted">({escape(source)})</span>' if source else "")),
        ("budget", _num(budget)),
        ("tokens", f"{_num(before)} → {_num(after)}{saved}"),
        ("messages in the body", f"{_num(report.get('messages_before'))} → {_num(report.get('messages_after'))}"),
        ("system prompt", _FLAGS.get(explain.get("system_kept"), '<span class="muted">unknown</span>')),
        ("task", _FLAGS.get(explain.get("task_kept"), '<span class="muted">unknown</span>')),
    ]
    html = "".join(
        f'<div class="fact{" wide" if k == "tokens" else ""}"><dt>{k}</dt><dd>{v}</dd></div>' for k, v in facts
    )
    html = f'<dl class="facts">{html}</dl>'
    if report.get("over_budget"):
        html += '<p class="alert"><b>Over budget:</b> the governed request is still larger than the budget.</p>'
    if report.get("changed") is False:
        html += '<p class="sub">Governance left this request unchanged.</p>'
    html += _gauge(before, after, budget, window) + _breakdown(explain.get("totals"), report)
    if steps := report.get("steps"):
        chips = "".join(f"<li>{escape(k)} <b>{escape(str(v))}</b></li>" for k, v in steps.items())
        html += (
            '<p class="what" id="steps-what">Steps, as the report counts them: how many times each acted '
            f'(a merge of two messages is one).</p><ul class="chips" id="steps">{chips}</ul>'
        )
    elif summary := report.get("summary"):
        html += f'<p class="sub mono" id="summary">{escape(summary)}</p>'
    if report.get("cache_prefix_rewritten"):
        html += '<p class="sub">Note: the cached prompt prefix was rewritten.</p>'
    if notes := "".join(f"<li>{escape(n)}</li>" for n in report.get("notes", ())):
        html += f'<ul class="notes" id="notes">{notes}</ul>'
    return (
        f'<header><h1>Governance report: <span class="model">{escape(_model(explain)) or "unknown model"}</span></h1>'
        '<p class="sub">What governance did to one request, message by message. '
        f"Roles, tool names and token counts only: no message content.</p>{html}</header>"
    )


def _model(explain: Row) -> str:
    return str(explain.get("model") or explain["report"].get("model") or "")


def _breakdown(totals: Row | None, report: Row) -> str:
    """Where the token figures come from: per side, system messages + tool schemas + the other
    messages + the reply priming, times the token ratio (the strips show the system and message parts)."""
    if totals is None:  # an explanation saved by a version without it
        return ""
    rows = []
    for side in ("before", "after"):
        t = totals[side]
        cells = "".join(f'<td class="num">{_num(t[key])}</td>' for key in [*_BREAKDOWN, "counted"])
        rows.append(
            f'<tr data-side="{side}"><th>{side}</th>{cells}<td class="num">\u00d7 {t["ratio"]}</td>'
            f'<td class="num"><b>{_num(t["tokens"])}</b></td></tr>'
        )
    heads = "".join(f"<th>{label}</th>" for label in [*_BREAKDOWN.values(), "counted"])
    return (
        f'<table class="totals" id="totals"><thead><tr><th></th>{heads}<th>token ratio</th><th>tokens</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="sub">Tokens: tiktoken counts of the system messages, the tool schemas and the other messages, '
        f"plus the reply priming, times the token ratio ({escape(report['ratio_source'])}): the provider's tokenizer "
        f"counts that much more or less. The strips below show the system and message parts, one cell per entry: "
        f"each message of the body, with a top-level system prompt and each tool result of a message a cell of "
        f"its own.</p>"
    )


def render_html(explain: Mapping[str, Any]) -> str:
    """The explain JSON as one self-contained HTML page (inline CSS and JS, nothing loaded)."""
    report, before, after = explain["report"], explain["before"], explain["after"]
    links_before, links_after = _links(before, after)
    total = max(sum(r["tokens"] for r in before), sum(r["tokens"] for r in after), 1)
    row_tokens, row_what = _row_tokens(report.get("context_window"), total)

    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape('Governance: ' + _model(explain))}</title><style>{_CSS}{_fate_css()}</style></head>\n"
        f"<body><main>{_header(explain, report)}\n"
        f"{_legend(before, after)}"
        f'<p class="scale">One cell per message, width proportional to tokens: a full row is '
        f"{row_tokens:,} tokens ({row_what}); every cell has a minimum width. "
        f"Dark underline: system or developer message; grey: user message. "
        f"Hover a cell for details and its counterpart; click it for its table row.</p>"
        f'<section class="strips" id="strips">{_strip("before", before, links_before, row_tokens)}\n'
        f"{_strip('after', after, links_after, row_tokens)}"
        '<div id="veil"></div><div id="marks"></div></section>\n'
        f"{_table('before', before)}\n{_table('after', after)}\n"
        f'</main><div id="tip" role="tooltip"></div>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
