"""The conflict rules on long adversarial texts: a 20,000-character turn of one letter, or of one
change verb repeated, kept a worker for 40-60 s per pair (an unanchored name pattern backtracked
from every start; the clause rules re-read the whole text per clause), and every organisation's
conflict checks queued behind it. The rules now read a text's first ``MAX_RULE_CHARS`` characters
(whole sentences), and their patterns are anchored and bounded."""

from __future__ import annotations

import pytest

from memory.engine.text import extract_entities
from reflection.heuristics import MAX_RULE_CHARS, _rule_text, conflict_reason, only_counts_differ

STATEMENT = "The ledger database is PostgreSQL 15."


def _reason(a: str, b: str) -> str | None:
    return conflict_reason(a, b, extract_entities(a), extract_entities(b))


def test_the_rules_read_whole_sentences_up_to_the_cap():
    text = "We moved the Q4 freeze to December 7. " * 100
    cut = _rule_text(text)
    assert len(cut) <= MAX_RULE_CHARS and cut.endswith("December 7.") and text.startswith(cut)
    assert _rule_text(STATEMENT) == STATEMENT
    one_word = "a" * 5000  # no sentence end: cut at the cap
    assert _rule_text(one_word) == "a" * MAX_RULE_CHARS


def test_a_statement_in_a_long_text_is_still_read():
    """A correction at the start of a long note still contradicts the statement it corrects."""
    long = "We dropped PostgreSQL for the ledger and are going with CockroachDB instead. " + "Notes follow. " * 1500
    assert _reason(STATEMENT, long) is not None and _reason(long, STATEMENT) is not None


@pytest.mark.parametrize("unit", ["a", "move ", "took over ", "from Kafka ", "now ",
                                  "We moved the Q4 freeze from December 14 to December 7. "])
def test_long_adversarial_texts_are_read_as_their_first_statements(unit, monkeypatch):
    import reflection.heuristics as rules

    text = (unit * (20000 // len(unit) + 1))[:20000]
    head = _rule_text(text)
    # the answer is the one for the text's head: the rest cannot change it, whatever it costs
    assert _reason(text, STATEMENT) == _reason(head, STATEMENT)
    assert only_counts_differ(text, STATEMENT) == only_counts_differ(head, STATEMENT)
    # and no rule reads more than the head: every statement the rules parse is within the cap
    read: list[int] = []
    parse = rules.statement
    monkeypatch.setattr(rules, "statement", lambda t, *a, **k: read.append(len(t)) or parse(t, *a, **k))
    _reason(text, STATEMENT)
    assert read and max(read) <= MAX_RULE_CHARS


def test_a_clause_of_many_moves_is_parsed_once(monkeypatch):
    """A text with no clause break is one clause however many moves it holds: it was parsed again for
    each of them (64 parses of the same 1,000 characters, 100+ ms a pair, seconds for a write's
    candidates)."""
    from collections import Counter

    import reflection.heuristics as rules

    unit = "moved the standup to Friday and "
    text = (unit * (20000 // len(unit) + 1))[:20000]
    assert len(rules._clause_spans(_rule_text(text))) == 1
    before = _reason(text, text)
    parsed: list[str] = []
    dated = rules._dated
    monkeypatch.setattr(rules, "_dated", lambda clause: parsed.append(clause) or dated(clause))
    assert _reason(text, text) == before
    # each direction reads a clause at most twice: as the moving side's and as the other's dated one
    assert parsed and max(Counter(parsed).values()) <= 4, Counter(parsed).most_common(1)
