"""Privacy (SPEC §3 "never message content", issue #5): no log record the plugin causes, at any level,
quotes a message. Every field of the conversations below carries a unique marker; every path is
run (govern, both request hooks, the header hook, the sync entry point, fail-open, fail-closed,
malformed requests) with logging captured at DEBUG, and no marker may appear in any record.

The last test does the same against a real proxy process and its log file. LiteLLM's own loggers
quote requests at DEBUG by design; what is checked there is every line that mentions governance.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from litellm_governance import GovernanceConfig, GovernanceHook, InvalidRequestError, govern, govern_request
from litellm_governance.testing import RecordingUpstream

# The e2e fixtures, for the proxy-log test (pytest registers fixtures imported into a test module).
from .e2e.conftest import GOVERNANCE_CALLBACK, ProxyFactory, model_entry, proxy_factory, upstream

__all__ = ["proxy_factory", "upstream"]  # fixtures, used by name

MARK = "PRIVMARK"
MARKER = re.compile(MARK + r"[0-9a-z_-]*")
MODELS = ["openai/gpt-4o", "anthropic/claude-opus-4-6", "gemini/gemini-2.5-pro", "zai/glm-4.6"]
LOGGERS = ["litellm_governance", "LiteLLM", "LiteLLM Proxy", "LiteLLM Router", "litellm"]


def secret(field: str, tag: str = "") -> str:
    return f"{MARK}-{field}{tag}"


def marked_conversation(tag: str = "") -> list[dict[str, Any]]:
    """A damaged agent conversation with a marker in every field a message can carry: system, user
    (text and parts), names, assistant text, call ids, function names and arguments, results, orphan
    and duplicate results, unknown roles. Governing it compacts, snips, backfills, merges, drops and
    renames, so every step touches marked data."""

    def s(field: str) -> str:
        return secret(field, tag)

    def read(ident: str, name: str = "read_file") -> dict[str, Any]:
        arguments = json.dumps({"path": s("path-" + ident)})
        return {"id": s(ident), "type": "function", "function": {"name": name, "arguments": arguments}}

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": s("system")},
        {"role": "developer", "content": [{"type": "text", "text": s("developer")}]},
        {"role": "user", "content": s("task"), "name": s("username")},
        {"role": "user", "content": [{"type": "text", "text": s("part")}, {"type": "text", "text": s("part2")}]},
    ]
    for i in range(12):
        messages.append({"role": "assistant", "content": s(f"thinking{i}"), "tool_calls": [read(f"call{i}")]})
        messages.append({"role": "tool", "tool_call_id": s(f"call{i}"), "content": s(f"result{i}") * 60})
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [read("dup", s("fname")), read("lost")]},
        {"role": "tool", "tool_call_id": s("dup"), "name": s("toolname"), "content": s("dup-result")},
        {"role": "tool", "tool_call_id": s("dup"), "content": s("dup-again")},
        {"role": "tool", "tool_call_id": s("orphan"), "content": s("orphan-result")},
        {"role": "assistant", "content": None, "tool_calls": [read("dup")]},  # reused id: renamed for Anthropic
        {"role": "tool", "tool_call_id": s("dup"), "content": {"data": s("json-result")}},
        {"role": s("role"), "content": s("garbage-role")},
        {"role": "user", "content": s("latest")},
        {"role": "user", "content": s("latest-too")},
        {"role": "assistant", "content": s("trailing")},
    ]
    return messages


class Capture(logging.Handler):
    """Keeps every record it sees, formatted as a handler would write it (message, args, traceback)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(pathname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def texts(self, *, ours_only: bool = False) -> list[str]:
        out = []
        for record in self.records:
            if ours_only and not (
                record.name.startswith("litellm_governance") or "litellm_governance" in record.pathname
            ):
                continue
            out.append(f"{self.format(record)} {record.args!r} {record.exc_text or ''} {record.stack_info or ''}")
        return out


@pytest.fixture
def captured() -> Iterator[Capture]:
    """Every log record, from every logger, at DEBUG and up, while the test runs."""
    handler = Capture()
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ["", *LOGGERS]}
    root.addHandler(handler)
    for name in levels:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def leaks(texts: list[str]) -> list[str]:
    return [t[:300] for t in texts if MARK in t]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


@pytest.mark.litellm
class TestNoContentInLogs:
    def test_govern_on_every_profile_and_window(self, captured: Capture) -> None:
        """govern() on a marked, damaged conversation, for every profile, tiny and large windows."""
        messages = marked_conversation()
        for model in MODELS:
            for window in (300, 3_000, 1_000_000):
                config = GovernanceConfig(context_window_tokens=window, max_output_tokens=64, keep_recent=1)
                out = govern(messages, model=model, config=config)
                assert out.report.changed
                assert MARK not in json.dumps(out.report.to_dict())
        assert leaks(captured.texts()) == []

    def test_request_hooks_success_paths(self, captured: Capture) -> None:
        """Pre-call, deployment and header hooks on governed requests (the INFO line per change)."""
        hook = GovernanceHook(keep_recent=1)
        for model in MODELS:
            data = {"model": model, "messages": marked_conversation(), "metadata": {}, "user": secret("user-field")}
            updated = run(hook.async_pre_call_hook(None, None, data, "acompletion")) or data
            kwargs = {**updated, "metadata": {**updated["metadata"], "model_info": {"max_input_tokens": 2_000}}}
            deployed = run(hook.async_pre_call_deployment_hook(kwargs, "acompletion")) or kwargs
            headers = run(hook.async_post_call_response_headers_hook(deployed, None, None))
            assert headers and MARK not in json.dumps(headers)
            report = deployed["metadata"]["spend_logs_metadata"]["governance"]
            assert MARK not in json.dumps(report)
        assert any(r.name == "litellm_governance" for r in captured.records), "the INFO line was not emitted"
        assert leaks(captured.texts()) == []

    def test_fail_open_paths(self, captured: Capture) -> None:
        """A misconfigured deployment (twice: WARNING, then DEBUG) and malformed requests let the request
        through; their log records name the error type and code location only."""
        hook = GovernanceHook()
        bogus = {"governance_profile": secret("profile"), "max_input_tokens": 1_000}
        for _ in range(2):
            kwargs = {"model": "zai/glm-4.6", "messages": marked_conversation(), "metadata": {"model_info": bogus}}
            assert run(hook.async_pre_call_deployment_hook(kwargs, "acompletion")) is None
            assert MARK not in json.dumps(kwargs["metadata"]["spend_logs_metadata"], default=str)
        malformed: list[Any] = [
            secret("string-messages"),
            [secret("string-element")],
            {"role": "user", "content": secret("dict-messages")},
            [{"role": "user", "content": secret("a")}, 5],
        ]
        for messages in malformed:
            for stage in ("pre_call", "deployment"):
                data = {"model": "openai/gpt-4o", "messages": copy.deepcopy(messages), "tools": secret("tools")}
                if stage == "pre_call":
                    run(hook.async_pre_call_hook(None, None, data, "completion"))
                else:
                    run(hook.async_pre_call_deployment_hook(data, "completion"))
        levels = {r.levelno for r in captured.records if r.name == "litellm_governance"}
        assert {logging.WARNING, logging.DEBUG} <= levels
        assert leaks(captured.texts()) == []

    def test_fail_closed_errors_quote_no_content(self, captured: Capture) -> None:
        """With fail_closed, the rejection the client sees (and anything logged) holds no content either."""
        from litellm.exceptions import BadRequestError

        hook = GovernanceHook(fail_closed=True)
        cases = [
            {
                "model": "zai/glm-4.6",
                "messages": marked_conversation(),
                "metadata": {"model_info": {"governance_profile": "x"}},
            },
            {"model": "zai/glm-4.6", "messages": [secret("element")]},
            {"model": "zai/glm-4.6", "messages": secret("string")},
        ]
        for kwargs in cases:
            with pytest.raises(BadRequestError) as caught:
                run(hook.async_pre_call_deployment_hook(kwargs, "acompletion"))
            assert "fail_closed" in str(caught.value) and MARK not in str(caught.value)
        assert leaks(captured.texts()) == []

    def test_library_errors_quote_no_content(self) -> None:
        """InvalidRequestError says what and where, without echoing the offending value."""
        for messages in (secret("s"), [secret("e")], [{"role": "user"}, secret("e2")], {"content": secret("d")}):
            with pytest.raises(InvalidRequestError) as caught:
                govern(messages, model="openai/gpt-4o")  # type: ignore[arg-type]
            assert MARK not in str(caught.value)

    def test_sync_entry_point(self, captured: Capture) -> None:
        """integration.completion (the sync drop-in) logs its report line without content. LiteLLM's own
        DEBUG request dumps are excluded here: only records from this package are checked."""
        from litellm_governance.integration import completion

        with RecordingUpstream() as server:
            response = completion(
                model="hosted_vllm/private-model",
                api_base=server.base_url,
                api_key="sk-fake",
                messages=marked_conversation(),
                config=GovernanceConfig(context_window_tokens=2_000, max_output_tokens=64),
            )
            assert response.choices[0].message.content
        ours = captured.texts(ours_only=True)
        assert any("governed" in t for t in ours)
        assert leaks(ours) == []


class TestNoContentRetained:
    def test_token_cache_keeps_no_text(self) -> None:
        """The process-wide token cache, which outlives every request, keys every text by its hash
        (an int): a secret (a password in a chat turn, a key in tool arguments) is not kept in memory;
        its values are counts."""
        from litellm_governance._tokens import token_cache

        cache = token_cache(GovernanceConfig().token_cache_size)
        govern(marked_conversation("-cache"), model="zai/glm-4.6")
        keys = [*cache._young, *cache._old]
        assert keys and all(type(key) is int for key in keys)
        assert all(type(count) is int for count in [*cache._young.values(), *cache._old.values()])

    @pytest.mark.parametrize("fmt", ["chat", "anthropic", "responses"])
    def test_no_module_state_keeps_a_request_text(self, fmt: str) -> None:
        """What the core remembers between requests (the token cache, the calls it named, the sizes
        and outcomes of results, the texts it shortened) holds no text of a request: after governing
        a loop whose files, commands, results and turns are long and unique, with stubs and a note
        for cut turns written, no string reachable from the core's modules holds any of them. (A
        call can carry a whole file: kept, 8,192 of them held tens of MiB of what agents wrote.)"""
        mark = f"{MARK}-retained-{fmt}-"
        body = _long_loop(fmt, mark)
        out = govern_request(body, model="anthropic/claude-sonnet-4-5", model_info={"max_input_tokens": 6_000})
        assert out.report.steps.get("snipped") and out.report.steps.get("superseded")  # a note and stubs made
        del out, body
        leaked = [text[:60] for text in _strings_kept_by_the_core() if mark in text]
        assert leaked == []


def _long_loop(fmt: str, mark: str) -> dict[str, Any]:
    """An agent loop in `fmt` whose every long text has `mark` in its middle (where no shortened
    form of it shows it): 14 rounds writing files, running scripts and re-reading one file."""

    def long(field: str) -> str:
        return "a " * 150 + f"{mark}{field}" + " z" * 150

    rounds = []
    for i in range(14):
        if i % 3 == 0:
            name, arguments = "Write", {"file_path": f"src/m{i}.py", "content": long(f"file{i}")}
        elif i % 3 == 1:
            name, arguments = "Bash", {"command": "cat <<'EOF' > run.sh\n" + long(f"script{i}") + "\nEOF"}
        else:
            name, arguments = "Read", {"file_path": "src/app.py"}
        rounds.append((long(f"said{i}"), f"call_{i}", name, arguments, long(f"output{i}")))
    task, system = long("task"), "You are a coding agent."
    if fmt == "chat":
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        for said, ident, name, arguments, output in rounds:
            call = {"id": ident, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            messages += [
                {"role": "assistant", "content": said, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": ident, "content": output},
            ]
        return {"messages": [*messages, {"role": "user", "content": "Go on."}]}
    if fmt == "anthropic":
        turns: list[dict[str, Any]] = [{"role": "user", "content": task}]
        for said, ident, name, arguments, output in rounds:
            use = {"type": "tool_use", "id": ident, "name": name, "input": arguments}
            answer = {"type": "tool_result", "tool_use_id": ident, "content": output}
            turns += [
                {"role": "assistant", "content": [{"type": "text", "text": said}, use]},
                {"role": "user", "content": [answer]},
            ]
        turns[-1]["content"].append({"type": "text", "text": "Go on."})
        return {"system": system, "messages": turns, "max_tokens": 1024}
    items: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "input_text", "text": task}]}]
    for said, ident, name, arguments, output in rounds:
        items += [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": said}]},
            {"type": "function_call", "call_id": ident, "name": name, "arguments": json.dumps(arguments)},
            {"type": "function_call_output", "call_id": ident, "output": output},
        ]
    items.append({"role": "user", "content": [{"type": "input_text", "text": "Go on."}]})
    return {"instructions": system, "input": items}


def _strings_kept_by_the_core() -> Iterator[str]:
    """Every string reachable from the globals of the core's modules (``litellm_governance._*``)
    through containers, caches (`functools.lru_cache`) and the core's own objects: what it keeps
    between requests. Functions, classes and modules are not followed (their code and constants
    are no request's)."""
    import functools
    import gc
    import sys
    import types

    roots = [
        value
        for name, module in sorted(sys.modules.items())
        if name.startswith("litellm_governance._")
        for value in vars(module).values()
    ]
    seen: set[int] = set()
    stack: list[object] = list(roots)
    skipped = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, str):
            yield value
        elif isinstance(value, functools._lru_cache_wrapper):  # type: ignore[attr-defined]
            stack.extend(r for r in gc.get_referents(value) if isinstance(r, dict))  # its cache, not its function
        elif isinstance(value, (dict, list, tuple, set, frozenset)) or (
            not isinstance(value, skipped) and type(value).__module__.startswith("litellm_governance")
        ):
            stack.extend(gc.get_referents(value))


# ---- the proxy's log file --------------------------------------------------------------------

# Imported by the proxy before the governance hook (callbacks load in order): routes the plugin's
# logger, at DEBUG, into the proxy log with a recognisable prefix.
_DEBUG_LOGGING_MODULE = """
import logging
from litellm.integrations.custom_logger import CustomLogger

_logger = logging.getLogger("litellm_governance")
_handler = logging.StreamHandler()
_handler.setFormatter(logging.Formatter("PLUGIN-LOG litellm_governance %(levelname)s %(message)s"))
_logger.addHandler(_handler)
_logger.setLevel(logging.DEBUG)
instance = CustomLogger()
"""


@pytest.mark.e2e
@pytest.mark.litellm
def test_proxy_log_has_no_content(
    proxy_factory: ProxyFactory, upstream: RecordingUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Marked requests through a real proxy (governed, fail-open, malformed, streaming): no line of
    the proxy log that mentions governance carries a marker."""
    helper = tmp_path_factory.mktemp("privacy_logging")
    (helper / "governance_debug_logging.py").write_text(_DEBUG_LOGGING_MODULE)
    base = upstream.base_url
    proxy = proxy_factory(
        callbacks=["governance_debug_logging.instance", GOVERNANCE_CALLBACK],
        model_list=[
            model_entry("private-small", "openai/up-private", base, max_input_tokens=3_000),
            model_entry("private-glm", "zai/glm-4.6", base, max_input_tokens=6_000),
        ],
        callback_settings={"governance": {"keep_recent": 1}},
        pythonpath=[str(helper)],
    )
    bodies: list[dict[str, Any]] = []
    for i, model in enumerate(["private-small", "private-glm", "private-small"]):
        bodies.append({"model": model, "messages": marked_conversation(f"-r{i}"), "max_tokens": 64})
    bodies.append({"model": "private-glm", "messages": marked_conversation("-stream"), "stream": True})
    bodies += [
        {"model": "private-small", "messages": secret("string-messages")},
        {"model": "private-small", "messages": [secret("element")]},
        {"model": "private-small", "messages": [{"role": "user", "content": secret("x")}], "tools": secret("tools")},
    ]
    with proxy.client() as client:
        statuses = [client.post("/v1/chat/completions", json=body).status_code for body in bodies]
    assert statuses[:4] == [200] * 4, proxy.log_tail()
    markers_sent = sum(1 for body in upstream.bodies() if MARK in json.dumps(body))
    assert markers_sent >= 4  # the requests did carry markers to the provider
    log = Path(proxy.log_path).read_text(encoding="utf-8", errors="replace")
    plugin_lines = [line for line in log.splitlines() if "PLUGIN-LOG" in line]
    assert any("governance skipped" in line for line in plugin_lines), proxy.log_tail()
    assert any("governed" in line for line in plugin_lines), proxy.log_tail()
    governance_lines = [line for line in log.splitlines() if "governance" in line.lower()]
    assert [MARKER.findall(line) for line in governance_lines if MARK in line] == []
