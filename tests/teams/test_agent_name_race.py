"""An agent name taken between the service's check and its write (a concurrent request) is the
same 400 on `name` as a name taken before, not an IntegrityError 500."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError

from teams import services
from teams.auth import actor_for_user
from teams.models import Agent

pytestmark = pytest.mark.django_db


def _check_misses_the_concurrent_row():
    # The pre-check ran before the other request committed: it saw no agent of that name.
    return mock.patch.object(QuerySet, "exists", return_value=False)


def test_create_with_a_name_taken_concurrently_is_400(world):
    a = world["a"]
    with _check_misses_the_concurrent_row(), pytest.raises(ValidationError) as exc:
        services.agent_create(actor=actor_for_user(a.admin, a.org), name=a.agent.name)
    assert "name" in exc.value.detail
    assert Agent.objects.filter(org=a.org, name=a.agent.name).count() == 1

