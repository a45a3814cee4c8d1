"""Counting a prompt as the emulated provider does: tiktoken ``cl100k_base`` over every text the
prompt carries, plus framing, times a ``token_rate``. The encoding is read from the file LiteLLM
bundles (``litellm/litellm_core_utils/tokenizers``), offline and checked, by this package's own loader:
the emulator shares no code with the plugin it checks."""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import json
import math
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

__all__ = [
    "MEDIA_TOKENS",
    "MESSAGE_FRAMING",
    "REQUEST_FRAMING",
    "TokenizerNotFound",
    "count_prompt_tokens",
    "count_text_tokens",
    "encoding",
    "requested_output_tokens",
]

# OpenAI's published cl100k_base file as LiteLLM bundles it: named as tiktoken's cache names it (the
# SHA-1 of its download URL), with OpenAI's published SHA-256.
_BUNDLED_DIR: Final = Path("litellm_core_utils", "tokenizers")
_CL100K_FILE: Final = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
_CL100K_SHA256: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


class TokenizerNotFound(RuntimeError):
    """LiteLLM's bundled tiktoken file is missing or damaged (the emulator never downloads one)."""


#: Tokens counted per message (role and framing) and once per request (reply priming).
MESSAGE_FRAMING: Final = 4
REQUEST_FRAMING: Final = 3
#: Tokens counted per image, audio or file part (their bytes are not text).
MEDIA_TOKENS: Final = 85

_PROMPT_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "chat": ("messages", "tools", "functions"),
    "messages": ("system", "messages", "tools"),
    "gemini": ("system_instruction", "systemInstruction", "contents", "tools"),
    "converse": ("system", "messages", "toolConfig"),
    "responses": ("instructions", "input", "tools"),
    "completions": ("prompt",),
}
_MESSAGE_LISTS: Final[Mapping[str, str]] = {
    "chat": "messages",
    "messages": "messages",
    "gemini": "contents",
    "converse": "messages",
    "responses": "input",
}
# Keys whose values are identifiers or markup, not prompt text.
_SKIP_KEYS: Final = frozenset(
    {
        "role",
        "type",
        "id",
        "tool_call_id",
        "tool_use_id",
        "toolUseId",
        "call_id",
        "signature",
        "thoughtSignature",
        "thought_signature",
        "cache_control",
        "cachePoint",
        "status",
        "encrypted_content",
        "prefix",
        "index",
        "mime_type",
        "mimeType",
        "format",
    }
)
# Keys whose values are media: counted as MEDIA_TOKENS, never tokenized.
_MEDIA_KEYS: Final = frozenset(
    {
        "image_url",
        "input_image",
        "image",
        "source",
        "inline_data",
        "inlineData",
        "file_data",
        "fileData",
        "document",
        "input_audio",
        "video",
        "file",
    }
)
# Keys whose structured values are sent as JSON text (arguments, schemas).
_JSON_KEYS: Final = frozenset(
    {
        "input",
        "args",
        "arguments",
        "response",
        "parameters",
        "input_schema",
        "inputSchema",
        "json",
        "tools",
        "functions",
        "toolConfig",
        "output",
    }
)


def _collect(value: object, texts: list[str], media: list[int]) -> None:
    if isinstance(value, str):
        texts.append(value)
    elif isinstance(value, list):
        for item in value:
            _collect(item, texts, media)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key in _SKIP_KEYS:
                continue
            if key in _MEDIA_KEYS:
                media[0] += 1
            elif key in _JSON_KEYS and not isinstance(item, str):
                texts.append(json.dumps(item, sort_keys=True, ensure_ascii=False))
            else:
                _collect(item, texts, media)


@functools.cache
def encoding() -> Any:
    """tiktoken's ``cl100k_base``, built from the file LiteLLM bundles (its SHA-256 verified); never
    downloaded. Raises `TokenizerNotFound` when the file is missing or damaged."""
    spec = importlib.util.find_spec("litellm")  # locates LiteLLM's folder without importing it
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerNotFound("the emulator counts with LiteLLM's bundled tiktoken files: pip install litellm")
    path = Path(next(iter(spec.submodule_search_locations))) / _BUNDLED_DIR / _CL100K_FILE
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TokenizerNotFound(f"cannot read LiteLLM's bundled cl100k_base file {path}: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
        raise TokenizerNotFound(f"LiteLLM's bundled cl100k_base file {path} is damaged (SHA-256 mismatch)")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}

    import tiktoken
    from tiktoken_ext import openai_public

    # tiktoken's own definition of the encoding (pattern, special tokens), run with its download
    # replaced by the ranks read above, in a copy of its globals: nothing global changes.
    define = openai_public.cl100k_base
    offline = {**define.__globals__, "load_tiktoken_bpe": lambda *_args, **_kwargs: ranks}
    return tiktoken.Encoding(**types.FunctionType(define.__code__, offline, "cl100k_base")())


def count_text_tokens(text: str) -> int:
    """Tokens of ``text`` under tiktoken ``cl100k_base`` (special tokens counted as text)."""
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def count_prompt_tokens(wire: str, body: Mapping[str, Any], token_rate: float = 1.0) -> int:
    """The emulated provider's prompt size: tiktoken over the prompt's texts, plus framing, times ``token_rate``.

    Texts are message contents, tool-call names and arguments, tool results, thinking text,
    system prompts and tool schemas (as JSON); each message adds :data:`MESSAGE_FRAMING`
    tokens, each media part :data:`MEDIA_TOKENS`, the request :data:`REQUEST_FRAMING`.
    """
    texts: list[str] = []
    media = [0]
    for name in _PROMPT_FIELDS.get(wire, ()):
        if name in body:
            if name in _JSON_KEYS and not isinstance(body[name], str):
                texts.append(json.dumps(body[name], sort_keys=True, ensure_ascii=False))
            else:
                _collect(body[name], texts, media)
    list_name = _MESSAGE_LISTS.get(wire)
    messages = body.get(list_name) if list_name else None
    count = len(messages) if isinstance(messages, list) else 1
    raw = sum(count_text_tokens(text) for text in texts) + MESSAGE_FRAMING * count + REQUEST_FRAMING
    raw += MEDIA_TOKENS * media[0]
    return max(1, math.ceil(raw * token_rate))


def requested_output_tokens(wire: str, body: Mapping[str, Any]) -> int | None:
    """The output budget the request asks for, if any (``max_tokens`` and its per-wire names)."""
    candidates: list[object]
    if wire == "gemini":
        config = body.get("generationConfig", body.get("generation_config"))
        candidates = (
            [config.get("maxOutputTokens"), config.get("max_output_tokens")] if isinstance(config, Mapping) else []
        )
    elif wire == "converse":
        config = body.get("inferenceConfig")
        candidates = [config.get("maxTokens")] if isinstance(config, Mapping) else []
    elif wire == "responses":
        candidates = [body.get("max_output_tokens")]
    else:
        candidates = [body.get("max_completion_tokens"), body.get("max_tokens")]
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None
