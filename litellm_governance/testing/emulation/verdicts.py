"""What the emulator concludes about a request: a broken rule (`Violation`) and the provider's HTTP
answer to it (`Rejection`: status, error body shape, headers), built by `error_response`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .rules import RULES_BY_ID, WIRE_DEFAULT_PROVIDER, Rule

__all__ = ["Rejection", "Violation", "error_response", "violation"]


@dataclass(frozen=True)
class Violation:
    """A broken rule: the rule and the provider's error message filled in for this request."""

    rule: Rule
    message: str
    param: str | None = None


@dataclass(frozen=True)
class Rejection:
    """What the emulated provider answers for a violation: status, headers and JSON body."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    rule_id: str = ""
    message: str = ""


def violation(rule_id: str, param: str | None = None, **values: object) -> Violation:
    """The violation of rule `rule_id`, its error text filled in with `values`."""
    rule = RULES_BY_ID[rule_id]
    return Violation(rule, rule.error.format(**values) if values else rule.error, param)


_BEDROCK_VALIDATION: Final = "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"


def error_response(provider: str | None, wire: str, violation: Violation) -> Rejection:
    """The provider's HTTP answer to ``violation``: status, JSON body shape and headers."""
    name = provider or WIRE_DEFAULT_PROVIDER.get(wire, "openai")
    rule = violation.rule
    message = violation.message
    body: dict[str, Any]
    headers: dict[str, str] = {}
    if name == "anthropic":
        error = {"type": rule.error_type or "invalid_request_error", "message": message}
        body = {"type": "error", "error": error, "request_id": "req_emulated"}
    elif name == "gemini":
        body = {"error": {"code": rule.status, "message": message, "status": "INVALID_ARGUMENT"}}
    elif name == "bedrock":
        body = {"message": message}
        headers["x-amzn-errortype"] = _BEDROCK_VALIDATION
    elif name == "mistral":
        body = {
            "object": "error",
            "message": message,
            "type": rule.error_type or "invalid_request_error",
            "param": None,
            "code": rule.code,
        }
    elif name == "deepseek":
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
        }
    elif name == "moonshot":
        body = {"error": {"message": message, "type": rule.error_type or "invalid_request_error"}}
    elif name == "glm":
        body = {"error": {"code": str(rule.code), "message": message}}
    elif name == "vllm":
        body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": rule.status}}
    else:
        body = {
            "error": {
                "message": message,
                "type": rule.error_type or "invalid_request_error",
                "param": violation.param,
                "code": rule.code,
            }
        }
    return Rejection(rule.status, body, headers, rule.id, message)
