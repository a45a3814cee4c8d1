"""Token counting: tiktoken, loaded offline from LiteLLM's bundled files, with a content cache.

tiktoken fetches its encodings over the network on first use and waits without a timeout where
the network is cut. LiteLLM ships the two encodings we need; this module reads them directly
(verifying their published SHA-256) and never lets tiktoken download anything. It does not
import LiteLLM (which takes seconds): it only locates LiteLLM's package folder.

Agent loops resend the same history on every request, so the token count of each text is
cached by content digest (bounded LRU): a prefix already seen is hashed, not tokenized again.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import threading
import types
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Final

from ._errors import TokenizerUnavailableError

__all__ = ["TokenCache", "TokenCounter", "encoding_for_model"]

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
    try:
        file_name, sha256 = _ENCODING_FILES[name]
    except KeyError:
        raise TokenizerUnavailableError(f"no bundled tiktoken file for encoding {name!r}") from None
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
    """A bounded, thread-safe LRU from text (or its digest) to its token count."""

    def __init__(self, max_entries: int = 65_536) -> None:
        self.max_entries = max_entries
        self._counts: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._counts)

    def get(self, key: tuple[str, bytes]) -> int | None:
        with self._lock:
            count = self._counts.get(key)
            if count is None:
                self.misses += 1
                return None
            self._counts.move_to_end(key)
            self.hits += 1
            return count

    def put(self, key: tuple[str, bytes], count: int) -> None:
        if self.max_entries <= 0:
            return
        with self._lock:
            self._counts[key] = count
            self._counts.move_to_end(key)
            while len(self._counts) > self.max_entries:
                self._counts.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self.hits = self.misses = 0


class TokenCounter:
    """Counts the tokens of messages and tool schemas with one encoding and a shared cache."""

    def __init__(self, encoding_name: str, cache: TokenCache) -> None:
        self.encoding_name = encoding_name
        self._cache = cache
        self._encoding: Any = None

    def text(self, text: str) -> int:
        """Tokens in `text` (cached by content)."""
        if not text:
            return 0
        # Keyed by digest: the cache never holds message content, and its entries have one size.
        key = (self.encoding_name, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
        count = self._cache.get(key)
        if count is None:
            count = sum(self._encode(text[i : i + _CHUNK]) for i in range(0, len(text), _CHUNK))
            self._cache.put(key, count)
        return count

    def _encode(self, text: str) -> int:
        if self._encoding is None:
            self._encoding = get_encoding(self.encoding_name)
        try:
            return len(self._encoding.encode_ordinary(text))
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException:  # noqa: BLE001 - tiktoken's Rust panics are BaseExceptions, not Exceptions
            # Every token is at least one byte: the byte count never undercounts.
            return len(text.encode("utf-8", "surrogatepass"))

    def content(self, content: object) -> int:
        """Tokens in a message's `content`: a string, a list of parts, or any other JSON value."""
        if content is None:
            return 0
        if isinstance(content, str):
            return self.text(content)
        if isinstance(content, list):
            total = 0
            for part in content:
                if isinstance(part, Mapping):
                    kind = part.get("type")
                    if kind == "text" and isinstance(part.get("text"), str):
                        total += self.text(part["text"])
                    elif kind in ("image_url", "image", "input_image"):
                        total += IMAGE_TOKENS
                    else:
                        total += self.text(_json(part))
                elif isinstance(part, str):
                    total += self.text(part)
                else:
                    total += self.text(_json(part))  # not recursion: content may nest without limit
            return total
        return self.text(_json(content))

    def message(self, message: Mapping[str, Any]) -> int:
        """Tokens a message costs in a request: framing, content, name and tool calls."""
        total = MESSAGE_OVERHEAD + self.content(message.get("content"))
        name = message.get("name")
        if isinstance(name, str):
            total += self.text(name) + 1
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                total += self._tool_call(call)
        tool_call_id = message.get("tool_call_id")
        if isinstance(tool_call_id, str):
            total += self.text(tool_call_id)
        for key in ("reasoning_content", "thinking_blocks"):
            extra = message.get(key)
            if extra:
                total += self.content(extra)
        return total

    def _tool_call(self, call: object) -> int:
        if not isinstance(call, Mapping):
            return self.content(call)
        total = 4
        ident = call.get("id")
        if isinstance(ident, str):
            total += self.text(ident)
        function = call.get("function")
        if isinstance(function, Mapping):
            for key in ("name", "arguments"):
                value = function.get(key)
                total += self.text(value) if isinstance(value, str) else self.content(value)
        return total

    def tools(self, tools: Sequence[object] | None) -> int:
        """Tokens the request's tool schemas cost."""
        if not tools:
            return 0
        return self.text(_json(list(tools))) + 8


def _json(value: object) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError, RecursionError):
        return _flatten(value)


def _flatten(value: object) -> str:
    """Every key and scalar in `value`, without recursion (for nesting too deep for json)."""
    parts: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            parts.append("{}")
            for key, inner in item.items():
                parts.append(str(key) if isinstance(key, (str, int, float, bool)) else "?")
                stack.append(inner)
        elif isinstance(item, (list, tuple)):
            parts.append("[]")
            stack.extend(item)
        elif isinstance(item, str):
            parts.append(item)
        else:
            parts.append(str(item) if isinstance(item, (int, float, bool)) or item is None else "?")
    return " ".join(parts)
