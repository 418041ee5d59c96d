"""A 20,000-character turn naming a day thousands of times ("Monday " * 2850) took 30 s of a write
request: each mention searched for and re-read its whole sentence, and each was compared with every
mention kept. Now a text's first MAX_TIME_MENTIONS mentions are kept, each sentence read once;
``bench/silks_cost.py`` times such texts beside an ordinary one."""

from __future__ import annotations

from datetime import date

from memory.engine.text import MAX_TIME_MENTIONS, resolve_times

REF = date(2026, 11, 20)


def test_a_text_keeps_its_first_mentions_only():
    out = resolve_times("We met on Monday. " * (MAX_TIME_MENTIONS + 40), REF)
    assert len(out) == MAX_TIME_MENTIONS
    assert all(m.start == date(2026, 11, 16) for m in out)


def test_each_mention_reads_the_future_cue_of_its_own_sentence():
    text = ("We shipped it on Friday. " * 30) + "We will demo it on Friday. " + ("It broke on Friday. " * 30)
    out = resolve_times(text, REF)
    assert len(out) == 61
    assert {m.start for i, m in enumerate(out) if i != 30} == {date(2026, 11, 13)}  # the Friday before the session
    assert out[30].start == date(2026, 11, 27)  # "will": the Friday to come


def test_overlapping_patterns_still_keep_the_longest():
    out = resolve_times("On 7 May 2023 and in May 2023 we met; " * 3, REF)
    assert [m.surface for m in out] == ["7 May 2023", "in May 2023"] * 3
