"""GET /api/v1/assets/{id}/versions is keyset-paginated, newest first, with a bounded page: every row
carries a full body (up to 100,000 characters) and writers can add versions without end, so the
unpaged list could build an arbitrarily large response in memory."""

from __future__ import annotations

import pytest

from assets.apis import AssetVersionPage
from assets.models import Asset, AssetVersion

from .helpers import create_asset

pytestmark = pytest.mark.django_db

N_VERSIONS = 45  # more than two default pages


def _asset_with_versions(client, n: int = N_VERSIONS) -> int:
    """An asset with versions 1..n. Versions 2..n are inserted newest first, so their ids run
    against their numbers: the page order must follow ``version``, not ``id``."""
    asset_id = create_asset(client, body="v1")["id"]
    asset = Asset.objects.get(id=asset_id)
    AssetVersion.objects.bulk_create([
        AssetVersion(org=asset.org, asset=asset, version=v, title=f"T{v}", body=f"body {v}",
                     content_hash=f"{v:064d}", author_label="test")
        for v in range(n, 1, -1)
    ])
    Asset.objects.filter(id=asset_id).update(version=n)
    return asset_id


def _walk(client, url: str) -> tuple[list[int], list[dict]]:
    """Follow ``next`` to the end: every version number seen, in order, and every page's body."""
    seen: list[int] = []
    pages: list[dict] = []
    while url:
        r = client.get(url)
        assert r.status_code == 200, r.content
        page = r.json()
        pages.append(page)
        seen += [v["version"] for v in page["results"]]
        url = page["next"]
    return seen, pages


def test_versions_are_paged_newest_first_without_skips_or_repeats(world, client_for):
    c = client_for(world["a"].member)
    asset_id = _asset_with_versions(c)
    seen, pages = _walk(c, f"/api/v1/assets/{asset_id}/versions")
    assert seen == list(range(N_VERSIONS, 0, -1))  # newest first, each exactly once
    assert [len(p["results"]) for p in pages] == [20, 20, 5]  # the default page, not everything
    assert set(pages[0]) == {"next", "previous", "results"} and pages[0]["previous"] is None
    first = pages[0]["results"][0]
    assert first["body"] == f"body {N_VERSIONS}" and first["title"] == f"T{N_VERSIONS}"  # rows keep their shape
    # an explicit page size, and back again through ``previous``
    seen7, pages7 = _walk(c, f"/api/v1/assets/{asset_id}/versions?limit=7")
    assert seen7 == seen and all(len(p["results"]) <= 7 for p in pages7)
    back = c.get(pages7[1]["previous"]).json()
    assert [v["version"] for v in back["results"]] == seen[:7]


def test_page_size_is_bounded(world, client_for):
    c = client_for(world["a"].member)
    asset_id = _asset_with_versions(c, n=AssetVersionPage.max_page_size + 5)
    url = f"/api/v1/assets/{asset_id}/versions"
    r = c.get(f"{url}?limit={AssetVersionPage.max_page_size}")
    assert r.status_code == 200 and len(r.json()["results"]) == AssetVersionPage.max_page_size
    for bad in (AssetVersionPage.max_page_size + 1, 0, "x"):
        r = c.get(f"{url}?limit={bad}")
        assert r.status_code == 400 and "limit" in r.json()["error"]["fields"], bad
    r = c.get(f"{url}?cursor=not-a-cursor")
    assert r.status_code == 400 and "cursor" in r.json()["error"]["fields"]


def test_access_rules_are_unchanged_on_every_page(world, client_for):
    a, b = world["a"], world["b"]
    c = client_for(a.admin)
    asset_id = _asset_with_versions(c)
    url = f"/api/v1/assets/{asset_id}/versions"
    next_url = c.get(url).json()["next"]
    assert next_url
    # A private asset's history is its owner's only: a member, the org owner, the org's agent and
    # another org's users get a 404, a user of no org is refused, with or without a cursor taken
    # from the owner's pages.
    for who in (a.member, a.owner, a.key, b.owner, b.member):
        for u in (url, next_url):
            assert client_for(who).get(u).status_code == 404, (who, u)
    for u in (url, next_url):
        assert client_for(world["outsider"]).get(u).status_code == 403
        assert client_for(None).get(u).status_code in (401, 403)
    # another org's asset: a 404 here, readable by its own owner
    other = create_asset(client_for(b.owner), body="beta")["id"]
    assert c.get(f"/api/v1/assets/{other}/versions").status_code == 404
    assert [v["version"] for v in client_for(b.owner).get(f"/api/v1/assets/{other}/versions").json()["results"]] == [1]
