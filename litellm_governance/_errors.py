"""Exceptions raised by litellm-governance.

Hierarchy::

    GovernanceError                    base of everything this package raises on purpose
    ├── InvalidRequestError            `messages`, `tools`, `model` or `max_output_tokens` is not what
    │                                  a chat request carries (also a TypeError and a ValueError)
    ├── ConfigError                    a GovernanceConfig field has an unusable value (also a ValueError)
    └── TokenizerUnavailableError      LiteLLM's bundled tiktoken files are missing or damaged
                                       (also a RuntimeError); the package never downloads them

`govern()` raises `InvalidRequestError` only for input that is not a chat message list at all
(not a list, or an element that is not a dict). Any list of dicts is governed, however damaged.
"""

from __future__ import annotations

__all__ = ["ConfigError", "GovernanceError", "InvalidRequestError", "TokenizerUnavailableError"]


class GovernanceError(Exception):
    """Base class of the errors this package raises on purpose."""


class InvalidRequestError(GovernanceError, TypeError, ValueError):
    """The request cannot be a chat request (e.g. `messages` is not a list of dicts): the error
    message says what is wrong and where."""


class ConfigError(GovernanceError, ValueError):
    """A configuration field has a value governance cannot use: the message names the field;
    `redacted` says it without the value, for logs (on a request's path a value may be a client's)."""

    def __init__(self, message: str, *, redacted: str | None = None) -> None:
        super().__init__(message)
        self.redacted = redacted if redacted is not None else message


class TokenizerUnavailableError(GovernanceError, RuntimeError):
    """The tiktoken encoding files bundled with LiteLLM could not be read or verified."""
