"""The command line: ``python -m litellm_governance.testing --port N [--emulate glm] ...`` runs a
`RecordingUpstream` in the foreground (`serve`), and prints the proxy deployment that reaches it
(`deployments`): the ``api_base`` for the emulated provider and the window in ``model_info``."""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Iterable, Sequence

from .deployments import deployment_for, deployment_yaml
from .emulation import PROVIDERS
from .scripted import ScriptedModel
from .upstream import RecordingUpstream

__all__ = ["main", "serve"]


def serve(
    port: int = 0,
    *,
    reply: str = RecordingUpstream.DEFAULT_REPLY,
    fail_models: Iterable[str] = (),
    emulate: str | None = None,
    window: int | None = None,
    token_rate: float = 1.0,
    default_max_tokens: int = 0,
    record_dir: str | os.PathLike[str] | None = None,
    script: ScriptedModel | None = None,
) -> None:
    """Run a :class:`RecordingUpstream` in the foreground, printing first the ``api_base`` a LiteLLM
    deployment of the emulated provider uses (the root URL for ``anthropic``, ``gemini`` and
    ``bedrock``, else ``…/v1``), then that deployment as a proxy ``model_list`` entry to paste, with
    the emulated window as ``model_info.max_input_tokens`` (what the plugin budgets for).

    Serves until SIGINT (Ctrl-C) or SIGTERM, then closes the socket.
    """
    upstream = RecordingUpstream(
        reply=reply,
        fail_models=fail_models,
        port=port,
        emulate=emulate,
        window=window,
        token_rate=token_rate,
        default_max_tokens=default_max_tokens,
        record_dir=record_dir,
        script=script,
    ).start()
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    entry = deployment_for(upstream)
    print(entry["litellm_params"]["api_base"], flush=True)
    print(_pasteable(entry, record_dir), flush=True)
    try:
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        upstream.stop()


def _pasteable(entry: dict[str, object], record_dir: str | os.PathLike[str] | None) -> str:
    """What the command prints after the ``api_base``: the deployment to paste, and where requests go."""
    note = (
        "# A LiteLLM proxy deployment for this upstream (paste under model_list:). model_info.max_input_tokens\n"
        "# is the emulated window: without it the plugin budgets for LiteLLM's window of the model instead."
    )
    if "model_info" not in entry:
        note = "# A LiteLLM proxy deployment for this upstream (paste under model_list:)."
    recorded = f"\n# Every request received is written to {os.fspath(record_dir)}." if record_dir is not None else ""
    return f"{note}\n{deployment_yaml(entry)}{recorded}\n"


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point: ``python -m litellm_governance.testing --port N``."""
    parser = argparse.ArgumentParser(
        prog="python -m litellm_governance.testing",
        description=(
            "Run a recording upstream on 127.0.0.1 (OpenAI, Anthropic, Gemini and Bedrock Converse endpoints), "
            "optionally emulating a provider's request rules and context window."
        ),
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    parser.add_argument("--reply", default=RecordingUpstream.DEFAULT_REPLY, help="assistant reply text")
    parser.add_argument(
        "--fail-model",
        action="append",
        default=[],
        metavar="MODEL",
        help="answer 400 (context length) for MODEL",
    )
    parser.add_argument("--emulate", choices=PROVIDERS, default=None, help="reject requests as this provider does")
    parser.add_argument("--window", type=int, default=None, metavar="TOKENS", help="emulated context window")
    parser.add_argument(
        "--token-rate", type=float, default=1.0, metavar="RATE", help="provider tokens per tiktoken token (default 1.0)"
    )
    parser.add_argument(
        "--default-max-tokens",
        type=int,
        default=0,
        metavar="TOKENS",
        help="output reserve when a request states no max_tokens (default 0)",
    )
    parser.add_argument(
        "--record-dir", default=None, metavar="DIR", help="write every request received to DIR, one JSON file each"
    )
    parser.add_argument(
        "--script-rounds",
        type=int,
        default=None,
        metavar="N",
        help="play an agent's model: N rounds of shell calls, then a final text (see ScriptedModel)",
    )
    parser.add_argument(
        "--script-chars", type=int, default=10_000, metavar="CHARS", help="characters each scripted call prints"
    )
    args = parser.parse_args(argv)
    serve(
        args.port,
        reply=args.reply,
        fail_models=args.fail_model,
        emulate=args.emulate,
        window=args.window,
        token_rate=args.token_rate,
        default_max_tokens=args.default_max_tokens,
        record_dir=args.record_dir,
        script=ScriptedModel(rounds=args.script_rounds, chars=args.script_chars)
        if args.script_rounds is not None
        else None,
    )
