"""The asset pages at 100k assets (and one asset with thousands of versions): every page is a few
bounded queries, never a full load, and listings never read asset or version bodies."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from assets.models import Asset

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

N = 100_000
VERSIONS = 3_000


def _bulk_assets(org_id: int, owner_id: int, team_id: int, n: int) -> None:
    """Org-wide assets of every kind and state; every 10th private (the owner's), every 1000th
    (never a private one) mentions zanzibar, every 5000th a candidate proposed for the team."""
    promotion = json.dumps({"visibility": "team", "team_id": team_id, "requested_by": "user:bulk"})
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO assets_asset (org_id, owner_user_id, kind, title, summary, body, node_ids, visibility,
                   status, version, content_hash, confidence, usage_count, promotion, last_move_note, created_at,
                   updated_at)
               SELECT %s, %s, (ARRAY['chat_memory','skill','wiki','persona','scenario'])[1 + g %% 5],
                      'Asset ' || g || CASE WHEN g %% 1000 = 7 THEN ' zanzibar' ELSE '' END, 'Bulk summary',
                      repeat('body text ', 200), '{}',
                      CASE WHEN g %% 10 = 0 THEN 'private' ELSE 'org' END,
                      CASE WHEN g %% 5000 = 0 THEN 'candidate'
                           ELSE (ARRAY['draft','approved','deprecated','archived'])[1 + g %% 4] END,
                      1, md5(g::text), 1, 0, CASE WHEN g %% 5000 = 0 THEN %s::jsonb ELSE '{}'::jsonb END,
                      '{}'::jsonb, now(), now()
               FROM generate_series(1, %s) AS g""",
            [org_id, owner_id, promotion, n],
        )
        cur.execute("ANALYZE assets_asset")


def _ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-asset-id="(\d+)"', html)]


def _asset_sql(q) -> list[str]:
    return [x["sql"] for x in q.captured_queries if 'FROM "assets_asset"' in x["sql"]]


def test_asset_list_pages_through_100k_assets_with_bounded_queries(world, login):
    a = world["a"]
    _bulk_assets(a.org.id, a.owner.id, a.team.id, N)
    c = login(a.member)
    with CaptureQueriesContext(connection) as q:
        html = c.get("/console/assets/").content.decode()
    first = _ids(html)
    assert len(first) == 50 and first == sorted(first, reverse=True)
    sql = _asset_sql(q)
    assert sql and all("LIMIT" in s for s in sql), sql
    assert not any('"body"' in s for s in sql)  # the list never reads bodies
    assert len(q.captured_queries) < 20
    # deep in the keyset: one bounded page of the member's readable (non-private) assets
    after = first[-1] - 90_000
    deep = _ids(c.get(f"/console/assets/?after={after}").content.decode())
    readable = Asset.objects.filter(org=a.org, visibility="org", id__lt=after).order_by("-id")
    assert deep == list(readable.values_list("id", flat=True)[:50])
    # filters stay bounded too
    for query in ("kind=skill", "status=approved", "visibility=org", "q=zanzibar&limit=200", "owner=me"):
        with CaptureQueriesContext(connection) as q:
            r = c.get(f"/console/assets/?{query}")
        assert r.status_code == 200 and all("LIMIT" in s for s in _asset_sql(q)), query
    hits = _ids(c.get("/console/assets/?q=zanzibar&limit=200").content.decode())
    assert len(hits) == N // 1000 and all("zanzibar" in t for t in
                                          Asset.objects.filter(id__in=hits).values_list("title", flat=True))
    assert _ids(c.get("/console/assets/?owner=me").content.decode()) == []
    # the approval queue of an org admin is bounded as well
    with CaptureQueriesContext(connection) as q:
        html = login(a.admin).get("/console/assets/").content.decode()
    assert 'id="awaiting-approval"' in html
    assert all("LIMIT" in s for s in _asset_sql(q)) and not any('"body"' in s for s in _asset_sql(q))


def test_asset_with_thousands_of_versions_loads_two_bodies(world, login):
    from assets import services
    from assets.models import AssetVersion

    from .conftest import actor

    a = world["a"]
    asset = services.asset_create(actor=actor(a.member, a.org), kind="wiki", title="Long history", body="v1")
    AssetVersion.objects.bulk_create([
        AssetVersion(org=a.org, asset=asset, version=v, title="Long history", body=f"line\nversion {v}",
                     content_hash=str(v), author_label="user:bulk") for v in range(2, VERSIONS + 1)
    ])
    Asset.objects.filter(id=asset.id).update(version=VERSIONS, body=f"line\nversion {VERSIONS}")
    c = login(a.member)
    with CaptureQueriesContext(connection) as q:
        html = c.get(f"/console/assets/{asset.id}/").content.decode()
    assert html.count('data-version="') - 1 == 100  # the newest 100 (plus the page's own attribute)
    assert f"version {VERSIONS - 1}" in html and f"version {VERSIONS}" in html  # the default diff
    version_sql = [x["sql"] for x in q.captured_queries if 'FROM "assets_assetversion"' in x["sql"]]
    with_body = [s for s in version_sql if '"body"' in s]
    assert len(with_body) == 1 and " IN (" in with_body[0]  # only the compared pair has bodies
    assert all("LIMIT" in s or " IN (" in s for s in version_sql), version_sql
