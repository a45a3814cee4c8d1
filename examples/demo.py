"""`make demo`: litellm-governance governing a real request through a real LiteLLM proxy.

No API key and no network: a local OpenAI-compatible server (`RecordingUpstream`) stands in for
the provider, and records exactly what it receives. The proxy loads the plugin from its config
file, as an operator would, and the deployment is GLM (``zai/glm-4.6``) with a 32k window.

The request is a 400-message coding-agent session (about 100k tokens, real file contents)
with the damage long agent loops produce: a tool call whose result was lost, a result for a
call that no longer exists, a result sent twice, two user messages in a row and a trailing
assistant message. GLM rejects such a request ("code 1214: The messages parameter is illegal").
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for bench.sessions, the realistic agent-session generator

import yaml  # noqa: E402  # installed with litellm[proxy]

from bench.sessions import make_session, make_tools  # noqa: E402
from litellm_governance.testing import RecordingUpstream, start_proxy  # noqa: E402

WINDOW = 32_768


def broken_session() -> list[dict[str, Any]]:
    """A long agent session with the damage real loops produce."""
    messages = make_session(400, seed=7)
    calls = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    lost = calls[len(calls) // 2]
    del messages[lost + 1]  # 1. a tool result lost (the loop crashed mid-round)
    messages.insert(calls[5] + 2, {"role": "tool", "tool_call_id": "call_gone", "content": "stale output"})  # 2. orphan
    answered = messages[-1]
    messages.append(dict(answered))  # 3. the newest result sent twice
    messages.append({"role": "user", "content": "Also keep the public API unchanged."})
    messages.append({"role": "user", "content": "And run the whole test suite before you stop."})  # 4. user run
    messages.append({"role": "assistant", "content": "Understood. Running"})  # 5. trailing assistant (prefill)
    return messages


def problems(messages: list[dict[str, Any]]) -> list[str]:
    """What a strict provider such as GLM rejects in `messages`."""
    found: list[str] = []
    declared: set[str] = set()
    answered: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                declared.add(call["id"])
        elif role == "tool":
            ident = message.get("tool_call_id")
            if ident not in declared:
                found.append(f"message {index}: tool result for a call that does not exist")
            elif ident in answered:
                found.append(f"message {index}: second result for the same call")
            answered.add(ident)
        if index and role in ("user", "assistant") and messages[index - 1].get("role") == role:
            found.append(f"message {index}: two {role} messages in a row")
    missing = declared - answered
    found += [f"tool call {ident} has no result" for ident in sorted(missing)]
    if messages and messages[-1].get("role") == "assistant":
        found.append("ends with an assistant message (prefill), which GLM rejects")
    return found


def roles(messages: list[dict[str, Any]]) -> str:
    letters = {"system": "S", "user": "U", "assistant": "A", "tool": "t"}
    return "".join(letters.get(str(m.get("role")), "?") for m in messages)


def main() -> None:
    print(__doc__)
    messages = broken_session()
    with RecordingUpstream(reply="All tests pass.") as upstream, tempfile.TemporaryDirectory() as tmp:
        config = {
            "model_list": [
                {
                    "model_name": "glm",
                    "litellm_params": {"model": "zai/glm-4.6", "api_base": upstream.base_url, "api_key": "sk-local"},
                    "model_info": {"max_input_tokens": WINDOW},
                }
            ],
            "litellm_settings": {"callbacks": "litellm_governance.proxy_handler_instance"},
            "callback_settings": {"governance": {"keep_recent": 10}},
        }
        print("Proxy config (the plugin is one line under litellm_settings.callbacks):")
        print("  " + yaml.safe_dump(config, sort_keys=False).replace("\n", "\n  "))
        print("Starting `litellm --config proxy_config.yaml` ...", flush=True)
        with start_proxy(config, workdir=Path(tmp)) as proxy:
            print(f"Proxy live at {proxy.base_url} after {proxy.startup_seconds:.1f} s.\n")
            found = problems(messages)
            print(f"Sending {len(messages)} messages with {len(found)} problems GLM would reject:")
            for line in found:
                print(f"  - {line}")
            body = {"model": "glm", "messages": messages, "tools": make_tools(), "max_tokens": 4096}
            status, headers, raw = proxy.post("/v1/chat/completions", body)
            if status != 200:
                raise SystemExit(f"the proxy answered {status}: {raw[:500]!r}")
            reply = json.loads(raw)
            received = upstream.bodies()[-1]["messages"]
            log_lines = [line for line in proxy.log_tail(10_000).splitlines() if "litellm_governance" in line]

    print(f"\nThe client got: {reply['choices'][0]['message']['content']!r}")
    print(f"Response header  x-litellm-governance: {headers.get('x-litellm-governance')}")
    print("Proxy log line:  " + (log_lines[-1] if log_lines else "(none)"))
    print(f"\nWhat the provider received: {len(received)} messages (sent {len(messages)}).")
    print(f"  roles sent:     {roles(messages[:12])} ... {roles(messages[-8:])}")
    print(f"  roles received: {roles(received[:12])} ... {roles(received[-8:])}")
    print(f"  system prompt and task kept whole: {received[0] == messages[0] and received[1] == messages[1]}")
    print(f"  problems left: {problems(received) or 'none'}")
    print(
        f"  last user message: {received[-1]['content'] if received[-1]['role'] == 'user' else received[-1]['role']!r}"
    )
    print("\nS system, U user, A assistant, t tool result. Governed for GLM: within the 32k window,")
    print("old tool output compacted, oldest turns snipped, the task kept, pairs repaired, roles alternating.")


if __name__ == "__main__":
    main()
