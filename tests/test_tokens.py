"""Token counting: tiktoken from LiteLLM's bundled files only, and the bounded count cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from litellm_governance import TokenizerUnavailableError, _tokens
from litellm_governance._tokens import TokenCache, TokenCounter, encoding_for_model, get_encoding


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
