"""The state the proxy's pre-call pass leaves in a request's metadata (`integration.passes.PassState`),
as LiteLLM's own handling of that metadata meets it."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_governance import GovernanceHook  # noqa: E402
from tests.test_context_editing_hook import tool_loop  # noqa: E402

pytestmark = pytest.mark.litellm

#: A deployment LiteLLM does not translate ``/v1/messages`` for (the deployment hook governs it itself).
MODEL = "anthropic/claude-sonnet-4-5"


def _pre_called() -> dict[str, Any]:
    data = {"messages": tool_loop(40), "max_tokens": 1024, "model": MODEL, "litellm_metadata": {}}
    return asyncio.run(GovernanceHook().async_pre_call_hook(None, None, data, "anthropic_messages")) or data


def test_a_copied_request_is_governed_again_after_routing() -> None:
    """The shared state still describes the history the pre-call pass governed, by identity: a deep copy
    of the whole request (a fallback's) has another history, which the deployment hook governs again."""
    passed = _pre_called()
    hook = GovernanceHook()
    copied = {**copy.deepcopy(passed), "model": MODEL}
    for kwargs in ({**passed, "model": MODEL}, copied):
        asyncio.run(hook.async_pre_call_deployment_hook(kwargs, "anthropic_messages"))
    stage = {"pre_call": "skipped", "deployment": "governed"}  # (the report's stage: the pass that wrote it)
    assert stage[passed["litellm_metadata"]["spend_logs_metadata"]["governance"]["stage"]] == "skipped"
    assert stage[copied["litellm_metadata"]["spend_logs_metadata"]["governance"]["stage"]] == "governed"
