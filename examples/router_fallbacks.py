"""A LiteLLM Router with a fallback to a smaller model: governance re-fits the request to the
window of whichever deployment is actually called, on every fallback.

    ZAI_API_KEY=... python examples/router_fallbacks.py

Offline, against a local upstream on which the first deployment's model, "up-failing", answers with
a context-length error (so the fallback runs) and every request must fit a 16,384-token window (the
fallback's); start it first, in another terminal (the test suite runs these two commands):

    python -m litellm_governance.testing --port 8099 --fail-model up-failing --window 16384
    EXAMPLE_API_BASE=http://127.0.0.1:8099/v1 python examples/router_fallbacks.py
"""

from __future__ import annotations

import asyncio
import logging
import os

import litellm

from litellm_governance import GovernanceHook

litellm.callbacks = [GovernanceHook()]
# One line per governed attempt: watch the fallback get a request fitted to its smaller window.
logging.basicConfig(format="%(name)s: %(message)s")
logging.getLogger("litellm_governance").setLevel(logging.INFO)

API_BASE = os.environ.get("EXAMPLE_API_BASE")
LOCAL = API_BASE is not None


def deployment(model: str, window: int) -> dict[str, object]:
    params: dict[str, object] = {"model": model}
    if LOCAL:
        params.update(api_base=API_BASE, api_key="sk-local")
    return {"litellm_params": params, "model_info": {"max_input_tokens": window}}


router = litellm.Router(
    model_list=[
        {"model_name": "agent", **deployment("openai/up-failing" if LOCAL else "zai/glm-4.6", 200_000)},
        {"model_name": "agent-small", **deployment("openai/up-small" if LOCAL else "zai/glm-4.5-air", 16_384)},
    ],
    fallbacks=[{"agent": ["agent-small"]}],
    num_retries=0,
)


def long_history(rounds: int = 120) -> list[dict[str, object]]:
    """A task followed by many file reads: far more than 16k tokens."""
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Review every module for unused imports."},
    ]
    for i in range(rounds):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": f"Reading module {i}.", "tool_calls": [call]})
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"# module {i}\n" + "import os\n" * 400}
        )
    return messages


async def main() -> None:
    response = await router.acompletion(model="agent", messages=long_history(), max_tokens=1024)
    print("answered by:", response.model)
    print("reply:", response.choices[0].message.content)


if __name__ == "__main__":
    asyncio.run(main())
