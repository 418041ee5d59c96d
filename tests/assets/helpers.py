"""Helpers for the assets tests: weave through the real API, audit look-ups."""

from __future__ import annotations

from assets.models import Asset, AuditEvent


def weave(client, text: str, *, visibility: str = "private", session: str = "", team_id=None,
          occurred_at: str | None = None, speaker: str = "") -> int:
    body = {"text": text, "visibility": visibility, "session_key": session, "speaker": speaker}
    if team_id is not None:
        body["team_id"] = team_id
    if occurred_at:
        body["occurred_at"] = occurred_at
    r = client.post("/api/v1/memories/weave", body, format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"][0]


def create_asset(client, *, status: int = 201, **body) -> dict:
    body.setdefault("kind", "wiki")
    body.setdefault("title", "Runbook")
    r = client.post("/api/v1/assets", body, format="json")
    assert r.status_code == status, r.content
    return r.json()


def grant(client, object_type: str, object_id: int, *, status: int = 201, **grantee) -> dict:
    body = {"object_type": object_type, "object_id": object_id, **grantee}
    r = client.post("/api/v1/grants", body, format="json")
    assert r.status_code == status, r.content
    return r.json()


def approve(client, asset_id: int, *, version: int | None = None, status: int = 200) -> dict:
    """Approves ``version`` (the asset's current one if not given, as an approver who has just
    reviewed it): approving names the version reviewed."""
    if version is None:
        version = Asset.objects.get(id=asset_id).version
    r = client.post(f"/api/v1/assets/{asset_id}/transition", {"to": "approved", "expected_version": version},
                    format="json")
    assert r.status_code == status, r.content
    return r.json()


def moved(asset_id: int, to: str, **extra) -> dict:
    """A transition's body: a move to approved names the version reviewed, here the current one."""
    if to == "approved":
        extra.setdefault("expected_version", Asset.objects.get(id=asset_id).version)
    return {"to": to, **extra}


def last_event(org, **filters) -> AuditEvent | None:
    return AuditEvent.objects.filter(org=org, **filters).order_by("-id").first()
