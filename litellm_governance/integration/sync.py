"""The synchronous drop-in: ``litellm.completion`` with the request governed first (synchronous
``litellm.completion`` / ``Router.completion`` run no callback hook that can change the messages)."""

from __future__ import annotations

from typing import Any

from .._config import GovernanceConfig
from .._models import import_litellm
from .._request import govern_request
from .reporting import log_report

__all__ = ["completion"]


def completion(*, config: GovernanceConfig | None = None, **kwargs: Any) -> Any:
    """``litellm.completion`` with the request governed first (sync calls run no hook that can)."""
    governed = govern_request(kwargs, format="chat", config=config)
    log_report(governed.report, "sync")
    return import_litellm().completion(**governed.request)
