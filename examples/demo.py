"""`make demo`: litellm-governance governing real requests through a real LiteLLM proxy.

No API key and no network. A local server stands in for GLM: it checks every request it receives
against GLM's documented rules and its 32,768-token context window, and answers GLM's real
errors when one is broken (`litellm_governance.testing.emulation`). Two LiteLLM proxies are started from
their config files, as an operator would: one with the plugin (one line in the config), one
without. The same requests go to both:

1. a coding agent's long chat session with the damage long tool loops produce;
2. Claude Code's `/v1/messages` traffic, routed to GLM (LiteLLM translates it to chat).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for bench: the realistic agent-session generators

from bench.agent_shapes import claude_code_body  # noqa: E402
from bench.sessions import make_session, make_tools  # noqa: E402
from litellm_governance.testing import ProxyProcess, RecordingUpstream, start_proxy  # noqa: E402
from litellm_governance.testing.emulation import validate  # noqa: E402

WINDOW = 32_768
#: Where the demo leaves its requests, for `explain` (git ignores it; `make clean` removes it).
DEMO_DIR = ROOT / ".demo"
PLUGIN = "litellm_governance.proxy_handler_instance"


def step(text: str) -> None:
    print(text, flush=True)


def broken_session() -> tuple[list[dict[str, Any]], list[str]]:
    """A long agent session with the damage real loops produce, and what was done to it."""
    messages = make_session(400, seed=7)
    calls = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    damage = []
    lost = calls[len(calls) // 2]
    del messages[lost + 1]
    damage.append("a tool result lost (the loop crashed mid-round)")
    messages.insert(calls[5] + 2, {"role": "tool", "tool_call_id": "call_gone", "content": "stale output"})
    damage.append("a result for a call that no longer exists")
    messages.append(dict(messages[-1]))
    damage.append("the newest result sent twice")
    messages.insert(3, {"role": "system", "content": "Keep answers short."})
    damage.append("a system message in the middle (GLM-5#74)")
    messages.append({"role": "user", "content": "Also keep the public API unchanged."})
    messages.append({"role": "user", "content": ""})
    damage.append("an empty user message")
    messages.append({"role": "user", "content": "And run the whole test suite before you stop."})
    messages.append({"role": "assistant", "content": "Understood. Running"})
    damage.append("a trailing assistant message (prefill)")
    return messages, damage


def config_for(upstream: RecordingUpstream, *, plugin: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "model_list": [
            {
                "model_name": "glm",
                "litellm_params": {"model": "zai/glm-4.6", "api_base": upstream.base_url, "api_key": "sk-local"},
                "model_info": {"max_input_tokens": WINDOW},
            }
        ],
        "litellm_settings": {"num_retries": 0},
    }
    if plugin:
        config["litellm_settings"]["callbacks"] = PLUGIN
    return config


def start_both(upstream: RecordingUpstream, workdir: Path) -> dict[str, ProxyProcess]:
    """Start the two proxies side by side (each takes a few seconds)."""
    proxies: dict[str, ProxyProcess] = {}
    errors: list[BaseException] = []

    def start(name: str, plugin: bool) -> None:
        try:
            proxies[name] = start_proxy(config_for(upstream, plugin=plugin), workdir=workdir / name, name=name)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=args) for args in (("with", True), ("without", False))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        for proxy in proxies.values():
            proxy.stop()
        raise errors[0]
    return proxies


def provider_error(raw: bytes) -> str:
    """The provider's own error text inside LiteLLM's error body."""
    text = raw.decode(errors="replace")
    for marker in ('{\\"error\\"', '{"error"', '{\\"code\\"'):
        at = text.find(marker, 1)
        if at > 0:
            return text[at : at + 160].replace('\\"', '"') + " ..."
    return text[:200]


def send(proxy: ProxyProcess, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return proxy.post(path, body, timeout=180)


def show_case(
    title: str,
    path: str,
    body: dict[str, Any],
    damage: list[str],
    *,
    proxies: dict[str, ProxyProcess],
    upstream: RecordingUpstream,
) -> bool:
    history = body.get("messages", [])
    print(f"\n{title}")
    print(f"  {len(history)} messages; damage in them:")
    for line in damage:
        print(f"    - {line}")
    upstream.clear()
    status, _, raw = send(proxies["without"], path, body)
    verdict = upstream.requests[-1].rule if upstream.requests else None
    print(f"  without the plugin: HTTP {status}" + (f" ({verdict})" if verdict else ""))
    print(f"    GLM said: {provider_error(raw)}")
    upstream.clear()
    status, headers, raw = send(proxies["with"], path, body)
    print(f"  with the plugin:    HTTP {status}")
    if status != 200:
        print(f"    {raw[:400]!r}")
        return False
    reply = json.loads(raw)
    received = upstream.bodies()[-1]
    sent = received["messages"]
    header = headers.get("x-litellm-governance", "")
    usage = reply.get("usage") or {}
    prompt_tokens = usage.get("prompt_tokens", usage.get("input_tokens"))
    print(f"    x-litellm-governance: {header}")
    print(
        f"    GLM received {len(sent)} chat messages, {prompt_tokens:,} prompt tokens by its count (window {WINDOW:,});"
    )
    print("    the header's tokens are the plugin's estimate, at the strict profile's ratio until it has")
    print("    learned GLM's own from a few answers (calibration)")
    print(f"    GLM's rules broken in what it received: {validate('glm', 'chat', received) or 'none'}")
    return True


def save_for_explain(chat: dict[str, Any], claude: dict[str, Any], config: dict[str, Any]) -> str:
    """Save the requests and the proxy config under .demo/ and return a command that explains the
    first one, runnable as printed from the repository root (with the Python that runs the demo)."""
    DEMO_DIR.mkdir(exist_ok=True)
    (DEMO_DIR / "chat_request.json").write_text(json.dumps(chat, indent=1), encoding="utf-8")
    (DEMO_DIR / "claude_code_request.json").write_text(json.dumps(claude, indent=1), encoding="utf-8")
    # JSON is YAML: the proxy config as the proxy read it.
    (DEMO_DIR / "proxy_config.yaml").write_text(json.dumps(config, indent=2), encoding="utf-8")
    python = Path(sys.executable)
    shown = os.path.relpath(python, ROOT) if python.is_relative_to(ROOT) else str(python)
    demo = DEMO_DIR.relative_to(ROOT)
    return (
        f"{shown} -m litellm_governance explain {demo}/chat_request.json --config {demo}/proxy_config.yaml "
        f"--html {demo}/report.html"
    )


def main() -> None:
    print(__doc__)
    started = time.monotonic()
    with RecordingUpstream(reply="All tests pass.", emulate="glm", window=WINDOW) as upstream:
        step(f"[1/3] Local GLM stand-in listening on {upstream.base_url} (GLM's rules, {WINDOW:,}-token window).")
        with tempfile.TemporaryDirectory() as tmp:
            step("[2/3] Starting two LiteLLM proxies (`litellm --config ...`), with and without the plugin ...")
            proxies = start_both(upstream, Path(tmp))
            try:
                slowest = max(p.startup_seconds for p in proxies.values())
                step(f"      both live after {slowest:.1f} s. The plugin is one line of the first config:")
                step(f"        litellm_settings:\n          callbacks: {PLUGIN}")
                step("[3/3] Sending the same requests to both.")
                messages, damage = broken_session()
                chat = {"model": "glm", "messages": messages, "tools": make_tools(), "max_tokens": 4096}
                ok = show_case(
                    "Case 1: a coding agent's chat session",
                    "/v1/chat/completions",
                    chat,
                    damage,
                    proxies=proxies,
                    upstream=upstream,
                )
                claude = claude_code_body(300, seed=5, model="glm")
                claude_damage = [
                    "a long Claude Code session: far more than GLM's window",
                    "thinking blocks, <system-reminder> text riding with tool results, cache_control breakpoints",
                ]
                ok = (
                    show_case(
                        "Case 2: Claude Code (/v1/messages) pointed at GLM",
                        "/v1/messages",
                        claude,
                        claude_damage,
                        proxies=proxies,
                        upstream=upstream,
                    )
                    and ok
                )
                explain_command = save_for_explain(chat, claude, config_for(upstream, plugin=True))
                log = [line for line in proxies["with"].log_tail(4_000).splitlines() if "litellm_governance" in line]
                print("\nThe plugin's log lines in the proxy (counts and token figures, never content):")
                for line in log[-4:]:
                    print(f"  {line}")
            finally:
                for proxy in proxies.values():
                    proxy.stop()
    print(f"\nDone in {time.monotonic() - started:.0f} s.")
    print(f"The requests are saved in {DEMO_DIR.relative_to(ROOT)}/. One of them in detail, message by message")
    print("(from the repository root; the same Python as the demo, which has LiteLLM):")
    print(f"  {explain_command}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
