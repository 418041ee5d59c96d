"""A session ended with end_session is enqueued once: the tick does not send it again until its
retry period has passed (before, after_weave left abstraction_tried_at NULL and the next tick sent
a duplicate at once). When the broker did not take the message, the tick still sends it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reflection import services, tasks

from .helpers import session, weave

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker(settings, monkeypatch):
    settings.NYLON_ENQUEUE_TASKS = True
    settings.NYLON_ABSTRACTION_RETRY_SECS = 300
    sent = []
    state = {"down": False}

    def delay(name):
        def send(*args):
            if state["down"]:
                raise ConnectionError("broker down")
            sent.append((name, args))
        return send

    for t in (tasks.abstract_session, tasks.detect_conflicts, tasks.reflect_session):
        monkeypatch.setattr(t, "delay", delay(t.name))
    return sent, state


def abstractions(sent) -> list:
    return [args for name, args in sent if name == "reflection.abstract_session"]


def test_the_tick_does_not_resend_a_session_just_enqueued(world, client_for, no_llm, broker,
                                                         django_capture_on_commit_callbacks):
    sent, _ = broker
    with django_capture_on_commit_callbacks(execute=True):
        weave(client_for(world["a"].key), "s1")
    s = session(world["a"].org, "s1")
    assert abstractions(sent) == [(s.id,)]
    assert s.id not in services.tick()["abstract"]
    later = timezone.now() + timedelta(seconds=301)  # still pending after its retry period: re-sent
    assert s.id in services.tick(now=later)["abstract"]


def test_a_message_the_broker_refused_is_sent_by_the_next_tick(world, client_for, no_llm, broker,
                                                              django_capture_on_commit_callbacks):
    sent, state = broker
    state["down"] = True
    with django_capture_on_commit_callbacks(execute=True):
        weave(client_for(world["a"].key), "s1")
    state["down"] = False
    assert abstractions(sent) == []
    assert session(world["a"].org, "s1").id in services.tick()["abstract"]
