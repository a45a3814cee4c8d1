"""Where calibration's learned ratios live: this process's copy of each deployment's
`Calibration`, the requests waiting for their provider's answer, and the proxy's shared cache.

Calibration itself (what is learned from an answer or a rejection) is pure, in `_calibration`. This
module keeps it per process and, where the proxy has Redis, shares it through LiteLLM's own cache
layer (`shared_cache`) with every worker and instance. Nothing here waits on Redis for long or lets
a Redis failure reach a request. It reads LiteLLM's proxy objects (never imports them); what the
hook learns and when is in `learning`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .. import _calibration
from .._calibration import Calibration
from .logonce import LogOnce

__all__ = ["CALIBRATION_KEY_PREFIX", "CalibrationStore", "Sent", "apply_in_order", "shared_cache"]

logger = logging.getLogger("litellm_governance")

#: Key of a deployment's learned ratio in the proxy's shared cache
#: (Redis), followed by the deployment's ``model_info.id``. Delete ``litellm_governance:calibration:*``
#: to make every instance start over; a changed estimator gets a new version, so old values are ignored.
CALIBRATION_KEY_PREFIX: Final = f"litellm_governance:calibration:v{_calibration.VALUE_VERSION}:"
# Seconds a learned ratio lives in the shared cache after its last update.
_CALIBRATION_TTL: Final = 7 * 24 * 3600
# Seconds a process uses its copy of a learned ratio before re-reading it (in the background).
_CALIBRATION_REFRESH: Final = 1.0
# Seconds between two writes of one deployment's ratio by one process (news in between is batched).
_CALIBRATION_WRITE_INTERVAL: Final = 1.0
# Seconds one shared-cache read or write may take; past that the process goes on with what it has.
_CALIBRATION_TIMEOUT: Final = 0.25
# Requests between governance and the provider's answer remembered (by LiteLLM's call id), deployments
# remembered, and events kept for the shared cache while it cannot be reached.
_CALIBRATION_IN_FLIGHT: Final = 10_000
_CALIBRATION_DEPLOYMENTS: Final = 4096
_CALIBRATION_PENDING: Final = 256


@dataclass(frozen=True)
class Sent:
    """What calibration must know about a governed request until its provider answers."""

    key: str
    #: tiktoken tokens of exactly what was sent (the report's ``estimated_tokens``).
    estimated: int
    #: The ratio it was budgeted with.
    ratio: float
    #: The output the request asked for (``max_tokens`` or its per-format name), None if it did not.
    max_output: int | None
    window: int | None
    over_budget: bool


class _Change(Protocol):
    """News learned in one process: applied to a deployment's `Calibration`, it gives the next one."""

    def apply(self, state: Calibration) -> Calibration: ...


def apply_in_order(state: Calibration | None, events: Iterable[_Change]) -> Calibration:
    """`events` applied in order to `state` (None: nothing learned yet). How one process's news is
    merged into the value others wrote to the shared cache."""
    current = state if state is not None else Calibration()
    for event in events:
        current = event.apply(current)
    return current


@dataclass
class _Learned:
    """One key's state in this process: the best known, and the news this process has not yet
    written to the shared cache."""

    state: Calibration | None = None
    #: time.monotonic() of the last read of the shared cache (-inf: never).
    read_at: float = -math.inf
    pending: list[_Change] = field(default_factory=list)


def shared_cache() -> Any:
    """The Redis client of LiteLLM's own cross-instance cache in this proxy process, or None.

    The proxy's internal usage DualCache (``proxy_logging_obj.internal_usage_cache.dual_cache``, what
    LiteLLM's rate limiters share between instances) gets the proxy's coordination Redis: from
    ``litellm_settings: cache: true`` with ``cache_params: {type: redis, ...}``, from
    ``general_settings: coordination_redis``, or from ``REDIS_HOST`` / ``REDIS_URL``. A proxy whose only
    Redis is ``router_settings: redis_host`` has it in the Router's DualCache (``llm_router.cache``)
    instead. Outside the proxy (the SDK, a ``Router`` in your own code) there is none: the store is
    per process. Read on every use, since the proxy attaches Redis after loading its callbacks.
    """
    server = sys.modules.get("litellm.proxy.proxy_server")
    if server is None:
        return None
    usage = getattr(getattr(server, "proxy_logging_obj", None), "internal_usage_cache", None)
    redis = getattr(getattr(usage, "dual_cache", None), "redis_cache", None)
    if redis is None:
        redis = getattr(_router_cache(getattr(server, "llm_router", None)), "redis_cache", None)
    if redis is None or not hasattr(redis, "async_get_cache") or not hasattr(redis, "async_set_cache"):
        return None
    return redis


def _router_cache(router: object) -> object:
    """The Router's DualCache: ``router.cache`` (LiteLLM up to 1.109), ``router.health().store`` after."""
    if router is None:
        return None
    try:
        health = getattr(router, "health", None)
        store = getattr(health(), "store", None) if callable(health) else None
        return store if store is not None else getattr(router, "cache", None)
    except Exception:  # noqa: BLE001 - another LiteLLM's Router: no shared cache then
        return None


class CalibrationStore:
    """Learned ratios per deployment, and the requests waiting for their provider's answer.

    Each process keeps its own copy of every deployment's `Calibration` and budgets with it at once;
    where the proxy has a shared cache (`shared_cache`), the copy is re-read in the background every
    `_CALIBRATION_REFRESH` seconds (the first use of a deployment in a process waits for that read, at
    most `_CALIBRATION_TIMEOUT`), and what this process learns is merged into the shared value (read,
    apply this process's events, write) at most every `_CALIBRATION_WRITE_INTERVAL` seconds. Nothing
    here waits on the shared cache for longer than `_CALIBRATION_TIMEOUT`, and no failure of it
    reaches a request: the process goes on with what it knows.
    """

    def __init__(self, shared: Callable[[], Any] = shared_cache, kept: int = _CALIBRATION_DEPLOYMENTS) -> None:
        self._shared = shared
        self._kept = kept
        self._learned: dict[str, _Learned] = {}
        self._in_flight: OrderedDict[str, Sent] = OrderedDict()
        self._busy: set[str] = set()  # keys with a read or write under way
        self._tasks: set[asyncio.Task[None]] = set()
        self._failures = LogOnce(logger)

    # ---- requests between governance and the provider's answer ---------------------------------

    def remember(self, call_id: str, sent: Sent) -> None:
        self._in_flight[call_id] = sent
        self._in_flight.move_to_end(call_id)
        while len(self._in_flight) > _CALIBRATION_IN_FLIGHT:
            self._in_flight.popitem(last=False)

    def forget(self, call_id: str) -> None:
        self._in_flight.pop(call_id, None)

    def has(self, call_id: str) -> bool:
        return call_id in self._in_flight

    def take(self, call_id: str) -> Sent | None:
        return self._in_flight.pop(call_id, None)

    # ---- learned ratios ------------------------------------------------------------------------

    async def lookup(self, key: str) -> Calibration | None:
        """What is known about deployment `key` (None: nothing yet)."""
        entry = self._learned.get(key)
        cache = self._shared()
        if cache is None:
            return entry.state if entry is not None else None
        now = time.monotonic()
        if entry is None:
            entry = self._entry(key)
            entry.read_at = now
            if key not in self._busy:
                self._busy.add(key)
                await self._refresh(key, cache)  # first use in this process: worth a short wait
        elif now - entry.read_at >= _CALIBRATION_REFRESH and key not in self._busy:
            entry.read_at = now
            self._busy.add(key)
            self._spawn(self._refresh(key, cache), key)
        return entry.state

    def known(self, key: str) -> Calibration | None:
        """This process's copy of `key`'s state, as it is (None: nothing yet): no read of the shared cache."""
        entry = self._learned.get(key)
        return entry.state if entry is not None else None

    def learn(self, key: str, event: _Change) -> Calibration:
        """Apply `event` to `key` now; share it in the background."""
        entry = self._entry(key)
        entry.state = event.apply(entry.state if entry.state is not None else Calibration())
        if self._shared() is not None:
            entry.pending.append(event)
            del entry.pending[:-_CALIBRATION_PENDING]
            self._start_sync(key)
        return entry.state

    def reset(self) -> None:
        """Forget what this process learned (the shared cache is left alone: delete its keys)."""
        self._learned.clear()
        self._in_flight.clear()

    def _entry(self, key: str) -> _Learned:
        entry = self._learned.get(key)
        if entry is None:
            entry = self._learned[key] = _Learned()
            while len(self._learned) > self._kept:
                del self._learned[next(iter(self._learned))]
        return entry

    # One read or write per key at a time: the caller marks the key busy, the work unmarks it.

    def _start_sync(self, key: str) -> None:
        if key not in self._busy:
            self._busy.add(key)
            self._spawn(self._sync(key), key)

    async def _refresh(self, key: str, cache: Any) -> None:
        """Re-read `key` from the shared cache (this process's unwritten events stay on top)."""
        try:
            ok, value = await self._read(cache, key)
            entry = self._learned.get(key)
            if ok and entry is not None:
                # No value (or a foreign one): nothing learned yet, or the key was deleted to start over.
                shared = Calibration.from_value(value)
                keep = shared is not None or entry.pending
                entry.state = apply_in_order(shared, entry.pending) if keep else None
        finally:
            self._busy.discard(key)
        entry = self._learned.get(key)
        if entry is not None and entry.pending and self._shared() is not None:
            self._start_sync(key)  # news that came in during the read

    async def _sync(self, key: str) -> None:
        """Merge this process's events for `key` into the shared value until none are left (or the
        shared cache fails: they wait for the next event)."""
        try:
            while True:
                entry = self._learned.get(key)
                cache = self._shared()
                if entry is None or not entry.pending or cache is None:
                    return
                events = list(entry.pending)
                ok, value = await self._read(cache, key)
                if not ok:
                    return  # kept pending: sent with the next event
                merged = apply_in_order(Calibration.from_value(value), events)
                if not await self._write(cache, key, merged.to_value()):
                    return
                del entry.pending[: len(events)]
                entry.state = apply_in_order(merged, entry.pending)
                entry.read_at = time.monotonic()
                await asyncio.sleep(_CALIBRATION_WRITE_INTERVAL)
        finally:
            self._busy.discard(key)

    async def _read(self, cache: Any, key: str) -> tuple[bool, object]:
        """``(True, value or None)`` when the shared cache answered, ``(False, None)`` when it did not."""
        try:
            value = await asyncio.wait_for(cache.async_get_cache(CALIBRATION_KEY_PREFIX + key), _CALIBRATION_TIMEOUT)
            # LiteLLM's RedisCache answers None both for a missing key and when Redis failed (it logs
            # and swallows the error): only a live Redis makes "missing" true.
            ping = getattr(cache, "ping", None) if value is None else None
            if ping is not None and not await asyncio.wait_for(ping(), _CALIBRATION_TIMEOUT):
                raise ConnectionError("ping failed")
        except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
            raise
        except BaseException as exc:  # noqa: BLE001 - the shared cache never fails a request
            self._shared_failed("read", exc)
            return False, None
        return True, value

    async def _write(self, cache: Any, key: str, value: dict[str, object]) -> bool:
        try:
            await asyncio.wait_for(
                cache.async_set_cache(CALIBRATION_KEY_PREFIX + key, value, ttl=_CALIBRATION_TTL), _CALIBRATION_TIMEOUT
            )
        except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
            raise
        except BaseException as exc:  # noqa: BLE001 - the shared cache never fails a request
            self._shared_failed("write", exc)
            return False
        return True

    def _shared_failed(self, what: str, exc: BaseException) -> None:
        self._failures.log(
            "shared cache",
            logging.WARNING,
            "calibration: shared cache %s failed (%s); going on with this process's copy",
            what,
            type(exc).__name__,
        )

    def _spawn(self, work: Coroutine[Any, Any, None], key: str) -> None:
        try:
            task = asyncio.get_running_loop().create_task(work)
        except RuntimeError:  # no running loop (a synchronous caller): nothing is shared then
            work.close()
            self._busy.discard(key)
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
