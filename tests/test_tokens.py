"""Token counting: tiktoken from LiteLLM's bundled files only, and the bounded count cache."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_governance import TokenizerUnavailableError, _tokens
from litellm_governance._tokens import TokenCache, TokenCounter, _counter, encoding_for_model, get_encoding

from .test_properties import conversations


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("openai/gpt-4o", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("openai/gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("zai/glm-4.6", "cl100k_base"),
        ("anthropic/claude-opus-4-6", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
    ],
)
def test_encoding_for_model(model: str, encoding: str) -> None:
    """o200k for the GPT-4o/4.1/5 and o-series families, cl100k otherwise."""
    assert encoding_for_model(model) == encoding


def test_bundled_encodings_are_tiktokens_own() -> None:
    """Encodings built from LiteLLM's files give tiktoken's known token ids."""
    assert get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert get_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]


def test_a_damaged_file_is_an_error_not_a_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing or altered bundled file raises TokenizerUnavailableError; nothing is fetched."""
    monkeypatch.setattr(_tokens, "_litellm_tokenizer_dir", lambda: tmp_path)
    get_encoding.cache_clear()
    try:
        with pytest.raises(TokenizerUnavailableError, match="cannot read"):
            get_encoding("cl100k_base")
        (tmp_path / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").write_bytes(b"aGVsbG8= 0\n")
        with pytest.raises(TokenizerUnavailableError, match="damaged"):
            get_encoding("cl100k_base")
    finally:
        get_encoding.cache_clear()


class TestTokenCache:
    def test_bounded(self) -> None:
        """Never more entries than max_entries, however many are put."""
        cache = TokenCache(100)
        for i in range(1_000):
            cache.put(("cl100k_base", i, i), i)
            assert len(cache) <= 100

    def test_the_per_result_stores_are_bounded_too(self) -> None:
        """What a result's size and failure check remember (per process, by the text's hash) never
        holds more than `_SIZES_KEPT` entries each, however many distinct results come by."""
        from litellm_governance import _calls

        for i in range(_calls._SIZES_KEPT + 500):
            text = f"{i}\n" * 1_000
            _calls.describe_size(text)
            _calls.looks_like_error({"role": "tool", "content": text})
            assert len(_calls._SIZES) <= _calls._SIZES_KEPT and len(_calls._FAILURES) <= _calls._SIZES_KEPT

    def test_recent_entries_survive(self) -> None:
        """An entry read again stays; entries neither read nor new are the ones dropped."""
        cache = TokenCache(10)
        cache.put(("e", 0, 0), 7)
        for i in range(1, 40):
            assert cache.get(("e", 0, 0)) == 7
            cache.put(("e", i, i), i)
        assert cache.get(("e", 1, 1)) is None

    def test_zero_size_disables(self) -> None:
        """token_cache_size=0 caches nothing (and still counts right)."""
        counter = TokenCounter("cl100k_base", TokenCache(0))
        assert counter.text("hello world " * 100) == counter.text("hello world " * 100) == 201


class TestTokenCounter:
    def test_same_content_same_count_one_tokenization(self) -> None:
        """A message seen before (a new object with the same content) is a cache hit."""
        cache = TokenCache(1_000)
        counter = TokenCounter("cl100k_base", cache)
        message = {"role": "user", "content": "Fix the failing test in tests/test_api.py, please."}
        first = counter.message(message)
        hits = cache.hits
        assert counter.message(dict(message)) == first
        assert cache.hits == hits + 1

    def test_every_part_counts(self) -> None:
        """Content, name, tool-call ids, names and arguments, and images all add tokens."""
        counter = TokenCounter("cl100k_base", TokenCache(1_000))
        bare = counter.message({"role": "assistant", "content": "ok"})
        call = {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": '{"pattern": "x"}'}}
        assert counter.message({"role": "assistant", "content": "ok", "tool_calls": [call]}) > bare
        assert counter.message({"role": "assistant", "content": "ok", "name": "bot"}) > bare
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        with_image = counter.message({"role": "user", "content": [{"type": "text", "text": "ok"}, image]})
        assert with_image >= bare + _tokens.IMAGE_TOKENS

    def test_long_blank_runs_do_not_crash(self) -> None:
        """tiktoken's o200k pattern panics on ~1M blanks: counted in slices instead."""
        counter = TokenCounter("o200k_base", TokenCache(10))
        assert counter.text(" " * 1_000_000) > 0
        assert counter.text("\t" * 1_000_000) > 0


# Texts as tokenizers meet them: code, blanks, special tokens' own text, lone surrogates.
_SPECIAL_TEXT = st.sampled_from(["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|im_start|>", "\ud800"])
_TEXTS = st.lists(st.one_of(st.text(max_size=40), _SPECIAL_TEXT, st.sampled_from([" " * 300, "\n\n", "é", "🙂"]))).map(
    "".join
)


class _OrdinaryOnly:
    """A tiktoken core as in tiktoken 0.7 and 0.8: no ``encode_to_tiktoken_buffer``."""

    def __init__(self, core: Any) -> None:
        self.encode_ordinary = core.encode_ordinary


class _Before09:
    def __init__(self, encoding: Any) -> None:
        self._core_bpe = _OrdinaryOnly(encoding._core_bpe)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@settings(max_examples=150, deadline=None)
@given(text=_TEXTS)
def test_counting_gives_encode_ordinarys_count(name: str, text: str) -> None:
    """Counted from tiktoken's rank buffer (or, before tiktoken 0.9, its list), a text has exactly
    the tokens ``encode_ordinary`` gives it: special tokens' text is ordinary text, a lone surrogate
    is replaced as tiktoken replaces it."""
    encoding = get_encoding(name)
    expected = len(encoding.encode_ordinary(text))
    counter = TokenCounter(name, TokenCache(0))
    assert counter._encode(text) == expected
    assert counter.text(text) == expected
    older = TokenCounter(name, TokenCache(0))
    older._count = _counter(_Before09(encoding))
    assert older._encode(text) == expected


# Lines as the plugin joins them, and the characters around a line break that tokenizers treat
# apart: white space of every kind (Unicode's and Python's), "/", punctuation, marks, digits, an
# apostrophe, a lone surrogate, special tokens' text.
_AROUND_BREAKS = st.sampled_from(
    [
        *"aZ09 -/\n\r\t'()[]*#.,:;_",
        *("\u00a0", "\u2028", "\u3000", "\x85", "\x1c", "\u200b", "\u0301", "é", "\u2019", "—", "🙂", "\ud800"),
        *("Ⅻ", "٣", "<|endoftext|>", "\n\n", " \n", "-\n", "/\n", ")\n", "\n- "),
    ]
)
_PARTS = st.lists(
    st.lists(st.one_of(_AROUND_BREAKS, st.text(max_size=8)), max_size=12).map("".join), min_size=1, max_size=6
)


@functools.cache
def _encoding_with(pattern: str, ranks: str) -> Any:
    """A tiktoken encoding of `ranks`' tokens that splits text with `pattern` (made once: it takes a while)."""
    import tiktoken

    base = get_encoding(ranks)
    return tiktoken.Encoding(f"test-{ranks}", pat_str=pattern, mergeable_ranks=base._mergeable_ranks, special_tokens={})


def _ending_lines(parts: list[str], ending: str) -> list[str]:
    """`parts`, each but the last ending a line (the note's: ``"\n"``; a merged turn's: a blank line)."""
    return [part + ending if i < len(parts) - 1 else part for i, part in enumerate(parts)]


@pytest.mark.parametrize("ranks", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("pattern", sorted(_tokens._CLEAN_BREAK_PATTERNS))
@settings(max_examples=300, deadline=None)
@given(parts=_PARTS, ending=st.sampled_from(["\n", "\n\n", " \n", "x\n", "/\n", ".\n", "\r\n"]))
def test_a_text_joined_at_clean_line_breaks_has_its_parts_tokens(
    pattern: str, ranks: str, parts: list[str], ending: str
) -> None:
    """Under each pattern `compose` trusts, a text whose every join is a clean line break (the line
    ends with a line break, the next starts with neither white space nor "/") has exactly the sum
    of its parts' tokens, whatever else the parts hold."""
    counter = TokenCounter("test", TokenCache(0))
    counter._count = _counter(_encoding_with(pattern, ranks))
    parts = _ending_lines(parts, ending)
    if not all(_tokens._breaks_cleanly(parts[i - 1], parts[i]) for i in range(1, len(parts))):
        return
    assert counter._encode("".join(parts)) == sum(counter._encode(part) for part in parts)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@settings(max_examples=300, deadline=None)
@given(parts=_PARTS, ending=st.sampled_from(["\n", "\n\n", " \n", "/\n", ""]), padding=st.integers(0, 300))
def test_a_composed_text_counts_as_tokenized(name: str, parts: list[str], ending: str, padding: int) -> None:
    """`compose` gives the joined text, and counting that text afterwards (a cache hit where its
    breaks are clean) gives what tokenizing it gives — clean breaks or not."""
    parts = _ending_lines([*parts[:-1], parts[-1] + "x" * padding], ending)  # (long enough to be cached)
    cache = TokenCache(10_000)
    counter = TokenCounter(name, cache)
    text = counter.compose(parts)
    assert text == "".join(parts)
    assert counter.text(text) == len(get_encoding(name).encode_ordinary(text))


def test_compose_caches_only_what_it_can_count_from_the_parts() -> None:
    """A clean join is put in the cache (counting the text then tokenizes nothing); a join before
    white space or "/", or one that ends no line, is not; nor is a text too short to be cached."""
    line = "- Read(src/app.py) -> 120 lines" + "." * 260
    for parts, cached in (
        (["[header]\n", f"{line}\n", f"{line}]"], True),
        (["[header]\n", f" {line}\n", f"{line}]"], False),
        (["[header]\n", f"/{line}\n", f"{line}]"], False),
        (["[header]", f"{line}\n", f"{line}]"], False),
        (["[header]\n", "- a]"], False),
    ):
        counter = TokenCounter("o200k_base", TokenCache(10_000))
        text = counter.compose(parts)
        encoded = _spied(counter)
        assert counter.text(text) == len(get_encoding("o200k_base").encode_ordinary(text))
        assert (text not in encoded) is cached, parts
    off = TokenCounter("o200k_base", TokenCache(0))  # a cache that holds nothing: no part counted in vain
    encoded = _spied(off)
    off.compose(["[header]\n", f"{line}\n", f"{line}]"])
    assert not encoded


def _spied(counter: TokenCounter) -> list[str]:
    """The texts `counter` tokenizes from now on."""
    encoded: list[str] = []
    encode = counter._encode
    counter._encode = lambda text: encoded.append(text) or encode(text)  # type: ignore[method-assign]
    return encoded


def test_the_rank_buffer_is_used_where_tiktoken_has_it() -> None:
    """On a tiktoken that fills a rank buffer the count comes from it: no list of ints is made."""
    encoding = get_encoding("o200k_base")
    if not hasattr(encoding._core_bpe, "encode_to_tiktoken_buffer"):
        pytest.skip("this tiktoken predates 0.9")

    class BufferOnly:
        encode_to_tiktoken_buffer = encoding._core_bpe.encode_to_tiktoken_buffer

        def encode_ordinary(self, text: str) -> list[int]:
            raise AssertionError("a list of tokens was made")

    class Encoding:
        _core_bpe = BufferOnly()

    assert _counter(Encoding())("hello world <|endoftext|>") == len(
        encoding.encode_ordinary("hello world <|endoftext|>")
    )


def _cached(cache: TokenCache) -> dict[int, int]:
    return {**cache._old, **cache._young}


@settings(max_examples=80, deadline=None)
@given(messages=conversations(), repeat=st.booleans())
def test_a_batch_counts_as_message_by_message(messages: list[dict[str, Any]], repeat: bool) -> None:
    """`messages` (what no count is cached for gathered and tokenized in one go) gives each message
    the count `message` gives it, and leaves the same entries in the cache; a second batch, of new
    objects with the same content, is all hits."""
    if repeat:
        messages = messages + [dict(m) for m in messages]  # each text twice in one batch: tokenized once
    one_by_one, together = TokenCache(10_000), TokenCache(10_000)
    expected = [TokenCounter("o200k_base", one_by_one).message(m) for m in messages]
    counter = TokenCounter("o200k_base", together)
    assert counter.messages(messages) == expected
    assert _cached(together) == _cached(one_by_one)
    misses = together.misses
    assert counter.messages([dict(m) for m in messages]) == expected
    assert together.misses == misses


def test_a_batch_tokenizes_each_distinct_text_once() -> None:
    """A text that comes back in the batch (a file read twice) is tokenized once; with no cache at all
    the counts are still those of counting one by one."""
    read = "def handler(event):\n    return event\n" * 40
    messages = [
        {"role": "tool", "tool_call_id": "c1", "content": read},
        {"role": "tool", "tool_call_id": "c2", "content": read},
        {"role": "user", "content": "go on"},
    ]
    counter = TokenCounter("cl100k_base", TokenCache(0))
    counter._encode("")
    seen: list[str] = []
    count = counter._count

    def spy(text: str) -> int:
        seen.append(text)
        return count(text)  # type: ignore[misc]

    counter._count = spy
    assert counter.messages(messages) == [TokenCounter("cl100k_base", TokenCache(0)).message(m) for m in messages]
    assert seen.count(read) == 1


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "message",
    [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "c2ln"},
                {"type": "text", "text": "Reading it."},
                {"type": "image", "source": {}},
                {"type": "message", "content": [{"type": "output_text", "text": "x"}, {"type": "y", "n": 1.5}]},
                "loose",
                7,
            ],
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "Read", "arguments": {"path": "a", "limit": 70}}},
                {"id": "t2", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}},
                {
                    "id": "t3",
                    "type": "function",
                    "function": {"name": None, "arguments": [{"type": "text", "text": "z"}]},
                },
                "not a call",
            ],
            "reasoning_content": [{"type": "x", "v": [True, None, 0]}],
        },
        {"role": "user", "content": [{"type": "text", "text": "go on"}], "name": "ann", "thinking_blocks": "t"},
        {"role": "assistant", "content": {"type": "odd", "value": {"k": {1, 2}}}},  # no JSON: repr'd
        {"role": "assistant", "content": [{"type": "x", "value": _nested(5_000)}]},  # too deep to fingerprint
    ],
)
def test_a_messages_key_material_follows_its_pieces(message: dict[str, Any]) -> None:
    """`TokenCounter.message` keys a message on its pieces without making their JSON: each text
    piece as itself, each structured one as its fingerprint (or, where none holds it, its JSON
    marked apart from any text), with the same fixed tokens as the pieces counted."""
    texts: list[str] = []
    fixed = _tokens._message_pieces(message, texts)
    material: list[Any] = []
    assert _tokens._message_pieces(message, material, _tokens._structured_key) == fixed
    for text, key in zip(texts, material, strict=True):
        assert key == text or not isinstance(key, str) or key == "\x00" + text
    counter = TokenCounter("o200k_base", TokenCache())
    assert counter.message(message) == fixed + sum(counter.text(t) for t in texts) == counter.message(dict(message))


# ---- exact_bytes: the written form the conversation store and the tools' key compare ----------

_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=4)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


def _copy(value: Any) -> Any:
    """`value` rebuilt object by object: equal, sharing nothing with it."""
    if isinstance(value, dict):
        return {"".join(key): _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return "".join(value) if isinstance(value, str) else value


@settings(max_examples=300)
@given(_JSON, _JSON)
def test_exact_bytes_are_equal_for_the_same_value_only(first: Any, second: Any) -> None:
    """Equal bytes for the same JSON value, whichever objects hold it (`fingerprint` tells values
    apart with their types and key order: ``1``, ``1.0`` and ``True`` differ), and only for it."""
    same = _tokens.fingerprint(first) == _tokens.fingerprint(second)
    assert (_tokens.exact_bytes(first) == _tokens.exact_bytes(second)) == same
    assert _tokens.exact_bytes(first) == _tokens.exact_bytes(_copy(first))
    shared = [first, first, {"a": first, "b": first}]  # one object twice: written out whole each time
    assert _tokens.exact_bytes(shared) == _tokens.exact_bytes(_copy(shared))
    assert hash(_tokens.exact_bytes(shared)) == hash(_tokens.exact_bytes(_copy(shared)))


@given(st.lists(_JSON, max_size=6), st.lists(_JSON, max_size=6))
def test_a_lists_first_items_are_the_same_bytes_in_a_longer_list(items: list[Any], more: list[Any]) -> None:
    """Past its first two items, a list's items are written one after another: the bytes of a list
    without its end are where a longer list with the same first items begins (`_conversations`)."""
    short = bytes(_tokens.exact_bytes([None, None, *items]))
    assert bytes(_tokens.exact_bytes([None, None, *items, *more])).startswith(short[:-2])


@pytest.mark.parametrize("value", [{1, 2}, object(), type, len, type("D", (dict,), {})(), [1.5j]])
def test_exact_bytes_refuse_what_json_cannot_hold(value: object) -> None:
    """A value JSON cannot hold is refused, never pickled by its class (whose pickling could be
    anything)."""
    with pytest.raises(ValueError, match="not a JSON value"):
        _tokens.exact_bytes([{"k": value}])


def test_exact_bytes_refuse_a_cycle_and_nesting_too_deep() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError):
        _tokens.exact_bytes(cycle)
    with pytest.raises(RecursionError):
        _tokens.exact_bytes(_nested(100_000))


def test_tools_are_keyed_by_their_exact_value() -> None:
    """The tools' count is cached under their exact value: ``1`` and ``1.0`` apart, the same tools
    parsed anew found again, and tools JSON cannot hold (an SDK object) counted all the same."""
    cache = TokenCache()
    counter = TokenCounter("o200k_base", cache)
    tool = {"type": "function", "function": {"name": "Read", "parameters": {"type": "object", "maxItems": 1}}}
    retyped = {**tool, "function": {**tool["function"], "parameters": {"type": "object", "maxItems": 1.0}}}
    assert counter.tools([tool]) == counter.text(_tokens._json([tool])) + 8
    assert counter.tools([retyped]) == counter.text(_tokens._json([retyped])) + 8 != counter.tools([tool])
    size = len(cache)
    assert counter.tools([_copy(tool)]) == counter.tools([tool]) and len(cache) == size
    odd = {**tool, "extra": {1, 2}}
    assert counter.tools([odd]) == counter.text(_tokens._json([odd])) + 8
