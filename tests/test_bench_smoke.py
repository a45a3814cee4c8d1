"""Smoke tests of the benchmarks (`make bench`, `bench/run.py`): each runs end to end in a quick
configuration and prints its table, and the committed page's table is the one `bench/results.json`
renders. Tiny runs: these check that the benchmarks work and report honestly, never how fast
anything is."""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import run

# The benchmarks are the plugin's own tools, run on the pinned LiteLLM and Python (make test), not per matrix entry.
pytestmark = pytest.mark.scale

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return json.loads(run.RESULTS.read_text(encoding="utf-8"))


class TestResults:
    def test_the_committed_table_is_the_one_results_json_renders(self, results: dict[str, Any]) -> None:
        """docs/benchmarks.md holds the table bench/results.json renders: a new run needs its page
        (`make bench` writes both; `python bench/run.py --render` renders the page again)."""
        page = run.PAGE.read_text(encoding="utf-8")
        assert run.committed_section(page) == run.render(results), (
            "stale docs/benchmarks.md: python bench/run.py --render"
        )

    def test_the_page_is_short(self) -> None:
        """The page is the table and what a user needs to read it, not lab notes."""
        assert len(run.PAGE.read_text(encoding="utf-8")) < 10_000

    def test_every_figure_is_the_one_its_run_gives(self, results: dict[str, Any]) -> None:
        """The judged figures are derived from the raw ones of the same run, with their commands,
        and the run says when, where and how long."""
        assert results["figures"] == run.figures(results["benches"]), "judged anew: python bench/run.py --render"
        assert set(results["benches"]) == {name for name, _, _ in run.BENCHES}
        assert results["date"] and results["machine"]["cpu_count"] and results["seconds"] > 0
        for name, command, _ in run.BENCHES:
            assert results["benches"][name]["command"] == command
            assert (ROOT / command.split()[1]).is_file(), command
        assert all(f["command"] in {command for _, command, _ in run.BENCHES} for f in results["figures"])

    @pytest.mark.parametrize(
        ("path", "value", "figure"),
        [
            (("proxy_latency", "rows", 0, "hooks_p50_ms"), 10.5, "chat: the plugin's hooks"),
            (("load", "p95_ratio"), 1.11, "under load: p95"),
            (("load", "last_round_growth_mib", "with"), 100.0, "under load: resident memory"),
            (("formats", "rows", 2, "cold_over_pass"), 2.01, "a cold pass"),
            (("cache", "modes", "cache_stable", "reuse", 1), 0.949, "prompt-cache reuse"),
            (("recall", "recall_min_conversation"), 0.59, "action recall"),
            (("recall", "recall_mean"), 0.849, "action recall"),
        ],
    )
    def test_a_figure_past_its_target_is_reported_as_missed(
        self, results: dict[str, Any], path: tuple[Any, ...], value: float, figure: str
    ) -> None:
        """Honesty: a figure just past its target is judged "not met" on the page."""
        raw = copy.deepcopy(results["benches"])
        where = raw
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = value
        judged = next(f for f in run.figures(raw) if f["figure"].startswith(figure))
        assert judged["met"] is False
        assert "**no**" in run.render({**results, "figures": [judged]})


def test_quick_formats_bench_prints_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/formats.py --quick: per format and size, the tiktoken pass, cold, warm and the ratios."""
    from bench import formats

    assert formats.main(["--quick", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    assert "| format | messages | tokens | tiktoken pass | cold | warm | cold / pass | warm / cold |" in out
    for fmt in ("chat", "anthropic", "responses"):
        assert f"| {fmt} | 100 | " in out and f"| {fmt} | 400 | " in out


def test_quick_cache_replay_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/cache.py --quick runs end to end: both modes, no turn over budget."""
    from bench import cache

    assert cache.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| window | mode | reuse (each loop) |" in out
    rows = [line for line in out.splitlines() if line.startswith(("| 16k", "| 24k"))]
    assert len(rows) == 4 and all(row.split("|")[5].strip() == "0" for row in rows)


def test_quick_recall_replays_multi_task_conversations(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/recall.py --quick: two multi-task conversations, each cut (requests measured), none
    over budget, and the note makes a difference (recall above the baseline without it)."""
    from bench import recall

    assert recall.main(["--quick", "--processes", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|") for line in out.splitlines() if line.startswith(("| 0 |", "| 1 |"))]
    assert len(rows) == 2 and all(int(row[2]) > 10 for row in rows), out
    assert all(row[8].strip() == "0" and float(row[4]) > float(row[6]) for row in rows), out


def test_multi_task_conversations_grow_by_prefix_with_unique_call_ids() -> None:
    """bench.sessions.replay_tasks: each turn extends the one before; every task after the first is
    a user turn of its own; call ids never repeat."""
    from bench.sessions import replay_tasks

    turns = list(replay_tasks(3, 4, seed=7))
    assert len(turns) == 1 + 3 * 4 + 2
    assert all(later[: len(earlier)] == earlier for earlier, later in itertools.pairwise(turns))
    last = turns[-1]
    assert sum(m["role"] == "user" for m in last) == 3
    ids = [c["id"] for m in last for c in m.get("tool_calls") or ()]
    assert len(ids) == len(set(ids)) == sum(m["role"] == "tool" for m in last)


def _bench(script: str, *arguments: str) -> str:
    """The output of ``python bench/<script> ARGUMENTS`` from the repository root (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_ab_check_and_fuzz_compare_two_commits() -> None:
    """bench/ab.py --check --fuzz imports the last commit's package beside the working tree's and
    finds them writing the same bodies and reports (what every speed-up is held to); a generated
    request they disagree on fails it (`bench.ab.fuzz`, fed a package that drops a message)."""
    from types import SimpleNamespace

    from bench import ab

    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, check=False).returncode:
        pytest.skip("not a git checkout: bench/ab.py compares commits")
    out = _bench("ab.py", "--against", "HEAD", "--check", "--fuzz", "40", "--messages", "40")
    assert "identical: 40 generated requests" in out and "requests (formats x sessions" in out

    import litellm_governance

    def dropping(request: dict[str, Any], **options: Any) -> Any:
        governed = litellm_governance.govern_request(request, **options)
        body = dict(governed.request)
        for key in ("messages", "input"):
            if isinstance(body.get(key), list) and len(body[key]) > 1:
                body[key] = body[key][:-1]
        return SimpleNamespace(request=body, report=governed.report)

    broken = SimpleNamespace(govern_request=dropping, GovernanceConfig=litellm_governance.GovernanceConfig)
    with pytest.raises(AssertionError, match="generated request 0"):
        ab.fuzz({"after": litellm_governance, "broken": broken}, 5)  # type: ignore[dict-item]
