"""litellm-governance in Python: one line, then use LiteLLM as usual.

    ZAI_API_KEY=... python examples/sdk_quickstart.py

Set EXAMPLE_API_BASE to send to a local OpenAI-compatible server instead (the test suite does).
"""

from __future__ import annotations

import asyncio
import os

import litellm

from litellm_governance import GovernanceHook, govern

litellm.callbacks = [GovernanceHook()]  # the one line: every litellm.acompletion is governed

MODEL = os.environ.get("EXAMPLE_MODEL", "zai/glm-4.6")
API_BASE = os.environ.get("EXAMPLE_API_BASE")  # None: the provider's real endpoint

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
        api_key=os.environ.get("EXAMPLE_API_KEY"),  # None: LiteLLM reads ZAI_API_KEY
    )
    print("reply:", response.choices[0].message.content)

    # Synchronous litellm.completion runs no hook that can change messages: use the wrapper.
    from litellm_governance.integration import completion

    sync = completion(model=MODEL, messages=MESSAGES, api_base=API_BASE, api_key=os.environ.get("EXAMPLE_API_KEY"))
    print("sync reply:", sync.choices[0].message.content)


if __name__ == "__main__":
    asyncio.run(main())
