"""``assets.0006_assetversion_author`` on a database holding versions saved before it: the label
("agent:<name>", "user:<username>") is turned into author ids by two set-based UPDATEs, not one
per row (the migration holds an ACCESS EXCLUSIVE lock on the version table, and its foreign keys
lock ``teams_agent`` and ``auth_user`` against writes, until it commits); a person is found among
the version's org's members only, an agent among its org's agents not younger than the version.

The database is migrated back to 0005, given rows, and migrated forward again, for real: these
tests commit (``transaction=True``) and leave the schema migrated to the latest state."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("assets", "0005_assetversion_approved_at")
AUTHORS = ("assets", "0006_assetversion_author")


def _migrate(target):
    executor = MigrationExecutor(connection)
    targets = executor.loader.graph.leaf_nodes() if target is None else [target]
    return executor.migrate(targets)


@pytest.fixture
def before_authors():
    """The schema before author ids, and its historical models; the latest schema afterwards."""
    state = _migrate(BEFORE)
    try:
        yield state.apps
    finally:
        _migrate(None)


def _columns(table: str) -> set[str]:
    with connection.cursor() as cur:
        return {c.name for c in connection.introspection.get_table_description(cur, table)}


def _world(apps):
    """Two orgs. alpha: member alice, agent bot; beta: member bob (not of alpha), its own agent
    named bot. Versions in alpha labelled by alice, by bot, by bob (a name alpha has no member
    of), by an agent created after the version, by no one."""
    User = apps.get_model("auth", "User")
    Organization = apps.get_model("teams", "Organization")
    Membership = apps.get_model("teams", "Membership")
    Agent = apps.get_model("teams", "Agent")
    Asset = apps.get_model("assets", "Asset")
    AssetVersion = apps.get_model("assets", "AssetVersion")
    alpha = Organization.objects.create(name="Alpha", slug="alpha")
    beta = Organization.objects.create(name="Beta", slug="beta")
    alice = User.objects.create(username="alice")
    bob = User.objects.create(username="bob")
    Membership.objects.create(org=alpha, user=alice, role="member")
    Membership.objects.create(org=beta, user=bob, role="member")
    bot = Agent.objects.create(org=alpha, name="bot")
    beta_bot = Agent.objects.create(org=beta, name="bot")
    late = Agent.objects.create(org=alpha, name="late")
    asset = Asset.objects.create(org=alpha, kind="skill", title="Deploys", content_hash="h", owner_user=alice)
    labels = ["user:alice", "user:bob", "agent:late", "agent:ghost", "system"] + ["agent:bot"] * 6
    versions = {}
    for n, label in enumerate(labels, start=1):
        versions[n] = AssetVersion.objects.create(org=alpha, asset=asset, version=n, title="Deploys",
                                                  content_hash=f"h{n}", author_label=label).id
    # an agent given its name after the version was saved is not its author
    Agent.objects.filter(pk=late.pk).update(created_at=timezone.now() + dt.timedelta(hours=1))
    beta_asset = Asset.objects.create(org=beta, kind="skill", title="Beta", content_hash="b", owner_user=bob)
    beta_v = AssetVersion.objects.create(org=beta, asset=beta_asset, version=1, title="Beta", content_hash="b1",
                                         author_label="user:bob").id
    return {"alice": alice.id, "bob": bob.id, "bot": bot.id, "beta_bot": beta_bot.id, "versions": versions,
            "beta_version": beta_v}


def _authors() -> dict[int, tuple]:
    with connection.cursor() as cur:
        cur.execute("SELECT id, author_user_id, author_agent_id FROM assets_assetversion")
        return {pk: (user, agent) for pk, user, agent in cur.fetchall()}


def test_the_backfill_is_two_set_based_updates(before_authors):
    w = _world(before_authors)
    with CaptureQueriesContext(connection) as queries:
        _migrate(AUTHORS)
    updates = [q["sql"] for q in queries.captured_queries
               if q["sql"].lstrip().upper().startswith("UPDATE") and "assets_assetversion" in q["sql"]]
    assert len(updates) == 2, updates  # not one per version (six by bot alone)
    got = _authors()
    v = w["versions"]
    assert got[v[1]] == (w["alice"], None)
    for n in range(6, 12):
        assert got[v[n]] == (None, w["bot"])  # alpha's bot, not beta's namesake
    assert got[v[3]] == (None, None)  # the agent named "late" was created after the version
    assert got[v[4]] == (None, None) and got[v[5]] == (None, None)  # no such agent; no one
    assert got[w["beta_version"]] == (w["bob"], None)


def test_a_person_is_matched_among_the_versions_org_members_only(before_authors):
    """bob is a member of beta, not of alpha: alpha's version labelled "user:bob" (a renamed
    member's old name, taken since by someone elsewhere) is not recorded as his."""
    w = _world(before_authors)
    _migrate(AUTHORS)
    got = _authors()
    assert got[w["versions"][2]] == (None, None)
    assert got[w["beta_version"]] == (w["bob"], None)


def test_the_migration_reverses(before_authors):
    _world(before_authors)
    _migrate(AUTHORS)
    assert {"author_agent_id", "author_user_id"} <= _columns("assets_assetversion")
    _migrate(BEFORE)
    assert not {"author_agent_id", "author_user_id"} & _columns("assets_assetversion")
    _migrate(AUTHORS)  # and forward again, backfilling the same rows
    assert sum(1 for _, agent in _authors().values() if agent is not None) == 6
