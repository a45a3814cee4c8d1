"""`ScriptedModel`: the upstream plays an agent's model, so a real agent CLI (Claude Code, Codex) can
run a whole task against it through a LiteLLM proxy, offline and deterministically.

The script, per conversation: round ``r`` (1-based) is one assistant turn calling the agent's shell
tool — twice in one turn every third round — with a command that prints about ``chars`` characters,
every line tagged with a marker unique to the round and call (``MARK-r<r>-c<c>``), so the newest
result is recognisable in every later request; after ``rounds`` rounds the model answers with a
final text. Requests that offer no shell tool, or that ask for a summary of the conversation (the
agents' own compaction requests), get the short text such a request expects.

Where the round stands is read from the request itself, robustly against compaction, snipping and
stubbing of old turns: the largest of the round encoded in the model's own call ids (the newest
exchange always carries one), the ``ROUNDS-DONE=<k>`` its summaries write, and what the count of
tool results implies.

The model "thinks" where the real one would: with ``thinking`` enabled on ``/v1/messages`` every
answer starts with a thinking block signed as the emulated Anthropic signs it
(`emulation.sign_thinking`); a reasoning model on ``/v1/responses`` asked for
``reasoning.encrypted_content`` sends a ``reasoning`` item sealed as the emulated OpenAI seals it
(`emulation.seal_reasoning`), which the emulator verifies when it comes back. The answers in each
wire's shape are `replies`' job; this module only decides what to say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "SHELL_TOOLS",
    "SUMMARY_PROMPTS",
    "ScriptedModel",
    "ToolCall",
    "Turn",
    "count_results",
    "latest_user_text",
]

#: Names of the shell tool in the agents the script knows (Claude Code's ``Bash``, Codex's
#: ``exec_command``, …), in order of preference.
SHELL_TOOLS: Final = ("Bash", "exec_command", "shell", "shell_command", "local_shell", "bash", "exec")
#: Words of the agents' own summary requests (lower case): Claude Code's compaction prompt ("create
#: a detailed summary of the conversation so far", "Respond with TEXT ONLY") and Codex's ("CONTEXT
#: CHECKPOINT COMPACTION", "handoff summary").
SUMMARY_PROMPTS: Final = (
    "summary of the conversation so far",
    "respond with text only",
    "context checkpoint compaction",
    "handoff summary",
)
_LINE: Final = "MARK-r{r}-c{c} line %05g lorem ipsum dolor sit amet consectetur"
_LINE_CHARS: Final = 61  # one printed line, newline included
_CALL_ID: Final = re.compile(r"call_\d+_(\d+)_\d+")
_ROUNDS_DONE: Final = re.compile(r"ROUNDS-DONE=(\d+)")
_REASONING_MODELS: Final = re.compile(r"(?:^|[/-])(?:gpt-5|o[1-9]|codex)")
_RESULT_TYPES: Final = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
_TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True)
class ToolCall:
    """One call of the agent's tool: its id, the tool's name and the arguments."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Turn:
    """What the model answers to one request.

    ``kind`` is ``round`` (tool calls), ``final`` (the closing text), ``summary`` (an answer to the
    agent's summary request), ``compaction`` (a summary for a compaction item: the request ended with
    ``compaction_trigger``, which OpenAI's Responses API answers itself) or ``side`` (a request that
    offers no shell tool). ``reasoning`` is the
    text of the thinking block or reasoning item that comes first, when the model thinks (None:
    it does not).
    """

    text: str
    calls: tuple[ToolCall, ...] = ()
    kind: Literal["round", "final", "summary", "compaction", "side"] = "side"
    round: int = 0
    reasoning: str | None = None

    def describe(self) -> str:
        """A short description for the record (``round 3: 2 calls``, ``final``, …)."""
        if self.kind == "round":
            return f"round {self.round}: {len(self.calls)} call{'s' if len(self.calls) != 1 else ''}"
        return self.kind if self.kind != "final" else f"final after {self.round} rounds"


@dataclass(frozen=True)
class ScriptedModel:
    """The script: `rounds` rounds of shell calls printing about `chars` characters each, then a
    final text. `command_style` ``python`` prints the same output with ``python3 -c`` instead of
    ``seq`` (a command Claude Code does not take for read-only). `usage_scale` multiplies the
    reported input tokens (to drive an agent's own auto-compaction)."""

    rounds: int = 6
    chars: int = 10_000
    command_style: Literal["seq", "python"] = "seq"
    usage_scale: float = 1.0
    #: The closing text (``{rounds}``: the rounds done).
    final_text: str = "FINAL: completed {rounds} rounds. DONE."

    def __post_init__(self) -> None:
        if self.rounds < 0:
            raise ValueError("rounds must be >= 0")
        if self.chars < _LINE_CHARS:
            raise ValueError(f"chars must be >= {_LINE_CHARS}")
        if self.usage_scale <= 0:
            raise ValueError("usage_scale must be positive")

    # ---- the plan -----------------------------------------------------------------------------

    @staticmethod
    def calls_in_round(round: int) -> int:
        """How many calls round `round` makes: two every third round, else one."""
        return 2 if round % 3 == 0 else 1

    def total_calls(self) -> int:
        """How many calls the whole script makes."""
        return sum(self.calls_in_round(r) for r in range(1, self.rounds + 1))

    def lines(self) -> int:
        """Numbered lines each call prints."""
        return max(1, self.chars // _LINE_CHARS)

    @staticmethod
    def marker(round: int, call: int) -> str:
        """The marker every line of a call's output carries: ``MARK-r<round>-c<call>``."""
        return f"MARK-r{round}-c{call}"

    def first_line(self, round: int, call: int) -> str:
        """The first numbered line a call prints."""
        return f"{self.marker(round, call)} line 00001"

    def last_line(self, round: int, call: int) -> str:
        """The last numbered line a call prints (present only when the output arrived whole)."""
        return f"{self.marker(round, call)} line {self.lines():05d}"

    def command(self, round: int, call: int) -> str:
        """The shell command of a call: ``<marker>-BEGIN``, the numbered lines, ``<marker>-END``."""
        mark = self.marker(round, call)
        line = _LINE.format(r=round, c=call)
        if self.command_style == "python":
            body = line.replace("%05g", "{i:05d}")
            return (
                f"python3 -c \"print('{mark}-BEGIN'); "
                f"[print(f'{body}') for i in range(1, {self.lines()} + 1)]; print('{mark}-END')\""
            )
        return f"echo {mark}-BEGIN; seq -f '{line}' 1 {self.lines()}; echo {mark}-END"

    def rounds_done(self, results: int) -> int:
        """The rounds `results` tool results complete under the plan."""
        total = done = 0
        while done < self.rounds:
            following = total + self.calls_in_round(done + 1)
            if following > results:
                break
            total, done = following, done + 1
        return done

    # ---- reading a request ----------------------------------------------------------------------

    def progress(self, body: Mapping[str, Any]) -> int:
        """The rounds a request shows done: the largest of its call ids' rounds, the summaries'
        ``ROUNDS-DONE=``, and what its count of tool results implies."""
        dump = json.dumps(body, ensure_ascii=False, default=str)
        found = [int(m) for m in _CALL_ID.findall(dump)] + [int(m) for m in _ROUNDS_DONE.findall(dump)]
        return max([self.rounds_done(count_results(body)), *found])

    def newest_result(self, body: Mapping[str, Any]) -> str:
        """Whether the newest round's output is in the request whole: ``intact``, ``head-only``,
        ``tail-only`` or ``absent`` per call (comma-separated), ``-`` before the first round."""
        done = self.progress(body)
        if done == 0:
            return "-"
        dump = json.dumps(body, ensure_ascii=False, default=str)
        states = []
        for call in range(1, self.calls_in_round(done) + 1):
            head = self.first_line(done, call) in dump
            tail = self.last_line(done, call) in dump
            states.append("intact" if head and tail else "head-only" if head else "tail-only" if tail else "absent")
        return ",".join(states)

    # ---- answering ------------------------------------------------------------------------------

    def answer(self, wire: str, body: Mapping[str, Any], number: int) -> Turn:
        """What to answer to `body` received on `wire` (``messages``, ``chat``, ``responses``, …);
        `number` (unique per answer) goes into the call ids."""
        reasoning = self._reasoning(wire, body)
        done = self.progress(body)
        asked = latest_user_text(body).lower()
        triggered = _ends_with_trigger(body)
        if triggered or any(prompt in asked for prompt in SUMMARY_PROMPTS):
            summary = (
                "<analysis>Scripted compaction.</analysis>\n<summary>The user asked for a scripted loop of shell "
                f"commands. ROUNDS-DONE={done}. Continue with the next round.</summary>"
            )
            return Turn(summary, kind="compaction" if triggered else "summary", round=done, reasoning=reasoning)
        shell = _shell_tool(wire, body)
        if shell is None:
            return Turn(_side_answer(body, asked), kind="side", round=done, reasoning=reasoning)
        if done >= self.rounds:
            return Turn(self.final_text.format(rounds=done), kind="final", round=done, reasoning=reasoning)
        round = done + 1
        name, schema = shell
        calls = tuple(
            ToolCall(f"call_{number}_{round}_{call}", name, self._arguments(name, schema, round, call))
            for call in range(1, self.calls_in_round(round) + 1)
        )
        text = f"Running {len(calls)} scripted command{'s' if len(calls) != 1 else ''} (round {round})."
        return Turn(text, calls, kind="round", round=round, reasoning=reasoning)

    def _arguments(self, name: str, schema: Mapping[str, Any], round: int, call: int) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        command = self.command(round, call)
        arguments: dict[str, Any] = {}
        if "cmd" in properties:
            arguments["cmd"] = command
        elif isinstance(properties.get("command"), Mapping) and properties["command"].get("type") == "array":
            arguments["command"] = ["bash", "-lc", command]
        else:
            arguments["command"] = command
        if "description" in properties:
            arguments["description"] = f"Print the scripted output of round {round}, call {call}"
        if "yield_time_ms" in properties:
            arguments["yield_time_ms"] = 10_000
        if "timeout" in properties and name == "Bash":
            arguments["timeout"] = 60_000
        return arguments

    @staticmethod
    def _reasoning(wire: str, body: Mapping[str, Any]) -> str | None:
        """The model's reasoning text, where the real model would send one back."""
        if wire == "messages":
            thinking = body.get("thinking")
            if isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive"):
                return "" if thinking.get("display") == "omitted" else "Planning the next scripted command."
            return None
        if wire == "responses":
            model = body.get("model")
            include = body.get("include")
            wants = isinstance(include, list) and "reasoning.encrypted_content" in include
            if wants and isinstance(model, str) and _REASONING_MODELS.search(model.lower()):
                return "Planning the next scripted command."
        return None


# ---- request helpers ------------------------------------------------------------------------------


def _items(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    history = body.get("messages", body.get("input"))
    return [item for item in history if isinstance(item, Mapping)] if isinstance(history, list) else []


def _ends_with_trigger(body: Mapping[str, Any]) -> bool:
    """Whether a Responses request asks for a compaction: its last input item is ``compaction_trigger``."""
    items = body.get("input")
    last = items[-1] if isinstance(items, list) and items else None
    return isinstance(last, Mapping) and last.get("type") == "compaction_trigger"


def count_results(body: Mapping[str, Any]) -> int:
    """Tool results in a request of any wire (``tool_result`` blocks, ``tool`` messages, ``*_output`` items)."""
    count = 0
    for item in _items(body):
        content = item.get("content")
        if item.get("role") == "tool" or item.get("type") in _RESULT_TYPES:
            count += 1
        elif isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result")
    return count


def _texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            part["text"]
            for part in content
            if isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str)
        ]
    return []


def latest_user_text(body: Mapping[str, Any]) -> str:
    """The text the latest user message writes (its text parts, not the tool results it carries)."""
    history = body.get("input")
    if isinstance(history, str):
        return history
    for item in reversed(_items(body)):
        if item.get("role") == "user":
            texts = _texts(item.get("content"))
            if texts:
                return "\n".join(texts)
    return ""


def _tool_schemas(wire: str, body: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        if isinstance(function, Mapping):  # chat
            name, schema = function.get("name"), function.get("parameters")
        elif wire == "messages":
            name, schema = tool.get("name"), tool.get("input_schema")
        elif tool.get("type") == "local_shell":
            name, schema = "local_shell", {}
        else:
            name, schema = tool.get("name"), tool.get("parameters")
        if isinstance(name, str):
            found.append((name, schema if isinstance(schema, Mapping) else {}))
    return found


def _shell_tool(wire: str, body: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    schemas = dict(_tool_schemas(wire, body))
    for name in SHELL_TOOLS:
        if name in schemas:
            return name, schemas[name]
    return None


def _side_answer(body: Mapping[str, Any], asked: str) -> str:
    system = body.get("system", body.get("instructions"))
    instructions = " ".join(_texts(system)).lower() if system is not None else ""
    if "title" in asked or "title" in instructions:
        return json.dumps({"title": "Scripted shell loop"})
    if asked.strip() == "quota":
        return "ok"
    if "topic" in instructions:
        return json.dumps({"isNewTopic": False, "title": None})
    return "ok"
