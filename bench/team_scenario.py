#!/usr/bin/env python3
# ruff: noqa: B023, E731  (the per-question helpers close over the loop's lists and run within it)
"""Nylon retrieval-quality scenario: a small product team's agent memory (November 2026).

A retrieval audit's scenario (session 13): 120 turns of a product team's month (decisions and their
corrections a week later, incidents, paraphrases, chit-chat) and 47 questions an agent asks before
acting, with the turns that answer them. Not held out: the fixes of that session were found with it
(each checked on LoCoMo too, docs/benchmarks.md). Against a running instance (`make run`), with its
agent key and a second agent's key of the same org:

Usage:
  .venv/bin/python bench/team_scenario.py --url http://127.0.0.1:8000 --key nyl_... [--key2 nyl_...] [--write] [--ask]
                              [--json out.json] [--verbose]

--write  writes 120 turns in 24 sessions (+1 private memory) through POST /api/v1/memories/weave-session
         (event_ids make it idempotent: re-running is a replay). Needs --key (the writer, org-visible writes)
--ask    asks the questions through resonate (k=10, reinforce=false) and context (k=10, reinforce=false)
         and prints the table. --key2 is a second agent of the same org, used for the privacy question
         (it must not see the private memory the first agent wrote).
Stdlib only. "today" is assumed to be 2026-12-02 (Wednesday): the questions that name days relative to
today ("last Tuesday", "next week") are judged for that day, and the server resolves them against its own.
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request

PFX = "rq1-"  # event_id prefix

# (session_key, date, [(eid or None, speaker, "HH:MM", text)], visibility)
S = []


def sess(key, date, turns, visibility=None):
    S.append((key, date, turns, visibility))


sess("standup-2026-11-02", "2026-11-02", [
    (None, "Dana", "09:30", "Morning all. Quick standup: priorities this week are the billing rewrite and Acme onboarding."),
    (None, "Bruno", "09:31", "I'm still on the invoice generator. PDFs render now but currency formatting is off for EUR."),
    (None, "Chen", "09:32", "Grafana alerts were noisy over the weekend, I silenced the disk alerts on the build runners."),
    (None, "Eli", "09:33", "Frontend: the new checkout page is behind a flag, about 70% done."),
    (None, "Ana", "09:34", "Reminder that the billing datastore decision is due Wednesday."),
    (None, "coder-agent", "09:35", "Noted. I'll prepare a comparison of Postgres vs MongoDB for the billing service."),
])
sess("review-norms", "2026-11-03", [
    ("ana_pref_morning", "Ana", "14:00", "For code reviews: I prefer to do them in the morning, before 11am. If you request my review in the afternoon it will wait until the next day."),
    ("ana_pref_avoid", "Ana", "14:01", "And please avoid mixing formatting-only changes with logic changes in the same PR; it makes the diff unreadable. Keep PRs under 400 lines if you can."),
    (None, "Bruno", "14:02", "Makes sense. Should we add a linter so formatting never shows up in reviews?"),
    ("precommit", "Ana", "14:03", "Yes, let's run black and ruff in pre-commit."),
    (None, "coder-agent", "14:04", "I'll add a pre-commit config with black and ruff to the monorepo."),
    (None, "Eli", "14:05", "Can we also agree that screenshots are required for UI PRs?"),
    ("ui_screens", "Ana", "14:06", "Agreed, UI PRs need before/after screenshots."),
])
sess("billing-db-decision", "2026-11-04", [
    ("db_compare", "coder-agent", "10:00",
     "Comparison for the billing service datastore: Postgres gives us ACID transactions, foreign keys for the ledger, "
     "mature tooling (pg_dump, logical replication) and the team already runs it for the core app. MongoDB would make "
     "the flexible invoice line items easier, but multi-document transactions are slower and we would need a second "
     "backup pipeline. Benchmarks on the staging box: Postgres 16 sustained 4,100 ledger writes/s at p95 12 ms; "
     "MongoDB 7 sustained 3,300 writes/s at p95 19 ms. Recommendation: Postgres."),
    ("db_decision_pg", "Ana", "10:20", "Decision: the billing service will use Postgres 16, self-hosted on our existing cluster. MongoDB is out."),
    (None, "Bruno", "10:21", "Good, I'll write the migrations with Alembic."),
    (None, "Dana", "10:22", "Please record that as the official decision for billing."),
    ("db_pg_ack", "coder-agent", "10:23", "Recorded: billing datastore = PostgreSQL 16."),
])
sess("freeze-and-oncall", "2026-11-05", [
    ("freeze_v1", "Dana", "11:00", "Black Friday deploy freeze: no production deploys from Friday Nov 20 through Monday Nov 30. Hotfixes only with Ana's sign-off."),
    ("oncall_v1", "Chen", "11:02", "On-call rotation for the next weeks: Chen Nov 9-15, Bruno Nov 16-22, Ana Nov 23-29, Eli Nov 30-Dec 6, Bruno Dec 7-13, Chen Dec 14-20."),
    (None, "Eli", "11:03", "Works for me."),
    ("oncall_handoff", "Chen", "11:04", "Handoffs happen Monday at 10:00 in #ops, with a written summary of open incidents."),
    (None, "coder-agent", "11:05", "I'll put the rotation in the PagerDuty schedule."),
])
sess("pricing", "2026-11-06", [
    ("price_v1", "Dana", "15:00", "Pricing change approved: the Pro plan goes from $29 to $35 per seat per month starting January 1, 2027. The Team plan stays at $99 flat."),
    (None, "Bruno", "15:01", "Do existing customers get grandfathered?"),
    ("grandfather", "Dana", "15:02", "Existing Pro customers keep $29 until their renewal date, then move to the new price."),
    (None, "Eli", "15:03", "I'll update the pricing page copy, but not deploy until after the freeze."),
    (None, "Dana", "15:30", "Also, happy birthday Eli! Cake in the kitchen at 4."),
    (None, "Eli", "15:31", "Thanks! Chocolate, I hope."),
])
sess("incident-checkout", "2026-11-09", [
    ("checkout_incident", "Chen", "09:15",
     "Incident report INC-231: checkout was down on Sunday Nov 8 from 18:05 to 18:52 UTC (47 minutes). Customers got "
     "HTTP 500 on /api/checkout. Root cause: a PgBouncer config change on Saturday lowered default_pool_size for the "
     "payments backend from 40 to 4 (a typo in the Helm values). Under Sunday evening traffic the pool was exhausted "
     "and requests timed out. Fix: restored the pool size to 40 and added a CI check that alerts on pool setting "
     "diffs. Roughly 1,900 failed orders, about $61k GMV delayed, most recovered via retry emails."),
    (None, "Ana", "09:20", "Thanks Chen. Who reviewed the Helm change?"),
    (None, "Chen", "09:21", "Nobody, it was pushed directly. We'll require review for infra values files now."),
    ("infra_review", "Ana", "09:22", "Action item: branch protection on the infra repo, two approvals for values files."),
    (None, "coder-agent", "09:23", "I'll open the branch-protection PR for infra."),
])
sess("search-latency", "2026-11-10", [
    ("search_latency", "coder-agent", "10:00", "Task result: added a GIN index on products.search_vector and rewrote the ranking query. Search API p95 latency dropped from 820 ms to 310 ms; p99 from 2.1 s to 640 ms. Load test at 300 rps on staging."),
    (None, "Bruno", "10:01", "Nice. Any write amplification?"),
    (None, "coder-agent", "10:02", "Insert latency on products rose by 3 ms on average, acceptable."),
    (None, "Eli", "10:03", "Frontend debounce is now 150 ms so we make fewer search calls."),
])
sess("customers", "2026-11-11", [
    ("acme_sso", "Dana", "13:00", "Acme Corp call: they need SSO via Okta before they roll out to their 600 seats. Deadline is December 15."),
    ("globex_currency", "Dana", "13:01", "Globex complained that their invoices show USD instead of EUR. They're a French entity; the billing contact is Marie Dubois."),
    (None, "Bruno", "13:02", "That's the currency formatting bug I mentioned, will fix this week."),
    ("initech_churn", "Dana", "13:03", "Initech might churn; they're unhappy about the export speed. Their CSV exports take over 10 minutes."),
    (None, "coder-agent", "13:04", "I'll create tickets: SSO-Okta for Acme, BILL-88 currency for Globex, EXP-12 export speed for Initech."),
])
sess("billing-db-correction", "2026-11-12", [
    ("db_correction", "Ana", "16:00", "Change of plan on the billing datastore: we're switching from Postgres to CockroachDB. Acme's contract requires multi-region writes (EU and US), and self-hosted PG can't give us that without a lot of work."),
    (None, "Bruno", "16:01", "So the Alembic migrations still apply? Cockroach speaks the PG wire protocol."),
    (None, "Ana", "16:02", "Mostly, yes. Avoid sequences, use UUID primary keys."),
    ("db_correction_ack", "coder-agent", "16:03", "Updated the decision record: billing datastore = CockroachDB (multi-region), replacing PostgreSQL 16."),
    ("cockroach_cost", "Dana", "16:04", "Please tell finance the hosting cost goes up about $2,300/month."),
])
sess("friday-chat", "2026-11-13", [
    (None, "Eli", "12:30", "Anyone going to the board game night tonight?"),
    (None, "Bruno", "12:31", "Yes! I'm bringing Catan."),
    (None, "Chen", "12:32", "I'll skip, my kid has a football match tomorrow morning."),
    (None, "Dana", "12:33", "The coffee machine on floor 3 is broken again, use the one on floor 2."),
    (None, "Eli", "12:34", "Also the new ramen place on Market Street is great."),
    (None, "Ana", "12:35", "Have a good weekend everyone."),
])
sess("freeze-update", "2026-11-16", [
    ("freeze_v2", "Dana", "10:00", "Update on the code freeze: marketing moved the Cyber Monday campaign, so the freeze now runs from Tuesday Nov 24 to Wednesday Dec 2 inclusive. Deploys on Nov 20-23 are allowed again."),
    (None, "Chen", "10:01", "So I can ship the Redis upgrade on the 23rd?"),
    (None, "Dana", "10:02", "Yes, if it's done by end of day on the 23rd."),
    ("price_v2", "Dana", "10:03", "Also a correction on pricing: finance wants the Pro plan at $39 per seat, not $35. Starts January 1 as planned."),
    (None, "Eli", "10:04", "OK, I'll change the pricing page to $39."),
])
sess("standup-2026-11-17", "2026-11-17", [
    ("globex_fixed", "Bruno", "09:45", "Yesterday I fixed BILL-88, invoices now use the customer's currency. Globex confirmed."),
    ("preprod_flaky", "Chen", "09:46", "Pre-prod environment is flaky; the DB there keeps running out of disk."),
    (None, "Eli", "09:47", "Pricing page ready behind a flag."),
    ("export_result", "coder-agent", "09:48", "Export speed: the streaming CSV prototype reduces Initech's export from 11 min to 90 s."),
    (None, "Ana", "09:49", "Great, ship after freeze."),
])
sess("oncall-swap", "2026-11-18", [
    ("oncall_swap", "Bruno", "11:00", "I'm out Dec 7-11 for my wedding, so I can't do my on-call week."),
    ("oncall_v2", "Chen", "11:02", "Swap agreed: Priya takes the on-call week of Dec 7-13, and Bruno takes Priya's week of Jan 4 instead."),
    (None, "Priya", "11:03", "Fine by me. Please share the runbook for the payments backend."),
    ("runbook", "Chen", "11:04", "Runbooks are in the ops wiki under /runbooks/payments."),
    (None, "Dana", "11:05", "Congrats Bruno!"),
])
sess("incident-preprod", "2026-11-19", [
    ("staging_incident", "Chen", "08:30", "Postmortem for the staging outage on Nov 18: the staging Postgres volume filled to 100% because DEBUG-level query logging was left on after the search index work; 180 GB of logs in two days. Fix: log level back to WARN, log rotation at 5 GB, and a disk-usage alert at 80%."),
    (None, "coder-agent", "08:31", "That was my change, sorry. I've added a check in the deploy script that refuses DEBUG log level outside local."),
    (None, "Ana", "08:32", "No blame. Thanks for the guard."),
])
sess("webhooks-design", "2026-11-20", [
    ("webhook_design", "Bruno", "15:00",
     "Design for webhook retries on the payments backend. Every outgoing event gets an idempotency key (the event id) "
     "so receivers can dedupe. Delivery: POST with a 10 s timeout; anything but a 2xx is a failure. Retries use "
     "exponential backoff starting at 30 seconds and doubling up to a cap of 6 hours, at most 12 attempts spread "
     "over roughly 48 hours; after the last attempt the event goes to a dead-letter queue in SQS and the customer's "
     "admin gets an email. Payloads are signed with HMAC-SHA256 using a per-customer secret that can be rotated with "
     "a 24 h overlap. Ordering is not guaranteed; receivers should use the created_at field. We keep delivery logs "
     "for 30 days. Phase 2 adds a delivery-status view in the dashboard and manual replay."),
    (None, "Ana", "15:05", "Approve. Make the max attempts configurable per customer."),
    (None, "Eli", "15:06", "Do we show webhook delivery status in the dashboard?"),
    (None, "Bruno", "15:07", "Phase 2."),
])
sess("costs", "2026-11-23", [
    ("etl_cost", "Chen", "10:00", "Cost result: moving the nightly ETL jobs to spot instances cut the AWS bill from $14,200 to $9,800 per month. Two spot interruptions last week, both retried automatically."),
    (None, "Dana", "10:01", "Excellent, that pays for the Cockroach increase."),
    ("redis_upgrade", "Chen", "10:02", "Redis upgrade to 7.2 shipped today before the freeze, no issues."),
])
sess("flags-decision", "2026-11-24", [
    ("flags_decision", "Ana", "14:00", "Decision: we're dropping LaunchDarkly and moving feature flags to self-hosted Unleash, to save $1,100/month. Migration after the freeze."),
    (None, "Eli", "14:01", "I'll inventory our 42 flags."),
    ("trunk_decision", "Ana", "14:02", "Second decision: we move to trunk-based development, with short-lived branches of under 2 days."),
    (None, "Bruno", "14:03", "OK."),
])
sess("incident-login", "2026-11-25", [
    ("login_incident", "Chen", "09:00", "Incident INC-240: login failed for all users from 07:10 to 07:38 UTC today because the TLS certificate for auth.nylonapp.io expired. cert-manager's renewal had been failing silently since Oct 30 due to a DNS-01 permission change. Fix: renewed manually, fixed the IAM role, added an expiry alert at 14 days."),
    ("hotfix_allowed", "Ana", "09:05", "The hotfix was allowed under the freeze since it's an outage."),
])
sess("thanksgiving-chat", "2026-11-27", [
    (None, "Eli", "16:00", "Half the US team is out today for Thanksgiving."),
    (None, "Priya", "16:01", "Leftover pie in the kitchen!"),
    (None, "Bruno", "16:02", "Wedding planning update: the caterer finally confirmed."),
    (None, "Dana", "16:03", "Enjoy the long weekend."),
])
sess("standup-2026-11-30", "2026-11-30", [
    ("handoff_1130", "Chen", "10:00", "On-call handoff: Ana to Eli. One open incident: the flaky pre-prod DB, no customer impact."),
    ("ana_pref_late", "Ana", "10:01", "Reminder: please don't request reviews from me after 4pm, I won't see them until the next morning."),
    ("acme_status", "Dana", "10:02", "Acme confirmed the Okta SSO timeline is still Dec 15; they're testing in their sandbox."),
    ("cockroach_progress", "coder-agent", "10:03", "CockroachDB cluster for billing is provisioned in eu-west-1 and us-east-1; replication lag under 400 ms."),
    (None, "Eli", "10:04", "Unleash staging instance is up."),
])
sess("standup-2026-11-10", "2026-11-10", [
    (None, "Dana", "09:30", "Standup. Reminder: customer call with Acme tomorrow at 1pm."),
    (None, "Bruno", "09:31", "Payments backend p99 is at 1.2 s on the invoice list endpoint, looking into it."),
    (None, "Chen", "09:32", "Post-incident cleanup for INC-231 is done; the pool-size CI check is live."),
    (None, "Eli", "09:33", "Checkout page flag is at 100% for internal users."),
    (None, "Priya", "09:34", "I'm new on the team this week, mostly reading runbooks and the billing code."),
    (None, "Ana", "09:35", "Welcome Priya! Pair with Bruno on the billing service this week."),
    (None, "coder-agent", "09:36", "Working on the search latency ticket SRCH-19 today."),
])
sess("retro-2026-11-20", "2026-11-20", [
    (None, "Ana", "16:00", "Retro time. What went well this sprint?"),
    (None, "Bruno", "16:01", "Invoices are finally correct for EU customers."),
    (None, "Chen", "16:02", "The new disk alerts caught two issues before they became outages."),
    (None, "Eli", "16:03", "What didn't go well: too many Slack pings during focus time."),
    (None, "Priya", "16:04", "Onboarding docs for Postgres access were outdated, it took me two days to get credentials."),
    (None, "Dana", "16:05", "Action: Priya updates the onboarding doc; Eli proposes quiet hours."),
    (None, "Eli", "16:06", "Proposal: no meetings and no pings between 1pm and 3pm."),
    (None, "Ana", "16:07", "Sounds good, let's try quiet hours for two weeks."),
    (None, "coder-agent", "16:08", "Retro notes saved to the wiki page Retro/2026-11-20."),
])
sess("planning-2026-11-26", "2026-11-26", [
    (None, "Dana", "10:00", "Planning for December: Acme SSO, Unleash migration, webhook retries phase 1, pricing page launch on Jan 1."),
    (None, "Bruno", "10:01", "Webhook retries phase 1 needs about 8 days of work."),
    (None, "Eli", "10:02", "Pricing page is done, it just waits for the freeze to end and the Jan 1 switch."),
    (None, "Chen", "10:03", "I want a day for the Postgres minor version upgrade on the core app, 15.4 to 15.8."),
    (None, "Ana", "10:04", "OK, but schedule it after the freeze."),
    (None, "Priya", "10:05", "I'll take the Okta SSO integration for Acme, I did SAML at my last job."),
    (None, "Dana", "10:06", "Great. Let's also book the team dinner on Dec 10."),
    (None, "Eli", "10:07", "The Italian place near the office? I love their lasagna."),
    (None, "coder-agent", "10:08", "Created the December milestone with 14 tickets."),
])
# private to the writer (agent 1): agent 2 must never see it
sess("sales-private", "2026-11-26", [
    ("acme_discount", "Dana", "11:00", "Confidential: Acme's renewal includes a 30% discount on Pro seats for 2027, approved by the CEO; do not share outside sales."),
], visibility="private")

# Questions: (id, category, question, expected eids (any = hit), stale eids, kind)
# kind: "find" (expected must be retrieved), "abstain" (no_match expected), "private" (asked by agent 2: the
#       private eid must be absent), "all" (every expected eid should be in top 10; hit@k counts any, all@10 reported)
Q = [
    ("q01", "correction", "Which database did we pick for billing?", ["db_correction", "db_correction_ack"], ["db_decision_pg", "db_pg_ack"], "find"),
    ("q02", "correction", "What's the current deploy freeze window?", ["freeze_v2"], ["freeze_v1"], "find"),
    ("q03", "correction", "Who is on call next week?", ["oncall_v2"], ["oncall_v1"], "find"),
    ("q04", "correction", "What is the new price of the Pro plan?", ["price_v2"], ["price_v1"], "find"),
    ("q05", "correction", "Are we still using Postgres for the billing service?", ["db_correction", "db_correction_ack"], ["db_decision_pg", "db_pg_ack"], "find"),
    ("q06", "correction", "Who is on call the week of December 7?", ["oncall_v2"], ["oncall_v1"], "find"),
    ("q07", "direct", "Why did the checkout outage happen?", ["checkout_incident"], [], "find"),
    ("q08", "direct", "What did Ana ask us to avoid in code reviews?", ["ana_pref_avoid"], [], "find"),
    ("q09", "direct", "When does Ana prefer to do code reviews?", ["ana_pref_morning", "ana_pref_late"], [], "find"),
    ("q10", "direct", "How much did search latency improve?", ["search_latency"], [], "find"),
    ("q11", "direct", "How much did we save by moving ETL to spot instances?", ["etl_cost"], [], "find"),
    ("q12", "direct", "What does Acme need and by when?", ["acme_sso", "acme_status"], [], "find"),
    ("q13", "direct", "What caused the login outage?", ["login_incident"], [], "find"),
    ("q14", "direct", "Which feature flag tool are we moving to?", ["flags_decision"], [], "find"),
    ("q15", "direct", "How many orders failed during the checkout incident?", ["checkout_incident"], [], "find"),
    ("q16", "direct", "What is the webhook retry policy?", ["webhook_design"], [], "find"),
    ("q17", "direct", "Are existing Pro customers grandfathered on the old price?", ["grandfather"], [], "find"),
    ("q18", "paraphrase", "What went wrong with the pre-prod database?", ["staging_incident"], [], "find"),
    ("q19", "paraphrase", "Which DB does the payments backend run on now?", ["db_correction", "db_correction_ack", "cockroach_progress"], ["db_decision_pg", "db_pg_ack"], "find"),
    ("q20", "paraphrase", "What PG connection issue took down purchases?", ["checkout_incident"], [], "find"),
    ("q21", "paraphrase", "When is the code freeze?", ["freeze_v2"], ["freeze_v1"], "find"),
    ("q22", "paraphrase", "How much cheaper is our cloud bill after changing the batch jobs?", ["etl_cost"], [], "find"),
    ("q23", "paraphrase", "Which customer is unhappy about slow data downloads?", ["initech_churn", "export_result"], [], "find"),
    ("q24", "paraphrase", "Who is the contact at the French customer with the invoice problem?", ["globex_currency"], [], "find"),
    ("q25", "paraphrase", "How fast is product search now?", ["search_latency"], [], "find"),
    ("q26", "paraphrase", "What did we agree about pull request size?", ["ana_pref_avoid"], [], "find"),
    ("q27", "paraphrase", "Why did sign-in break for everyone?", ["login_incident"], [], "find"),
    ("q28", "temporal", "What did we decide last Tuesday?", ["flags_decision", "trunk_decision"], [], "find"),
    ("q29", "temporal", "What happened on November 8?", ["checkout_incident"], [], "find"),
    ("q30", "temporal", "What did we discuss on Monday?", ["handoff_1130", "ana_pref_late", "acme_status", "cockroach_progress"], [], "find"),
    ("q31", "temporal", "What incidents did we have in November?", ["checkout_incident", "staging_incident", "login_incident"], [], "all"),
    ("q32", "temporal", "What decisions did we make on November 24?", ["flags_decision", "trunk_decision"], [], "find"),
    ("q46", "temporal", "What did we decide last week?", ["flags_decision", "trunk_decision"], [], "find"),
    ("q47", "correction", "Can I deploy to production on Friday November 20?", ["freeze_v2"], ["freeze_v1"], "find"),
    ("q33", "multihop", "Who covers on-call while Bruno is at his wedding?", ["oncall_v2"], ["oncall_v1"], "find"),
    ("q34", "multihop", "Which customer's requirement made us change the billing database?", ["db_correction"], [], "find"),
    ("q35", "multihop", "Where is the runbook for the service that had the checkout outage?", ["runbook"], [], "find"),
    ("q36", "multihop", "Does the spot instance saving cover the extra database hosting cost?", ["etl_cost", "cockroach_cost"], [], "all"),
    ("q37", "abstain", "What Kubernetes version do we run in production?", [], [], "abstain"),
    ("q38", "abstain", "Who approved the SOC 2 audit vendor?", [], [], "abstain"),
    ("q39", "abstain", "Is there a student discount on the Pro plan?", [], [], "abstain"),
    ("q40", "crosslingual", "Welche Datenbank haben wir für das Abrechnungssystem gewählt?", ["db_correction", "db_correction_ack"], ["db_decision_pg", "db_pg_ack"], "find"),
    ("q41", "crosslingual", "Pourquoi la page de paiement était-elle en panne le 8 novembre ?", ["checkout_incident"], [], "find"),
    ("q42", "crosslingual", "Wann gilt der aktuelle Deploy-Stopp?", ["freeze_v2"], ["freeze_v1"], "find"),
    ("q43", "crosslingual", "Quand Ana préfère-t-elle faire les revues de code ?", ["ana_pref_morning", "ana_pref_late"], [], "find"),
    ("q44", "privacy", "What discount did Acme get on their renewal?", ["acme_discount"], [], "private"),
    ("q45", "privacy-control", "What discount did Acme get on their renewal?", ["acme_discount"], [], "find"),
]


def call(base, key, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base.rstrip("/") + "/api/v1/" + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def eid_of(key, date, i, eid):
    return PFX + (eid or f"{key}-{i}")


def write(base, key):
    ids = {}
    n = 0
    for skey, date, turns, vis in S:
        body = {"session_key": PFX + skey, "end_session": True,
                "turns": [{"text": t, "speaker": sp, "occurred_at": f"{date}T{hm}:00Z",
                           "event_id": eid_of(skey, date, i, e)} for i, (e, sp, hm, t) in enumerate(turns)]}
        if vis:
            body["visibility"] = vis
        st, out = call(base, key, "POST", "memories/weave-session", body)
        if st not in (200, 201):
            sys.exit(f"weave-session {skey}: {st} {out}")
        ids.update(out["event_ids"])
        n += len(turns)
    print(f"wrote {n} turns in {len(S)} sessions", file=sys.stderr)
    return ids


def node_map(base, key):
    """event_id -> node id (replaying the writes is idempotent and answers the mapping)."""
    return write(base, key)


def fact_sources(base, key, node_id, cache):
    """Leaf ids a derived node (fact/summary) comes from, via governance lineage (best effort)."""
    if node_id in cache:
        return cache[node_id]
    st, g = call(base, key, "GET", f"memories/nodes/{node_id}/governance")
    src = set()
    if st == 200:
        for x in (g.get("lineage") or {}).get("sources", []):
            src.add(int(x["id"]))
    cache[node_id] = src
    return src


def ask(base, key, key2, verbose=False, dump=None):
    eid2node = {k.removeprefix(PFX): v for k, v in node_map(base, key).items()}
    node2eid = {v: k for k, v in eid2node.items()}
    cache = {}
    rows = []
    details = []
    for qid, cat, q, exp, stale, kind in Q:
        k_ = key2 if kind == "private" else key
        exp_ids = {eid2node[e] for e in exp}
        stale_ids = {eid2node[e] for e in stale}
        _, rs = call(base, k_, "POST", "memories/resonate", {"query": q, "k": 10, "reinforce": False})
        _, cx = call(base, k_, "POST", "context", {"query": q, "k": 10, "reinforce": False})
        hits = rs.get("hits", [])

        def label(nid, kind_):
            if nid in node2eid:
                return node2eid[nid]
            if kind_ != "leaf":
                src = fact_sources(base, key, nid, cache) & set(node2eid)
                return f"{kind_}<{','.join(sorted(node2eid[s] for s in src)) or '?'}>"
            return f"n{nid}"

        def is_exp(nid, kind_):
            if nid in exp_ids:
                return True
            if kind_ != "leaf" and nid not in node2eid:
                return bool(fact_sources(base, key, nid, cache) & exp_ids)
            return False

        def is_stale(nid, kind_):
            if nid in stale_ids:
                return True
            if kind_ != "leaf" and nid not in node2eid:
                s = fact_sources(base, key, nid, cache)
                return bool(s & stale_ids) and not (s & exp_ids)
            return False

        ranks = [i for i, h in enumerate(hits) if is_exp(h["node_id"], h["kind"])]
        stale_ranks = [i for i, h in enumerate(hits) if is_stale(h["node_id"], h["kind"])]
        recall = cx.get("recall", []) or []
        rec_ids = [it["node_id"] for it in recall]
        rec_kinds = ["leaf" if n in node2eid else "derived" for n in rec_ids]
        rec_folded = [it.get("folded") or [] for it in recall]
        no_match = cx.get("no_match")
        first_ok = None
        stale_first = None
        if kind == "abstain":
            h3 = h10 = None
            first_ok = bool(no_match)
        elif kind == "private":
            priv = eid2node["acme_discount"]
            leak_r = any(h["node_id"] == priv or priv in fact_sources(base, key, h["node_id"], cache)
                         for h in hits if h["kind"] != "leaf" or h["node_id"] == priv)
            leak_c = any(i == priv for i in rec_ids) or any("30% discount" in (it.get("text") or "") for it in recall)
            h3 = h10 = not leak_r
            first_ok = not leak_c
        else:
            h3 = any(r < 3 for r in ranks)
            h10 = bool(ranks)
            if kind == "all":
                found = {node2eid.get(h["node_id"]) for h in hits[:10]}
                for h in hits[:10]:
                    if h["kind"] != "leaf" and h["node_id"] not in node2eid:
                        found |= {node2eid.get(s) for s in fact_sources(base, key, h["node_id"], cache)}
                h10 = f"{len(set(exp) & found)}/{len(exp)}"
            if rec_ids:
                def exp_item(i):
                    return is_exp(rec_ids[i], rec_kinds[i]) or any(
                        is_exp(f, "leaf" if f in node2eid else "derived") for f in rec_folded[i])

                def stale_item(i):
                    return is_stale(rec_ids[i], rec_kinds[i]) or any(
                        is_stale(f, "leaf" if f in node2eid else "derived") for f in rec_folded[i])
                first_ok = exp_item(0)
                if stale:
                    pe = [i for i in range(len(rec_ids)) if exp_item(i)]
                    ps = [i for i in range(len(rec_ids)) if stale_item(i)]
                    stale_first = bool(ps) and (not pe or ps[0] < pe[0])
            else:
                first_ok = False
        top = [f"{label(h['node_id'], h['kind'])}:{h['score']:.3f}" for h in hits[:5]]
        ctx_top = [label(n, rec_kinds[i]) for i, n in enumerate(rec_ids[:3])]
        disputed = [it.get("disputed_by") for it in recall[:5] if it.get("disputed_by")]
        rows.append((qid, cat, q, h3, h10, first_ok, stale_first, no_match, ranks[:1], stale_ranks[:1], top, ctx_top))
        details.append({"qid": qid, "cat": cat, "q": q, "expected": exp, "stale": stale, "kind": kind,
                        "route": rs.get("route"), "hits": [{**h, "label": label(h["node_id"], h["kind"])} for h in hits],
                        "context_recall": [{**it, "label": label(rec_ids[i], rec_kinds[i])} for i, it in enumerate(recall)],
                        "no_match": no_match, "context_text": cx.get("dynamic"),
                        "disputed": disputed})
    # table
    fmt = lambda v: "-" if v is None else ("Y" if v is True else ("n" if v is False else str(v)))
    print(f"{'id':4} {'category':15} {'h@3':3} {'h@10':4} {'ctx1':4} {'stale1st':8} {'nomatch':7} rank stale  question / top-5 resonate / context top-3")
    for r in rows:
        qid, cat, q, h3, h10, f1, sf, nm, rk, srk, top, ctop = r
        print(f"{qid:4} {cat:15} {fmt(h3):3} {fmt(h10):4} {fmt(f1):4} {fmt(sf):8} {fmt(nm):7} {str(rk[0]+1 if rk else '-'):4} {str(srk[0]+1 if srk else '-'):5} {q}")
        if verbose:
            print("        resonate:", " ".join(top))
            print("        context :", " ".join(ctop))
    # per category summary
    print()
    cats = {}
    for r in rows:
        cats.setdefault(r[1], []).append(r)
    print(f"{'category':15} {'n':>3} {'hit@3':>6} {'hit@10':>7} {'ctx-first':>9} {'stale-first':>11}")
    for c, rr in cats.items():
        n = len(rr)
        def cnt(i):
            vals = [x[i] for x in rr if x[i] is not None]
            if not vals:
                return "-"
            ok = sum(1 for v in vals if v is True or (isinstance(v, str) and v.split('/')[0] != '0'))
            return f"{ok}/{len(vals)}"
        print(f"{c:15} {n:>3} {cnt(3):>6} {cnt(4):>7} {cnt(5):>9} {cnt(6):>11}")
    if dump:
        with open(dump, "w") as f:
            json.dump(details, f, indent=1, default=str)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8011")
    ap.add_argument("--key", required=True)
    ap.add_argument("--key2")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--ask", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    if a.write:
        write(a.url, a.key)
        print("written; abstraction and conflict checks run in the background: wait ~30-60 s before --ask",
              file=sys.stderr)
    if a.ask:
        if not a.key2:
            sys.exit("--ask needs --key2 (a second agent of the org) for the privacy question")
        ask(a.url, a.key, a.key2, a.verbose, a.json)
