"""A console page whose GET raises a service's ValidationError was redirected to its own URL, which
raised again: a redirect loop the browser ends with "too many redirects". It is now a 400 page that
says why; a POST still goes back to its page with the message."""

from __future__ import annotations

import pytest
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory
from rest_framework import exceptions as drf

from frontend.console import console_view

pytestmark = pytest.mark.django_db


@console_view
def _refusing(request):
    raise drf.ValidationError({"after": ["No such memory to continue from."]})


def _request(method: str, user):
    request = getattr(RequestFactory(), method)("/console/somewhere/?after=7")
    request.user = user
    request.session = SessionStore()
    request._messages = FallbackStorage(request)
    return request


def test_a_get_that_cannot_be_shown_is_a_400_page_not_a_redirect_loop(world):
    r = _refusing(_request("get", world["a"].member))
    assert r.status_code == 400
    assert "No such memory to continue from." in r.content.decode()


def test_a_post_still_goes_back_with_the_message(world):
    r = _refusing(_request("post", world["a"].member))
    assert r.status_code == 302 and r.url == "/console/somewhere/?after=7"
