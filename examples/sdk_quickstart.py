"""litellm-governance in Python: one line, then use LiteLLM as usual.

    ZAI_API_KEY=... python examples/sdk_quickstart.py

Offline, against a local stand-in for GLM that rejects what GLM rejects (start it first, in another
terminal; the test suite runs these two commands):

    python -m litellm_governance.testing --port 8099 --emulate glm
    EXAMPLE_API_BASE=http://127.0.0.1:8099/v1 python examples/sdk_quickstart.py

EXAMPLE_API_BASE sends to that OpenAI-compatible server instead of GLM, with a placeholder key
(EXAMPLE_API_KEY sets another); EXAMPLE_MODEL names another model.
"""

from __future__ import annotations

import asyncio
import os

import litellm

from litellm_governance import GovernanceHook, govern

litellm.callbacks = [GovernanceHook()]  # the one line: every litellm.acompletion is governed

MODEL = os.environ.get("EXAMPLE_MODEL", "zai/glm-4.6")
API_BASE = os.environ.get("EXAMPLE_API_BASE")  # None: the provider's real endpoint
# None: LiteLLM reads the provider's key (ZAI_API_KEY); a local server takes any key.
API_KEY = os.environ.get("EXAMPLE_API_KEY") or ("sk-local" if API_BASE else None)

# What an agent loop sends after a crash: a tool call whose result was lost, two user messages
# in a row, and a trailing assistant message. GLM rejects all three (error 1214).
MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Find where the retry limit is set."},
    {
        "role": "assistant",
        "content": "Searching.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": '{"pattern": "retries"}'}}
        ],
    },
    {"role": "user", "content": "The search crashed; try again."},
    {"role": "user", "content": "Only look under src/."},
    {"role": "assistant", "content": "On it"},
]


async def main() -> None:
    # What governance will do, without sending anything:
    preview = govern(MESSAGES, model=MODEL)
    print("governance:", preview.report.summary())

    response = await litellm.acompletion(
        model=MODEL,
        messages=MESSAGES,
        api_base=API_BASE,
        api_key=API_KEY,
    )
    print("reply:", response.choices[0].message.content)

    # Synchronous litellm.completion runs no hook that can change messages: use the wrapper.
    from litellm_governance.integration import completion

    sync = completion(model=MODEL, messages=MESSAGES, api_base=API_BASE, api_key=API_KEY)
    print("sync reply:", sync.choices[0].message.content)


if __name__ == "__main__":
    asyncio.run(main())
