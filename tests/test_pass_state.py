"""The state the proxy's pre-call pass leaves in a request's metadata (`integration.passes.PassState`),
as LiteLLM's own handling of that metadata meets it."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm.litellm_core_utils.core_helpers import safe_deep_copy  # noqa: E402

from litellm_governance import GovernanceHook  # noqa: E402
from litellm_governance.integration.passes import STATE_KEY, PassState  # noqa: E402
from tests.test_context_editing_hook import tool_loop  # noqa: E402

pytestmark = pytest.mark.litellm

#: A deployment LiteLLM does not translate ``/v1/messages`` for (the deployment hook governs it itself).
MODEL = "anthropic/claude-sonnet-4-5"


def _pre_called() -> dict[str, Any]:
    data = {"messages": tool_loop(40), "max_tokens": 1024, "model": MODEL, "litellm_metadata": {}}
    return asyncio.run(GovernanceHook().async_pre_call_hook(None, None, data, "anthropic_messages")) or data


def test_litellm_copies_the_metadata_without_copying_the_state() -> None:
    """LiteLLM's router deep-copies a request's metadata on every request (its snapshot for a fallback,
    `safe_deep_copy`): the state, a frozen config and report, is kept as it is instead of copied object by
    object (some 80 microseconds a request). Without `PassState.__deepcopy__` the copy is a new object."""
    metadata = _pre_called()["litellm_metadata"]
    state = metadata[STATE_KEY]
    assert isinstance(state, PassState)
    copied = safe_deep_copy(metadata)
    assert copied[STATE_KEY] is state and copy.deepcopy(state) is state
    assert copied["spend_logs_metadata"] == metadata["spend_logs_metadata"]  # the report: copied as LiteLLM does
    assert copied["spend_logs_metadata"] is not metadata["spend_logs_metadata"]


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
