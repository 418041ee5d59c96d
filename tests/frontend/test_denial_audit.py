"""A refusal is audited exactly once, the same way through the console and through the API
(``assets.audit.record_denial``): a refusal raised by a service gets one entry naming the request's
object; a refusal the access module already recorded gets no second one."""

from __future__ import annotations

import pytest

from assets import services
from assets.models import AuditEvent
from memory.models import Visibility

from .conftest import actor

pytestmark = pytest.mark.django_db


def _denials(org, since: int) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(org=org, outcome="denied", id__gt=since).order_by("id"))


def _last_id() -> int:
    return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


@pytest.fixture
def skill(world):
    a = world["a"]
    return services.asset_create(actor=actor(a.owner, a.org), kind="skill", title="Escalation", body="b",
                                 visibility=Visibility.ORG)


def test_a_service_refusal_is_recorded_once_by_console_and_api(world, skill, login, client_for):
    a = world["a"]
    # binding is for admins: the member passes the access checks and the service refuses
    since = _last_id()
    r = login(a.member).post(f"/console/assets/{skill.id}/", {"op": "bind", "agent": a.agent.id, "mode": "full",
                                                             "priority": 100})
    assert r.status_code == 403
    r2 = client_for(a.member).post(f"/api/v1/agents/{a.agent.id}/bindings", {"asset_id": skill.id}, format="json")
    assert r2.status_code == 403
    console, api = _denials(a.org, since)
    assert (console.action, console.object_type, console.object_id) == (
        "post.console.asset_detail", "console", str(skill.id))
    assert (api.action, api.object_type, api.object_id) == ("post.AgentBindingListApi", "api", str(a.agent.id))
    for ev in (console, api):
        assert (ev.actor_kind, ev.actor_id) == ("user", a.member.id)
        assert ev.reason == "Only org admins or admins of the agent's team manage its bindings."
    assert console.request_id and api.request_id == r2.json()["request_id"]


def test_a_refusal_the_access_module_recorded_is_not_recorded_again(world, skill, login, client_for):
    a = world["a"]
    since = _last_id()
    assert login(a.member).post(f"/console/assets/{skill.id}/", {"op": "transition", "to": "candidate"}).status_code \
        == 403
    assert client_for(a.member).post(f"/api/v1/assets/{skill.id}/transition", {"to": "candidate"},
                                     format="json").status_code == 403
    assert [(e.action, e.object_type, e.reason) for e in _denials(a.org, since)] == [
        ("asset.write", "asset", "not_owner")] * 2
