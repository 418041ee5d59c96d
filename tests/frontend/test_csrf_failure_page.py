"""A console form refused for its CSRF token gets the console's page saying what to do (Django's own
said only "More information is available with DEBUG=True"), with nothing changed."""

from __future__ import annotations

import pytest
from django.test import Client

from teams.models import Team

pytestmark = pytest.mark.django_db


def test_a_form_without_its_token_is_refused_with_a_page_that_says_what_to_do(world):
    a = world["a"]
    c = Client(enforce_csrf_checks=True)
    c.force_login(a.owner)
    before = Team.objects.filter(org=a.org).count()
    r = c.post("/console/teams/", {"name": "Made without a token"}, HTTP_REFERER="http://testserver/console/teams/")
    assert r.status_code == 403
    body = r.content.decode()
    assert "Form expired" in body and "reload the page" in body and "DEBUG=True" not in body
    assert 'href="http://testserver/console/teams/"' in body  # back to the form's page
    assert Team.objects.filter(org=a.org).count() == before
    # another site's page is no way back
    r = c.post("/console/teams/", {"name": "x"}, HTTP_REFERER="https://evil.example/")
    assert r.status_code == 403 and "evil.example" not in r.content.decode()
