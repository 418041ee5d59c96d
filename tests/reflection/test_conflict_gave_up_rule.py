"""The rule-based conflict check on a value one statement gives up ("dropping X for …", "from X to
Y", "replaced X with Y", "Y rather than X", "moved … off X") that the other states of the same thing,
and on a named value that carries a version ("PostgreSQL 15" vs "CockroachDB"). Such changes stored
no conflict, so agents were handed the old tool or vendor with nothing marking it disputed."""

from __future__ import annotations

import pytest

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason


def _reason(a: str, b: str) -> str | None:
    return conflict_reason(a, b, extract_entities(a), extract_entities(b))


@pytest.mark.parametrize("a,b,old", [
    ("Search for the docs site runs on Algolia.",
     "We are dropping Algolia for the docs site search and going with Typesense.", "algolia"),
    ("The payments queue uses RabbitMQ.", "We switched the payments queue from RabbitMQ to SQS.", "rabbitmq"),
    ("Status pages are hosted on Statuspage.", "We replaced Statuspage with Instatus for the status pages.",
     "statuspage"),
    # the full stop after the name is the sentence's, not the name's
    ("The design system docs live in Storybook.", "The design system docs live in Zeroheight rather than Storybook.",
     "storybook"),
    ("Log shipping for the API goes through Fluentd.", "We moved log shipping for the API off Fluentd and onto Vector.",
     "fluentd"),
])
def test_a_value_given_up_contradicts_the_statement_of_it(a, b, old):
    for x, y in ((a, b), (b, a)):
        assert _reason(x, y) == f"replaced: the other statement gives up {old}"


def test_a_version_goes_with_its_name():
    reason = _reason("The staging cluster runs Kubernetes 1.27.", "The staging cluster runs Nomad.")
    assert reason and reason.startswith("different place or name for the same statement")


@pytest.mark.parametrize("a,b", [
    # only weighed
    ("We use Sentry for error tracking.", "We could replace Sentry with Rollbar for error tracking next quarter."),
    # another thing moved off another tool
    ("Mobile builds run on Bitrise.", "Web builds moved off Jenkins to GitHub Actions."),
    # both give it up
    ("We dropped Jenkins last year.", "We dropped Jenkins for the CI pipeline."),
    # nothing named on both sides
    ("The billing service uses Stripe.", "We replaced the office coffee machine with a Jura."),
    # one person's switch is not a team's statement about the other's editor
    ("Anna uses Vim.", "Ben switched from Vim to Emacs for his editor."),
    # a denied giving up gives nothing up
    ("We did not drop Kafka for the event bus.", "We picked Kafka for the event bus."),
])
def test_no_conflict_without_a_value_given_up_of_the_same_thing(a, b):
    assert _reason(a, b) is None and _reason(b, a) is None
