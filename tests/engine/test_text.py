from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from memory.engine.text import (
    Emotion,
    TimeMention,
    aliases,
    canonical_entity,
    date_terms,
    emotion,
    extract_entities,
    has_time_expression,
    key_terms,
    parse_datetime,
    resolve_times,
    session_date_terms,
)

# Monday 8 May 2023, early afternoon.
REF = datetime(2023, 5, 8, 13, 56)


# --------------------------------------------------------------------------- parse_datetime


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37)),
        ("12:05 am on 1 January, 2024", datetime(2024, 1, 1, 0, 5)),
        ("12:30 pm on 3 Sept, 2022", datetime(2022, 9, 3, 12, 30)),
        ("8 May 2023", datetime(2023, 5, 8)),
        ("May 8, 2023", datetime(2023, 5, 8)),
        ("May 8th 2023 at 18:45", datetime(2023, 5, 8, 18, 45)),
        ("2023-05-08", datetime(2023, 5, 8)),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56)),
    ],
)
def test_parse_datetime_forms(raw: str, expected: datetime) -> None:
    assert parse_datetime(raw) == expected


def test_parse_datetime_iso_keeps_offset() -> None:
    got = parse_datetime("2023-05-08T13:56:00Z")
    assert got == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.mark.parametrize("raw", ["", None, "not a date", "31 February 2023", "sometime in spring"])
def test_parse_datetime_rejects(raw: str | None) -> None:
    assert parse_datetime(raw) is None


# --------------------------------------------------------------------------- entities


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hey Mel! Good to see you!", ["Mel"]),
        ("I went to a LGBTQ support group yesterday.", ["LGBTQ"]),
        ("We flew to New York with Jordan's cousin.", ["New York", "Jordan"]),
        ("Thanks Priya, that means a lot. Wow, I love it!", ["Priya"]),
        ("She studied at the University of Michigan in March.", ["University of Michigan"]),
        ("Painting helps me relax. Sam agrees, and Sam paints too.", ["Sam"]),
        ("On Friday in May I saw Ana and Luis at the Louvre.", ["Ana", "Luis", "Louvre"]),
        ("I'm so tired. I'd rather stay in.", []),
    ],
)
def test_extract_entities(text: str, expected: list[str]) -> None:
    assert extract_entities(text) == expected


def test_extract_entities_deduplicates_case_insensitively_in_order() -> None:
    text = "Marco called. Then Ines and MARCO went out; Ines drove."
    assert extract_entities(text) == ["Marco", "Ines"]


def test_extract_entities_sentence_initial_common_word_is_skipped() -> None:
    assert extract_entities("Finished the race! Usually I walk.") == []
    # ...but a sentence-initial name is kept.
    assert extract_entities("Beatriz finished the race.") == ["Beatriz"]


def test_key_terms_ranks_by_frequency_then_position() -> None:
    text = "The pottery class was fun. Pottery is relaxing and the class teacher is kind, Ravi said."
    terms = key_terms(text, 3)
    assert terms == ["pottery", "class", "fun"]
    assert "ravi" not in key_terms(text, 20)  # entities are indexed separately
    assert "the" not in key_terms(text, 20)


def test_key_terms_deterministic_and_bounded() -> None:
    text = "hiking camping hiking kayaking swimming camping hiking"
    assert key_terms(text, 2) == ["hiking", "camping"]
    assert key_terms(text, 0) == []
    assert key_terms(text, 10) == key_terms(text, 10)


def test_canonical_entity_prefix_match() -> None:
    known = ["Caroline", "Melanie"]
    assert canonical_entity("Mel", known) == "Melanie"
    assert canonical_entity("caroline", known) == "Caroline"
    assert canonical_entity("Jo", known) == "Jo"  # too short to trust
    assert canonical_entity("Bob", known) == "Bob"


def test_canonical_entity_ambiguous_prefix_is_left_alone() -> None:
    assert canonical_entity("Mel", ["Melanie", "Melissa"]) == "Mel"


def test_aliases_dedupes_after_canonicalising() -> None:
    assert aliases(["Mel", "Melanie", "Caroline"], ["Caroline", "Melanie"]) == ["Melanie", "Caroline"]


# --------------------------------------------------------------------------- emotion


def test_emotion_positive_and_negative() -> None:
    assert emotion("I am happy").valence > 0.3
    assert emotion("This is terrible and I feel awful").valence < -0.5


def test_emotion_neutral() -> None:
    assert emotion("The meeting is at three.") == Emotion(valence=0.0, intensity=0.0)


def test_emotion_negation_flips_and_damps() -> None:
    happy = emotion("I am happy").valence
    not_happy = emotion("I am not happy").valence
    assert not_happy < 0
    assert abs(not_happy) < abs(happy)
    assert emotion("It wasn't bad at all").valence > 0


def test_emotion_negation_does_not_cross_clauses() -> None:
    assert emotion("Not today, but I am happy").valence > 0


def test_emotion_intensifiers_and_exclamations_raise_strength() -> None:
    plain = emotion("I am happy")
    boosted = emotion("I am so happy")
    shouted = emotion("I am so happy!!")
    assert boosted.valence > plain.valence
    assert shouted.intensity > boosted.intensity > plain.intensity
    assert emotion("I am really sad").valence < emotion("I am sad").valence


def test_emotion_bounds() -> None:
    e = emotion("SO SO happy!!! amazing wonderful fantastic love love love :) " * 5)
    assert -1.0 <= e.valence <= 1.0
    assert 0.0 <= e.intensity <= 1.0
    assert e.valence > 0.9


# --------------------------------------------------------------------------- resolve_times


def d(y: int, m: int, day: int) -> date:
    return date(y, m, day)


@pytest.mark.parametrize(
    ("text", "start", "end", "gran"),
    [
        ("I went yesterday", d(2023, 5, 7), d(2023, 5, 7), "day"),
        ("I'm going today", d(2023, 5, 8), d(2023, 5, 8), "day"),
        ("We eat out tonight", d(2023, 5, 8), d(2023, 5, 8), "day"),
        ("See you tomorrow", d(2023, 5, 9), d(2023, 5, 9), "day"),
        ("We danced last night", d(2023, 5, 7), d(2023, 5, 7), "day"),
        ("the day before yesterday", d(2023, 5, 6), d(2023, 5, 6), "day"),
        ("I started last week", d(2023, 5, 1), d(2023, 5, 7), "week"),
        ("busy this week", d(2023, 5, 8), d(2023, 5, 14), "week"),
        ("I'll call next week", d(2023, 5, 15), d(2023, 5, 21), "week"),
        ("We hiked last weekend", d(2023, 5, 6), d(2023, 5, 7), "week"),
        ("We'll hike this weekend", d(2023, 5, 13), d(2023, 5, 14), "week"),
        ("I ran last Saturday", d(2023, 5, 6), d(2023, 5, 6), "day"),
        ("I ran on Saturday", d(2023, 5, 6), d(2023, 5, 6), "day"),
        ("I will run on Saturday", d(2023, 5, 13), d(2023, 5, 13), "day"),
        ("It was last Monday", d(2023, 5, 1), d(2023, 5, 1), "day"),
        ("see you next Friday", d(2023, 5, 12), d(2023, 5, 12), "day"),
        ("we met last fri", d(2023, 5, 5), d(2023, 5, 5), "day"),
        ("I moved last month", d(2023, 4, 1), d(2023, 4, 30), "month"),
        ("I move next month", d(2023, 6, 1), d(2023, 6, 30), "month"),
        ("so much this month", d(2023, 5, 1), d(2023, 5, 31), "month"),
        ("I graduated last year", d(2022, 1, 1), d(2022, 12, 31), "year"),
        ("I graduate next year", d(2024, 1, 1), d(2024, 12, 31), "year"),
        ("It happened last May", d(2022, 5, 1), d(2022, 5, 31), "month"),
        ("It happened last March", d(2023, 3, 1), d(2023, 3, 31), "month"),
        ("I visited in April", d(2023, 4, 1), d(2023, 4, 30), "month"),
        ("I visited in July", d(2022, 7, 1), d(2022, 7, 31), "month"),
        ("I'm going to visit in July", d(2023, 7, 1), d(2023, 7, 31), "month"),
        ("I quit two weeks ago", d(2023, 4, 24), d(2023, 4, 30), "week"),
        ("I quit 3 days ago", d(2023, 5, 5), d(2023, 5, 5), "day"),
        ("a couple of days ago", d(2023, 5, 6), d(2023, 5, 6), "day"),
        ("I adopted him five years ago", d(2018, 1, 1), d(2018, 12, 31), "year"),
        ("a month ago", d(2023, 4, 1), d(2023, 4, 30), "month"),
        ("the week before", d(2023, 5, 1), d(2023, 5, 7), "week"),
        ("I was there in 2022", d(2022, 1, 1), d(2022, 12, 31), "year"),
        ("It was on 7 May 2023", d(2023, 5, 7), d(2023, 5, 7), "day"),
        ("It was on the 3rd of April, 2021", d(2021, 4, 3), d(2021, 4, 3), "day"),
        ("It was on May 7", d(2023, 5, 7), d(2023, 5, 7), "day"),
        ("Party on December 24", d(2022, 12, 24), d(2022, 12, 24), "day"),
        ("It was in May 2023", d(2023, 5, 1), d(2023, 5, 31), "month"),
        ("it was 2023-04-30", d(2023, 4, 30), d(2023, 4, 30), "day"),
        ("we went camping last summer", d(2022, 6, 1), d(2022, 8, 31), "month"),
        ("we'll go camping this summer", d(2023, 6, 1), d(2023, 8, 31), "month"),
    ],
)
def test_resolve_times_single(text: str, start: date, end: date, gran: str) -> None:
    got = resolve_times(text, REF)
    assert len(got) == 1, got
    assert (got[0].start, got[0].end, got[0].granularity) == (start, end, gran)
    assert got[0].surface in text


def test_resolve_times_a_few_days_ago_is_approximate_week() -> None:
    (m,) = resolve_times("I saw her a few days ago", REF)
    assert m.granularity == "week"
    assert m.approximate
    assert m.start <= date(2023, 5, 5) <= m.end
    assert m.start.weekday() == 0


def test_resolve_times_few_weeks_ago_widens_to_month() -> None:
    (m,) = resolve_times("a few weeks ago", REF)
    assert (m.start, m.end, m.granularity, m.approximate) == (d(2023, 4, 1), d(2023, 4, 30), "month", True)


def test_resolve_times_longest_match_wins_and_keeps_text_order() -> None:
    got = resolve_times("Yesterday was great, and on 7 May 2023 and in May 2022 too.", REF)
    assert [m.surface for m in got] == ["Yesterday", "7 May 2023", "in May 2022"]
    assert [m.granularity for m in got] == ["day", "day", "month"]


def test_resolve_times_ignores_modal_may_and_bare_seasons() -> None:
    assert resolve_times("You may want to fall back on plan B.", REF) == []
    assert resolve_times("I sat on the bench", REF) == []


def test_resolve_times_accepts_date_ref() -> None:
    assert resolve_times("yesterday", date(2023, 1, 1))[0].start == date(2022, 12, 31)


def test_resolve_times_weekend_when_ref_is_sunday() -> None:
    sunday = datetime(2023, 5, 14, 10, 0)
    (m,) = resolve_times("last weekend", sunday)
    assert (m.start, m.end) == (d(2023, 5, 6), d(2023, 5, 7))


def test_resolve_times_last_weekday_on_same_weekday_goes_back_a_week() -> None:
    (m,) = resolve_times("last Monday", REF)
    assert m.start == REF.date() - timedelta(days=7)


def test_has_time_expression() -> None:
    assert has_time_expression("What did she do last weekend?")
    assert not has_time_expression("What did she paint?")


# --------------------------------------------------------------------------- rendering


def test_date_terms_day_week_month_year() -> None:
    day = TimeMention("yesterday", d(2023, 5, 7), d(2023, 5, 7), "day")
    week = TimeMention("last week", d(2023, 5, 1), d(2023, 5, 7), "week")
    month = TimeMention("last month", d(2023, 4, 1), d(2023, 4, 30), "month")
    year = TimeMention("in 2022", d(2022, 1, 1), d(2022, 12, 31), "year")
    assert date_terms([day]) == "7 May 2023 May 2023 2023"
    assert date_terms([week]) == "week of 1 May 2023 May 2023"
    assert date_terms([month]) == "April 2023"
    assert date_terms([year]) == "2022"
    assert date_terms([]) == ""


def test_date_terms_dedupes_across_mentions_and_names_weekends_and_seasons() -> None:
    rendered = date_terms(resolve_times("yesterday and last weekend", REF))
    assert rendered == "7 May 2023 May 2023 2023 weekend of 6 May 2023"
    assert date_terms(resolve_times("last summer", REF)).startswith("summer 2022 June 2022")


def test_date_terms_week_spanning_two_months() -> None:
    week = TimeMention("last week", d(2023, 5, 29), d(2023, 6, 4), "week")
    assert date_terms([week]) == "week of 29 May 2023 May 2023 June 2023"


def test_session_date_terms() -> None:
    assert session_date_terms(REF) == "8 May 2023 May 2023 2023 Monday"
    assert session_date_terms(date(2022, 12, 25)) == "25 December 2022 December 2022 2022 Sunday"


def test_results_are_frozen() -> None:
    m = resolve_times("yesterday", REF)[0]
    with pytest.raises(AttributeError):
        m.start = date(2000, 1, 1)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        emotion("happy").valence = 0.0  # type: ignore[misc]


def test_has_time_expression_prefilter_never_changes_the_answer() -> None:
    import random

    from memory.engine import text as T

    words = ("yesterday today May may Monday mon tue 2023 7 in the last next week weeks ago a few two months "
             "fall Fall spring Sept. sept 3rd of March the day before tomorrow tonight this morning summer "
             "of 2022 since 2019 early 2020 back in 1999 on Sat last sat cat went and I 12/05 noon").split()
    rng = random.Random(0)
    for _ in range(5000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        assert T.has_time_expression(text) == bool(T._scan(T._normalise_quotes(text))), text


# --------------------------------------------------------------------------- resolve_times at the calendar's edges


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("It was 10000 years ago", REF),
        ("That happened 99999999 days ago.", REF),
        ("That happened 9999999999 days ago.", REF),  # past timedelta's own range
        ("It was " + "9" * 5000 + " days ago", REF),  # past int()'s 4,300-digit limit
        ("It was 123456789 months ago", REF),
        ("It was 999999 weeks ago", REF),
        ("we deploy tomorrow", datetime(9999, 12, 31, 12, 0, tzinfo=UTC)),
        ("the day after tomorrow", date(9999, 12, 30)),
        ("next week", date(9999, 12, 27)),
        ("next year", date(9999, 6, 1)),
        ("yesterday", date(1, 1, 1)),
        ("last year", date(1, 6, 1)),
        ("this winter", date(9999, 12, 25)),  # winter 9999 ends in February 10000
    ],
)
def test_resolve_times_leaves_out_dates_past_the_calendar(text: str, ref: datetime | date) -> None:
    """Ordinary text resolving before year 1 or after 9999 is not a mention (it used to raise and
    fail the write)."""
    assert resolve_times(text, ref) == []


def test_resolve_times_out_of_range_mention_does_not_drop_the_others() -> None:
    got = resolve_times("Yesterday I read it was 10000 years ago, and 7 May 2023 too.", REF)
    assert [m.surface for m in got] == ["Yesterday", "7 May 2023"]


@pytest.mark.parametrize(
    ("text", "ref", "start", "end"),
    [
        # December 9999 is representable even though "the 1st of next month" is not.
        ("in December", date(9999, 12, 25), d(9999, 12, 1), d(9999, 12, 31)),
        ("several weeks ago", date(9999, 12, 31), d(9999, 12, 1), d(9999, 12, 31)),
        ("this month", date(9999, 12, 31), d(9999, 12, 1), d(9999, 12, 31)),
        # Seasons look at neighbouring years; the unrepresentable ones must not hide the answer.
        ("last summer", date(9999, 12, 25), d(9999, 6, 1), d(9999, 8, 31)),
        ("next summer", date(1, 3, 1), d(1, 6, 1), d(1, 8, 31)),
        ("yesterday", date(1, 1, 2), d(1, 1, 1), d(1, 1, 1)),
        ("tomorrow", date(9999, 12, 30), d(9999, 12, 31), d(9999, 12, 31)),
    ],
)
def test_resolve_times_still_resolves_at_the_edges(text: str, ref: date, start: date, end: date) -> None:
    (m,) = resolve_times(text, ref)
    assert (m.start, m.end) == (start, end)


# One or more expressions per kind the resolver knows; the test below checks every pattern is hit.
EXPRESSION_KINDS = [
    "it was 2023-04-30", "on 7 May 2023", "on May 7, 2023", "on the 31st of December", "on February 29",
    "on December 24", "in May 2023", "in 2022", "the day before yesterday", "the day after tomorrow",
    "yesterday", "last night", "today", "this morning", "tomorrow", "last week", "this week", "next week",
    "last weekend", "this weekend", "next weekend", "the week before", "the week after", "last month",
    "next month", "the month after", "last year", "next year", "the year before", "last Monday",
    "this Sunday", "next Friday", "on Saturday", "I will run on Saturday", "last fri", "next sat",
    "last May", "next March", "this June", "in December", "I will go in January", "last summer",
    "next winter", "this winter", "in the spring", "since the fall", "winter of 2022", "3 days ago",
    "a few days ago", "two weeks ago", "several weeks ago", "a month ago", "a few months ago",
    "five years ago", "a few years ago", "10000 years ago", "99999999 days ago", "9999999999 weeks ago",
    "123456789012 months ago",
]
EDGE_ANCHORS = [
    date(1, 1, 1), date(1, 1, 6), date(1, 2, 28), date(1, 12, 31), datetime(1, 1, 1, 0, 0),
    date(9999, 1, 1), date(9999, 2, 28), date(9999, 12, 1), date(9999, 12, 25), date(9999, 12, 31),
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
]


def test_expression_kinds_cover_every_pattern() -> None:
    from memory.engine import text as T

    hit = {handler for e in EXPRESSION_KINDS for _s, _e, _m, handler in T._scan(e)}
    assert {handler for _p, handler in T._PATTERNS} <= hit


@pytest.mark.parametrize("ref", EDGE_ANCHORS, ids=str)
def test_resolve_times_never_raises_at_the_calendar_edges(ref: datetime | date) -> None:
    for text in EXPRESSION_KINDS:
        for sentence in (text, f"We will go {text}.", f"{text}, {text} and {text}"):
            for m in resolve_times(sentence, ref):
                assert date.min <= m.start <= m.end <= date.max, (sentence, ref, m)
                date_terms([m])  # rendering a resolved mention must not raise either


@pytest.mark.parametrize("text,expected", [
    ("What Postgres version does production run?", True),
    ("How was the trip? Did you rest?", True),
    ("Redis runs 6.2. Should we move to 7.4?", False),
    ("We migrated to Postgres 16.", False),
    ("ok?!", False),
    ("", False),
    ("Really?", True),
])
def test_asks_only(text: str, expected: bool) -> None:
    from memory.engine.text import asks_only

    assert asks_only(text) is expected


def test_resolve_times_marks_a_day_named_without_its_year() -> None:
    ref = date(2026, 12, 1)
    got = {m.surface: m for m in resolve_times("on March 5th, on 5 March 2024, yesterday, on 2024-03-05, "
                                               "the 4th of July", ref)}
    assert got["March 5th"].yearless and got["March 5th"].start == date(2027, 3, 5)  # the nearest, as before
    assert got["the 4th of July"].yearless
    assert not got["5 March 2024"].yearless and not got["yesterday"].yearless
    assert not got["2024-03-05"].yearless


@pytest.mark.parametrize("text,entities", [
    ("Update: the Postgres upgrade moved to January 9th.", ["Postgres"]),  # a chat line's lead-in
    ("Note: Ana owns billing.", ["Ana"]),
    ("Reminder: standup at 10.", []),
    ("Black Friday week is our peak.", ["Black Friday"]),  # a day's name, not "Black"
    ("Heads up: Cyber Monday sale starts soon.", ["Cyber Monday"]),
    ("Good Friday is a holiday in the UK.", ["Good Friday", "UK"]),
    ("Good morning Ana", ["Ana"]),
])
def test_entities_skip_lead_ins_and_keep_holiday_names(text: str, entities: list[str]) -> None:
    assert extract_entities(text) == entities


def test_a_holiday_named_after_a_weekday_is_not_that_weekday() -> None:
    ref = date(2026, 11, 10)
    assert [m.surface for m in resolve_times("Black Friday week, November 24 to 30", ref)] == ["November 24"]
    assert resolve_times("Cyber Monday sale starts soon", ref) == []
    assert [m.start for m in resolve_times("We shipped it on Friday.", ref)] == [date(2026, 11, 6)]
    assert resolve_times("on Good Friday we rest", ref) == [] and resolve_times("black friday sale", ref) == []
    # "good" is a holiday's name only capitalised
    assert [m.start for m in resolve_times("It was a good Monday for sales.", ref)] == [date(2026, 11, 9)]


def test_a_yearless_29_february_is_the_nearest_leap_years() -> None:
    got = resolve_times("What did we ship on February 29?", date(2026, 12, 1))
    assert [(m.start, m.yearless) for m in got] == [(date(2028, 2, 29), True)]
    assert [m.start for m in resolve_times("on March 5", date(2026, 12, 1))] == [date(2027, 3, 5)]  # as before


@pytest.mark.parametrize("text, surface", [
    ("The architecture review is moved to Monday November 16 at 10am.", "November 16"),
    ("See you on Monday, 16 November.", "16 November"),
    ("Monday the 16th of November works.", "the 16th of November"),
    ("Deadline: Monday 2026-11-16.", "2026-11-16"),
])
def test_a_weekday_naming_a_dates_day_is_that_date(text, surface):
    """"Monday November 16" was two mentions: the 16th and the Monday before the session (9 November)."""
    got = resolve_times(text, date(2026, 11, 11))
    assert [(m.surface, m.start) for m in got] == [(surface, date(2026, 11, 16))]


def test_a_weekday_apart_from_a_date_stays_its_own_mention():
    got = resolve_times("On Friday we shipped. 16 November is the deadline.", date(2026, 11, 11))
    assert [m.start for m in got] == [date(2026, 11, 6), date(2026, 11, 16)]


@pytest.mark.parametrize("text, days", [
    ("On 2 November we planned Cyber Monday, November 30 sales.", [date(2026, 11, 2), date(2026, 11, 30)]),
    ("Yesterday we planned the Black Friday, 27 November promo.", [date(2026, 11, 10), date(2026, 11, 27)]),
])
def test_a_holiday_before_a_date_takes_no_other_mention_with_it(text, days):
    """A holiday's weekday ("Cyber Monday") is no mention: the date after it dropped the one before."""
    assert [m.start for m in resolve_times(text, date(2026, 11, 11))] == days


@pytest.mark.parametrize("text,day", [
    # a weekday set for a thing in the present tense: the coming one (written on Wednesday 2 December)
    ("the database cutover is scheduled for Friday.", "2026-12-04"),
    ("we decided the cutover is on Friday.", "2026-12-04"),
    ("The vendor demo is on Thursday.", "2026-12-03"),
    ("The demo moved to Monday.", "2026-12-07"),
    ("The release ships Friday.", "2026-12-04"),
    # told of as past: the last one
    ("The party was on Friday.", "2026-11-27"),
    ("I went hiking on Friday.", "2026-11-27"),
    ("On Friday I fixed the bug.", "2026-11-27"),
    ("Friday was great.", "2026-11-27"),
    # nouns, past verbs and possessives before a weekday: no plan
    ("The launch on Friday went smoothly.", "2026-11-27"),
    ("I pushed on Friday and CI went red.", "2026-11-27"),
    ("He moved on Monday.", "2026-11-30"),
    ("Ana's Friday demo went well.", "2026-11-27"),
    ("The report is due Friday.", "2026-12-04"),
    # "now" between: the day given as the current one (second audit: the past Thursday was taken)
    ("The deploy window is now Thursday at 16:00.", "2026-12-03"),
    ("The deploy window is now on Thursday.", "2026-12-03"),
    ("It was now Thursday and we shipped.", "2026-11-26"),
    # the day itself, said on it
    ("Yay, it's Wednesday!", "2026-12-02"),
    ("The demo is on Wednesday.", "2026-12-02"),
    # a month set for something in the present tense, likewise
    ("The offsite is in March.", "2027-03-01"),
    ("The offsite was in March.", "2026-03-01"),
    ("I went to Lisbon in March.", "2026-03-01"),
])
def test_a_weekday_set_for_something_is_the_coming_one(text, day):
    (m,) = resolve_times(text, date(2026, 12, 2))
    assert str(m.start) == day


@pytest.mark.parametrize("text,start,end,granularity", [
    # a month with its day is that day ("until December" read the month and dropped the 10th)
    ("Sam is on vacation until December 10.", "2026-12-10", "2026-12-10", "day"),
    ("Sam is on vacation until December 10th.", "2026-12-10", "2026-12-10", "day"),
    ("Sam is away until December.", "2026-12-01", "2026-12-31", "month"),
])
def test_until_a_month_and_its_day_is_the_day(text, start, end, granularity):
    (m,) = resolve_times(text, date(2026, 11, 30))
    assert (str(m.start), str(m.end), m.granularity) == (start, end, granularity)


def test_every_weekday_of_a_list_set_for_something_is_a_coming_one():
    got = [str(m.start) for m in resolve_times("The demo is on Monday or Tuesday.", date(2026, 12, 2))]
    assert got == ["2026-12-07", "2026-12-08"]
