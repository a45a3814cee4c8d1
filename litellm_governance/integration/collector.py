"""Python's cyclic garbage collector held off while a request is governed.

A pass allocates a few thousand short-lived containers (the outline's messages, stubs, keys), all
alive until it returns and freed by reference counting then: it makes no reference cycles (a test
holds it to that). The collector cannot know that. Its young generation fills several times
during a pass, and each collection finds the pass's temporaries alive and promotes them to the
older generations; once enough has been promoted, CPython collects the oldest generation: the
whole process. In a LiteLLM proxy that is some 700,000 objects and close to half a second, during
which the proxy serves nobody (`python bench/collector.py`: two such collections in 400 governed
`/v1/messages` requests, about 2.2 ms a request on average, all of it in two requests).

Held off for the pass, the collector sees only what the pass leaves alive (the governed request):
its young generations are collected as often as without the plugin (`python bench/collector.py`,
and in real proxies `python bench/collector_proxy.py`). It is a process-wide switch, so it is
reference-counted across threads (a big request is governed in a worker thread while the event
loop governs others) and restored only by whoever turned it off: a collector the application
disabled itself stays disabled.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


class _Switch:
    """The collector's switch, shared by the passes running: the first turns it off, remembering
    whether it was on; the last puts it back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._restore = False

    def hold(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._restore = gc.isenabled()
                gc.disable()
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._restore:
                gc.enable()


_SWITCH = _Switch()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold the cyclic collector off for the block (re-entrant and thread-safe)."""
    _SWITCH.hold()
    try:
        yield
    finally:
        _SWITCH.release()
