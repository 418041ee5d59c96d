from __future__ import annotations

import pytest

from memory.engine.router import DEPTHS, RoutePlan, is_time_question, route

# Hand-written questions about invented people; expected qtype and the rule that fires.
CASES: list[tuple[str, str, str]] = [
    # temporal
    ("When did Priya start learning the cello?", "temporal", "temporal"),
    ("What year did Tomas move to Lisbon?", "temporal", "temporal"),
    ("How long has Aiko been volunteering at the shelter?", "temporal", "temporal"),
    ("Which month did Rafael run his first marathon?", "temporal", "temporal"),
    ("How long ago did Dana adopt her cat?", "temporal", "temporal"),
    ("Can you tell me when Jonah visited Berlin?", "temporal", "temporal"),
    ("On what date was Ines's recital?", "temporal", "temporal"),
    ("How many years has Marco lived in Oslo?", "temporal", "temporal"),
    ("When is Keiko planning to repaint the kitchen?", "temporal", "temporal"),
    # detail
    ("What is Priya's favourite dessert?", "detail", "detail"),
    ("Where did Tomas grow up?", "detail", "detail"),
    ("What did Aiko buy at the farmers market?", "detail", "detail"),
    ("Who gave Rafael the guitar?", "detail", "detail"),
    ("Did Dana finish her thesis?", "detail", "detail"),
    ("Is Jonah allergic to peanuts?", "detail", "detail"),
    ("What instrument does Priya play?", "detail", "detail"),
    ("What is Rafael's job?", "detail", "detail"),
    ("What did Aiko do last weekend?", "detail", "detail"),
    ("Where does Keiko work now?", "detail", "detail"),
    # reasoning: causal
    ("Why did Tomas quit his job at the bank?", "reasoning", "causal"),
    ("What made Aiko decide to switch careers?", "reasoning", "causal"),
    ("How come Marco stopped running?", "reasoning", "causal"),
    # reasoning: hypothetical
    ("Would Rafael enjoy a cooking class?", "reasoning", "hypothetical"),
    ("What might Dana do after graduating?", "reasoning", "hypothetical"),
    ("Is Jonah likely to move abroad?", "reasoning", "hypothetical"),
    ("Could Ines be considered an introvert?", "reasoning", "hypothetical"),
    ("If Keiko had more time, what hobby would she pick up?", "reasoning", "hypothetical"),
    # reasoning: multi-entity
    ("What do Priya and Tomas have in common?", "reasoning", "multi_entity"),
    ("Did Aiko and Rafael both go to the concert?", "reasoning", "multi_entity"),
    ("What did Dana cook and who did she invite?", "reasoning", "multi_entity"),
    ("Which cities have Jonah and Priya visited together?", "reasoning", "multi_entity"),
    ("Whose garden is bigger, Marco's or Ines's?", "reasoning", "multi_entity"),
    # reasoning: aggregation
    ("What hobbies does Dana have?", "reasoning", "aggregate"),
    ("What books has Jonah read?", "reasoning", "aggregate"),
    ("What activities does Priya do with her kids?", "reasoning", "aggregate"),
    ("What kinds of music does Tomas like?", "reasoning", "aggregate"),
    ("What are Aiko's plans for the summer?", "reasoning", "aggregate"),
    ("How many pets does Rafael have?", "reasoning", "aggregate"),
    # open
    ("How does Jonah feel about his new job?", "open", "open"),
    ("What does Priya think of the city?", "open", "open"),
    ("Tell me about Tomas's trip.", "open", "open"),
    ("pottery class", "open", "open"),
    ("What has Keiko been up to lately?", "open", "open"),
]


@pytest.mark.parametrize(("query", "qtype", "rule"), CASES)
def test_route_qtype(query: str, qtype: str, rule: str) -> None:
    plan = route(query)
    assert (plan.qtype, plan.rule) == (qtype, rule)
    assert plan.depth == DEPTHS[rule]


def test_depth_table_shape() -> None:
    assert DEPTHS["detail"] == 0
    assert DEPTHS["temporal"] == 1
    assert DEPTHS["open"] == 1
    assert DEPTHS["multi_entity"] == DEPTHS["aggregate"] == 2
    assert DEPTHS["hypothetical"] == 3


def test_route_extracts_entities_and_terms() -> None:
    plan = route("When did Priya visit the Museum of Modern Art with Tomas?")
    assert plan.entities == ("Priya", "Museum of Modern Art", "Tomas")
    assert "visit" in plan.terms
    assert not {"when", "did", "the", "priya"} & set(plan.terms)


def test_route_terms_drop_question_scaffolding() -> None:
    plan = route("What kinds of pastries would Dana likely bake?")
    assert "pastries" in plan.terms
    assert "bake" in plan.terms
    assert not {"kinds", "likely", "would"} & set(plan.terms)


def test_time_focus() -> None:
    assert route("When did Aiko move?").time_focus
    assert route("What did Aiko cook last weekend?").time_focus
    assert route("What did Aiko do after the wedding?").time_focus
    assert route("Is Aiko still painting?").time_focus
    assert not route("What did Aiko cook?").time_focus


# A duration asked in the present or future is a stated fact, not a time: the "when" bonus of
# resonate (``is_time_question``) lifted "We moved the orders database to Postgres 16 last weekend."
# above the JWT decision that answers the first one.
DURATIONS = [
    "How long do JWT access tokens last before they expire?",
    "How long does a refresh token last?",
    "How long is the log retention?",
    "How long's the log retention?",
    "How long will the migration take?",
    "Can you tell me how long do the backups take?",
    "How many days do refresh tokens last?",
]

# Asked when: a past span (its start and end are dates, "How long has" asks since when), "ago",
# "since", a day named in a "when" question.
WHENS = [
    "When did we last deploy?",
    "When is the last deploy before the freeze?",
    "How long ago did we migrate the orders database?",
    "How long has Aiko been volunteering at the shelter?",
    "How long did the outage last?",
    "How long was the outage?",
    "How long is it since we deployed?",
    "How many years has Marco lived in Oslo?",
    "How often do we rotate the keys?",
]


@pytest.mark.parametrize("query", DURATIONS)
def test_a_duration_is_not_asked_when(query: str) -> None:
    assert not is_time_question(query)
    assert route(query).rule != "temporal"


@pytest.mark.parametrize("query", WHENS)
def test_when_questions_stay_temporal(query: str) -> None:
    assert is_time_question(query)
    assert route(query).rule == "temporal"


def test_a_duration_of_one_fact_routes_as_detail() -> None:
    plan = route("How long do JWT access tokens last before they expire?")
    assert (plan.qtype, plan.rule, plan.depth) == ("detail", "detail", DEPTHS["detail"])


def test_wants_reason() -> None:
    assert route("Why did Marco sell his bike?").wants_reason
    assert route("Would Marco enjoy sailing?").wants_reason
    assert not route("Where did Marco buy his bike?").wants_reason


def test_polite_wrappers_do_not_change_routing() -> None:
    assert (
        route("Do you remember where Ines studied?").qtype == route("Where did Ines study?").qtype == "detail"
    )
    assert route("Could you tell me what Ines studied?").rule == "detail"


def test_route_is_deterministic_and_frozen() -> None:
    a = route("What sports does Rafael play with his brother?")
    assert a == route("What sports does Rafael play with his brother?")
    assert isinstance(a, RoutePlan)
    with pytest.raises(AttributeError):
        a.depth = 5  # type: ignore[misc]


def test_route_empty_query() -> None:
    plan = route("   ")
    assert plan.qtype == "open"
    assert plan.entities == ()
    assert plan.terms == ()
