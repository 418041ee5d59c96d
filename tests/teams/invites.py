"""Test helpers for the invitation flow: invite through the API, then accept in the console as the
invitee would (``/invite/<token>``)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from django.test import Client

PASSWORD = "a-long-enough-password-42"


def invite(api_client, email: str, role: str = "member", **headers) -> dict:
    r = api_client.post("/api/v1/members", {"email": email, "role": role}, format="json", **headers)
    assert r.status_code == 201, r.content
    return r.json()


def link_path(url: str) -> str:
    """The path of an ``invite_url`` (the test client talks to the app, not to its host)."""
    return urlsplit(url).path


def accept(user, url: str) -> Client:
    """``user`` (an existing account with the invited email) accepts in a fresh browser session."""
    c = Client()
    c.force_login(user)
    r = c.post(link_path(url), {"op": "accept"})
    assert r.status_code == 302, r.content
    return c


def sign_up(url: str, password: str = PASSWORD) -> Client:
    """A new email sets its password on the invite page (and is logged in)."""
    c = Client()
    r = c.post(link_path(url), {"password": password, "password_again": password})
    assert r.status_code == 302, r.content
    return c


def legacy_member(org, email: str, role: str = "member"):
    """An account as invitations made them before invitees chose a name: named by its email
    address (such accounts stay in databases that were used before)."""
    from django.contrib.auth import get_user_model

    from teams.models import Membership

    user = get_user_model().objects.create_user(email, email, PASSWORD)
    Membership.objects.create(org=org, user=user, role=role)
    return user


def refuse_smtp(settings) -> None:
    """Mail configured, but to a port nothing listens on: every send is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.NYLON_EMAIL_HOST, settings.NYLON_PUBLIC_URL = "127.0.0.1", "https://nylon.example.com"
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", port, 2
