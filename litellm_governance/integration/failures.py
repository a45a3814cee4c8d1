"""The plugin's logger, its one "warn once" helper (`LogOnce`), and what a pass does when governance
fails: fail open (log once, say so in the report, send the request unchanged) or, where the operator
set ``fail_closed``, reject it with a 400. Logged: types, code locations and figures, never content."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Hashable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from litellm.exceptions import BadRequestError

from .._errors import ConfigError
from .._request import Format
from .fields import record

logger = logging.getLogger("litellm_governance")

#: Keys a `LogOnce` remembers at most; past that the oldest is forgotten (its message may come again).
MAX_KEYS: Final = 1024
#: A configuration error is logged again at most this often (seconds) while it lasts.
CONFIG_ERROR_INTERVAL: Final = 60.0


class LogOnce:
    """Logs a key's message at the level asked the first time, and again every `every` seconds when
    set; in between at `then` (DEBUG by default; None: not at all). Safe to share between threads."""

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

    @contextlib.contextmanager
    def guard(self, msg: str) -> Iterator[None]:
        """Fail open: an exception in the block is logged as a `failure` and goes no further."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - fail open is the contract
            self.failure(exc, msg)


def where(exc: BaseException) -> str:
    """Where `exc` was raised, as ``file.py:line``: code, never data, so always safe to log."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"


class Failures:
    """Reports a pass's failures: each kind of internal failure logged once (then at DEBUG), a
    configuration error every `CONFIG_ERROR_INTERVAL` seconds while it lasts."""

    def __init__(self) -> None:
        self._failures = LogOnce(logger)
        self._config_errors = LogOnce(logger, every=CONFIG_ERROR_INTERVAL, then=None)

    def config_error(
        self, request: dict[str, Any], fmt: Format, stage: str, exc: ConfigError, *, fail_closed: bool
    ) -> None:
        """A configuration error (it names config fields and values, never content): the request goes
        through ungoverned, unless the operator set ``fail_closed``."""
        if fail_closed:
            raise rejection(request, f"a configuration error: {exc}") from exc
        self._config_errors.log(
            str(exc),
            logging.WARNING,
            "governance skipped (configuration error, stage %s): %s; request sent unchanged",
            stage,
            exc,
        )
        entry = {"skipped": True, "error": "ConfigError", "config_error": str(exc), "format": fmt, "stage": stage}
        record(request, fmt, {**entry, "changed": False, "summary": "skipped (configuration error)"})

    def failed(
        self, request: dict[str, Any], fmt: Format, stage: str, exc: BaseException, *, fail_closed: bool, client: bool
    ) -> None:
        """Fail closed (raise a 400), or log once and let the request through with a note. `client`:
        a request no provider takes (its text may be given to the client that sent it)."""
        name, location = type(exc).__name__, where(exc)
        if fail_closed:
            raise rejection(request, f"{name}: {exc}" if client else f"{name} at {location}") from exc
        self._failures.log(
            (name, location),
            logging.WARNING,
            "governance skipped (%s, %s at %s, stage %s): request sent unchanged",
            "not a governable request" if client else "internal error",
            name,
            location,
            stage,
        )
        entry = {"error": name, "where": location, "format": fmt, "stage": stage}
        record(request, fmt, {"skipped": True, **entry, "changed": False, "summary": f"skipped ({name})"})


def rejection(request: Mapping[str, Any], detail: str) -> BadRequestError:
    """The 400 a fail-closed pass raises (LiteLLM's own error type, so the client gets a 400)."""
    model = request.get("model")
    return BadRequestError(
        message=f"litellm-governance rejected the request ({detail}); the operator set fail_closed",
        model=model if isinstance(model, str) else "",
        llm_provider="litellm_governance",
    )
