"""Where an invitation link points: the configured public address (NYLON_PUBLIC_URL), never a
Host header someone could choose, and a mailed link only ever from that setting. Settings are
read once per process, so the configuration checks import them in a subprocess of their own."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from tests.settings_loader import load_settings

from .invites import invite

PUBLIC = "https://nylon.example.com"


@pytest.fixture
def spoofable(settings):
    """Any Host is accepted (an operator's ALLOWED_HOSTS=*, or a proxy passing Host on as sent)."""
    settings.ALLOWED_HOSTS = ["*"]
    settings.NYLON_PUBLIC_URL = PUBLIC


@pytest.mark.django_db
def test_api_link_starts_with_the_public_url_whatever_the_host_header(world, client_for, spoofable):
    body = invite(client_for(world["a"].admin), "host@example.com", HTTP_HOST="evil.example")
    assert body["invite_url"].startswith(f"{PUBLIC}/invite/"), body["invite_url"]


@pytest.mark.django_db
def test_console_link_starts_with_the_public_url_whatever_the_host_header(world, spoofable):
    admin = Client()
    admin.force_login(world["a"].admin)
    r = admin.post("/console/members/", {"email": "host@example.com", "role": "member"},
                                     HTTP_HOST="evil.example")
    assert r.status_code == 200
    assert r.context["invite_url"].startswith(f"{PUBLIC}/invite/"), r.context["invite_url"]


@pytest.mark.django_db
def test_mailed_link_is_the_public_one(world, client_for, spoofable, settings, mailoutbox,
                                       django_capture_on_commit_callbacks):
    settings.NYLON_EMAIL_HOST = "smtp.example.com"
    with django_capture_on_commit_callbacks(execute=True):
        body = invite(client_for(world["a"].admin), "mail@example.com", HTTP_HOST="evil.example")
    (mail,) = mailoutbox
    assert f"{PUBLIC}/invite/" in mail.body and "evil.example" not in mail.body
    assert body["invite_url"] is None  # mailed links are not shown to the admin


@pytest.mark.django_db
def test_console_says_a_mailed_link_was_sent_and_does_not_show_it(world, spoofable, settings, mailoutbox,
                                                                 django_capture_on_commit_callbacks):
    settings.NYLON_EMAIL_HOST = "smtp.example.com"
    admin = Client()
    admin.force_login(world["a"].admin)
    with django_capture_on_commit_callbacks(execute=True):
        r = admin.post("/console/members/", {"email": "mailed@example.com", "role": "member"})
    assert r.status_code == 200 and r.context["invite_url"] is None
    html = r.content.decode()
    assert 'id="invite-emailed"' in html and "mailed@example.com" in html and "/invite/" not in html
    (mail,) = mailoutbox
    assert f"{PUBLIC}/invite/" in mail.body


@pytest.mark.django_db
def test_without_a_public_url_nothing_is_mailed(world, client_for, settings, mailoutbox, caplog,
                                                django_capture_on_commit_callbacks):
    # Only reachable by overriding settings (the settings refuse this combination): the link
    # would come from the request's Host header, so it is not mailed; the admin still has it.
    settings.NYLON_EMAIL_HOST, settings.NYLON_PUBLIC_URL = "smtp.example.com", ""
    with caplog.at_level(logging.WARNING, logger="nylon.invitations"), \
            django_capture_on_commit_callbacks(execute=True):
        body = invite(client_for(world["a"].admin), "nomail@example.com")
    assert mailoutbox == []
    assert body["invite_url"].startswith("http://testserver/invite/")
    assert any("NYLON_PUBLIC_URL" in r.getMessage() for r in caplog.records)


def _settings(tmp_path, names=("NYLON_PUBLIC_URL", "EMAIL_BACKEND"), **env: str):
    return load_settings(tmp_path, names, **env)


def test_mail_needs_the_public_url(tmp_path):
    r = _settings(tmp_path, NYLON_EMAIL_HOST="smtp.example.com")
    assert r.returncode != 0 and "NYLON_PUBLIC_URL" in r.stderr, r.stderr[-2000:]
    r = _settings(tmp_path, NYLON_EMAIL_HOST="smtp.example.com", NYLON_PUBLIC_URL=f"{PUBLIC}/")
    assert r.returncode == 0, r.stderr[-2000:]
    values = json.loads(r.stdout.strip().splitlines()[-1])
    assert values == {"NYLON_PUBLIC_URL": PUBLIC, "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend"}


@pytest.mark.parametrize("value", ["nylon.example.com", "ftp://nylon.example.com", "https://nylon.example.com/app",
                                   "https://nylon.example.com/?x=1", "https://user@nylon.example.com",
                                   "https://nylon.example.com:8o8o", "https://nylon.example.com:99999"])
def test_a_public_url_that_is_not_scheme_host_port_is_refused(tmp_path, value):
    r = _settings(tmp_path, NYLON_PUBLIC_URL=value)
    assert r.returncode != 0 and "NYLON_PUBLIC_URL" in r.stderr, r.stderr[-2000:]


MAIL = ("EMAIL_PORT", "EMAIL_USE_TLS", "EMAIL_USE_SSL")


@pytest.mark.parametrize(("env", "expected"), [
    ({}, [587, True, False]),  # STARTTLS on its port
    ({"NYLON_EMAIL_SSL": "1"}, [465, False, True]),  # implicit TLS on its own port, not 587's
    ({"NYLON_EMAIL_SSL": "1", "NYLON_EMAIL_PORT": "2465"}, [2465, False, True]),
    ({"NYLON_EMAIL_TLS": "0"}, [587, False, False]),
])
def test_the_mail_port_follows_the_tls_mode(tmp_path, env, expected):
    r = _settings(tmp_path, names=MAIL, NYLON_EMAIL_HOST="smtp.example.com", NYLON_PUBLIC_URL=PUBLIC, **env)
    assert r.returncode == 0, r.stderr[-2000:]
    values = json.loads(r.stdout.strip().splitlines()[-1])
    assert [values[n] for n in MAIL] == expected


def test_starttls_and_implicit_tls_together_are_refused_at_start(tmp_path):
    """Django's SMTP backend refuses the pair only when it sends, and a failed send is only logged:
    every invitation would go unmailed while the API answered emailed: true."""
    r = _settings(tmp_path, names=MAIL, NYLON_EMAIL_HOST="smtp.example.com", NYLON_PUBLIC_URL=PUBLIC,
                  NYLON_EMAIL_SSL="1", NYLON_EMAIL_TLS="1")
    assert r.returncode != 0 and "NYLON_EMAIL_TLS" in r.stderr, r.stderr[-2000:]
