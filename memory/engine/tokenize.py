"""Lexical normalisation shared by indexing and querying.

Both sides must go through the very same function, otherwise BM25 silently
stops matching; hence one module-level entry point and no options.
"""

from __future__ import annotations

import re

import Stemmer

__all__ = ["tokenize", "STOP_WORDS"]

# Apostrophes are deleted rather than split on, so "don't" -> "dont" stays one
# token instead of leaving a stray "t".
_APOSTROPHES = re.compile(r"['\u2019\u2018`]")
# \W covers punctuation in every script; "_" is a word char for re, so it is
# split explicitly (snake_case identifiers become their parts).
_SPLIT = re.compile(r"[\W_]+")

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
    neither
    """.split()
)
# Negations are deliberately NOT stop words: "likes tea" vs "doesn't like tea"
# is exactly the distinction a memory store must not blur. Contractions that
# collide with real words once the apostrophe is gone ("id", "ill", "well",
# "wed") and "may"/"us" (month, country) are kept for the same reason.

_STEMMER = Stemmer.Stemmer("english")
# Bounded memo: vocabularies are Zipfian, so a plain dict hit is far cheaper
# than a C call per token; cleared wholesale when full to bound memory.
_STEM_CACHE: dict[str, str] = {}
_STEM_CACHE_MAX = 200_000


def _stem_all(words: list[str]) -> list[str]:
    cache = _STEM_CACHE
    missing = [w for w in words if w not in cache]
    if missing:
        if len(cache) + len(missing) > _STEM_CACHE_MAX:
            cache.clear()
        uniq = list(dict.fromkeys(missing))
        for w, s in zip(uniq, _STEMMER.stemWords(uniq), strict=True):
            cache[w] = s
    return [cache[w] for w in words]


def tokenize(text: str) -> list[str]:
    """Lowercase, split on non-alphanumerics, drop stop words, Snowball-stem.

    Order and duplicates are kept (BM25 needs term frequencies).
    """
    if not text:
        return []
    words = [w for w in _SPLIT.split(_APOSTROPHES.sub("", text.lower())) if w and w not in STOP_WORDS]
    return _stem_all(words) if words else []
