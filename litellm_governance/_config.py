"""`GovernanceConfig`: every tunable of the pipeline, frozen and validated at construction."""

from __future__ import annotations

import dataclasses
import difflib
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._errors import ConfigError
from ._profiles import PROFILES

__all__ = ["AGENT_TOOLS", "DEFAULT_COMPACTABLE_TOOLS", "NANOBOT_TOOLS", "TOOL_PRESETS", "GovernanceConfig"]

#: Nanobot's compactable tools (its own agent's observation tools): the ``nanobot`` preset.
NANOBOT_TOOLS: frozenset[str] = frozenset(
    {"read_file", "exec", "grep", "find_files", "web_search", "web_fetch", "list_dir", "list_exec_sessions"}
)

#: The observation tools of today's coding agents (reads, listings, searches, command output, web
#: fetches: output the agent can fetch again; names from each agent's source). Tools that hold
#: state (plans, todo lists, sub-agent results, the user's answers, memory) and edit tools (short
#: confirmations) are left out. The ``agents`` preset, and the default.
AGENT_TOOLS: frozenset[str] = NANOBOT_TOOLS | frozenset(
    {
        # Claude Code
        "Read", "NotebookRead", "Glob", "Grep", "LS", "LSP", "Bash", "BashOutput", "TaskOutput",
        "WebFetch", "WebSearch", "ReadMcpResourceTool", "ListMcpResourcesTool",
        # Codex CLI
        "shell", "shell_command", "exec_command", "write_stdin", "local_shell", "list_dir", "grep_files",
        "view_image", "read_mcp_resource", "list_mcp_resources", "list_mcp_resource_templates",
        # OpenHands (its editor's `view` results only: see _reads.OBSERVING_COMMANDS)
        "execute_bash", "terminal", "execute_ipython_cell", "browser", "fetch", "str_replace_editor",
        # Anthropic's text editor tool (its `view` results only)
        "str_replace_based_edit_tool",
        # Cline, Roo Code
        "execute_command", "search_files", "list_files", "list_code_definition_names", "codebase_search",
        "browser_action", "access_mcp_resource",
        # Gemini CLI
        "read_many_files", "list_directory", "glob", "grep_search", "search_file_content", "run_shell_command",
        "google_web_search",
        # OpenCode
        "read", "bash", "list", "webfetch", "websearch", "codesearch", "lsp",
        # Goose
        "developer__shell", "developer__analyze",
    }
)  # fmt: skip

#: Named sets of compactable tools (``compactable_tools: nanobot``).
TOOL_PRESETS: Mapping[str, frozenset[str]] = {"agents": AGENT_TOOLS, "nanobot": NANOBOT_TOOLS}

#: Tools whose old results are replaced by a one-line stub by default. `"*"` means every tool.
DEFAULT_COMPACTABLE_TOOLS: frozenset[str] = AGENT_TOOLS

ToolSet: TypeAlias = "frozenset[str] | Literal['*']"

#: compact_batch when cache_stable is on and the config names none.
STABLE_COMPACT_BATCH = 20
#: cache_stable "auto": on from this window up; below it a turn is too large a share of the budget
#: for the stable mode to keep as many recent results whole as the literal rules do.
AUTO_STABLE_MIN_WINDOW = 64_000
# Upper bound for any token figure a configuration may name: above every window in LiteLLM's model
# map (10M); anything bigger is a typo or an attack through per-request overrides.
_MAX_TOKENS = 100_000_000


@dataclass(frozen=True, kw_only=True)
class GovernanceConfig:
    """How governance shapes a request. Budget: ``context window - max output - safety buffer``, the
    max output being the request's ``max_tokens`` / ``max_completion_tokens`` where it has one."""

    #: Context window to govern against; overrides what LiteLLM knows about the model.
    context_window_tokens: int | None = None
    #: Window used when neither the config, the deployment nor LiteLLM knows one. With none at all,
    #: history is not snipped and the report says so.
    default_context_window_tokens: int | None = None
    #: Output reservation when the request sets no ``max_tokens`` / ``max_completion_tokens``. Like the
    #: request's own, it is capped by the deployment's ``model_info.max_output_tokens`` and by
    #: ``max_output_share`` of the window (the proxy's start-up warns of one at or above a window).
    max_output_tokens: int = 4096
    #: At most this share of the window is reserved for the output: a request asking for more (Claude
    #: Code asks 32,000) has its own field lowered to the reserve, so the history keeps the rest (never
    #: below 1,024 tokens, 2,048 with Anthropic's extended thinking, whose ``budget_tokens`` follows).
    max_output_share: float = 0.25
    #: False: reserve and send what the request asks for, however much of the window that takes (the
    #: report warns when no budget is left for the history).
    fit_max_output: bool = True
    #: Kept free on top of the output reservation, for estimate error.
    safety_buffer_tokens: int = 1024
    #: The newest results of compactable tools (at least ``min_chars`` long) kept whole.
    keep_recent: int = 10
    #: Results shorter than this many characters are never compacted.
    min_chars: int = 500
    #: Tools whose old results may be compacted: tool names, preset names (``agents``, the default,
    #: or ``nanobot``), or ``"*"`` for every tool.
    compactable_tools: ToolSet = DEFAULT_COMPACTABLE_TOOLS
    #: Compact old results in batches of this many: results stay whole until ``keep_recent +
    #: compact_batch`` of them are, then the oldest batch is compacted at once, rewriting the history
    #: once per batch instead of on every turn. Default: 1 (Nanobot's rule), or 20 with ``cache_stable``.
    compact_batch: int | None = None
    #: Keep the provider's prompt cache warm: compaction and snipping are replayed over the
    #: conversation's growth with hysteresis, so consecutive requests of an agent loop share their
    #: governed prefix (see "Prompt caching"). False: Nanobot's rules on every request, which rewrite
    #: the prefix on most turns. ``"auto"``: on for windows from 64k and when no window is known.
    cache_stable: bool | Literal["auto"] = "auto"
    #: cache_stable only: when history must be cut, cut it back to this share of the room left for
    #: history, so the following turns append without moving the cut again. None: derived per
    #: request from the size of a turn against the window (about 0.3 at 24k windows, 0.75 at 128k).
    snip_watermark: float | None = None
    #: When snipping cuts whole turns, put one short note in their place listing what they did (each
    #: call's tool, main argument and outcome; what was said), in at most a tenth of the budget, so
    #: the agent neither repeats them nor loses track. False: cut turns leave no trace.
    note_cut_turns: bool = True
    #: Integration only: a model group of the same proxy or Router (in the SDK: a model string) that
    #: writes a summary of cut turns, off the request path; it replaces the note once ready, while the
    #: cut point stays (``cache_stable`` requests only). None: the note alone.
    summary_model: str | None = None
    #: Integration only: who shares a summary of the same cut turns (each is keyed by the exact content
    #: cut, the deployment, the summary model and its prompt): ``"team"`` the caller's LiteLLM team (a
    #: key without a team is its own), ``"key"`` each LiteLLM key alone, ``"all"`` every caller.
    summary_sharing: Literal["team", "key", "all"] = "team"
    #: Integration only: how the gateway answers a compaction request (Codex's ``compaction_trigger``)
    #: for a deployment without compaction of its own: ``model`` asks the deployment's model (or
    #: ``summary_model``) for a summary, the note where that fails; ``note`` answers at once with the
    #: session's deterministic note.
    compaction: Literal["model", "note"] = "model"
    #: Integration only: learn each deployment's real tokens-per-tiktoken-token ratio from the
    #: ``usage.prompt_tokens`` providers report (and their context-length rejections), and budget
    #: with it instead of the profile's fixed ratio.
    calibrate: bool = True
    #: Force a provider profile (``permissive``, ``strict``, ...: see the Providers page) instead of
    #: deriving it from the model's provider.
    profile: str | None = None
    #: Rewrite nothing before the last ``cache_control`` breakpoint unless the budget forces it.
    respect_cache_control: bool = True
    #: Token counts remembered across requests (entries; each is a hash and a count).
    token_cache_size: int = 65_536
    #: Deprecated (0.3): accepted and ignored (nothing of a conversation but token counts is kept across requests).
    conversation_cache_size: int = 0
    #: Integration only: ``False`` lets the original request through when governance fails
    #: internally (with a warning); ``True`` rejects the request instead.
    fail_closed: bool = False
    #: Integration only: honour ``metadata={"governance": {...}}`` from clients.
    allow_request_overrides: bool = False
    #: Integration only: ``False`` turns the hook into a no-op.
    enabled: bool = True

    def __post_init__(self) -> None:
        for name, (minimum, maximum) in _INT_RANGES.items():
            value = getattr(self, name)
            if value is not None or name not in _OPTIONAL_INTS:
                _check_int(name, value, minimum, maximum)
        share = self.max_output_share
        if not _is_number(share) or not 0.05 <= share <= 0.9:
            raise ConfigError(f"max_output_share must be a number between 0.05 and 0.9, got {short_repr(share)}")
        if self.summary_model is not None and (
            not isinstance(self.summary_model, str) or not self.summary_model.strip() or len(self.summary_model) > 256
        ):
            raise ConfigError(f"summary_model must be a model group name or null, got {short_repr(self.summary_model)}")
        if self.summary_sharing not in ("team", "key", "all"):
            raise ConfigError(f'summary_sharing must be "team", "key" or "all", got {short_repr(self.summary_sharing)}')
        if self.compaction not in ("model", "note"):
            raise ConfigError(f'compaction must be "model" or "note", got {short_repr(self.compaction)}')
        watermark = self.snip_watermark
        if watermark is not None and not _is_number(watermark):
            raise ConfigError(f"snip_watermark must be a number or null, got {short_repr(watermark)}")
        if watermark is not None and not 0.1 <= watermark <= 1.0:
            raise ConfigError(f"snip_watermark must be between 0.1 and 1.0, got {short_repr(watermark)}")
        if self.cache_stable != "auto" and not isinstance(self.cache_stable, bool):
            raise ConfigError(f'cache_stable must be true, false or "auto", got {short_repr(self.cache_stable)}')
        for name in _BOOL_FIELDS:
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {short_repr(getattr(self, name))}")
        object.__setattr__(self, "compactable_tools", _tool_set(self.compactable_tools))
        if self.profile is not None and self.profile not in PROFILES:
            raise ConfigError(
                f"profile must be one of {', '.join(sorted(PROFILES))} or None, got {short_repr(self.profile)}"
                + suggestion(str(self.profile), PROFILES)
            )

    def replace(self, **changes: object) -> GovernanceConfig:
        """A copy with some fields changed (validated like a new config)."""
        unknown = set(changes) - _FIELD_NAMES
        if unknown:
            raise ConfigError(_unknown_message(unknown))
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_mapping(cls, options: Mapping[str, object] | None) -> GovernanceConfig:
        """Build a config from plain data (a proxy YAML section); unknown keys are an error."""
        if options is None:
            return cls()
        if not isinstance(options, Mapping):
            raise ConfigError(f"governance settings must be a mapping, got {type(options).__name__}")
        return cls().replace(**{str(k): v for k, v in options.items()})

    def describe(self) -> str:
        """Every option with the value in effect, in one line (the proxy's start-up log)."""
        parts = []
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name == "compactable_tools":
                named = [k for k, v in TOOL_PRESETS.items() if v == value]
                value = named[0] if named else value if value == "*" else f"{len(value)} tools"
            elif value is None:
                value = _UNSET.get(item.name, "none")
            parts.append(f"{item.name}={value}")
        return ", ".join(parts)

    def stable_for(self, window: int | None) -> bool:
        """Whether requests for a model with this context window are governed with ``cache_stable``."""
        if isinstance(self.cache_stable, bool):
            return self.cache_stable
        # No window: nothing is cut, and compacting in batches keeps at least as many results whole.
        return window is None or window >= AUTO_STABLE_MIN_WINDOW

    def compact_batch_for(self, stable: bool) -> int:
        """compact_batch, or its default for the mode (1, or 20 with cache_stable)."""
        if self.compact_batch is not None:
            return self.compact_batch
        return STABLE_COMPACT_BATCH if stable else 1

    def is_compactable(self, tool_name: str) -> bool:
        """Whether results of `tool_name` may be compacted."""
        tools = self.compactable_tools
        return tools == "*" or tool_name in tools


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(GovernanceConfig))
_BOOL_FIELDS = tuple(f.name for f in dataclasses.fields(GovernanceConfig) if isinstance(f.default, bool))
#: The integer options and their bounds; those in `_OPTIONAL_INTS` may also be None.
_INT_RANGES: Mapping[str, tuple[int, int]] = {
    "context_window_tokens": (1, _MAX_TOKENS),
    "default_context_window_tokens": (1, _MAX_TOKENS),
    "max_output_tokens": (0, _MAX_TOKENS),
    "safety_buffer_tokens": (0, _MAX_TOKENS),
    "keep_recent": (0, 1_000_000),
    "min_chars": (0, 1_000_000_000),
    "compact_batch": (1, 1_000_000),
    "token_cache_size": (0, 100_000_000),
    "conversation_cache_size": (0, 100_000_000),
}
_OPTIONAL_INTS = frozenset({"context_window_tokens", "default_context_window_tokens", "compact_batch"})
# What applies when an option that may be None is not set (`GovernanceConfig.describe`).
_UNSET: Mapping[str, str] = {
    "context_window_tokens": "the model's",
    "default_context_window_tokens": "none",
    "compact_batch": f"1 ({STABLE_COMPACT_BATCH} with cache_stable)",
    "snip_watermark": "derived",
    "profile": "from the provider",
    "summary_model": "none (the note alone)",
}
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxdict = 5


def short_repr(value: object) -> str:
    """A repr short enough for an error message, whatever the value (values may come from clients)."""
    return _REPR.repr(value)


def suggestion(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when `name` looks like a misspelling of one of `choices`, else ""."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.75)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _unknown_message(unknown: Iterable[str]) -> str:
    names = sorted(map(str, unknown))[:10]
    described = ", ".join(short_repr(n) + suggestion(n, _FIELD_NAMES) for n in names)
    return f"unknown governance option(s) {described}; known options: {', '.join(sorted(_FIELD_NAMES))}"


def _check_int(name: str, value: object, minimum: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {short_repr(value)}")
    if not minimum <= value <= maximum:
        raise ConfigError(f"{name} must be between {minimum} and {maximum}, got {short_repr(value)}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _tool_set(value: object) -> frozenset[str] | Literal["*"]:
    if value == "*":
        return "*"
    if isinstance(value, str):
        if value in TOOL_PRESETS:
            return TOOL_PRESETS[value]
        raise ConfigError(
            f"compactable_tools must be a list of tool names, a preset ({', '.join(sorted(TOOL_PRESETS))}) "
            f'or "*", got {short_repr(value)}{suggestion(value, TOOL_PRESETS)}'
        )
    if not isinstance(value, Iterable):
        raise ConfigError(f'compactable_tools must be a list of tool names or "*", got {short_repr(value)}')
    names: set[str] = set()
    for name in value:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"compactable_tools must hold non-empty tool names, got {short_repr(name)}")
        names |= TOOL_PRESETS.get(name, {name})  # a preset's name stands for its tools
    return frozenset(names)
