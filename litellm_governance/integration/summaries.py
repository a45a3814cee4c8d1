"""Summaries of cut turns written by a model (``summary_model``), off the request path.

With ``summary_model`` set, the plugin asks that model in the background for a summary of the turns
a cut removed; no request waits for it: the deterministic note (`_trace`) is used until the summary
is ready, the summary from then on while the cut point stays (so the prompt cache holds). Only
``cache_stable`` requests get summaries: elsewhere the cut point moves every turn. Summaries are kept
per process and shared through the proxy's Redis, under `SUMMARY_KEY_PREFIX`. A summary holds what
the model saw, so it is found only by the same cut turns (`CutTurns.key`) in the same scope
(`summary_scope`: summary model, prompt, deployment, tenant), and its request is charged to the caller
that caused it (`attribution`). A failure changes nothing but a warning (once).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any, Final

from .._cut_turns import CutTurns, transcript
from .failures import LogOnce, logger, where
from .routing import proxy_router, shared_cache, shared_get, shared_set

#: Key of a cut point's summary in the proxy's shared cache, followed by a digest of its scope and
#: `CutTurns.key`.
SUMMARY_KEY_PREFIX: Final = "litellm_governance:summary:v2:"
#: Seconds a summary lives in the shared cache.
SUMMARY_TTL: Final = 7 * 24 * 3600
#: A summary request carries this key in its metadata: the plugin leaves it alone.
SUMMARY_MARKER: Final = "_governance_summary"
#: Summaries a process keeps, and summary requests in flight at once (more are not started).
_KEPT: Final = 1024
_IN_FLIGHT: Final = 2
#: Seconds one summary request may take.
_REQUEST_TIMEOUT: Final = 120.0
SUMMARY_PROMPT: Final = (
    "Earlier turns of an AI agent's session had to be cut from its context window. Summarize them for "
    "the agent in at most {words} words of plain text: what it was asked, the files it read and changed, "
    "the commands it ran and what came of them (errors above all), what it found and decided, and what "
    "is still to do. No preamble."
)
#: What a summary's scope digests besides the request's: this version and the prompt's own digest.
_SCOPE_VERSION: Final = "summary-scope-v1:" + hashlib.sha256(SUMMARY_PROMPT.encode()).hexdigest()


def summary_scope(*, summary_model: str, deployment: Hashable, metadata: Mapping[str, Any], sharing: str) -> str:
    """The scope a request's summaries are kept and found in: a SHA-256 digest of the summary model,
    the prompt's version, the deployment (`Deployment.key`) and the tenant — the LiteLLM team of the
    caller (``sharing: team``; a key without a team stands alone), its key (``key``), or nobody
    (``all``), read from the caller's LiteLLM metadata (``user_api_key_team_id``, ``user_api_key_hash``)."""
    team, key = metadata.get("user_api_key_team_id"), metadata.get("user_api_key_hash")
    if sharing == "all":
        tenant = "all"
    elif sharing == "team" and isinstance(team, str) and team:
        tenant = f"team:{team}"
    elif isinstance(key, str) and key:
        tenant = f"key:{key}"
    else:
        tenant = "no key"
    material = json.dumps([_SCOPE_VERSION, summary_model, repr(deployment), tenant], ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


def attribution(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The caller's ``user_api_key*`` fields of its LiteLLM metadata (plain values): what makes
    LiteLLM's spend tracking charge a summary request to the caller's key and team."""
    return {
        name: value
        for name, value in metadata.items()
        if isinstance(name, str) and name.startswith("user_api_key") and isinstance(value, (str, int, float))
    }


class Summaries:
    """This process's summaries by scope and cut key, and the background requests that write them."""

    def __init__(self) -> None:
        self._ready: OrderedDict[tuple[str, str], str] = OrderedDict()  # (scope, cut key) -> summary
        self._by_scope: dict[str, dict[str, str]] = {}  # the same, by scope
        self._pending: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._failures = LogOnce(logger, every=60.0)

    def ready_for(self, scope: str) -> Mapping[str, str]:
        """The summaries written so far in `scope`, by cut key (what a pass hands the pipeline)."""
        return self._by_scope.get(scope, {})

    def schedule(
        self, cut: CutTurns, model: str, max_tokens: int, *, scope: str, caller: Mapping[str, Any] | None = None
    ) -> None:
        """Have `model` summarize `cut` for `scope` in the background (charged to `caller`), unless that is
        done, under way, or too many summaries are under way already."""
        entry = (scope, cut.key)
        if entry in self._ready or entry in self._pending or len(self._pending) >= _IN_FLIGHT:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a synchronous caller: nothing runs in the background there
            return
        self._pending.add(entry)
        task = loop.create_task(self._produce(cut, model, max_tokens, scope, dict(caller or {})))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        """Wait for the summaries under way (tests, and a clean shutdown)."""
        while pending := [task for task in self._tasks if not task.done()]:
            await asyncio.gather(*pending, return_exceptions=True)

    def _keep(self, scope: str, cut_key: str, summary: str) -> None:
        self._ready[(scope, cut_key)] = summary
        self._ready.move_to_end((scope, cut_key))
        self._by_scope.setdefault(scope, {})[cut_key] = summary
        while len(self._ready) > _KEPT:
            (old_scope, old_key), _ = self._ready.popitem(last=False)
            kept = self._by_scope[old_scope]
            del kept[old_key]
            if not kept:
                del self._by_scope[old_scope]

    async def _produce(self, cut: CutTurns, model: str, max_tokens: int, scope: str, caller: dict[str, Any]) -> None:
        try:
            shared = shared_cache()
            key = SUMMARY_KEY_PREFIX + hashlib.sha256(f"{scope}:{cut.key}".encode()).hexdigest()
            cached = None
            if shared is not None:
                with contextlib.suppress(Exception):  # the shared cache is optional: ask the model instead
                    cached = await shared_get(shared, key)
            if isinstance(cached, str) and cached.strip():
                self._keep(scope, cut.key, cached)
                return
            summary = await _ask(model, cut, max_tokens, caller)
            if summary:
                self._keep(scope, cut.key, summary)
                if shared is not None:
                    with contextlib.suppress(Exception):  # kept in this process anyway
                        await shared_set(shared, key, summary, SUMMARY_TTL)
        except Exception as exc:  # noqa: BLE001 - a summary never breaks anything: the note stays
            # Type and code location only: an exception's text may quote the conversation.
            self._failures.log(
                ("summary", type(exc).__name__),
                logging.WARNING,
                "summary of cut turns by %s failed (%s at %s): the note stays in their place",
                model,
                type(exc).__name__,
                where(exc),
            )
        finally:
            self._pending.discard((scope, cut.key))


async def _ask(model: str, cut: CutTurns, max_tokens: int, caller: Mapping[str, Any]) -> str | None:
    """The summary `model` writes of `cut`: through the proxy's Router when it has that model group,
    else LiteLLM's SDK."""
    words = max(50, max_tokens * 2 // 3)
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": SUMMARY_PROMPT.format(words=words)},
            {"role": "user", "content": _what_to_summarize(cut)},
        ],
        "max_tokens": max_tokens,
        "metadata": {**caller, SUMMARY_MARKER: True},
    }
    router = proxy_router()
    if router is not None and model in (getattr(router, "model_names", None) or ()):
        response = await asyncio.wait_for(router.acompletion(**kwargs), _REQUEST_TIMEOUT)
    else:
        import litellm

        response = await asyncio.wait_for(litellm.acompletion(**kwargs), _REQUEST_TIMEOUT)
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    text = getattr(message, "content", None)
    return text.strip() if isinstance(text, str) and text.strip() else None


def _what_to_summarize(cut: CutTurns) -> str:
    """The cut turns as text, after the summary of the turns cut before them (summaries roll)."""
    turns = transcript(cut.messages)
    if not cut.previous:
        return turns
    return f"Summary of the earlier turns:\n{cut.previous}\n\nThe turns after them:\n{turns}"
