"""A web process builds the engine caches of the orgs written to most recently when it starts
(``assets.context.warm_up``, run in a thread by the ASGI application): after a restart the proxy
passed its first requests through without memory, as the build did not fit its budget."""

from __future__ import annotations

import pytest

from assets import context
from memory.cache import get_cache

from .helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def test_the_recently_written_orgs_are_built_at_start(world, client_for, settings):
    a, b = world["a"], world["b"]
    weave(client_for(b.key), "Beta's older note.", session="b-1")
    weave(client_for(a.key), "Alpha's newest note.", session="a-1")
    get_cache().drop()
    assert get_cache().peek(a.org.id) is None and get_cache().peek(b.org.id) is None

    settings.NYLON_CACHE_WARM_ORGS = 1
    context.warm_up()
    assert get_cache().peek(a.org.id) is not None  # the most recent only
    assert get_cache().peek(b.org.id) is None

    get_cache().drop()
    assert context.warm_recent_orgs(2) == [a.org.id, b.org.id]
    assert get_cache().peek(b.org.id) is not None


def test_none_when_turned_off(world, client_for, settings):
    weave(client_for(world["a"].key), "Alpha's note.", session="a-1")
    get_cache().drop()
    settings.NYLON_CACHE_WARM_ORGS = 0
    context.warm_up()
    assert get_cache().peek(world["a"].org.id) is None
