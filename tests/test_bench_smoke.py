"""Smoke test of the benchmark (`bench/run.py`): it runs end to end and prints its tables.

Tiny sessions, one repetition: this checks that the benchmark works, never how fast anything is.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import run

# The benchmarks are the plugin's own tools, run on the pinned LiteLLM and Python (make test), not per matrix entry.
pytestmark = pytest.mark.scale


def test_quick_benchmark_prints_tables_and_ratios(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    raw = tmp_path / "bench.json"
    argv = ["--quick", "--sizes", "12,48", "--trim-sizes", "12", "--reps", "1", "--trim-reps", "1", "--profile"]
    argv += ["--json", str(raw)]

    assert run.main(argv) == 0

    out = capsys.readouterr().out
    for heading in (
        "# litellm-governance benchmark",
        "## Headline",
        "## One-time costs",
        "## Session length: `openai/gpt-4o`",
        "## Session length: `zai/glm-4.6`",
        "## litellm.utils.trim_messages",
        "## Token cache memory",
        "## Profile: govern() openai/gpt-4o, warm, 48 messages (cProfile)",
    ):
        assert heading in out
    for text in (
        "Command: `python bench/run.py --quick",
        "CPUs",
        "| tiktoken pass over message text (floor: content, function names and arguments) |",
        "cold / tiktoken pass (target ≤ 1.2)",
        "warm / cold (target ≤ 0.1)",
        "4x history, cold (12 → 48 msgs",
        "trim_messages / govern() cold (12 msgs",
        "| messages | tokens | kept | tiktoken pass | tiktoken, all strings | cold | warm |",
        "Bounded: the 1,000-entry cache never held more than",
    ):
        assert text in out

    data = json.loads(raw.read_text(encoding="utf-8"))
    assert set(data["models"]) == {"openai/gpt-4o", "zai/glm-4.6"}
    for model in data["models"].values():
        assert [row["messages"] for row in model["sizes"]] == [12, 48]
        assert all(
            row[key] > 0 for row in model["sizes"] for key in ("tiktoken_s", "tiktoken_all_s", "cold_s", "warm_s")
        )
        assert model["growth"]["cold_s"][0]["from"] == 12
        assert model["trim"][0]["govern_pairing_errors"] == 0
    small = data["memory"]["small"]
    assert small["max_entries_seen"] <= small["size_limit"] == 1000


def test_quick_cache_replay_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/cache.py --quick runs end to end: both modes, no turn over budget."""
    from bench import cache

    assert cache.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| window | mode | reuse |" in out
    rows = [line for line in out.splitlines() if line.startswith("| 16k") or line.startswith("| 24k")]
    assert len(rows) == 4 and all(row.split("|")[5].strip() == "0" for row in rows)


@pytest.mark.litellm
def test_summary_bench_runs_and_the_summaries_keep_the_prompt_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/summary.py --quick prints both tables; summaries that roll from one cut point to the
    next leave prefix reuse where the note alone has it (no timing is asserted)."""
    from bench import summary

    assert summary.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| with summary_model (summaries written in the background) |" in out
    note_only = summary.replay_reuse(120, summaries=False)
    rolling = summary.replay_reuse(120, summaries=True)
    assert rolling[2] > 0, "the replay must use summaries"
    assert rolling[0] >= note_only[0] - 0.005


ROOT = Path(__file__).resolve().parent.parent


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


def test_metrics_benchmark_prints_its_table() -> None:
    """bench/metrics.py --quick measures the metrics' cost per request, in one process and in
    multi-process mode, and prints its table (no timing is asserted)."""
    pytest.importorskip("prometheus_client")
    out = _bench("metrics.py", "--quick")
    assert "| one process |" in out and "| PROMETHEUS_MULTIPROC_DIR (multi-worker) |" in out
    assert "metric calls per request:" in out


def test_formats_bench_prints_both_passes_and_every_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/formats.py --quick runs end to end: per format, the tiktoken pass the targets take, the
    pass counted as governance counts (tiktoken's rank buffer), cold, warm and their ratios (here in a
    heap of a proxy's size, which its title says)."""
    from bench import formats

    assert formats.main(["--quick", "--reps", "1", "--proxy-heap"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"interleaved, in a heap of [\d,]+ objects \(LiteLLM imported\)\)", out), out[:300]
    assert "| tiktoken pass | buffer pass | cold | warm | cold / pass | cold / buffer pass | warm / cold |" in out
    for fmt in ("chat", "anthropic", "responses"):
        assert f"| {fmt} | 400 | " in out


def test_formats_bench_phases_split_a_pass_by_stage(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/formats.py --phases: per format, a cold and a warm pass split into the stages of
    `bench.formats.PHASES`, each row's stages and rest adding up to its pass (medians, so within a
    rounding); tokenizing is most of a cold pass, reading the body a part of a warm Anthropic and
    Responses one; and every function it timed is the plugin's own again afterwards."""
    from bench import formats
    from litellm_governance import _formats, _pipeline

    before = (_pipeline.shrink, _pipeline._REPAIR, _formats.FormatSpec.__dict__["read"])
    assert formats.main(["--phases", "--quick", "--reps", "3"]) == 0
    assert (_pipeline.shrink, _pipeline._REPAIR, _formats.FormatSpec.__dict__["read"]) == before
    out = capsys.readouterr().out
    assert "(openai/gpt-4o, 400 messages, medians of 3, in ms)" in out, out[:300]
    labels = [label for label, _ in formats.PHASES]
    assert "| format | pass | " + " | ".join(labels) + " | rest |" in out
    rows = {}
    for line in out.splitlines():
        found = re.match(r"\| (\w+) \| (cold|warm) ([\d.]+) \| (.*) \|$", line)
        if found:
            cells = [float(cell) for cell in found[4].split(" | ")]
            rows[(found[1], found[2])] = dict(zip([*labels, "rest"], cells, strict=True))
            assert sum(cells) == pytest.approx(float(found[3]), rel=0.5, abs=0.5), line
    assert sorted(rows) == sorted((fmt, name) for fmt in formats.FORMATS for name in ("cold", "warm"))
    for fmt in formats.FORMATS:
        cold = rows[(fmt, "cold")]
        assert max(cold, key=cold.__getitem__) == "tokenizing", (fmt, cold)
    for fmt in ("anthropic", "responses"):
        assert rows[(fmt, "warm")]["read"] > 0.1, rows[(fmt, "warm")]


def test_a_proxy_sized_heap_is_litellms() -> None:
    """`bench.speed.proxy_sized_heap` leaves LiteLLM imported and says how many objects the collector
    tracks then: a proxy's heap, an order of magnitude more than the benches' own (about 24,000)."""
    from bench import speed

    objects = speed.proxy_sized_heap()
    assert "litellm" in sys.modules and objects > 200_000
    # the benches' title, from one place: said only with the option
    assert speed.proxy_heap_note(False) == ""
    assert re.fullmatch(r", in a heap of [\d,]+ objects \(LiteLLM imported\)", speed.proxy_heap_note(True))


def test_memory_bench_prints_what_the_full_caches_hold(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import memory

    assert memory.main(["--quick"]) == 0
    out = capsys.readouterr().out
    for cache in ("token cache", "per-result stores", "call-name caches", "conversations, cut at 32k", "| all "):
        assert cache in out


def test_memory_bench_counts_entries_per_round(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import memory

    assert memory.main(["--rounds", "1", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "| conversations (messages) | resident memory | allocated blocks |" in out
    (row,) = [line for line in out.splitlines() if line.startswith("| 1 |")]
    *_, kept, resident, blocks, _ = row.split("|")
    # the round's two sessions are kept, and the process's memory is read after it
    assert int(kept.strip().replace(",", "")) > 0
    assert re.fullmatch(r" \d+\.\d MiB ", resident) and int(blocks.strip().replace(",", "")) > 100_000


def test_collector_bench_counts_the_collections_per_mode(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import collector

    # One mode, one child process (each imports LiteLLM): the bench runs; its figures are not checked.
    arguments = ["--requests", "5", "--formats", "anthropic", "--session", "30", "--plain-heap", "--modes", "held off"]
    assert collector.main(arguments) == 0
    assert "| anthropic | held off |" in capsys.readouterr().out


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
