"""A request for a host Nylon does not serve (a balancer probing with its own ``Host``) is a 400 and
one warning line naming NYLON_ALLOWED_HOSTS. It was an ERROR with a ~30-line traceback per request,
telling the operator to edit ALLOWED_HOSTS, a setting they do not have."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_disallowed_host_is_a_400_and_one_warning_line(caplog):
    with caplog.at_level(logging.INFO):
        r = Client(HTTP_HOST="nylon.example.com").get("/healthz")
    assert r.status_code == 400
    records = [rec for rec in caplog.records if rec.name == "django.security.DisallowedHost"]
    assert len(records) == 1
    rec = records[0]
    assert rec.levelno == logging.WARNING and rec.exc_info is None and rec.exc_text is None
    message = rec.getMessage()
    assert "'nylon.example.com'" in message and "NYLON_ALLOWED_HOSTS" in message
    assert " ALLOWED_HOSTS" not in message.replace("NYLON_ALLOWED_HOSTS", "")
    assert "Traceback" not in caplog.text


def test_an_allowed_host_is_served():
    assert Client().get("/healthz").status_code == 200  # the same request with a served host
