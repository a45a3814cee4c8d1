"""Timing primitives for the benches: a `Measure` (a call and its untimed setup), `interleave` (every
measure's repetitions in a seeded random order, so a shared machine's load falls on all alike), and
the floor governance is held to: one tiktoken pass over the strings a request carries."""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from litellm_governance._tokens import encoding_for_model, get_encoding

__all__ = ["Measure", "interleave", "median", "tiktoken_pass"]

K = TypeVar("K")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


@dataclass(frozen=True)
class Measure:
    """``fn(setup())``, timed; `setup` untimed (None: ``fn(None)``)."""

    fn: Callable[[Any], object]
    setup: Callable[[], Any] | None = None


def interleave(measures: Mapping[K, Measure], *, reps: int, seed: int = 0) -> dict[K, list[float]]:
    """Seconds of `reps` timed calls of each measure, after one untimed warm-up of each; one call of
    every measure per round, in a seeded random order, each after its setup and a `gc.collect()`."""
    order = list(measures)
    for key in order:  # warm-up
        measure = measures[key]
        measure.fn(measure.setup() if measure.setup is not None else None)
    rng = random.Random(seed)
    times: dict[K, list[float]] = {key: [] for key in order}
    for _ in range(reps):
        rng.shuffle(order)
        for key in order:
            measure = measures[key]
            arg = measure.setup() if measure.setup is not None else None
            gc.collect()
            start = time.perf_counter()
            measure.fn(arg)
            times[key].append(time.perf_counter() - start)
    return times


def tiktoken_pass(model: str, strings: Sequence[str]) -> tuple[Measure, int]:
    """One ``encode_ordinary`` over each of `strings` with the model's encoding, and their tokens."""
    encoding = get_encoding(encoding_for_model(model))

    def run(_: object) -> int:
        return sum(len(encoding.encode_ordinary(text)) for text in strings)

    return Measure(fn=run), run(None)
