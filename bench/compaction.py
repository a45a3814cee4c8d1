"""How long the gateway takes to answer Codex's remote compaction (``compaction_trigger``), per mode,
through a real LiteLLM proxy.

    python bench/compaction.py              # 7 requests per row
    python bench/compaction.py --quick --fast-start   # the smoke test

Starts a local upstream that plays the model (`litellm_governance.testing.ScriptedModel`, answering at
once: what is measured is the gateway, not a model's writing) and emulates GLM or OpenAI, and two
proxies with the plugin, one per ``compaction`` mode (``model``, the default; ``note``). It sends each
the request Codex sends when it compacts — a session of N rounds of ~10k-character tool output, then
``compaction_trigger``, streamed — and times it to the last byte, beside an ordinary turn of the same
session through the same proxy. Rows: GLM (the plugin answers: a summary request to the model, or the
note at once) and OpenAI's own Responses API (it compacts itself: the plugin passes the trigger on).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from litellm_governance.testing import ProxyProcess, RecordingUpstream, ScriptedModel, start_proxy

ROOT = Path(__file__).resolve().parent.parent
WINDOW = 200_000  # GLM-4.6's: the summary request of the largest session fits without a cut
SHELL = {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {}}}


def codex_session(rounds: int, chars: int = 10_000) -> list[dict[str, Any]]:
    """A Codex session: its developer message, the environment, the task, `rounds` shell calls."""

    def message(role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    items = [message("developer", "You are Codex."), message("user", "<environment_context/>")]
    items.append(message("user", "Run the scripted shell commands, one round at a time."))
    line = "MARK-r{r}-c1 line lorem ipsum dolor sit amet consectetur\n"
    for r in range(1, rounds + 1):
        call_id = f"call_{r}_{r}_1"
        arguments = json.dumps({"cmd": f"echo MARK-r{r}-c1"})
        items.append({"type": "function_call", "call_id": call_id, "name": "exec_command", "arguments": arguments})
        output = (line.format(r=r) * (chars // len(line) + 1))[:chars]
        items.append({"type": "function_call_output", "call_id": call_id, "output": output})
    return items


def config(upstream: RecordingUpstream, mode: str) -> dict[str, Any]:
    models = [
        ("glm", "zai/glm-4.6", upstream.base_url),
        ("openai", "openai/gpt-5.5", upstream.base_url),
    ]
    return {
        "model_list": [
            {
                "model_name": name,
                "litellm_params": {"model": model, "api_base": base, "api_key": "sk-local"},
                "model_info": {"max_input_tokens": WINDOW},
            }
            for name, model, base in models
        ],
        "litellm_settings": {"callbacks": "litellm_governance.proxy_handler_instance", "num_retries": 0},
        "callback_settings": {"governance": {"compaction": mode}},
    }


def timed(proxy: ProxyProcess, body: dict[str, Any]) -> float:
    """One streamed request's time to its last byte; it must end with one compaction item (a trigger)."""
    started = time.perf_counter()
    status, _, raw = proxy.post("/v1/responses", body)
    elapsed = time.perf_counter() - started
    text = raw.decode()
    compacting = body["input"][-1].get("type") == "compaction_trigger"
    if status != 200 or (compacting and not re.search(r'"type": ?"compaction"', text)):
        raise SystemExit(f"{proxy.base_url} answered {status}: {text[:300]}")
    return elapsed


def row(proxy: ProxyProcess, group: str, rounds: int, reps: int) -> tuple[list[float], list[float]]:
    """`reps` compaction requests and as many ordinary turns of the same session, alternating."""
    items = codex_session(rounds)
    base = {"model": group, "tools": [SHELL], "stream": True, "store": False}
    trigger = {**base, "input": [*items, {"type": "compaction_trigger"}]}
    turn = {**base, "input": items}
    timed(proxy, trigger)  # warm: the tokenizer, LiteLLM's first requests
    timed(proxy, turn)
    compactions, turns = [], []
    for _ in range(reps):
        compactions.append(timed(proxy, trigger))
        turns.append(timed(proxy, turn))
    return compactions, turns


def ms(values: list[float]) -> str:
    middle = statistics.median(values) * 1000
    if len(values) < 4:
        return f"{middle:.0f} ms"
    low, _, high = statistics.quantiles(values, n=4)
    return f"{middle:.0f} ms ({low * 1000:.0f} … {high * 1000:.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 requests per row, sessions of 4 and 12 rounds")
    parser.add_argument("--reps", type=int, default=None, help="requests per row (default 7)")
    parser.add_argument("--fast-start", action="store_true", help="fork the proxies from one LiteLLM import")
    args = parser.parse_args(argv)
    reps = args.reps or (2 if args.quick else 7)
    sizes = (4, 12) if args.quick else (12, 40)
    upstream = RecordingUpstream(script=ScriptedModel(rounds=1_000), emulate=None)
    rows = []
    with upstream, tempfile.TemporaryDirectory() as tmp:
        options: dict[str, Any] = {"fast_start": args.fast_start, "pythonpath": [ROOT]}
        with (
            start_proxy(config(upstream, "model"), workdir=Path(tmp) / "model", name="model", **options) as model,
            start_proxy(config(upstream, "note"), workdir=Path(tmp) / "note", name="note", **options) as note,
        ):
            for rounds in sizes:
                for label, proxy, group in (
                    ("GLM, `compaction: model` (a summary request)", model, "glm"),
                    ("GLM, `compaction: note` (no model call)", note, "glm"),
                    ("OpenAI's own compaction (passed through)", model, "openai"),
                ):
                    upstream.clear()
                    compactions, turns = row(proxy, group, rounds, reps)
                    answered = sum(1 for r in upstream.requests if r.answer in ("summary", "compaction"))
                    asked = answered / (reps + 1)
                    rows.append((label, rounds, compactions, turns, asked))
    flags = (" --quick" if args.quick else "") + (f" --reps {args.reps}" if args.reps else "")
    flags += " --fast-start" if args.fast_start else ""
    print(f"Compaction answers through the proxy: median (middle half) of {reps} streamed requests each")
    print(f"command: python bench/compaction.py{flags}\n")
    print("| route and mode | session (rounds of 10k chars) | compaction answer | an ordinary turn | model calls |")
    print("|---|---:|---:|---:|---:|")
    for label, rounds, compactions, turns, asked in rows:
        print(f"| {label} | {rounds} | {ms(compactions)} | {ms(turns)} | {asked:g} |")
    print("\nTime to the last byte on loopback; the upstream answers at once, so a real model adds the time it")
    print("takes to write its summary (model mode) on top. An ordinary turn: the same session without the trigger,")
    print("through the same proxy. Model calls: summary or compaction requests the upstream received per compaction.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
