"""Heuristic facts (the no-LLM default): what "I" / "my" stand for, and which sentences are facts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reflection.heuristics import heuristic_fact

MAY8 = datetime(2023, 5, 8, 12, tzinfo=UTC)


@pytest.mark.parametrize("text,expected", [
    # quoted speech is someone else's "my" / "I"
    ('She said "my car is red" and I agreed.', 'She said "my car is red" and Ana agreed.'),
    ('Bob said "I quit" and I laughed.', 'Bob said "I quit" and Ana laughed.'),
    # a decimal, an abbreviation or a title does not end the sentence
    ("I bought 2.5 kg of apples.", "Ana bought 2.5 kg of apples."),
    ("I am U.S. based.", "Ana is U.S. based."),
    # an adverb between "I" and its verb
    ("I really like it.", "Ana really likes it."),
    ("I also have a dog.", "Ana also has a dog."),
    # chat spelling keeps the negation
    ("I dont eat meat.", "Ana doesn't eat meat."),
    # "I" as a numeral or inside a name is not the speaker
    ("I have type I diabetes.", "Ana has type I diabetes."),
    ("I went on I-95 to work.", "Ana went on I-95 to work."),
    ("I work on A.I. models.", "Ana works on A.I. models."),
    ("I went to see World War I sites.", "Ana went to see World War I sites."),
    # interjections and titles are no possessions; an ordinary "my" still is
    ("Oh my God, I got the job!", "Oh my God, Ana got the job."),
    ("I love My Chemical Romance.", "Ana loves My Chemical Romance."),
    ("I love my mom's cooking.", "Ana loves Ana's mom's cooking."),
])
def test_heuristic_fact_rewrites_only_the_speaker(text, expected):
    assert heuristic_fact(text, "Ana", MAY8) == expected


@pytest.mark.parametrize("text", [
    "Should I quit my job",
    "What do I need for the trip",
    "Do I have to work tomorrow",
])
def test_questions_without_a_question_mark_are_no_fact(text):
    assert heuristic_fact(text, "Ana", MAY8) is None


@pytest.mark.parametrize("text,speaker,expected", [
    # a transcript's label naming the speaker is no part of the statement; its spelling names them
    ("Bob: I finished the login page redesign for billing.", "bob",
     "Bob finished the login page redesign for billing."),
    ("Zoe Park: we merged the pull request for billing.", "zoe park",
     "Zoe Park and others merged the pull request for billing."),
    # another label (or another person's) stays as written
    ("Note: I finished the login page redesign for billing.", "bob",
     "Note: bob finished the login page redesign for billing."),
    ("Ana: I finished the login page redesign for billing.", "bob",
     "Ana: bob finished the login page redesign for billing."),
])
def test_a_label_naming_the_speaker_is_not_repeated(text, speaker, expected):
    assert heuristic_fact(text, speaker, None) == expected
