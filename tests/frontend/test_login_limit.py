"""Console sign-in: failed attempts are limited per account name and client address, and per
address; a refused attempt is not tried; the limit fails open when Redis is down."""

from __future__ import annotations

import logging
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "right-password-123"


@pytest.fixture
def user():
    # A fresh name per test: the counters live in the shared Redis for 15 minutes.
    return get_user_model().objects.create_user(f"ana-{uuid.uuid4().hex[:8]}", "ana@example.com", PASSWORD)


def _ip() -> str:
    return f"198.51.100.{uuid.uuid4().int % 250 + 1}"


def _sign_in(client: Client, username: str, password: str, **extra):
    return client.post("/login/", {"username": username, "password": password}, **extra)


def test_failures_past_the_limit_refuse_even_the_right_password(user, settings):
    settings.NYLON_LOGIN_FAILURES = 3
    ip = _ip()
    c = Client(REMOTE_ADDR=ip)
    for _ in range(3):
        r = _sign_in(c, user.username, "wrong")
        assert r.status_code == 200 and "_auth_user_id" not in c.session
    r = _sign_in(c, user.username, PASSWORD)
    assert r.status_code == 429 and int(r["Retry-After"]) > 0
    assert "Too many attempts" in r.content.decode() and "_auth_user_id" not in c.session
    # Case and spaces do not make a new name.
    assert _sign_in(c, f"  {user.username.upper()} ", PASSWORD).status_code == 429

    # Another address is not held up by this one's failures, and a success clears its own count.
    other = Client(REMOTE_ADDR=_ip())
    _sign_in(other, user.username, "wrong")
    r = _sign_in(other, user.username, PASSWORD)
    assert r.status_code == 302 and other.session["_auth_user_id"] == str(user.pk)


def test_a_success_resets_the_count(user, settings):
    settings.NYLON_LOGIN_FAILURES = 3
    ip = _ip()
    for _ in range(2):
        _sign_in(Client(REMOTE_ADDR=ip), user.username, "wrong")
    assert _sign_in(Client(REMOTE_ADDR=ip), user.username, PASSWORD).status_code == 302
    for _ in range(2):
        assert _sign_in(Client(REMOTE_ADDR=ip), user.username, "wrong").status_code == 200
    assert _sign_in(Client(REMOTE_ADDR=ip), user.username, PASSWORD).status_code == 302


def test_one_address_trying_many_names_is_limited(user, settings):
    settings.NYLON_LOGIN_FAILURES = 2  # 20 per address
    ip = _ip()
    for i in range(20):
        assert _sign_in(Client(REMOTE_ADDR=ip), f"guess-{i}", "wrong").status_code == 200
    assert _sign_in(Client(REMOTE_ADDR=ip), user.username, PASSWORD).status_code == 429


def test_behind_the_proxy_the_address_the_proxy_appended_counts(user, settings):
    settings.NYLON_LOGIN_FAILURES = 2
    proxy = "10.0.0.5"
    a, b = _ip(), _ip()
    for _ in range(2):
        _sign_in(Client(REMOTE_ADDR=proxy), user.username, "wrong", HTTP_X_FORWARDED_FOR=f"1.2.3.4, {a}")
    # Without the proxy setting the header is anyone's to forge: every client is the proxy's address.
    assert _sign_in(Client(REMOTE_ADDR=proxy), user.username, PASSWORD,
                    HTTP_X_FORWARDED_FOR=b).status_code == 429
    settings.NYLON_BEHIND_HTTPS_PROXY = True
    assert _sign_in(Client(REMOTE_ADDR=proxy), user.username, "wrong", HTTP_X_FORWARDED_FOR=a).status_code == 200
    assert _sign_in(Client(REMOTE_ADDR=proxy), user.username, "wrong", HTTP_X_FORWARDED_FOR=a).status_code == 200
    assert _sign_in(Client(REMOTE_ADDR=proxy), user.username, PASSWORD,
                    HTTP_X_FORWARDED_FOR=f"{b}, {a}").status_code == 429  # a forged first entry changes nothing
    ok = _sign_in(Client(REMOTE_ADDR=proxy), user.username, PASSWORD, HTTP_X_FORWARDED_FOR=b)
    assert ok.status_code == 302  # client b is not held up by client a


def test_without_redis_sign_in_works_and_says_so_in_the_log(user, settings, caplog):
    settings.NYLON_LOGIN_FAILURES = 1
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
                                   "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2}}}
    ip = _ip()
    with caplog.at_level(logging.WARNING, logger="nylon.ratelimit"):
        for _ in range(3):
            assert _sign_in(Client(REMOTE_ADDR=ip), user.username, "wrong").status_code == 200
        assert _sign_in(Client(REMOTE_ADDR=ip), user.username, PASSWORD).status_code == 302
    assert any("cache unavailable" in r.getMessage() for r in caplog.records)


def test_the_admin_sign_in_is_held_to_the_same_limit_counted_with_the_consoles(settings):
    settings.NYLON_LOGIN_FAILURES = 3
    boss = get_user_model().objects.create_superuser(f"boss-{uuid.uuid4().hex[:8]}", "boss@example.com", PASSWORD)
    ip = _ip()
    admin_client = Client(REMOTE_ADDR=ip)
    for _ in range(2):
        assert admin_client.post("/admin/login/", {"username": boss.username, "password": "wrong"}).status_code == 200
    assert _sign_in(Client(REMOTE_ADDR=ip), boss.username, "wrong").status_code == 200
    r = admin_client.post("/admin/login/", {"username": boss.username, "password": PASSWORD})
    assert r.status_code == 429 and int(r["Retry-After"]) > 0 and "_auth_user_id" not in admin_client.session
    assert _sign_in(Client(REMOTE_ADDR=ip), boss.username, PASSWORD).status_code == 429

    elsewhere = Client(REMOTE_ADDR=_ip())
    r = elsewhere.post("/admin/login/", {"username": boss.username, "password": PASSWORD, "next": "/admin/"})
    assert r.status_code == 302 and elsewhere.session["_auth_user_id"] == str(boss.pk)


def _fullwidth(text: str) -> str:
    """The same name in fullwidth forms ('bea' -> 'ｂｅａ'), which Django's UsernameField
    NFKC-normalises back to the name it signs in."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def test_compatibility_spellings_of_a_name_share_its_count(user, settings):
    """The counter was keyed on the typed name casefolded only: fullwidth 'ｂｅａ' (or a ligature)
    had a count of its own yet signed in as 'bea', so each spelling was NYLON_LOGIN_FAILURES
    more guesses at one account's password."""
    settings.NYLON_LOGIN_FAILURES = 3
    wide = _fullwidth(user.username)
    assert wide != user.username
    # the sign-in form itself takes the fullwidth spelling for the account
    ok = Client(REMOTE_ADDR=_ip())
    assert _sign_in(ok, wide, PASSWORD).status_code == 302 and ok.session["_auth_user_id"] == str(user.pk)

    ip = _ip()
    for name in (user.username, wide, f"\u3000{wide.upper()}"):  # plain, fullwidth, upper with a wide space
        assert _sign_in(Client(REMOTE_ADDR=ip), name, "wrong").status_code == 200
    for name in (wide, user.username):
        c = Client(REMOTE_ADDR=ip)
        assert _sign_in(c, name, PASSWORD).status_code == 429 and "_auth_user_id" not in c.session


def test_an_accounts_name_and_email_count_failures_together(settings):
    settings.NYLON_LOGIN_FAILURES = 3
    name = f"dana-{uuid.uuid4().hex[:8]}"
    get_user_model().objects.create_user(name, f"{name}@example.com", PASSWORD)
    ip = _ip()
    for typed in (name, f"{name}@example.com", name.upper()):
        assert _sign_in(Client(REMOTE_ADDR=ip), typed, "wrong").status_code == 200
    assert _sign_in(Client(REMOTE_ADDR=ip), f"{name}@EXAMPLE.com", PASSWORD).status_code == 429
