"""The tokenizer's stem memo is process-wide and fed by every query and every indexed text: it must
stay bounded in bytes (not only in entries), and filling it must not lose the answer of the call
that filled it."""

from __future__ import annotations

import importlib
import random
import sys
import threading
import tracemalloc

import pytest
import Stemmer

tok = importlib.import_module("memory.engine.tokenize")  # the module (the package exports the function)

_REF = Stemmer.Stemmer("english", 0)  # no cache of its own: it must not hold what is measured
MiB = 1024 * 1024


def _expected(words: list[str]) -> list[str]:
    return [_REF.stemWord(w) for w in words]


def _memo_bytes() -> int:
    """Bytes the memo's dict and strings hold, each string object once (measured here, not by the
    module's own accounting)."""
    cache = tok._STEM_CACHE
    seen: set[int] = set()
    n = sys.getsizeof(cache)
    for k, v in list(cache.items()):
        for o in (k, v):
            if id(o) not in seen:
                seen.add(id(o))
                n += sys.getsizeof(o)
    return n


@pytest.fixture(autouse=True)
def _fresh_memo():
    saved = dict(tok._STEM_CACHE)
    tok._STEM_CACHE.clear()
    yield
    tok._STEM_CACHE.clear()
    tok._STEM_CACHE.update(saved)


def test_the_call_that_fills_the_memo_keeps_its_hits(monkeypatch):
    """Words known to the memo and new words in one text, when the new ones overflow it: the memo is
    cleared, and the known words' stems must still be in the answer (the old code looked them up
    again after the clear and raised KeyError: a 500 for the request that filled the memo)."""
    monkeypatch.setattr(tok, "_STEM_CACHE_MAX", 10)
    known = ["running", "jumps", "walked", "cities", "happily", "organisations"]
    assert tok.tokenize(" ".join(known)) == _expected(known)
    new = ["flying", "studies", "quickly", "meetings", "migrations", "deploying"]
    words = known[:3] + new + known[3:]
    assert tok.tokenize(" ".join(words)) == _expected(words)
    assert len(tok._STEM_CACHE) <= 10


def test_memo_stays_bounded_in_bytes_when_full():
    """Fed 199,000 unique 32-character words (what a stream of ids in queries gives), the memo never
    holds more than ~11 MiB; the old one (200,000 entries) held ~38 MiB of them by then."""
    rng = random.Random(5)
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    peak = 0
    for i in range(199):
        words = ["".join(rng.choices(alphabet, k=32)) for _ in range(1000)]
        assert tok.tokenize(" ".join(words)) == _expected(words)
        if i % 10 == 9 or len(tok._STEM_CACHE) > tok._STEM_CACHE_MAX - 1000:
            peak = max(peak, _memo_bytes())
        assert len(tok._STEM_CACHE) <= tok._STEM_CACHE_MAX
    assert peak < 11 * MiB, f"{peak / MiB:.1f} MiB in the stem memo"
    info = tok.stem_cache_info()
    assert info["entries"] == len(tok._STEM_CACHE)
    assert abs(info["bytes"] - _memo_bytes()) < 1024


def test_long_unique_words_are_stemmed_but_not_kept():
    """Queries may hold a 4,000-character token each (a pasted hash or base64 run). 1,000 of them
    must not stay in the process: neither in our memo nor in PyStemmer's own cache (the old memo
    kept every one, ~8 KiB each, and PyStemmer kept the last 10,000 misses of any length)."""
    rng = random.Random(9)
    tok.tokenize("warm up the tokenizer and the stemmer")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            word = "".join(rng.choices("abcdef0123456789", k=4000))
            assert tok.tokenize(f"deploy {word}") == ["deploy", _REF.stemWord(word)]
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1 * MiB, f"{grown / MiB:.1f} MiB kept after 1,000 long unique words"


def test_equal_stems_share_the_word_object():
    """A word that stems to itself ("zq81f3", "deploy") costs one string in the memo, not two."""
    tok.tokenize("zq81f3 deploy running")
    for w in ("zq81f3", "deploy"):
        assert tok._STEM_CACHE[w] is next(k for k in tok._STEM_CACHE if k == w)
    assert tok._STEM_CACHE["running"] == "run"


def test_concurrent_callers_while_the_memo_clears(monkeypatch):
    """Request threads tokenize at once while the memo fills and clears under them: every answer is
    right and none raises (a hit read twice could vanish in between on the old code)."""
    monkeypatch.setattr(tok, "_STEM_CACHE_MAX", 40)
    common = ["running", "meetings", "deployed", "cities", "reviewing", "owners", "approved", "budgets"]
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for i in range(1500):
                words = rng.sample(common, 4) + [f"w{seed}x{i}x{j}ing" for j in range(rng.randint(0, 6))]
                rng.shuffle(words)
                got = tok.tokenize(" ".join(words))
                if got != _expected(words):
                    raise AssertionError(f"{words} -> {got}")
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
