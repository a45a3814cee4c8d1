"""Test helpers that ship: a recording, OpenAI-compatible upstream server, and a real LiteLLM proxy process.

:class:`RecordingUpstream` is a tiny HTTP server bound to ``127.0.0.1`` that
answers the OpenAI endpoints LiteLLM calls (chat completions, text
completions, responses, models; streaming too) plus Anthropic's
``/v1/messages``, and records every request it receives, so a test can check
what actually reached the "provider" after LiteLLM and its callbacks have run.
It uses only the standard library and never touches the network beyond
loopback. Point ``openai/``, ``hosted_vllm/``, ``deepseek/``, ``zai/``, ``mistral/``,
``moonshot/``... models at :attr:`RecordingUpstream.base_url`, and ``anthropic/``,
``gemini/`` and ``bedrock/converse/`` models at :attr:`RecordingUpstream.root_url`
(it also serves Gemini's ``models/{model}:generateContent`` and Bedrock's
``/model/{model}/converse``, streaming included).

``RecordingUpstream(emulate="glm", window=32768, token_rate=1.3)`` makes it behave like
that provider (see :mod:`litellm_governance.testing.emulation`): a request that breaks one of the
provider's documented rules, or does not fit the window, gets the provider's real status and
error body; an accepted one reports the provider-style prompt token count in ``usage``.
``record_dir=`` writes every request received to a directory, one JSON file each.
:func:`deployment_for` gives the proxy ``model_list`` entry that reaches an upstream (the
``api_base`` its emulated provider needs, the emulated window in ``model_info``).

``RecordingUpstream(script=ScriptedModel(rounds=6, chars=10_000))`` plays an agent's model (see
:mod:`litellm_governance.testing.scripted`): rounds of shell calls whose outputs carry a marker per
round and call, then a final text, with signed thinking and sealed reasoning where the real model
would send them — so a real agent CLI (Claude Code, Codex) can run a whole task through a proxy
offline, against the emulated provider's rules and window.

Use it as a context manager::

    from litellm_governance.testing import RecordingUpstream

    with RecordingUpstream(reply="hello") as upstream:
        litellm.completion(model="openai/any", api_base=upstream.base_url,
                           api_key="sk-fake", messages=[...])
        assert upstream.bodies()[0]["messages"] == [...]

or run it as a separate process: ``python -m litellm_governance.testing --port 8099
[--emulate glm] [--window 32768] [--token-rate 1.3] [--record-dir DIR] [--script-rounds 6]``.

:func:`start_proxy` runs ``litellm --config`` (your config, as a dict) on a free loopback port,
offline and with a fresh master key, for end-to-end tests of a proxy configuration. With
``fast_start=True`` the proxy is forked from a server process that imported LiteLLM's proxy once
(about 0.7 s a proxy instead of 7 s; see :func:`start_proxy`).

Modules: `upstream` (the server and its records), `replies` (the answers in each endpoint's shape),
`scripted` (the scripted model), `deployments` (the proxy deployment that reaches an upstream),
`emulation` (the providers' rules, as data, and their validators), `proxy` (the proxy launcher),
`cli` (the command line). The runtime never imports this package, and it uses only the plugin's
public API (``litellm_governance.__all__``): both are import-linter contracts (``make lint``).
"""

from __future__ import annotations

from .cli import main, serve
from .deployments import deployment_for
from .proxy import IMPORT_TIME_ENV, ProcessHandle, ProxyProcess, ProxyStartError, free_port, proxy_env, start_proxy
from .scripted import ScriptedModel, ToolCall, Turn
from .upstream import RecordedRequest, RecordingUpstream, ReplyFn

__all__ = [
    "IMPORT_TIME_ENV",
    "ProcessHandle",
    "ProxyProcess",
    "ProxyStartError",
    "RecordedRequest",
    "RecordingUpstream",
    "ReplyFn",
    "ScriptedModel",
    "ToolCall",
    "Turn",
    "deployment_for",
    "free_port",
    "main",
    "proxy_env",
    "serve",
    "start_proxy",
]
