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
import io
import json
import pickle
import types
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Final, NoReturn

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
# Texts at least this long are cached by digest; shorter ones are quicker to encode than to look up.
_CACHED_TEXT: Final = 256
_IMAGE_PARTS: Final = frozenset({"image_url", "image", "input_image"})
_TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
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


def _counter(encoding: Any) -> Callable[[str], int]:
    """How many tokens `encoding` makes of a text, exactly as many as ``encode_ordinary`` gives.

    tiktoken's ``encode_ordinary`` returns a Python list: an int object per token, made only to be
    counted. From tiktoken 0.9 its core also fills a buffer of 32-bit ranks (what ``encode_to_numpy``
    reads); counted from the buffer's size, no token becomes an object: 2-6 % of a tokenization of
    `bench/formats.py`'s sessions, both ways measured in one process. With no special token allowed,
    ``encode`` gives exactly ``encode_ordinary``'s tokens (tiktoken's docstring for ``encode_ordinary``
    says so). Raises what the core raises: UnicodeEncodeError on a lone surrogate, a panic on
    pathological input."""
    core = encoding._core_bpe
    into_buffer = getattr(core, "encode_to_tiktoken_buffer", None)
    if into_buffer is None:  # tiktoken 0.7 and 0.8
        encode = core.encode_ordinary
        return lambda text: len(encode(text))
    none: frozenset[str] = frozenset()
    return lambda text: memoryview(into_buffer(text, none)).nbytes >> 2


#: tiktoken's pre-tokenizer patterns (cl100k_base as tiktoken 0.7-0.9 and as 0.10+ write it;
#: o200k_base) under which no piece holds a line break and the character after it, where that
#: character is neither white space nor "/": a piece that reaches a line break is white space, or
#: punctuation followed by line breaks (and slashes, in o200k_base), and none starts at a line break
#: and goes on. tiktoken encodes each piece on its own, so a text whose every join is such a break
#: has the sum of its parts' tokens (`TokenCounter.compose`; `tests/test_tokens.py` holds it on
#: generated texts for each pattern). Another pattern (a later tiktoken's) is simply not trusted.
_CLEAN_BREAK_PATTERNS: Final = frozenset(
    "|".join(alternatives)
    for alternatives in (
        (  # cl100k_base, tiktoken 0.7-0.9
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)",
            r"[^\r\n\p{L}\p{N}]?\p{L}+",
            r"\p{N}{1,3}",
            r" ?[^\s\p{L}\p{N}]+[\r\n]*",
            r"\s*[\r\n]+",
            r"\s+(?!\S)",
            r"\s+",
        ),
        (  # cl100k_base, tiktoken 0.10 and later
            r"'(?i:[sdmt]|ll|ve|re)",
            r"[^\r\n\p{L}\p{N}]?+\p{L}++",
            r"\p{N}{1,3}+",
            r" ?[^\s\p{L}\p{N}]++[\r\n]*+",
            r"\s++$",
            r"\s*[\r\n]",
            r"\s+(?!\S)",
            r"\s",
        ),
        (  # o200k_base
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"\p{N}{1,3}",
            r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
            r"\s*[\r\n]+",
            r"\s+(?!\S)",
            r"\s+",
        ),
    )
)


@cache
def breaks_cleanly_in(encoding_name: str) -> bool:
    """Whether the encoding's pattern is one of `_CLEAN_BREAK_PATTERNS`."""
    return getattr(get_encoding(encoding_name), "_pat_str", None) in _CLEAN_BREAK_PATTERNS


def _breaks_cleanly(before: str, after: str) -> bool:
    """Whether `before` ends a line where `after` starts one with a character no piece joins to the
    line break (see `_CLEAN_BREAK_PATTERNS`; ``isspace`` holds for every character of Unicode's
    White_Space, which the patterns' ``\\s`` matches)."""
    return before.endswith("\n") and bool(after) and not after[0].isspace() and after[0] != "/"


#: A cache key: the hash of (encoding, length or kind, the content's hash) — an int, not the tuple,
#: which would take three times the memory (`python bench/memory.py`).
CacheKey = int


class TokenCache:
    """A bounded map from a content key to a token count, safe to share between threads.

    Two generations instead of an LRU: reads take no lock and move nothing. New entries go to
    the young generation; when it holds half the entries allowed, it becomes the old one and the
    previous old one is dropped; an entry read from the old generation moves back to the young.
    At most `max_entries` entries are ever held. A race between threads can at worst lose an
    entry (it is counted again), never return a wrong count.
    """

    def __init__(self, max_entries: int = 65_536) -> None:
        self.max_entries = max_entries
        self._young: dict[CacheKey, int] = {}
        self._old: dict[CacheKey, int] = {}
        #: Lookups answered and not (approximate when threads race; for observability).
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def get(self, key: CacheKey) -> int | None:
        count = self._young.get(key)
        if count is None:
            count = self._old.get(key)
            if count is None:
                self.misses += 1
                return None
            self.put(key, count)
        self.hits += 1
        return count

    def put(self, key: CacheKey, count: int) -> None:
        if self.max_entries < 2:
            return
        young = self._young
        young[key] = count
        if len(young) >= self.max_entries // 2:
            self._old, self._young = young, {}

    def clear(self) -> None:
        self._young, self._old = {}, {}
        self.hits = self.misses = 0


class TokenCounter:
    """Counts the tokens of messages and tool schemas with one encoding and a shared cache.

    A message is looked up in the cache under one digest of everything it carries, so a history
    the cache has seen costs one hash and one lookup per message. A message not seen before is
    counted piece by piece, long pieces through the cache too (agents repeat tool outputs).
    """

    def __init__(self, encoding_name: str, cache: TokenCache) -> None:
        self.encoding_name = encoding_name
        self._cache = cache
        self._count: Callable[[str], int] | None = None

    # Keys are the hash of (encoding, length, hash), never the text: the cache holds no message
    # content and its entries have one size. Python's string hash is SipHash under a per-process
    # random key, so collisions cannot be aimed at, and one would only misestimate a single
    # message's count. It costs a third of a cryptographic digest, which matters on the warm path
    # (measured). The (encoding, length, hash) tuple is hashed once more rather than kept: a
    # 64-bit int instead of a tuple of three objects, less than half the memory per entry.

    def text(self, text: str) -> int:
        """Tokens in `text` (cached by content when long enough for a lookup to beat encoding)."""
        if len(text) < _CACHED_TEXT:
            return self._encode(text) if text else 0
        key = self._text_key(text)
        count = self._cache.get(key)
        if count is None:
            count = self._sliced(text)
            self._cache.put(key, count)
        return count

    def _text_key(self, text: str) -> CacheKey:
        """The key a text's count is cached under (see the comment above `text`)."""
        return hash((self.encoding_name, len(text), hash(text)))

    def _sliced(self, text: str) -> int:
        """Tokens in `text`, encoded in `_CHUNK` slices (no cache)."""
        return sum(self._encode(text[i : i + _CHUNK]) for i in range(0, len(text), _CHUNK))

    def short(self, text: str) -> int:
        """Tokens in `text`, through the cache whatever its length: for the plugin's own short texts
        (stubs, note lines) that come back on every request of a conversation."""
        key = self._text_key(text)
        count = self._cache.get(key)
        if count is None:
            count = self.text(text) if len(text) >= _CACHED_TEXT else self._encode(text)
            self._cache.put(key, count)
        return count

    def compose(self, parts: Sequence[str]) -> str:
        """``"".join(parts)`` — a text the plugin builds on a request from pieces that come back on
        the next (the note for cut turns from its lines; a turn merged with it) — with its tokens put
        in the cache as the sum of the parts' (each through the cache: `short`), where that is exactly
        what tokenizing the text gives (`_breaks_cleanly`). Counting the text then costs a lookup, not
        a tokenization of a text that is new on every request the note changes."""
        text = "".join(parts)
        if (
            len(parts) > 1
            and _CACHED_TEXT <= len(text) < _CHUNK  # (`text` caches it; encodes it in one slice)
            and self._cache.max_entries >= 2  # (a cache that holds nothing: counting the parts would be in vain)
            and all(_breaks_cleanly(parts[i - 1], parts[i]) for i in range(1, len(parts)))
            and breaks_cleanly_in(self.encoding_name)
        ):
            key = self._text_key(text)
            if self._cache.get(key) is None:
                self._cache.put(key, sum(self.short(part) for part in parts))
        return text

    def _encode(self, text: str) -> int:
        count = self._count
        if count is None:
            count = self._count = _counter(get_encoding(self.encoding_name))
        try:
            try:
                return count(text)
            except UnicodeEncodeError:  # a lone surrogate: tiktoken's own encode_ordinary replaces it
                return count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException:  # noqa: BLE001 - tiktoken's Rust panics are BaseExceptions, not Exceptions
            # Every token is at least one byte: the byte count never undercounts.
            return len(text.encode("utf-8", "surrogatepass"))

    def message(self, message: Mapping[str, Any]) -> int:
        """Tokens a message costs in a request: framing, content, name and tool calls."""
        key = self._key(message)
        count = self._cache.get(key)
        if count is None:
            texts: list[str] = []
            count = _message_pieces(message, texts) + sum(self.text(text) for text in texts)
            self._cache.put(key, count)
        return count

    def messages(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """`message` of each of `messages`: the same counts, and the same entries left in the cache.
        What no count is cached for is gathered first and tokenized in one go (`_texts`): a text that
        comes back in the request (the same file read twice, the same message) is tokenized once, and
        each message costs a few Python calls fewer than counted alone."""
        counts: list[int] = []
        missing: dict[int, tuple[list[int], int, list[str]]] = {}  # key -> (positions, fixed tokens, texts)
        get = self._cache.get
        for message in messages:
            key = self._key(message)
            count = get(key)
            if count is None:
                entry = missing.get(key)
                if entry is None:
                    texts: list[str] = []
                    entry = missing[key] = ([], _message_pieces(message, texts), texts)
                entry[0].append(len(counts))
                count = 0
            counts.append(count)
        if missing:
            found = iter(self._texts([text for _, _, texts in missing.values() for text in texts]))
            for key, (positions, fixed, texts) in missing.items():
                count = fixed + sum(next(found) for _ in texts)
                self._cache.put(key, count)
                for position in positions:
                    counts[position] = count
        return counts

    def _texts(self, texts: list[str]) -> list[int]:
        """`text` of each of `texts`: the long ones through the cache, each distinct text tokenized once."""
        counts = [0] * len(texts)
        todo: dict[object, list[int]] = {}  # a long text's cache key (a short text itself) -> positions
        work: list[tuple[object, str]] = []  # (key, text) to tokenize, each once
        get = self._cache.get
        for position, text in enumerate(texts):
            if not text:
                continue
            key: object = text
            if len(text) >= _CACHED_TEXT:
                key = self._text_key(text)
                count = get(key)
                if count is not None:
                    counts[position] = count
                    continue
            positions = todo.get(key)
            if positions is None:
                positions = todo[key] = []
                work.append((key, text))
            positions.append(position)
        for key, text in work:
            count = self._sliced(text)  # as `text` counts
            if type(key) is int:
                self._cache.put(key, count)
            for position in todo[key]:
                counts[position] = count
        return counts

    def _key(self, message: Mapping[str, Any]) -> CacheKey:
        """The key a message's count is cached under: its pieces (`_message_pieces`), hashed."""
        content = message.get("content")
        extra = message.get("reasoning_content") or message.get("thinking_blocks")
        if type(content) is str and message.get("tool_calls") is None and message.get("name") is None and not extra:
            # Most messages (results, user and system text): the key its pieces (the content, then the
            # result's call id) would give, without building them.
            ident = message.get("tool_call_id")
            if type(ident) is str:
                return hash((self.encoding_name, MESSAGE_OVERHEAD + 2, hash((MESSAGE_OVERHEAD, content, ident))))
            return hash((self.encoding_name, MESSAGE_OVERHEAD + 1, hash((MESSAGE_OVERHEAD, content))))
        # Keyed on each piece's text or structured value's `fingerprint`: no JSON is made on a hit.
        material: list[object] = []
        try:
            fixed = _message_pieces(message, material, fingerprint)
        except (RecursionError, ValueError, TypeError):  # a value no fingerprint holds
            material = []
            fixed = _message_pieces(message, material, _structured_key)
        return hash((self.encoding_name, fixed + len(material), hash((fixed, *material))))

    def content(self, content: object) -> int:
        """Tokens a message's content alone costs (what replacing it saves or adds)."""
        if type(content) is str:
            return self.text(content)
        texts: list[str] = []
        return _content_pieces(content, texts) + sum(self.text(text) for text in texts)

    def tools(self, tools: Sequence[object] | None) -> int:
        """Tokens the request's tool schemas cost."""
        if not tools:
            return 0
        schemas = list(tools)
        try:  # (the schemas written out in C: a fifth of the time `fingerprint` takes on them)
            material: object = exact_bytes(schemas)
        except (RecursionError, ValueError):  # not a JSON value (an SDK object, say)
            material = _structured_key(schemas)
        key = hash((self.encoding_name, -1 - len(tools), hash(material)))  # negative: no text's
        count = self._cache.get(key)
        if count is None:
            count = self.text(_json(schemas)) + 8
            self._cache.put(key, count)
        return count


# `json.dumps` with these options builds an encoder per call: half its time on a small block.
_ENCODER: Final = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)


def _json(value: object) -> str:
    try:
        return _ENCODER.encode(value)
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


_DICT: Final = "\x00{"
_LIST: Final = "\x00["


def fingerprint(value: object) -> object:
    """A hashable value that tells `value` apart from any other JSON value (and from any text:
    every structured fingerprint is a tuple): strings as they are, dicts and lists as tuples
    (their own strings are hashed in C, no text is built), other values with their type (``1``,
    ``1.0`` and ``True`` hash alike), numbers and objects JSON cannot hold by their `repr`."""
    kind = type(value)
    if kind is str:
        return value
    if kind is dict:
        found: list[object] = [_DICT]  # a loop, not a comprehension: twice as fast on these small dicts (measured)
        for key, item in value.items():  # type: ignore[attr-defined]
            found.append(key if type(key) is str else fingerprint(key))
            found.append(item if type(item) is str else fingerprint(item))  # most leaves: no call
        return tuple(found)
    if kind is list:
        return (_LIST, *[item if type(item) is str else fingerprint(item) for item in value])  # type: ignore[attr-defined]
    if value is None or kind is bool:
        return (kind, value)
    # Numbers by their text: their own hashes collide by design (-1 and -2; ints equal modulo 2**61 - 1).
    return (kind, repr(value))


class _ExactWriter(pickle.Pickler):
    """`pickle` (protocol 3) with its memo off (``fast``): every object is written out whole where
    it stands, never as a reference to an earlier one, so the bytes depend on the values alone and
    not on which objects the parser or the client shared. Anything but the exact types ``dict``,
    ``list``, ``tuple``, ``str``, ``bytes``, ``int``, ``float``, ``bool`` and ``None`` is refused,
    not pickled by its class (`pickle` asks `reducer_override` of every other object)."""

    def reducer_override(self, obj: object) -> NoReturn:
        raise ValueError(f"not a JSON value: {type(obj).__name__}")


def exact_bytes(value: object) -> memoryview:
    """`value` (a JSON value, as parsed) written out in C: equal bytes for the same value and only
    for it (with its types: ``1``, ``1.0`` and ``True`` apart; its dicts in their key order), as
    a read-only view that `hash` takes. Items of a list are written one after another, so a
    list's first items are the same bytes in a longer list as in a shorter one (past the first
    two items: `_conversations` puts two ``None`` in front). Raises ValueError for a value JSON
    cannot hold or a cycle, RecursionError for one nested too deep."""
    out = io.BytesIO()
    writer = _ExactWriter(out, 3)
    writer.fast = True
    writer.dump(value)
    return out.getbuffer().toreadonly()


def _structured_key(value: object) -> object:
    """`fingerprint(value)`, or where none holds it (too deep, not hashable) its JSON, set apart from texts."""
    try:
        return fingerprint(value)
    except (RecursionError, ValueError, TypeError):
        return "\x00" + _json(value)


#: What a structured value becomes as a piece: its JSON (the text to count), or a key's material.
Wrap = Callable[[Any], Any]


def _content_pieces(content: object, pieces: list[Any], wrap: Wrap = _json, *, nested: bool = False) -> int:
    """Append the texts to tokenize in `content` to `pieces` (a structured value as ``wrap(value)``);
    return the tokens counted as fixed."""
    if content is None:
        return 0
    if type(content) is str:
        pieces.append(content)
        return 0
    if isinstance(content, list):
        fixed = 0
        for part in content:
            if type(part) is dict or isinstance(part, Mapping):
                kind = part.get("type")
                text = part.get("text")
                if kind in _TEXT_PARTS and type(text) is str:
                    pieces.append(text)
                elif kind in _IMAGE_PARTS:
                    fixed += IMAGE_TOKENS
                elif kind == "message" and not nested and type(part.get("content")) is list:
                    # A Responses message item inside an assistant turn: its parts, one level down.
                    fixed += MESSAGE_OVERHEAD + _content_pieces(part["content"], pieces, wrap, nested=True)
                else:
                    pieces.append(wrap(part))
            elif type(part) is str:
                pieces.append(part)
            else:
                pieces.append(wrap(part))  # not recursion: content may nest without limit
        return fixed
    pieces.append(content if isinstance(content, str) else wrap(content))
    return 0


def _message_pieces(message: Mapping[str, Any], pieces: list[Any], wrap: Wrap = _json) -> int:
    """Append the pieces of `message` to `pieces` (see `_content_pieces`); return its fixed tokens."""
    content = message.get("content")
    if type(content) is str:  # most messages: no call for the content
        pieces.append(content)
        fixed = MESSAGE_OVERHEAD
    else:
        fixed = MESSAGE_OVERHEAD + _content_pieces(content, pieces, wrap)
    name = message.get("name")
    if type(name) is str:
        pieces.append(name)
        fixed += 1
    calls = message.get("tool_calls")
    if type(calls) is list:
        for call in calls:
            fixed += 4
            if type(call) is dict or isinstance(call, Mapping):
                ident = call.get("id")
                if type(ident) is str:
                    pieces.append(ident)
                function = call.get("function")
                if type(function) is dict or isinstance(function, Mapping):
                    for value in (function.get("name"), function.get("arguments")):
                        if type(value) is str:  # most names and arguments: no call
                            pieces.append(value)
                        elif type(value) is dict:  # parsed arguments (Anthropic's tool_use input)
                            pieces.append(wrap(value))
                        else:
                            fixed += _content_pieces(value, pieces, wrap)
            else:
                fixed += _content_pieces(call, pieces, wrap)
    tool_call_id = message.get("tool_call_id")
    if type(tool_call_id) is str:
        pieces.append(tool_call_id)
    for key in ("reasoning_content", "thinking_blocks"):
        extra = message.get(key)
        if extra:
            fixed += _content_pieces(extra, pieces, wrap)
    return fixed
