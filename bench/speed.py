"""Measurements behind ``bench/run.py``: timing primitives and the benchmark's individual measures.

Every function here returns plain numbers; `bench.run` decides what to measure and prints the
report. Times are seconds from `time.perf_counter`; a measure runs once untimed (warm-up), then
``reps`` timed repetitions, each preceded by its untimed ``setup`` and a `gc.collect()`; the
result is the list of timings (the report uses their median).
"""

from __future__ import annotations

import functools
import gc
import json
import logging
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from litellm_governance import GovernanceConfig, govern
from litellm_governance._conversations import conversations
from litellm_governance._pipeline import token_cache
from litellm_governance._tokens import _counter, encoding_for_model, get_encoding

__all__ = [
    "CacheMemory",
    "Measure",
    "cold",
    "count_pairing_errors",
    "encoding_load_times",
    "fresh_json_copy",
    "interleave",
    "median",
    "message_strings",
    "profile",
    "proxy_heap_note",
    "proxy_sized_heap",
    "rank_buffer_pass",
    "repeat",
    "text_strings",
    "tiktoken_pass",
    "tools_json",
    "trim",
    "trim_failure_safe_copy",
    "trim_messages_call",
    "warm",
]

Message = dict[str, Any]
K = TypeVar("K")


def proxy_sized_heap() -> int:
    """Import LiteLLM, so that what is timed next runs in a heap of a proxy's size, and return how many
    objects the collector then tracks (about 350,000, against some 24,000 without).

    `interleave` collects before each timed call; in a heap that size the collection's walk leaves the
    CPU caches about as cold as a proxy's own work between requests does, and a warm pass takes
    1.2-1.4 times what it takes in the small heap (docs/benchmarks.md, "Why a pass takes longer in a
    proxy"). The benches' ``--proxy-heap`` option: a change that reads less memory shows there."""
    import litellm  # noqa: F401 - imported for its objects

    gc.collect()
    return len(gc.get_objects())


def proxy_heap_note(proxy_heap: bool) -> str:
    """For a bench's ``--proxy-heap``: make the heap a proxy's (`proxy_sized_heap`) and say so in the
    table's title; nothing without it."""
    return f", in a heap of {proxy_sized_heap():,} objects (LiteLLM imported)" if proxy_heap else ""


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def repeat(
    fn: Callable[[Any], object],
    *,
    reps: int,
    setup: Callable[[], Any] | None = None,
    warmup: bool = True,
) -> list[float]:
    """Seconds of each of `reps` timed calls ``fn(setup())``; setup and gc.collect() are untimed."""
    if warmup:
        fn(setup() if setup is not None else None)
    times: list[float] = []
    for _ in range(reps):
        arg = setup() if setup is not None else None
        gc.collect()
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return times


# --------------------------------------------------------------------------------------------
# The floor: one tiktoken pass over every string a request carries.
# --------------------------------------------------------------------------------------------


def _content_strings(content: object) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    yield part["text"]
            elif isinstance(part, str):
                yield part


def text_strings(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The message text the issue's floor tokenizes: content text (parts) and each tool call's
    function name and arguments."""
    out: list[str] = []
    for message in messages:
        out.extend(_content_strings(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            for key in ("name", "arguments"):
                if isinstance(function.get(key), str):
                    out.append(function[key])
    return [s for s in out if s]


def message_strings(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every string the messages carry: content text (parts), name, tool_call_id, and each tool
    call's id, function name and arguments (what exact counting must tokenize at least once)."""
    out: list[str] = []
    for message in messages:
        out.extend(_content_strings(message.get("content")))
        for key in ("name", "tool_call_id"):
            value = message.get(key)
            if isinstance(value, str):
                out.append(value)
        for call in message.get("tool_calls") or ():
            if isinstance(call.get("id"), str):
                out.append(call["id"])
            function = call.get("function") or {}
            for key in ("name", "arguments"):
                if isinstance(function.get(key), str):
                    out.append(function[key])
    return [s for s in out if s]


def tools_json(tools: Sequence[Any] | None) -> str:
    """The tool schemas as the one JSON string a request sends (and govern counts)."""
    if not tools:
        return ""
    return json.dumps(list(tools), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _build(build: Callable[[str], object], name: str, _: object) -> object:
    return build(name)


def encoding_load_times(names: Sequence[str], *, reps: int) -> dict[str, dict[str, float]]:
    """Seconds to build each encoding: the first call in this process (for the first name this
    includes ``import tiktoken``) and the median of `reps` rebuilds (`get_encoding` is cached, so
    the rebuilds call the uncached function beneath it)."""
    build = get_encoding.__wrapped__
    out: dict[str, dict[str, float]] = {}
    for name in names:
        start = time.perf_counter()
        get_encoding(name)
        first = time.perf_counter() - start
        again = repeat(functools.partial(_build, build, name), reps=reps, warmup=False)
        out[name] = {"first_s": first, "rebuild_s": median(again)}
    return out


# --------------------------------------------------------------------------------------------
# govern(), cold and warm.
# --------------------------------------------------------------------------------------------


def _govern(messages: Sequence[Message], model: str, tools: Sequence[Any] | None, config: GovernanceConfig) -> Any:
    return govern(messages, model=model, tools=tools, config=config)


@dataclass(frozen=True)
class Measure:
    """One thing to time: ``fn(setup())``, with `setup` untimed (None: ``fn(None)``)."""

    fn: Callable[[Any], object]
    setup: Callable[[], Any] | None = None


def interleave(measures: Mapping[K, Measure], *, reps: int) -> dict[K, list[float]]:
    """Time several measures in turn, one repetition of each per round, `reps` rounds after one
    untimed warm-up round.

    Interleaving spreads any load from other processes evenly over the measures, so their ratios
    (govern cold over the tiktoken pass, warm over cold, 1,600 messages over 400) stay meaningful
    on a shared machine even when absolute times are inflated. The order is shuffled every round
    (seeded, so reproducible): whatever runs right after a big measure finds the CPU caches cold,
    and no measure should always be the one that pays for it."""
    times: dict[K, list[float]] = {key: [] for key in measures}
    keys = list(measures)
    for round_ in range(reps + 1):
        random.Random(f"bench.speed:{round_}").shuffle(keys)
        for key in keys:
            measure = measures[key]
            arg = measure.setup() if measure.setup is not None else None
            gc.collect()
            start = time.perf_counter()
            measure.fn(arg)
            elapsed = time.perf_counter() - start
            if round_:
                times[key].append(elapsed)
    return times


def cold(messages: Sequence[Message], *, model: str, tools: Sequence[Any] | None, config: GovernanceConfig) -> Measure:
    """govern() on content never seen before: the token cache is emptied before each repetition
    (the encoding stays loaded)."""
    return Measure(fn=lambda _: _govern(messages, model, tools, config), setup=lambda: clear_caches(config))


def clear_caches(config: GovernanceConfig) -> None:
    """Empty what governing remembers across requests: the token cache and the conversations."""
    token_cache(config.token_cache_size).clear()
    conversations(config.conversation_cache_size).clear()


def fresh_json_copy(messages: Sequence[Message]) -> list[Message]:
    """An equal list made of new objects, as a proxy sees every request (parsed from JSON)."""
    return json.loads(json.dumps(messages))  # type: ignore[no-any-return]


def warm(
    session: Sequence[Message],
    following: Sequence[Message],
    *,
    model: str,
    tools: Sequence[Any] | None,
    config: GovernanceConfig,
    fresh_objects: bool = False,
) -> Measure:
    """govern() on `following` (the session plus one new tool round) right after `session` was
    governed once from an empty cache: what an agent loop sends next. With `fresh_objects`, the
    timed call gets a JSON copy of `following` (new objects, equal content), as in the proxy."""

    def setup() -> Sequence[Message]:
        clear_caches(config)
        _govern(session, model, tools, config)
        return fresh_json_copy(following) if fresh_objects else following

    return Measure(fn=lambda msgs: _govern(msgs, model, tools, config), setup=setup)


def tiktoken_pass(model: str, strings: Sequence[str]) -> tuple[Measure, int]:
    """``encode_ordinary`` over `strings` with govern's encoding for `model`, and the token total.
    The strings are extracted beforehand, so this is pure tokenizer time."""
    encode = get_encoding(encoding_for_model(model)).encode_ordinary
    total = sum(len(encode(s)) for s in strings)
    return Measure(fn=lambda _: sum(len(encode(s)) for s in strings)), total


def rank_buffer_pass(model: str, strings: Sequence[str]) -> Measure:
    """`tiktoken_pass` counted as governance counts: from tiktoken's buffer of ranks (0.9+), no list."""
    count = _counter(get_encoding(encoding_for_model(model)))
    return Measure(fn=lambda _: sum(map(count, strings)))


# --------------------------------------------------------------------------------------------
# Cache memory.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheMemory:
    size_limit: int
    entries: int
    max_entries_seen: int
    retained_bytes: int
    peak_bytes: int
    calls: int

    @property
    def bytes_per_entry(self) -> float:
        return self.retained_bytes / self.entries if self.entries else 0.0


def cache_memory(
    requests: Sequence[Sequence[Message]], *, model: str, tools: Sequence[Any] | None, config: GovernanceConfig
) -> CacheMemory:
    """Govern `requests` in order starting from an empty cache, under tracemalloc: the entries the
    cache holds afterwards (and the most it held after any call), and the bytes still allocated
    once the results are dropped, which is the cache's own growth (the conversations are not
    remembered here: `bench/memory.py` measures them)."""
    config = config.replace(conversation_cache_size=0)
    cache = token_cache(config.token_cache_size)
    _govern(requests[0], model, tools, config)  # any first-call allocations happen outside the trace
    cache.clear()
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        seen = 0
        for messages in requests:
            result = _govern(messages, model, tools, config)
            del result
            seen = max(seen, len(cache))
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return CacheMemory(
        size_limit=cache.max_entries,
        entries=len(cache),
        max_entries_seen=seen,
        retained_bytes=after - before,
        peak_bytes=peak - before,
        calls=len(requests),
    )


# --------------------------------------------------------------------------------------------
# LiteLLM's trim_messages.
# --------------------------------------------------------------------------------------------


def trim_failure_safe_copy(messages: Sequence[Message]) -> list[Message]:
    """The session with ``content: None`` replaced by ``""``: trim_messages raises on None content
    when it tries to shorten an assistant tool-call message, catches its own error and returns the
    input untrimmed, so timing it on the raw session would time a failure."""
    return [dict(m, content="") if m.get("content") is None else m for m in messages]


def _trim(messages: Sequence[Message], model: str, max_tokens: int) -> Any:
    from litellm.utils import trim_messages

    logger = logging.getLogger("LiteLLM")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # its caught exception would print a traceback
    try:
        return trim_messages(messages, model=model, max_tokens=max_tokens)
    finally:
        logger.setLevel(level)


def trim_messages_call(messages: Sequence[Message], *, model: str, max_tokens: int) -> tuple[float, Any, bool]:
    """One timed ``litellm.utils.trim_messages`` call: (seconds, output, failed). `failed` is True
    when trim_messages caught an internal error and handed back its input unchanged."""
    gc.collect()
    start = time.perf_counter()
    out = _trim(messages, model, max_tokens)
    seconds = time.perf_counter() - start
    return seconds, out, out is messages


def trim(messages: Sequence[Message], *, model: str, max_tokens: int) -> tuple[Measure, list[Any]]:
    """``litellm.utils.trim_messages(messages, model=model, max_tokens=max_tokens)`` as a measure,
    and the list its outputs are appended to."""
    outputs: list[Any] = []
    return Measure(fn=lambda _: outputs.append(_trim(messages, model, max_tokens))), outputs


def count_pairing_errors(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tool results with no earlier matching call, plus tool calls with no result (what OpenAI,
    Anthropic and others reject)."""
    open_calls: set[str] = set()
    answered: set[str] = set()
    errors = 0
    for message in messages:
        for call in message.get("tool_calls") or ():
            open_calls.add(str(call.get("id")))
        if message.get("role") == "tool":
            ident = str(message.get("tool_call_id"))
            if ident in open_calls and ident not in answered:
                answered.add(ident)
            else:
                errors += 1
    return errors + len(open_calls - answered)


# --------------------------------------------------------------------------------------------
# Where the time goes (cProfile), for --profile.
# --------------------------------------------------------------------------------------------


def profile(measure: Measure, *, reps: int, top: int = 15) -> list[dict[str, Any]]:
    """cProfile over `reps` calls of `measure` (setups not profiled): the `top` functions by own
    time, with calls per request and own / inclusive shares of the profiled time. cProfile's own
    overhead inflates code that makes many small Python calls, so read the shares as a ranking."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    for _ in range(reps):
        arg = measure.setup() if measure.setup is not None else None
        gc.collect()
        profiler.enable()
        measure.fn(arg)
        profiler.disable()
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in stats.values()) or 1.0
    rows = []
    for (path, line, func), (_, calls, own, inclusive, _) in sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]:
        where = func if path == "~" else f"{_short(path)}:{line}({func})"
        rows.append(
            {
                "function": where,
                "calls_per_request": calls / reps,
                "own_share": own / total,
                "inclusive_share": min(inclusive / total, 1.0),
                "own_ms_per_request": own * 1e3 / reps,
            }
        )
    return rows


def _short(path: str) -> str:
    for marker in ("/site-packages/", "/src/", "/bench/"):
        if marker in path:
            return path.split(marker, 1)[1] if marker != "/bench/" else "bench/" + path.split(marker, 1)[1]
    return path.rsplit("/", 1)[-1]
