"""A labelled evaluation of the rule-based conflict check (the no-LLM default): pairs of statements
a team's agents and people write over a few weeks (decisions, owners, customer preferences, dates,
settings, a rota's lines, chatter), each marked whether the later one contradicts the earlier one.

Written before the rules it measures were changed, from the kinds of statement a team memory holds,
not from the sentences of one audit. ``verdict`` runs a pair the way ``reflection.conflicts.detect``
runs its rule path (a status line's counts on two days are excused there, before the rules).

Run ``python -m tests.reflection.conflict_eval`` for the precision, recall and every miss.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason, only_counts_differ


@dataclass(frozen=True)
class Case:
    a: str
    b: str
    conflict: bool
    days: int  # how long after ``a`` ``b`` was written
    kind: str


def _c(kind: str, conflict: bool, rows: list[tuple[str, str, int]]) -> list[Case]:
    return [Case(a, b, conflict, days, kind) for a, b, days in rows]


CASES: list[Case] = [
    # ---------------------------------------------------------------- true changes
    *_c("decision", True, [
        ("For the new ledger database we'll go with PostgreSQL 15.",
         "We're dropping PostgreSQL for the ledger and going with CockroachDB instead.", 5),
        ("The ledger database is PostgreSQL 15.", "The ledger database is CockroachDB.", 5),
        ("We picked Kafka for the event bus.", "We switched the event bus from Kafka to NATS.", 9),
        ("The mobile app will be built with React Native.",
         "Change of plans: the mobile app will be built in Flutter instead.", 4),
        ("CI runs on Jenkins.", "We moved CI off Jenkins and onto GitHub Actions.", 12),
        ("Auth for the admin console goes through Okta.", "We replaced Okta with Auth0 for the admin console.", 6),
        ("The analytics stack will be hosted on AWS.", "Analytics will be hosted on GCP rather than AWS.", 3),
        ("Infra is managed with Terraform.", "We're going with Pulumi for infra from now on, not Terraform.", 10),
        ("Feature flags are served by LaunchDarkly.", "Feature flags now come from Unleash; LaunchDarkly is gone.", 14),
        ("Error tracking uses Sentry.", "Error tracking moved to Rollbar.", 8),
        ("We'll ship the beta to 50 customers.", "We'll ship the beta to 20 customers instead.", 2),
        ("The offsite will be in Lisbon.", "The offsite will be in Porto instead of Lisbon.", 8),
        ("Retros happen on Zoom.", "Retros moved to Google Meet.", 9),
    ]),
    *_c("owner", True, [
        ("Priya will own payments-api.", "Luis is the acting owner of payments-api while Priya is on leave.", 7),
        ("Marco owns the billing service.", "Ownership of the billing service moved to Aisha.", 11),
        ("Tom is the tech lead for the mobile app.", "Rachel is now the tech lead for the mobile app.", 6),
        ("The data pipeline is owned by the platform team.", "The data pipeline is now owned by the analytics team.", 9),
        ("Ticket #404 is assigned to Ana.", "Ticket #404 was reassigned to Bo.", 1),
        ("Chen is in charge of the Q3 roadmap.", "Dev took over the Q3 roadmap from Chen.", 4),
        ("Elena is the point of contact for Initech.", "From now on Omar is the point of contact for Initech.", 13),
        ("Sam is the release manager for v4.", "Nadia replaces Sam as release manager for v4.", 5),
        ("Payments escalations go to Kenji.", "Payments escalations now go to Maria instead of Kenji.", 8),
    ]),
    *_c("preference", True, [
        ("Globex prefers invoices in EUR.", "Globex now want their invoices in USD instead.", 10),
        ("Initech wants weekly status reports.", "Initech asked us to switch to monthly status reports.", 6),
        ("Acme prefers calls on Tuesdays.", "Acme now prefers calls on Thursdays.", 7),
        ("Umbrella wants its data hosted in Frankfurt.", "Umbrella now wants its data hosted in Dublin.", 9),
        ("Stark Industries pays by bank transfer.", "Stark Industries pays by credit card now.", 15),
        ("Hooli's invoices go to their finance inbox.",
         "Hooli asked that invoices go to their procurement portal instead.", 5),
        ("Wayne Enterprises wants deploys on weekends only.",
         "Wayne Enterprises doesn't want deploys on weekends anymore.", 12),
    ]),
    *_c("date", True, [
        ("The Q4 release freeze starts December 14.",
         "Update: the release freeze now starts December 7 for the SOC2 audit.", 12),
        ("The data migration is planned for March 3.", "The data migration has been pushed to March 17.", 2),
        ("Demo day is on Thursday.", "Demo day got moved up to Tuesday.", 1),
        ("Initech's contract renews on June 1.", "Initech's contract now renews on July 1.", 20),
        ("Code freeze for v3 begins Friday.", "Code freeze for v3 now begins Monday.", 2),
        ("The GA launch is scheduled for May 20.", "We delayed the GA launch until June 3.", 6),
        ("The security review is due November 29.", "The security review deadline is now December 6.", 5),
        ("Kickoff with Globex is on the 12th.", "Kickoff with Globex is on the 19th instead.", 3),
    ]),
    *_c("value", True, [
        ("The API rate limit is 1000 requests per minute.",
         "We lowered the API rate limit to 600 requests per minute.", 4),
        ("Staging has 3 replicas of the API.", "Staging now runs 5 replicas of the API.", 7),
        ("The session timeout is 30 minutes.", "Session timeout was changed to 15 minutes.", 3),
        ("Our SLA for P1 incidents is 4 hours.", "The SLA for P1 incidents is now 2 hours.", 10),
        ("Log retention is 30 days.", "Log retention went up to 90 days.", 12),
        ("The team standup is at 9:30.", "Standup is now at 10:00.", 8),
        ("The Pro plan costs $49 a month.", "We raised the Pro plan to $59 a month.", 14),
        ("The hiring target for Q1 is 6 engineers.", "Q1 hiring target is down to 4 engineers.", 9),
    ]),
    *_c("negation", True, [
        ("The new dashboard will support IE11.", "The new dashboard will not support IE11.", 5),
        ("The billing export supports CSV.", "The billing export no longer supports CSV.", 11),
        ("Bob is joining the offsite in Lisbon.", "Bob is not joining the offsite in Lisbon.", 3),
    ]),
    *_c("version/region", True, [
        ("Globex customer data lives in eu-west-1.", "We migrated Globex customer data to eu-central-1.", 6),
        ("The primary region is us-east-1.", "The primary region is now us-west-2.", 10),
        ("The iOS app targets iOS 16.", "The iOS app now targets iOS 17.", 13),
        ("The web app runs on Node 18.", "We upgraded the web app to Node 20.", 7),
    ]),
    # a rota's line contradicts another for the same period
    *_c("same period", True, [
        ("On-call this week is Kenji.", "On-call this week is Ana.", 1),
        ("Tonight's deploy is handled by Luis.", "Tonight's deploy is handled by Priya.", 0),
    ]),
    # ---------------------------------------------------------------- no contradiction
    # different people doing the same kind of thing, mostly on other days
    *_c("activities", False, [
        ("Sofia will pair with Ben on the search-indexer refactor this afternoon.",
         "Kenji will pair with Maria on the search-indexer refactor.", 13),
        ("Ana reviewed the billing PR this morning.", "Luis reviewed the billing PR after lunch.", 0),
        ("Omar is debugging the flaky checkout test today.", "Chen is debugging the flaky checkout test.", 3),
        ("Priya demoed the new dashboard to Initech.", "Tom demoed the new dashboard to Globex.", 2),
        ("Kenji is out sick today.", "Maria is out sick today.", 9),
        ("Ben is working from the Lisbon office this week.", "Sofia is working from the Berlin office this week.", 0),
        ("Rachel fixed the login redirect bug.", "Dev fixed the password reset bug.", 1),
        ("Aisha is writing the postmortem for the outage.", "Marco is writing the release notes for the outage fix.", 0),
        ("Luis will take the customer call with Acme at 3pm.", "Elena will take the customer call with Hooli at 11am.", 4),
        ("Nadia ran the onboarding session for the new hires.", "Sam ran the onboarding session for the new hires.", 14),
        ("Ben is pairing with Sofia on the indexer today.", "Ben is pairing with Ana on the indexer today.", 6),
        ("Kenji deployed the hotfix to staging.", "Maria deployed the hotfix to staging.", 5),
        ("Ana is on the Globex escalation this morning.", "Bo is on the Globex escalation this morning.", 7),
    ]),
    # the same rota's lines for other periods
    *_c("other period", False, [
        ("On-call this week is Kenji.", "On-call this week is Ana.", 7),
        ("This week's release captain is Omar.", "This week's release captain is Dev.", 14),
        ("Today's standup is run by Chen.", "Today's standup is run by Aisha.", 1),
        ("Sprint 21 goal: ship the export API.", "Sprint 22 goal: ship the import API.", 14),
        ("Weekly metrics: 41 signups, 3 churned.", "Weekly metrics: 57 signups, 1 churned.", 7),
        ("Tonight's deploy is handled by Luis.", "Tonight's deploy is handled by Priya.", 2),
        ("Support rotation today: Elena.", "Support rotation today: Omar.", 1),
    ]),
    # proposals, refusals, questions, conditions
    *_c("not done", False, [
        ("The ledger database is PostgreSQL 15.", "Should we consider CockroachDB for the ledger?", 2),
        ("The ledger database is PostgreSQL 15.", "Luis proposed moving the ledger to CockroachDB.", 3),
        ("Globex prefers invoices in EUR.", "Globex asked whether they could get invoices in USD.", 4),
        ("Priya owns payments-api.", "Luis offered to take over payments-api, but we said no.", 5),
        ("The API rate limit is 1000 requests per minute.",
         "Someone suggested raising the API rate limit to 2000 requests per minute.", 1),
        ("The release freeze starts December 14.", "We might move the freeze to December 7 if the audit slips.", 2),
        ("We use Kafka for the event bus.", "We looked at NATS for the event bus but are sticking with Kafka.", 6),
        ("The offsite will be in Lisbon.", "Porto was rejected as the offsite venue.", 3),
        ("Stark Industries pays by bank transfer.", "Could Stark Industries pay by credit card instead?", 2),
        ("Marco owns the billing service.", "If Marco leaves, Aisha would take over the billing service.", 9),
    ]),
    # the same value said again, in other words
    *_c("restated", False, [
        ("The ledger database is PostgreSQL 15.", "Confirmed: we're going with PostgreSQL 15 for the ledger.", 1),
        ("Priya will own payments-api.", "Payments-api is owned by Priya.", 4),
        ("Globex prefers invoices in EUR.", "Reminder: Globex invoices must be in EUR.", 8),
        ("The release freeze starts December 14.", "Update: the release freeze still starts December 14.", 6),
        ("Staging has 3 replicas.", "We run 3 replicas in staging.", 2),
        ("Tom is the tech lead for the mobile app.", "Tom, our mobile tech lead, is out on Friday.", 3),
        ("Error tracking uses Sentry.", "Sentry is still our error tracker.", 5),
    ]),
    # two things, each with its own value
    *_c("other subject", False, [
        ("The staging database is PostgreSQL 15.", "The analytics warehouse is Snowflake.", 2),
        ("Globex prefers invoices in EUR.", "Initech prefers invoices in USD.", 1),
        ("Priya owns payments-api.", "Luis owns ledger-api.", 0),
        ("The mobile release freeze starts December 14.", "The web release freeze starts December 7.", 0),
        ("Globex customer data lives in eu-west-1.", "Initech customer data lives in eu-central-1.", 3),
        ("The SOC2 audit starts March 3.", "The ISO27001 audit starts March 10.", 5),
        ("Release v2.3 ships on Friday.", "Release v2.4 ships on Monday.", 4),
        ("Q3 revenue target is 2M.", "Q4 revenue target is 2.5M.", 20),
        ("The us-east-1 cluster has 12 nodes.", "The eu-west-1 cluster has 8 nodes.", 2),
        ("Acme prefers calls on Tuesdays.", "Acme prefers email for invoices.", 3),
        ("The team standup is at 9:30.", "The design review is at 10:00.", 0),
        ("Kafka handles the event bus.", "Redis handles the job queue.", 2),
        ("Globex now want their invoices in USD instead.", "Initech prefers invoices in EUR.", 1),
        ("Rachel is now the tech lead for the mobile app.", "Tom is the tech lead for the web app.", 3),
        ("Nadia is the release manager for v4.", "Sam is the release manager for v5.", 5),
        ("We're dropping the old PostgreSQL backups and going with snapshots instead.",
         "The ledger database is PostgreSQL 15.", 2),
    ]),
    # chatter beside a statement
    *_c("chatter", False, [
        ("Great demo today, the Globex folks loved the new invoice view.", "Globex prefers invoices in EUR.", 1),
        ("Lunch is at noon in the big room.", "The retro is at 4pm in the big room.", 0),
        ("Deploying the hotfix now.", "Hotfix deployed to production.", 0),
        ("Kenji joined the incident call at 2am.", "Maria joined the incident call at 2:30am.", 0),
        ("Priya is on leave until January 8.", "Luis is on leave until January 15.", 2),
        ("Tom fixed a flaky test on Monday.", "Tom fixed a flaky test on Tuesday.", 1),
        ("We moved the ledger service to the new cluster.", "The ledger database is PostgreSQL 15.", 3),
        ("Luis is the acting owner of payments-api while Priya is on leave.", "Priya is on leave until January 8.", 0),
    ]),
]


def verdict(case: Case) -> str | None:
    """The rule path's answer for the pair, as ``detect`` asks it."""
    if case.days and only_counts_differ(case.a, case.b):
        return None
    return conflict_reason(case.a, case.b, extract_entities(case.a), extract_entities(case.b))


@dataclass(frozen=True)
class Score:
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def score(cases: list[Case] = CASES) -> tuple[Score, list[tuple[Case, str | None]]]:
    """The counts, and the cases the rules get wrong with what they said."""
    tp = fp = fn = tn = 0
    wrong: list[tuple[Case, str | None]] = []
    for case in cases:
        said = verdict(case)
        if said and case.conflict:
            tp += 1
        elif said:
            fp += 1
            wrong.append((case, said))
        elif case.conflict:
            fn += 1
            wrong.append((case, said))
        else:
            tn += 1
    return Score(tp, fp, fn, tn), wrong


if __name__ == "__main__":
    s, wrong = score()
    print(f"{len(CASES)} pairs: tp {s.tp} fp {s.fp} fn {s.fn} tn {s.tn}  "
          f"precision {s.precision:.2f} recall {s.recall:.2f}")
    for case, said in wrong:
        print(f"{'MISS' if case.conflict else 'FALSE'} [{case.kind}] +{case.days}d  {case.a!r} / {case.b!r}"
              + (f"\n      -> {said}" if said else ""))
