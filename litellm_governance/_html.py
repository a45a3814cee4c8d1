"""`render_html`: one self-contained HTML page showing what governance did to one request.

The input is the ``explain`` JSON (header figures plus one entry per input and per output message: role,
tool name, tokens, fate; never message content). Every string in it is treated as untrusted and escaped.
The page loads nothing: inline CSS and one inline script, pinned by a Content-Security-Policy hash.

Layout: a header with the request's figures, a legend of fates with counts, two strips ("before" and
"after", one cell per message, width proportional to tokens) and a plain table per side. Everything is
rendered here, server side; the script only adds the hover card, the counterpart highlight, and
click-to-row. The hover card reads the table row, so the data lives in the page once.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any, Final

from ._html_assets import CSP as _CSP
from ._html_assets import CSS as _CSS
from ._html_assets import SCRIPT as _SCRIPT
from ._steps import FATES, Kind, step

__all__ = ["FATE_COLOURS", "FATE_PATTERNS", "KIND_COLOURS", "OTHER_COLOUR", "PATTERNS", "render_html"]

# Colours by what a step does to a message (`_steps.Kind`): the Okabe-Ito palette, whose colours
# readers with any common colour-vision deficiency can tell apart (tests/test_html_report.py checks
# every pair under simulated protanopia, deuteranopia and tritanopia).
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
#: Fates of one kind that a long request has many of, told apart at a glance: the stage by the hue
#: (compaction orange, truncation the palette's yellow), the fate by a pattern, which a reader who
#: cannot tell the hues apart (or sees no colour at all) still sees. Other fates are plain.
FATE_PATTERNS: Final[Mapping[str, str]] = {"superseded": "stripes", "truncated": "bars"}
_FATE_HUES: Final[Mapping[str, str]] = {"truncated": "#F0E442"}  # yellow
#: Every fate's colour, in legend order: `KEPT`, then the steps in their order (`_steps`).
FATE_COLOURS: Final[Mapping[str, str]] = {
    fate: _FATE_HUES.get(fate) or KIND_COLOURS[found.kind if (found := step(fate)) is not None else "kept"]
    for fate in FATES
}
# Roles that get a dark underline in the strips, so the system prompt and user turns stand out.
_MARKED_ROLES = {"system": "r-sys", "developer": "r-sys", "user": "r-user"}
# The strips wrap: at most this many full rows of tokens (cells' minimum width may add a few more).
_MAX_ROWS = 40


@dataclass
class _Entry:
    """One message of either side, normalised: every field has its type whatever the input held."""

    position: int
    index: int
    where: str
    role: str
    tool: str
    tokens: int
    fate: str
    detail: str
    #: The other side's message indexes: `after` for an input message, `from` for an output one.
    targets: list[int]
    #: Positions of the counterpart cells in the other strip (filled in by `_link`).
    links: list[int] = field(default_factory=list)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def _ints(value: Any) -> list[int]:
    if not isinstance(value, list | tuple):
        value = [value]
    return [n for n in (_int(v) for v in value) if n is not None]


def _entries(raw: Any, targets_key: str) -> list[_Entry]:
    if not isinstance(raw, list | tuple):
        return []
    out = []
    for position, raw_item in enumerate(raw):
        item = raw_item if isinstance(raw_item, Mapping) else {}
        index = _int(item.get("index"))
        out.append(
            _Entry(
                position=position,
                index=position if index is None else index,
                where=_text(item.get("where")),
                role=_text(item.get("role")),
                tool=_text(item.get("tool")),
                tokens=max(0, _int(item.get("tokens")) or 0),
                fate=_text(item.get("fate")) or "unknown",
                detail=_text(item.get("detail")),
                targets=_ints(item.get(targets_key)),
            )
        )
    return out


def _link(before: list[_Entry], after: list[_Entry]) -> None:
    """Fill each entry's `links` from both directions (`after` of inputs, `from` of outputs)."""
    before_at = {e.index: e.position for e in reversed(before)}
    after_at = {e.index: e.position for e in reversed(after)}
    pairs: set[tuple[int, int]] = set()
    for e in before:
        pairs.update((e.position, after_at[t]) for t in e.targets if t in after_at)
    for e in after:
        pairs.update((before_at[s], e.position) for s in e.targets if s in before_at)
    for b, a in sorted(pairs):
        before[b].links.append(a)
        after[a].links.append(b)


def _num(value: Any) -> str:
    n = _int(value)
    return "unknown" if n is None else f"{n:,}"


def _fate_class(fate: str) -> str:
    return f"f-{fate}" if fate in FATE_COLOURS else "f-other"


def _fate_order(entries: Iterable[_Entry]) -> list[str]:
    seen = dict.fromkeys(e.fate for e in entries)
    return [f for f in FATE_COLOURS if f in seen] + [f for f in seen if f not in FATE_COLOURS]


def _row_tokens(window: int | None, before: list[_Entry], after: list[_Entry]) -> tuple[int, str]:
    """Tokens one full strip row stands for, and what that number is."""
    total = max(sum(e.tokens for e in before), sum(e.tokens for e in after), 1)
    if window is not None and window > 0 and window <= total:
        if window * _MAX_ROWS >= total:
            return window, "the context window"
        return _round_up(total / _MAX_ROWS), f"so that the request takes about {_MAX_ROWS} rows"
    return _round_up(total * 1.1), "the larger side, with room for the cells' minimum width"


def _round_up(n: float) -> int:
    """`n` rounded up to two significant digits (a readable scale)."""
    step = int(10 ** max(0, len(str(math.ceil(n))) - 2))
    return math.ceil(n / step) * step


def _strip(side: str, entries: list[_Entry], row_tokens: int) -> str:
    cells = []
    for e in entries:
        width = min(100.0, 100.0 * e.tokens / row_tokens)
        role = _MARKED_ROLES.get(e.role, "")
        cells.append(
            f'<span class="cell {_fate_class(e.fate)}{" " + role if role else ""}" data-index="{e.index}" '
            f'data-fate="{escape(e.fate)}" data-tokens="{e.tokens}" data-link="{" ".join(map(str, e.links))}" '
            f'style="width:{width:.3f}%"></span>'
        )
    return f'<div class="strip" id="strip-{side}">{"".join(cells)}</div>'


def _table(side: str, entries: list[_Entry]) -> str:
    before = side == "before"
    last = "after" if before else "from"
    heads = ["#", "where", "role", "tool", "tokens", "fate", last, "detail"]
    if not before:
        heads.remove("where")
    rows = []
    for e in entries:
        went = ", ".join(map(str, e.targets)) or ("—" if before else "— (new)")
        cols = [
            f'<td class="num">{e.index}</td>',
            f'<td class="mono">{escape(e.where)}</td>' if before else "",
            f"<td>{escape(e.role)}</td>",
            f"<td>{escape(e.tool)}</td>",
            f'<td class="num">{e.tokens:,}</td>',
            f'<td><i class="sw {_fate_class(e.fate)}"></i> {escape(e.fate)}</td>',
            f'<td class="num">{went}</td>',
            f"<td>{escape(e.detail)}</td>",
        ]
        rows.append(
            f'<tr id="{side[0]}-{e.position}" data-index="{e.index}" data-fate="{escape(e.fate)}" '
            f'data-tokens="{e.tokens}">{"".join(cols)}</tr>'
        )
    title = "Input messages" if before else "Governed messages"
    return (
        f"<details{' open' if before else ''}><summary>{title} ({len(entries):,})</summary>"
        f'<table class="msgs" id="table-{side}"><thead><tr>{"".join(f"<th>{h}</th>" for h in heads)}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></details>"
    )


def _fate_css() -> str:
    """One rule per fate: its colour, and its pattern where it has one (`FATE_PATTERNS`)."""
    rules = []
    for fate, colour in FATE_COLOURS.items():
        pattern = PATTERNS.get(FATE_PATTERNS.get(fate, ""))
        rules.append(f".f-{fate}{{background-color:{colour}" + (f";background-image:{pattern}}}" if pattern else "}"))
    return "".join(rules) + f".f-other{{background-color:{OTHER_COLOUR}}}"


def _legend(before: list[_Entry], after: list[_Entry]) -> str:
    items = []
    counts_before, counts_after = Counter(e.fate for e in before), Counter(e.fate for e in after)
    for fate in _fate_order([*before, *after]):
        n_before, n_after = counts_before[fate], counts_after[fate]
        items.append(
            f'<li data-fate="{escape(fate)}" data-before="{n_before}" data-after="{n_after}">'
            f'<i class="sw {_fate_class(fate)}"></i>{escape(fate)}'
            f'<span class="n">{n_before:,} in · {n_after:,} out</span></li>'
        )
    what = (
        '<p class="what" id="legend-what">Messages by fate, as the strips and tables show them: cells in the '
        "request · in the governed request (one fate each: the step that acted on it, or kept).</p>"
    )
    return f'{what}<ul class="legend" id="legend">{"".join(items)}</ul>'


def _flag(value: Any) -> str:
    if value is True:
        return '<span class="yes">kept ✓</span>'
    if value is False:
        return '<span class="no">not kept ✗</span>'
    return '<span class="muted">unknown</span>'


def _gauge(tokens_before: int | None, tokens_after: int | None, budget: int | None, window: int | None) -> str:
    top = max(n for n in (tokens_before, tokens_after, budget, window, 1) if n is not None)

    def pct(n: int) -> str:
        return f"{min(100.0, 100.0 * n / top):.2f}%"

    bars = "".join(
        f'<div class="bar {name}"><span>{name}</span><span class="track">'
        f'<span class="fill" style="width:{pct(n)}"></span></span><span class="v">{n:,}</span></div>'
        for name, n in (("before", tokens_before), ("after", tokens_after))
        if n is not None
    )
    ticks = "".join(
        f'<i class="tick {cls}" style="left:{pct(n)}"><b>{label} {n:,}</b></i>'
        for cls, label, n in (("budget", "budget", budget), ("window", "window", window))
        if n is not None and n > 0 and n <= top
    )
    return f'<div class="gauge">{bars}<div class="ticks">{ticks}</div></div>'


def _header(explain: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    model = _text(explain.get("model") or report.get("model"))
    tokens_before, tokens_after = _int(report.get("tokens_before")), _int(report.get("tokens_after"))
    window, budget = _int(report.get("context_window")), _int(report.get("budget"))
    saved = ""
    if tokens_before and tokens_after is not None:
        saved = f' <span class="muted">({100.0 * (tokens_after - tokens_before) / tokens_before:+.0f}%)</span>'
    source = _text(report.get("window_source"))
    facts = [
        ("format", escape(_text(explain.get("format")) or "unknown")),
        ("profile", escape(_text(report.get("profile")) or "unknown")),
        ("context window", _num(window) + (f' <span class="muted">({escape(source)})</span>' if source else "")),
        ("budget", _num(budget)),
        ("tokens", f"{_num(tokens_before)} → {_num(tokens_after)}{saved}"),
        ("messages in the body", f"{_num(report.get('messages_before'))} → {_num(report.get('messages_after'))}"),
        ("system prompt", _flag(explain.get("system_kept"))),
        ("task", _flag(explain.get("task_kept"))),
    ]
    dl = "".join(
        f'<div class="fact{" wide" if k == "tokens" else ""}"><dt>{k}</dt><dd>{v}</dd></div>' for k, v in facts
    )
    alerts = ""
    if report.get("over_budget") is True:
        alerts += '<p class="alert"><b>Over budget:</b> the governed request is still larger than the budget.</p>'
    if report.get("changed") is False:
        alerts += '<p class="sub">Governance left this request unchanged.</p>'
    steps = report.get("steps")
    chips = ""
    if isinstance(steps, Mapping) and steps:
        chips = "".join(f"<li>{escape(_text(k))} <b>{escape(_text(v))}</b></li>" for k, v in steps.items())
        chips = (
            '<p class="what" id="steps-what">Steps, as the report counts them: how many times each acted '
            f'(a merge of two messages is one).</p><ul class="chips" id="steps">{chips}</ul>'
        )
    notes = report.get("notes")
    notes_list = [_text(n) for n in notes] if isinstance(notes, list | tuple) else []
    notes_html = "".join(f"<li>{escape(n)}</li>" for n in notes_list)
    extra = []
    if report.get("cache_prefix_rewritten") is True:
        extra.append("the cached prompt prefix was rewritten")
    summary = _text(report.get("summary"))
    return (
        f'<header><h1>Governance report: <span class="model">{escape(model) or "unknown model"}</span></h1>'
        f'<p class="sub">What governance did to one request, message by message. '
        f"Roles, tool names and token counts only: no message content.</p>"
        f'<dl class="facts">{dl}</dl>{alerts}'
        f"{_gauge(tokens_before, tokens_after, budget, window)}{_breakdown(explain.get('totals'), report)}{chips}"
        + (f'<p class="sub mono" id="summary">{escape(summary)}</p>' if summary and not chips else "")
        + (f'<p class="sub">Note: {"; ".join(extra)}.</p>' if extra else "")
        + (f'<ul class="notes" id="notes">{notes_html}</ul>' if notes_html else "")
        + "</header>"
    )


# The breakdown's columns: (key in a side's totals, heading).
_BREAKDOWN = (
    ("system", "system"),
    ("tools", "tool schemas"),
    ("messages", "messages"),
    ("reply_priming", "reply priming"),
    ("counted", "counted"),
)


def _breakdown(totals: Any, report: Mapping[str, Any]) -> str:
    """Where the token figures come from: per side, system messages + tool schemas + the other
    messages + the reply priming, times the token ratio (one set of figures: the strips show the
    system and message parts, the cards the result)."""
    if not isinstance(totals, Mapping):
        return ""
    rows = []
    for side in ("before", "after"):
        t = totals.get(side)
        if not isinstance(t, Mapping):
            return ""
        cells = "".join(f'<td class="num">{_num(t.get(key))}</td>' for key, _ in _BREAKDOWN)
        ratio = t.get("ratio")
        ratio_text = escape(_text(ratio)) if isinstance(ratio, int | float) and not isinstance(ratio, bool) else "?"
        rows.append(
            f'<tr data-side="{side}"><th>{side}</th>{cells}<td class="num">\u00d7 {ratio_text}</td>'
            f'<td class="num"><b>{_num(t.get("tokens"))}</b></td></tr>'
        )
    heads = "".join(f"<th>{label}</th>" for _, label in _BREAKDOWN)
    source = escape(_text(report.get("ratio_source")) or "static")
    return (
        f'<table class="totals" id="totals"><thead><tr><th></th>{heads}<th>token ratio</th><th>tokens</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="sub">Tokens: tiktoken counts of the system messages, the tool schemas and the other messages, '
        f"plus the reply priming, times the token ratio ({source}): the provider's tokenizer counts that much more "
        f"or less. The strips below show the system and message parts, one cell per entry: each message of the "
        f"body, with a top-level system prompt and each tool result of a message a cell of its own.</p>"
    )


def render_html(explain: Mapping[str, Any]) -> str:
    """The explain JSON as one self-contained HTML page (inline CSS and JS, nothing loaded)."""
    report = explain.get("report")
    report = report if isinstance(report, Mapping) else {}
    before = _entries(explain.get("before"), "after")
    after = _entries(explain.get("after"), "from")
    _link(before, after)
    window = _int(report.get("context_window"))
    row_tokens, row_what = _row_tokens(window, before, after)
    fate_css = _fate_css()
    title = f"Governance: {_text(explain.get('model') or report.get('model'))}"

    def side_title(name: str, entries: list[_Entry]) -> str:
        total = sum(e.tokens for e in entries)
        return (
            f'<h2>{name} <small>{len(entries):,} entries · <span class="strip-tokens">{total:,}</span> tokens of '
            f"system and messages, before the ratio</small></h2>"
        )

    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}{fate_css}</style></head>\n"
        f"<body><main>{_header(explain, report)}\n"
        f"{_legend(before, after)}"
        f'<p class="scale">One cell per message, width proportional to tokens: a full row is '
        f"{row_tokens:,} tokens ({row_what}); every cell has a minimum width. "
        f"Dark underline: system or developer message; grey: user message. "
        f"Hover a cell for details and its counterpart; click it for its table row.</p>"
        f'<section class="strips" id="strips">{side_title("Before", before)}{_strip("before", before, row_tokens)}\n'
        f"{side_title('After', after)}{_strip('after', after, row_tokens)}"
        '<div id="veil"></div><div id="marks"></div></section>\n'
        f"{_table('before', before)}\n{_table('after', after)}\n"
        f'</main><div id="tip" role="tooltip"></div>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
