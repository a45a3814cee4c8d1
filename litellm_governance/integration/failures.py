"""What a pass does when governance fails: fail open (log once, note it in the report, send the
request unchanged) or, where the operator set ``fail_closed``, reject it with a 400."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from litellm.exceptions import BadRequestError

from .._errors import ConfigError
from .._request import Format
from .logonce import LogOnce, where
from .reporting import logger, record

__all__ = ["CONFIG_ERROR_INTERVAL", "Failures"]

#: A configuration error is logged again at most this often (seconds) while it lasts.
CONFIG_ERROR_INTERVAL: Final = 60.0


class Failures:
    """Reports a pass's failures: each kind of internal failure logged once (then at DEBUG), a
    configuration error every `CONFIG_ERROR_INTERVAL` seconds while it lasts."""

    def __init__(self) -> None:
        self._failures = LogOnce(logger)
        self._config_errors = LogOnce(logger, every=CONFIG_ERROR_INTERVAL, then=None)

    def config_error(
        self, request: dict[str, Any], fmt: Format, stage: str, exc: ConfigError, *, fail_closed: bool
    ) -> None:
        """A configuration error: reported as one (naming the field), again every minute while it
        lasts; the request goes through ungoverned unless the operator set ``fail_closed``."""
        if fail_closed:
            raise rejection(request, f"a configuration error: {exc}") from exc
        message = str(exc)
        # A configuration error names config fields and values, never request content.
        self._config_errors.log(
            message,
            logging.WARNING,
            "governance skipped (configuration error, stage %s): %s; request sent unchanged",
            stage,
            exc,
        )
        record(
            request,
            fmt,
            {
                "skipped": True,
                "error": "ConfigError",
                "config_error": message,
                "format": fmt,
                "stage": stage,
                "changed": False,
                "summary": "skipped (configuration error)",
            },
        )

    def failed(
        self,
        request: dict[str, Any],
        fmt: Format,
        stage: str,
        exc: BaseException,
        *,
        fail_closed: bool,
        client_error: bool = False,
    ) -> None:
        """Fail closed (raise a 400), or log once and let the request through with a note."""
        location = where(exc)
        if fail_closed:
            detail = f"{type(exc).__name__}: {exc}" if client_error else f"{type(exc).__name__} at {location}"
            raise rejection(request, detail) from exc
        kind = "not a governable request" if client_error else "internal error"
        # Type and code location only: an exception's text may quote message content.
        self._failures.log(
            (type(exc).__name__, location),
            logging.WARNING,
            "governance skipped (%s, %s at %s, stage %s): request sent unchanged",
            kind,
            type(exc).__name__,
            location,
            stage,
        )
        record(
            request,
            fmt,
            {
                "skipped": True,
                "error": type(exc).__name__,
                "where": location,
                "format": fmt,
                "stage": stage,
                "changed": False,
                "summary": f"skipped ({type(exc).__name__})",
            },
        )


def rejection(request: Mapping[str, Any], detail: str) -> BadRequestError:
    """The 400 a fail-closed pass raises (LiteLLM's own error type, so the client gets a 400)."""
    model = request.get("model")
    return BadRequestError(
        message=f"litellm-governance rejected the request ({detail}); the operator set fail_closed",
        model=model if isinstance(model, str) else "",
        llm_provider="litellm_governance",
    )
