"""Token counting: tiktoken, loaded offline from LiteLLM's bundled files, with one bounded cache.

tiktoken downloads its encodings on first use (and waits without a timeout where the network is
cut). This module reads LiteLLM's bundled files instead, checking their published SHA-256, without
importing LiteLLM (which takes seconds). Agents resend the same history on every request, so the
count of each message and of each long text is cached by the hash of its content (`TokenCache`):
hashes and counts, never text.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import threading
import types
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Final

from ._errors import TokenizerUnavailableError
from ._messages import TEXT_PARTS

__all__ = ["TokenCache", "TokenCounter", "encoding_for_model", "token_cache"]

# Published by OpenAI (tiktoken_ext.openai_public); LiteLLM bundles these files under the name
# tiktoken gives them in its cache: sha1 of the download URL.
_ENCODING_FILES: Final[Mapping[str, tuple[str, str]]] = {
    "cl100k_base": (
        "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "fb374d419588a4632f3f557e76b4b70aebbca790",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
_O200K_PREFIXES: Final = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "o1", "o3", "o4", "gpt-oss")

#: Tokens counted per message for the role and the message framing (OpenAI's chat format).
MESSAGE_OVERHEAD: Final = 4
#: Tokens counted once per request for priming the reply.
REPLY_PRIMING: Final = 3
#: Tokens counted per image part (a high-detail 1024x1024 image costs 765 with OpenAI and about
#: 1,400 with Claude at 1.15 megapixels; this is the conservative middle after the profile ratio).
IMAGE_TOKENS: Final = 1_200
# Texts at least this long are cached by digest; shorter ones are quicker to encode than to look up.
_CACHED_TEXT: Final = 32
_IMAGE_PARTS: Final = frozenset({"image_url", "image", "input_image"})
# Long texts are tokenized in slices of this many characters: tiktoken's o200k pattern panics on
# runs of several hundred thousand blanks. A cut between slices can add a token, never lose one.
_CHUNK: Final = 100_000


def encoding_for_model(model: str) -> str:
    """``o200k_base`` for the GPT-4o/4.1/5 and o-series families, ``cl100k_base`` otherwise."""
    name = model.lower().rsplit("/", 1)[-1]
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


def _litellm_tokenizer_dir() -> Path:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerUnavailableError(
            "LiteLLM is not installed, and its bundled tokenizer files are the only source "
            "litellm-governance reads encodings from (it never downloads them): pip install litellm"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"


@cache
def get_encoding(name: str) -> Any:
    """The tiktoken `Encoding` called `name`, built from LiteLLM's bundled file (no network)."""
    file_name, sha256 = _ENCODING_FILES[name]
    path = _litellm_tokenizer_dir() / file_name

    def load_bundled(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        # Stands in for tiktoken.load.load_tiktoken_bpe, which would download `url`.
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TokenizerUnavailableError(f"cannot read LiteLLM's bundled {name} file {path}: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != sha256:
            raise TokenizerUnavailableError(f"LiteLLM's bundled {name} file {path} is damaged (SHA-256 mismatch)")
        ranks: dict[bytes, int] = {}
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        return ranks

    import tiktoken
    from tiktoken_ext import openai_public

    # Run tiktoken's own constructor (pattern and special tokens stay exactly tiktoken's) with
    # its loader swapped for ours in a copy of the function's globals: nothing global changes.
    constructor = getattr(openai_public, name)
    offline = types.FunctionType(
        constructor.__code__, {**constructor.__globals__, "load_tiktoken_bpe": load_bundled}, name
    )
    return tiktoken.Encoding(**offline())


class TokenCache:
    """A map from a text's hash to its token count, safe to share between threads, holding at
    most `max_entries` in two generations: new entries go to the young one; when it holds half,
    it becomes the old one (the previous old one is dropped); an entry read from the old one moves
    back to the young."""

    def __init__(self, max_entries: int = 65_536) -> None:
        self.max_entries = max_entries
        self._young: dict[int, int] = {}
        self._old: dict[int, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def get(self, key: int) -> int | None:
        count = self._young.get(key)
        if count is None:
            count = self._old.get(key)
            if count is not None:
                self.put(key, count)
        return count

    def put(self, key: int, count: int) -> None:
        if self.max_entries < 2:
            return
        with self._lock:
            self._young[key] = count
            if len(self._young) >= self.max_entries // 2:
                self._old, self._young = self._young, {}

    def clear(self) -> None:
        with self._lock:
            self._young, self._old = {}, {}


@cache
def token_cache(size: int) -> TokenCache:
    """The process's cache of token counts holding at most `size` entries (the config's
    ``token_cache_size``: one per size configured)."""
    return TokenCache(size)


class TokenCounter:
    """Counts the tokens of messages and tool schemas with one encoding and a shared cache, whose
    keys are Python's hash of the texts with the encoding's name: 64 bits, from SipHash under a key
    drawn per process (unless PYTHONHASHSEED fixes it), so nobody outside can aim a collision, and one
    could only change an estimate, never content; a string hashes once (the steps count texts again)."""

    def __init__(self, encoding_name: str, cache: TokenCache) -> None:
        self.encoding_name = encoding_name
        self._cache = cache

    def text(self, text: str) -> int:
        """Tokens in `text` (cached by its hash when long enough for a lookup to beat encoding)."""
        if len(text) < _CACHED_TEXT:
            return self._encode(text) if text else 0
        key = hash((self.encoding_name, text))
        count = self._cache.get(key)
        if count is None:
            count = sum(self._encode(text[i : i + _CHUNK]) for i in range(0, len(text), _CHUNK))
            self._cache.put(key, count)
        return count

    def _encode(self, text: str) -> int:
        encoding = get_encoding(self.encoding_name)
        try:
            return len(encoding.encode_ordinary(text))  # (a lone surrogate is replaced by tiktoken itself)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException:  # noqa: BLE001 - tiktoken's Rust panics are BaseExceptions, not Exceptions
            # Every token is at least one byte: the byte count never undercounts.
            return len(text.encode("utf-8", "surrogatepass"))

    def message(self, message: Mapping[str, Any]) -> int:
        """Tokens a message costs in a request: framing, content, name and tool calls. Agents resend
        their history: a message seen before is one hash of its pieces and one lookup."""
        texts: list[str] = []
        fixed = _message_pieces(message, texts)
        key = hash((self.encoding_name, fixed, *texts))  # (a tuple: no two ways to split the texts alike)
        count = self._cache.get(key)
        if count is None:
            count = fixed + sum(self.text(text) for text in texts)
            self._cache.put(key, count)
        return count

    def content(self, content: object) -> int:
        """Tokens a message's content alone costs (what replacing it saves or adds)."""
        texts: list[str] = []
        fixed = _content_pieces(content, texts)
        return fixed + sum(self.text(text) for text in texts)

    def tools(self, tools: Sequence[object] | None) -> int:
        """Tokens the request's tool schemas cost."""
        return self.text(_json(list(tools))) + 8 if tools else 0


# `json.dumps` with these options builds an encoder per call: half its time on a small block.
_ENCODER: Final = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)


def _json(value: object) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError):
        return _flatten(value)


def _flatten(value: object) -> str:
    """Every key and scalar in `value`, without recursion (for nesting too deep for json), each
    container once (for a value that holds itself)."""
    parts: list[str] = []
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        if isinstance(item, Mapping):
            seen.add(id(item))
            parts.append("{}")
            for key, inner in item.items():
                parts.append(str(key) if isinstance(key, (str, int, float, bool)) else "?")
                stack.append(inner)
        elif isinstance(item, (list, tuple)):
            seen.add(id(item))
            parts.append("[]")
            stack.extend(item)
        elif isinstance(item, str):
            parts.append(item)
        else:
            parts.append(str(item) if isinstance(item, (int, float, bool)) or item is None else "?")
    return " ".join(parts)


def _content_pieces(content: object, pieces: list[str], *, nested: bool = False) -> int:
    """Append the texts to tokenize in `content` to `pieces` (a structured value as its JSON);
    return the tokens counted as fixed."""
    if content is None:
        return 0
    if not isinstance(content, list):
        pieces.append(content if isinstance(content, str) else _json(content))
        return 0
    fixed = 0
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if isinstance(part, str):
            pieces.append(part)
        elif kind in TEXT_PARTS and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif kind in _IMAGE_PARTS:
            fixed += IMAGE_TOKENS
        elif kind == "message" and not nested and isinstance(part.get("content"), list):
            # A Responses message item inside an assistant turn: its parts, one level down.
            fixed += MESSAGE_OVERHEAD + _content_pieces(part["content"], pieces, nested=True)
        else:
            pieces.append(_json(part))
    return fixed


def _message_pieces(message: Mapping[str, Any], pieces: list[str]) -> int:
    """Append the pieces of `message` to `pieces` (see `_content_pieces`); return its fixed tokens:
    the framing, and each tool call's (its id, name and arguments are pieces)."""
    fixed = MESSAGE_OVERHEAD + _content_pieces(message.get("content"), pieces)
    if isinstance(message.get("name"), str):
        pieces.append(message["name"])
        fixed += 1
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        fixed += 4
        if not isinstance(call, Mapping):
            fixed += _content_pieces(call, pieces)
            continue
        if isinstance(call.get("id"), str):
            pieces.append(call["id"])
        function = call.get("function")
        if isinstance(function, Mapping):
            fixed += _content_pieces(function.get("name"), pieces) + _content_pieces(function.get("arguments"), pieces)
    if isinstance(message.get("tool_call_id"), str):
        pieces.append(message["tool_call_id"])
    for key in ("reasoning_content", "thinking_blocks"):
        if message.get(key):
            fixed += _content_pieces(message[key], pieces)
    return fixed
