from __future__ import annotations

from memory.engine import STOP_WORDS, tokenize


def test_basic_normalisation() -> None:
    assert tokenize("The Running dogs") == ["run", "dog"]
    assert tokenize("") == []
    assert tokenize("the and of") == []


def test_apostrophes_and_digits() -> None:
    toks = tokenize("Don't deploy v2 on 2024-05-01; Alice's build_id 42")
    assert "dont" in toks
    assert "t" not in toks
    assert {"v2", "2024", "05", "01", "42"} <= set(toks)
    assert "alic" in toks
    assert {"build", "id"} <= set(toks)


def test_negations_kept() -> None:
    assert "not" in tokenize("does not like tea")
    assert "not" not in STOP_WORDS and "no" not in STOP_WORDS


def test_duplicates_kept_for_tf() -> None:
    assert tokenize("cache cache caching") == ["cach", "cach", "cach"]


def test_unicode_words() -> None:
    assert tokenize("Café Zürich") == ["café", "zürich"]
