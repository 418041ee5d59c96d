"""Lexical normalisation shared by indexing and querying.

Both sides must go through the very same function, otherwise BM25 silently
stops matching; hence one module-level entry point and no options.

Chinese and Japanese are written without spaces, so a whole clause would be
one "word"; runs of Han, Hiragana, Katakana and Hangul become overlapping
character bigrams instead (a lone character stays a unigram), as Lucene's
CJKAnalyzer does: no dictionary, and a query phrased differently from the
stored sentence still shares most of its bigrams with it.
"""

from __future__ import annotations

import re
import sys
import unicodedata

import Stemmer

__all__ = ["tokenize", "STOP_WORDS", "is_cjk_token", "stem_cache_info"]

# Apostrophes are deleted rather than split on, so "don't" -> "dont" stays one
# token instead of leaving a stray "t".
_APOSTROPHES = re.compile(r"['\u2019\u2018`]")
# \W covers punctuation in every script; "_" is a word char for re, so it is
# split explicitly (snake_case identifiers become their parts).
_SPLIT = re.compile(r"[\W_]+")
# Han (with the ideographic iteration/number marks and the supplementary planes),
# Hiragana, Katakana (and its half-width forms), Hangul jamo and syllables.
_CJK_CHARS = (
    "\u1100-\u11ff\u3005-\u3007\u3021-\u3029\u3038-\u303b\u3041-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U000323af"
)
_CJK = re.compile(f"[{_CJK_CHARS}]")
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
# Full-width Latin, digits and punctuation, and half-width katakana, are folded
# to their usual forms (Lucene's CJKWidthFilter), so "ＧＰＴ４" is "gpt4" and
# "ｶﾞ" is "ガ". Only this block: NFKC everywhere would also rewrite other
# non-ASCII text (ligatures, superscripts) that tokenizes as it always has.
_WIDE = re.compile("[\uff01-\uffef]+")
# One scan answers "anything to fold or bigram?" for the common non-ASCII text
# (curly quotes, dashes, emoji, accents); two separate scans cost 2.5x as much.
_NEEDS_WORK = re.compile(f"[{_CJK_CHARS}\uff01-\uffef]")

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because
    been before being below between both but by can could did do does doing
    down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just let me more
    most my myself of off on once only or other ought our ours ourselves out
    over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would
    you your yours yourself yourselves also might must shall im ive
    youre youve youd youll hes shes theyre theyve theyd theyll weve
    whats whos thats theres heres lets s t d ll m o re ve y via
    per etc yet ever even much many within without upon onto whether either
    neither now anymore currently nowadays still
    """.split()
)
# Negations are deliberately NOT stop words: "likes tea" vs "doesn't like tea"
# is exactly the distinction a memory store must not blur. Contractions that
# collide with real words once the apostrophe is gone ("id", "ill", "well",
# "wed") and "may"/"us" (month, country) are kept for the same reason.
# "now", "anymore", "currently", "nowadays" and "still" are stop words: they
# say a statement holds at some moment, not what it is about, and a memory store
# is full of such statements ("How much is the ads budget now?" found "Omar
# owns it now" by "now" alone). Their sense is not lost: the router and the
# conflict rules read them from the raw text. "today", "yesterday", "tomorrow"
# and "tonight" are kept: they name a day (resolved at write time into the
# stored date words, and read from the query by the date focus), and on LoCoMo
# dropping them cost a seed (92.2% -> 92.1%) for no gain.

# Snowball leaves some nouns and their verbs apart where English changes the stem ("decision" ->
# "decis", "decide" -> "decid"): "What did we decide last week?" met no "Decision: we drop
# LaunchDarkly" by words. These stems are read as their verb's. Only families that keep one sense
# in a team's talk: not "provision" (servers) / "provide", "extension" / "extend", "division" /
# "divide", "response" (also "responsible") / "respond".
_STEM_FAMILY = {
    "decis": "decid", "conclus": "conclud", "inclus": "includ", "exclus": "exclud", "permiss": "permit",
    "submiss": "submit", "omiss": "omit", "expans": "expand", "descript": "describ", "subscript": "subscrib",
    "failur": "fail", "choic": "choos", "chose": "choos", "payment": "pay", "denial": "deni",
    "comparison": "compar", "explan": "explain",
}

# PyStemmer keeps a cache of its own (10,000 words of any length by default); ours below is the
# one that is bounded, so its own is off.
_STEMMER = Stemmer.Stemmer("english", 0)
# Bounded memo: vocabularies are Zipfian, so a plain dict hit is far cheaper than a C call per
# token; cleared wholesale when full. Bounded in bytes as well as entries: only words of at most
# _STEM_CACHE_MAX_WORD characters are kept (ids, hashes and base64 runs are rarely seen twice, and
# a query may hold a 4,000-character one), and a stem equal to its word shares the word's object.
# Full, it holds at most ~11 MiB of ASCII words (~22 MiB were every word 4-byte characters); the
# old 200,000 entries of any length held 32 MiB of ordinary words and had no bound in bytes. A
# vocabulary of 12,000 words (the stdlib's docstrings) fits in it four times over
# (tests/engine/test_stem_cache.py; bench/read_rss.py --diag shows a server's memo).
_STEM_CACHE: dict[str, str] = {}
_STEM_CACHE_MAX = 50_000
_STEM_CACHE_MAX_WORD = 32
# The memo's string bytes, counted as entries go in, so that its size costs nothing to read (the
# engine cache's budget asks for it): walking 50,000 entries took ~40 ms with the GIL held. Threads
# filling at once may miscount a little; an entry count that disagrees with the dict's makes
# stem_cache_info walk it once and start again from the truth.
_STEM_COUNT = {"bytes": 0, "entries": 0}


def _stem_all(words: list[str]) -> list[str]:
    cache = _STEM_CACHE
    try:  # the common case, every word known: one pass
        return [cache[w] for w in words]
    except KeyError:
        pass
    # Each word is read from the memo once, and the answer is made before the memo changes: the
    # clear below (or another request's, on another thread) drops words that were hits; the old
    # code read them back after clearing, and the call that filled the memo raised KeyError.
    got = [cache.get(w) for w in words]
    uniq = list(dict.fromkeys(w for w, s in zip(words, got, strict=True) if s is None))
    family = _STEM_FAMILY
    stems = {w: family.get(s, s) for w, s in zip(uniq, _STEMMER.stemWords(uniq), strict=True)}
    out = [stems[w] if s is None else s for w, s in zip(words, got, strict=True)]
    keep = [w for w in uniq if len(w) <= _STEM_CACHE_MAX_WORD]
    count = _STEM_COUNT
    if len(cache) + len(keep) > _STEM_CACHE_MAX:
        cache.clear()
        count["bytes"] = count["entries"] = 0
    for w in keep[:_STEM_CACHE_MAX]:
        if w in cache:  # another thread put it in meanwhile
            continue
        s = stems[w]
        cache[w] = w if s == w else s
        count["bytes"] += sys.getsizeof(w) + (0 if s == w else sys.getsizeof(s))
        count["entries"] += 1
    return out


def stem_cache_info() -> dict[str, int]:
    """Entries of the stem memo and the bytes its dict and strings hold (a shared string counted
    once): what one process pays for it."""
    count = _STEM_COUNT
    if count["entries"] != len(_STEM_CACHE):  # changed outside _stem_all, or threads miscounted
        seen: set[int] = set()
        nbytes = 0
        items = list(_STEM_CACHE.items())
        for w, s in items:
            for obj in (w, s):
                if id(obj) not in seen:
                    seen.add(id(obj))
                    nbytes += sys.getsizeof(obj)
        count["bytes"], count["entries"] = nbytes, len(items)
    return {"entries": len(_STEM_CACHE), "bytes": sys.getsizeof(_STEM_CACHE) + count["bytes"],
            "max_entries": _STEM_CACHE_MAX, "max_word": _STEM_CACHE_MAX_WORD}


def _fold_width(m: re.Match[str]) -> str:
    return unicodedata.normalize("NFKC", m.group())


def is_cjk_token(token: str) -> bool:
    """Whether ``token`` (an output of ``tokenize``) is a CJK bigram or unigram.

    Tokens never mix CJK and other characters, so the first one decides.
    """
    return bool(token) and _CJK.match(token) is not None


def _tokenize_cjk(low: str) -> list[str]:
    """``tokenize`` of lowercased text holding CJK: other parts of each word take the usual path
    (stop words, stemming), CJK runs become bigrams; order kept."""
    out: list[str] = []
    plain: list[int] = []  # positions in ``out`` still to be stemmed

    def add_plain(w: str) -> None:
        if w and w not in STOP_WORDS:
            plain.append(len(out))
            out.append(w)

    for w in _SPLIT.split(low):
        if not w:
            continue
        pos = 0
        for m in _CJK_RUN.finditer(w):
            add_plain(w[pos:m.start()])
            run = m.group()
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i:i + 2] for i in range(len(run) - 1))
            pos = m.end()
        add_plain(w[pos:])
    if plain:
        for i, s in zip(plain, _stem_all([out[i] for i in plain]), strict=True):
            out[i] = s
    return out


def tokenize(text: str) -> list[str]:
    """Lowercase, split on non-alphanumerics, drop stop words, Snowball-stem;
    CJK runs become overlapping character bigrams (see the module docstring).

    Order and duplicates are kept (BM25 needs term frequencies).
    """
    if not text:
        return []
    low = text.lower()
    # isascii() is O(1) on CPython: English text never pays for the CJK checks.
    if not low.isascii() and _NEEDS_WORK.search(low):
        if _WIDE.search(low):
            low = _WIDE.sub(_fold_width, low)
        if _CJK.search(low):
            return _tokenize_cjk(_APOSTROPHES.sub("", low))
    words = [w for w in _SPLIT.split(_APOSTROPHES.sub("", low)) if w and w not in STOP_WORDS]
    return _stem_all(words) if words else []
