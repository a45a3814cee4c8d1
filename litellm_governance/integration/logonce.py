"""Log a message once per key (again after an interval, if asked), quieter in between: the one
"warn once" helper of the integration (failures, calibration, the shared cache, configuration errors)."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Final

__all__ = ["MAX_KEYS", "LogOnce", "where"]

#: Keys a `LogOnce` remembers at most; past that the oldest is forgotten (its message may come again).
MAX_KEYS: Final = 1024


class LogOnce:
    """Logs a key's message at the level asked the first time, and again every `every` seconds when
    set (never, when not); in between at `then` (DEBUG by default; None: not at all).
    Safe to share between threads."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        every: float | None = None,
        then: int | None = logging.DEBUG,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._every = every
        self._then = then
        self._clock = clock
        self._lock = threading.Lock()
        self._logged: dict[Hashable, float] = {}

    def due(self, key: Hashable) -> bool:
        """Whether `key`'s message is due at full level now; if so it counts as logged from now."""
        now = self._clock()
        with self._lock:
            last = self._logged.get(key)
            if last is not None and (self._every is None or now - last < self._every):
                return False
            self._logged.pop(key, None)
            self._logged[key] = now
            while len(self._logged) > MAX_KEYS:
                del self._logged[next(iter(self._logged))]
            return True

    def log(self, key: Hashable, level: int, msg: str, *args: object) -> None:
        """``logger.log(level, msg, *args)`` when `key` is due, else at the quieter level (if any)."""
        if self.due(key):
            self._logger.log(level, msg, *args)
        elif self._then is not None:
            self._logger.log(self._then, msg, *args)

    def failure(self, exc: BaseException, msg: str) -> None:
        """A WARNING (once per kind and place) naming `exc`'s type and code location, never its text
        (which may quote a request): `msg` has two ``%s``, for them."""
        location = where(exc)
        self.log((type(exc).__name__, location), logging.WARNING, msg, type(exc).__name__, location)


def where(exc: BaseException) -> str:
    """Where `exc` was raised, as ``file.py:line``: code, never data, so always safe to log."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno}"
