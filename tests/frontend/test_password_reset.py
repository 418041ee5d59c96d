"""Self-service password reset by email: a one-time link from the configured public address, the
same answer whether an account exists or not, limits per email and per address, and a page that
says what to do on a server without mail."""

from __future__ import annotations

import logging
import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from teams.logfilters import InviteTokenFilter
from tests.teams.invites import invite

pytestmark = pytest.mark.django_db

User = get_user_model()
NEW_PASSWORD = "a-brand-new-password-77"
PUBLIC = "https://nylon.example.com"


@pytest.fixture
def mail(settings):
    settings.NYLON_EMAIL_HOST, settings.NYLON_PUBLIC_URL = "smtp.example.com", PUBLIC  # locmem receives it


def _email() -> str:
    # Unique per test: the per-email counters live in the shared Redis for an hour.
    return f"reset-{uuid.uuid4().hex[:10]}@example.com"


def _ip() -> str:
    return f"203.0.113.{uuid.uuid4().int % 250 + 1}"


def _ask(email: str, *, ip: str | None = None, **extra):
    return Client(REMOTE_ADDR=ip or _ip()).post("/password-reset/", {"email": email}, **extra)


def _link(message) -> str:
    (link,) = re.findall(rf"{re.escape(PUBLIC)}(/reset/\S+/\S+/)", message.body)
    return link


def _set_password(link: str, password: str = NEW_PASSWORD) -> tuple[Client, str, object]:
    """Opens the mailed link and posts ``password``: the client, the form's URL and the answer."""
    c = Client()
    r = c.get(link)
    form_url = r["Location"]
    assert r.status_code == 302 and form_url.endswith("/set-password/")  # the token leaves the URL
    return c, form_url, c.post(form_url, {"new_password1": password, "new_password2": password})


def test_a_mailed_link_sets_a_new_password_and_ends_other_sessions(mail, mailoutbox):
    email = _email()
    user = User.objects.create_user("rita", email, "old-password-123")
    elsewhere = Client()
    elsewhere.force_login(user)
    assert elsewhere.get("/console/").status_code == 403  # signed in (in no org)

    r = _ask(email.upper())
    assert r.status_code == 302 and r["Location"] == "/password-reset/sent/"
    (message,) = mailoutbox
    assert message.to == [email] and "rita" in message.body
    link = _link(message)

    c, form_url, r = _set_password(link, "short")
    assert r.status_code == 200 and "too short" in r.content.decode()  # Django's validators apply
    r = c.post(form_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert r.status_code == 302 and r["Location"] == "/reset/done/"
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)
    # The other browser's session was made with the old password: it is signed out.
    assert elsewhere.get("/console/")["Location"].startswith("/login/")
    # The link works once.
    again = Client().get(link, follow=True)
    assert b'data-valid="0"' in again.content


def test_the_answer_is_the_same_for_an_unknown_email_and_nothing_is_sent(mail, mailoutbox):
    r = _ask(_email())
    assert r.status_code == 302 and r["Location"] == "/password-reset/sent/"
    assert mailoutbox == []


def test_the_link_uses_the_public_url_not_the_request_host(mail, mailoutbox):
    email = _email()
    User.objects.create_user("host-check", email, "old-password-123")
    _ask(email, HTTP_HOST="localhost")
    (message,) = mailoutbox
    assert f"{PUBLIC}/reset/" in message.body and "localhost" not in message.body


def test_an_account_without_a_password_gets_one_and_can_then_accept_an_invitation(
        mail, mailoutbox, world, client_for, django_capture_on_commit_callbacks):
    # What the member-add of earlier versions left: an account with no usable password.
    email = _email()
    legacy = User.objects.create_user("legacy-member", email)
    assert not legacy.has_usable_password()
    with django_capture_on_commit_callbacks(execute=True):
        invite(client_for(world["a"].admin), email)
    (invitation_mail,) = mailoutbox
    (invite_path,) = re.findall(rf"{re.escape(PUBLIC)}(/invite/\S+)", invitation_mail.body)
    # It cannot sign in to accept yet: the invite page sends it to the login.
    assert Client().get(invite_path)["Location"].startswith("/login/")

    _ask(email)
    _set_password(_link(mailoutbox[1]))
    legacy.refresh_from_db()
    assert legacy.check_password(NEW_PASSWORD)
    browser = Client()
    assert browser.post("/login/", {"username": "legacy-member", "password": NEW_PASSWORD}).status_code == 302
    assert browser.post(invite_path, {"op": "accept"}).status_code == 302
    assert world["a"].org.memberships.filter(user=legacy).exists()


def test_inactive_accounts_get_no_mail(mail, mailoutbox):
    email = _email()
    User.objects.create_user("gone", email, "old-password-123", is_active=False)
    assert _ask(email).status_code == 302
    assert mailoutbox == []


def test_at_most_the_hourly_number_of_mails_per_email(mail, mailoutbox, settings):
    settings.NYLON_PASSWORD_RESETS_PER_HOUR = 2
    email = _email()
    User.objects.create_user("often", email, "old-password-123")
    answers = [_ask(email).status_code for _ in range(4)]
    assert answers == [302] * 4  # the same answer: saying "limit reached" would tell the account exists
    assert len(mailoutbox) == 2


def test_one_address_asking_too_often_gets_a_429(mail, mailoutbox, settings):
    settings.NYLON_PASSWORD_RESETS_PER_HOUR = 1  # 10 requests per address
    ip = _ip()
    for _ in range(10):
        assert _ask(_email(), ip=ip).status_code == 302
    r = _ask(_email(), ip=ip)
    assert r.status_code == 429 and int(r["Retry-After"]) > 0 and b"Too many attempts" in r.content


def test_without_mail_the_page_says_who_can_help_and_nothing_is_sent(settings, mailoutbox):
    settings.NYLON_EMAIL_HOST = ""
    email = _email()
    User.objects.create_user("nomail", email, "old-password-123")
    r = Client().get("/password-reset/")
    assert r.status_code == 200 and b'id="reset-no-mail"' in r.content and b"changepassword" in r.content
    assert _ask(email).status_code == 503
    assert mailoutbox == []


def test_the_login_page_links_to_the_reset():
    assert b'href="/password-reset/"' in Client().get("/login/").content


def test_a_failed_send_shows_the_same_page_and_is_logged(mail, mailoutbox, settings, caplog):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 1, 2  # refused
    email = _email()
    User.objects.create_user("unlucky", email, "old-password-123")
    with caplog.at_level(logging.ERROR, logger="django.contrib.auth"):
        r = _ask(email)
    assert r.status_code == 302 and r["Location"] == "/password-reset/sent/"
    assert any("Failed to send password reset email" in rec.getMessage() for rec in caplog.records)


def test_reset_tokens_stay_out_of_the_logs():
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1,
                               "Not Found: %s", ("/reset/MTI/cb5x1z-0123456789abcdef/",), None)
    InviteTokenFilter().filter(record)
    assert record.getMessage() == "Not Found: /reset/MTI/<token>/"
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1,
                               "Bad Request: /reset/MTI/set-password/", (), None)
    InviteTokenFilter().filter(record)
    assert record.getMessage() == "Bad Request: /reset/MTI/set-password/"
