"""Token counting: tiktoken from LiteLLM's bundled files only, and the bounded count cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_governance import GovernanceConfig, TokenizerUnavailableError, _tokens
from litellm_governance._context_editing import prompt_counter
from litellm_governance._session_compaction import session_note
from litellm_governance._tokens import TokenCache, TokenCounter, encoding_for_model, get_encoding, token_cache

from .builders import examples


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
            cache.put(i.to_bytes(16, "big"), i)
            assert len(cache) <= 100

    def test_recent_entries_survive(self) -> None:
        """An entry read again stays; entries neither read nor new are the ones dropped."""
        cache = TokenCache(10)
        cache.put(b"0", 7)
        for i in range(1, 40):
            assert cache.get(b"0") == 7
            cache.put(str(i).encode(), i)
        assert cache.get(b"1") is None

    def test_zero_size_disables(self) -> None:
        """token_cache_size=0 caches nothing (and still counts right)."""
        cache = TokenCache(0)
        counter = TokenCounter("cl100k_base", cache)
        assert counter.text("hello world " * 100) == counter.text("hello world " * 100) == 201
        assert len(cache) == 0

    def test_one_cache_per_configured_size(self) -> None:
        """Context editing and the compaction note count in the cache of the configured size:
        with ``token_cache_size`` 0 nothing is kept in a default-sized cache behind the operator's back."""
        default = token_cache(GovernanceConfig().token_cache_size)
        default.clear()
        text = "A long tool result, line after line. " * 200
        prompt_counter("anthropic/claude-sonnet-4-5", cache_size=0)([{"role": "user", "content": text}])
        session_note([{"type": "message", "role": "user", "content": text}], "gpt-4o", cache_size=0)
        assert len(default) == 0
        prompt_counter("anthropic/claude-sonnet-4-5", cache_size=1_000)([{"role": "user", "content": text}])
        assert len(token_cache(1_000)) > 0 and len(default) == 0


class TestTokenCounter:
    def test_same_text_one_tokenization(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A long text seen before (a new object with the same content) is counted from the cache."""
        counter = TokenCounter("cl100k_base", TokenCache(1_000))
        text = "Fix the failing test in tests/test_api.py, please. " * 20
        first = counter.text(text)
        monkeypatch.setattr(counter, "_encode", lambda _: pytest.fail("tokenized again"))
        assert counter.text("".join(list(text))) == first

    def test_the_cache_tells_texts_apart_by_their_hash(self) -> None:
        """Two long texts differing in one character in the middle are counted apart."""
        counter = TokenCounter("cl100k_base", TokenCache(1_000))
        base = "word " * 200
        other = base[:500] + "x" + base[501:]
        assert counter.text(base) == len(get_encoding("cl100k_base").encode_ordinary(base))
        assert counter.text(other) == len(get_encoding("cl100k_base").encode_ordinary(other))
        assert counter.text(other) != counter.text(base)

    def test_a_message_seen_before_is_not_tokenized_again(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The same message in a new object is counted from the cache (by the hash of its pieces);
        the same texts split differently between parts are counted apart."""
        cache = TokenCache(1_000)
        counter = TokenCounter("cl100k_base", cache)
        message = {"role": "user", "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "cd ef"}]}
        first = counter.message(message)
        with monkeypatch.context() as patched:
            patched.setattr(counter, "_encode", lambda _: pytest.fail("tokenized again"))
            assert counter.message(json.loads(json.dumps(message))) == first
        split = {"role": "user", "content": [{"type": "text", "text": "abc"}, {"type": "text", "text": "d ef"}]}
        expected = counter.message({"role": "user", "content": ""}) + sum(
            len(get_encoding("cl100k_base").encode_ordinary(text)) for text in ("abc", "d ef")
        )
        assert counter.message(split) == expected

    def test_the_encodings_keep_their_counts_apart(self) -> None:
        """The same text in one shared cache keeps a count per encoding."""
        cache = TokenCache(1_000)
        text = "🙂 emoji and accents é è ê " * 40
        cl100k, o200k = TokenCounter("cl100k_base", cache), TokenCounter("o200k_base", cache)
        assert cl100k.text(text) == len(get_encoding("cl100k_base").encode_ordinary(text))
        assert o200k.text(text) == len(get_encoding("o200k_base").encode_ordinary(text))

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

    def test_tool_schemas_count_by_their_content(self) -> None:
        """Changed schemas are counted anew; the same schemas in new objects give the same count."""
        counter = TokenCounter("cl100k_base", TokenCache(1_000))
        tools = [{"type": "function", "function": {"name": "grep", "description": "Search " * 80}}]
        first = counter.tools(tools)
        assert counter.tools([dict(tools[0])]) == first
        longer = [{"type": "function", "function": {"name": "grep", "description": "Search files " * 80}}]
        assert counter.tools(longer) > first
        assert counter.tools(None) == counter.tools([]) == 0

    def test_a_value_that_holds_itself_is_counted(self) -> None:
        """A Python caller's block that holds itself (json cannot encode it) is counted, each
        container once, instead of being walked forever."""
        counter = TokenCounter("cl100k_base", TokenCache(10))
        block: dict[str, object] = {"type": "x", "note": "hello"}
        block["self"] = block
        assert counter.message({"role": "user", "content": [block]}) > counter.message({"role": "user", "content": ""})

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


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@settings(max_examples=examples(150), deadline=None)
@given(text=_TEXTS)
def test_counting_gives_encode_ordinarys_count(name: str, text: str) -> None:
    """A text has exactly the tokens ``encode_ordinary`` gives it, cached or not: special tokens'
    text is ordinary text, a lone surrogate is replaced as tiktoken replaces it."""
    expected = len(get_encoding(name).encode_ordinary(text))
    counter = TokenCounter(name, TokenCache(1_000))
    assert counter.text(text) == expected
    assert counter.text(text) == expected  # (from the cache, for a long one)
