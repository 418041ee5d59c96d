"""The reflection tick must not starve orgs with an LLM: sessions that cannot be reflected now
(their org has none, given up, not due) used to match every tick and, a thousand of them, fill the
unordered ``[:1000]`` pick."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import MemorySession
from reflection import services
from reflection.models import SessionWork

pytestmark = pytest.mark.django_db

S = MemorySession.Status


def sessions(member, n: int, prefix: str, **fields) -> list[MemorySession]:
    past = timezone.now() - timedelta(days=2)
    return MemorySession.objects.bulk_create([
        MemorySession(org=member.org, owner_agent=member.agent, key=f"{prefix}{i}", started_at=past,
                      last_turn_at=past, ended_at=past, abstraction_status=S.DONE,
                      reflection_status=fields.get("reflection_status", S.OPEN)) for i in range(n)])


def works(made: list[MemorySession], **fields) -> None:
    SessionWork.objects.bulk_create([SessionWork(org_id=s.org_id, session=s, **fields) for s in made])


@pytest.fixture
def org_b_has_an_llm(world, no_llm, scripted_llm):
    org = world["b"].org
    org.settings = {"llm": {"url": scripted_llm.url, "key": scripted_llm.key}}
    org.save()


def test_skipped_sessions_of_an_org_without_llm_do_not_starve_another_org(world, org_b_has_an_llm):
    skipped = sessions(world["a"], 1001, "skipped-")
    works(skipped, reflection=SessionWork.Reflection.SKIPPED, reflection_detail="skipped: no LLM",
          reflection_attempts=1)
    fresh_a = sessions(world["a"], 1, "fresh-")[0]  # not yet marked: marked once, still
    (b,) = sessions(world["b"], 1, "b-")
    assert services.tick()["reflect"] == [b.id]
    assert MemorySession.objects.get(pk=b.pk).reflection_status == S.PENDING
    work = SessionWork.objects.get(session=fresh_a)
    assert work.reflection == "skipped" and work.reflection_detail == "skipped: no LLM"
    assert SessionWork.objects.filter(session__in=skipped, reflection_attempts=1).count() == 1001  # untouched


def test_given_up_and_not_due_sessions_do_not_starve_the_due_one(world, org_b_has_an_llm, settings):
    settings.NYLON_ABSTRACTION_MAX_ATTEMPTS = 3
    settings.NYLON_ABSTRACTION_RETRY_SECS = 600
    given_up = sessions(world["b"], 600, "given-up-", reflection_status=S.FAILED)
    works(given_up, reflection=SessionWork.Reflection.FAILED, reflection_attempts=3)
    recent = sessions(world["b"], 600, "recent-", reflection_status=S.FAILED)
    works(recent, reflection=SessionWork.Reflection.FAILED, reflection_attempts=1,
          reflection_tried_at=timezone.now())
    older = sessions(world["b"], 1, "older-", reflection_status=S.FAILED)[0]
    works([older], reflection=SessionWork.Reflection.FAILED, reflection_attempts=1,
          reflection_tried_at=timezone.now() - timedelta(hours=1))
    (new,) = sessions(world["b"], 1, "new-")
    assert services.tick()["reflect"] == [new.id, older.id]  # never tried first, then oldest try
    assert services.tick()["reflect"] == []  # both stamped: not due again yet


def test_pick_is_bounded(world, org_b_has_an_llm):
    made = sessions(world["b"], 1001, "b-")
    out = services.tick()["reflect"]
    assert out == [s.id for s in made[:1000]]
    assert services.tick()["reflect"] == [made[1000].id]


def test_abstractions_not_due_yet_do_not_starve_the_due_ones(world, settings):
    """The same for abstraction: a thousand failed sessions waiting out their retry period, then a
    never-tried one and one whose retry is due — both picked, never-tried first."""
    settings.NYLON_ABSTRACTION_RETRY_SECS = 600
    past = timezone.now() - timedelta(days=2)
    a = world["a"]

    def ended(n: int, prefix: str, status) -> list[MemorySession]:
        return MemorySession.objects.bulk_create([
            MemorySession(org=a.org, owner_agent=a.agent, key=f"{prefix}{i}", started_at=past, last_turn_at=past,
                          ended_at=past, abstraction_status=status, abstraction_attempts=1) for i in range(n)])

    waiting = ended(1001, "waiting-", S.FAILED)
    works(waiting, abstraction_tried_at=timezone.now())
    (due,) = ended(1, "due-", S.FAILED)
    works([due], abstraction_tried_at=timezone.now() - timedelta(hours=1))
    (never,) = ended(1, "never-", S.PENDING)
    picked = services.tick()["abstract"]
    assert picked == [never.id, due.id]
    assert services.tick()["abstract"] == []  # both stamped: not due again for the retry period
