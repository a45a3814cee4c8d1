"""The synchronous drop-in: ``litellm.completion`` with the request governed first (synchronous
``litellm.completion`` / ``Router.completion`` run no callback hook that can change the messages)."""

from __future__ import annotations

from typing import Any

from .._config import GovernanceConfig
from .._models import import_litellm
from .._request import govern_request
from .hook import GovernanceHook
from .reporting import log_report

__all__ = ["completion", "registered_config"]


def completion(*, config: GovernanceConfig | None = None, **kwargs: Any) -> Any:
    """``litellm.completion`` with the request governed first (sync calls run no hook that can).
    Without `config`, the options of the `GovernanceHook` registered in ``litellm.callbacks`` apply
    (as they do to the async calls), else the defaults."""
    litellm = import_litellm()
    chosen = config if config is not None else registered_config(litellm)
    if chosen is not None and not chosen.enabled:
        return litellm.completion(**kwargs)
    governed = govern_request(kwargs, format="chat", config=chosen)
    log_report(governed.report, "sync")
    return litellm.completion(**governed.request)


def registered_config(litellm: Any) -> GovernanceConfig | None:
    """The config of the first `GovernanceHook` in ``litellm.callbacks`` (None: none registered)."""
    for callback in getattr(litellm, "callbacks", None) or ():
        if isinstance(callback, GovernanceHook):
            return callback.config
    return None
