"""An operator's new tenant: ``manage.py create_org NAME --owner-email …`` makes the org with no
member and an owner invitation; the owner joins through the link like any invitee."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from assets.models import AuditEvent
from nylon_project.management.commands.nylon_run import Command as RunCommand
from teams.management.commands.create_org import Command as CreateOrgCommand
from teams.management.commands.create_org import default_base_url
from teams.models import Invitation, Membership, Organization, Role

from .invites import accept, link_path, refuse_smtp, sign_up

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _serving_on_the_defaults(monkeypatch, tmp_path):
    # the default link follows `make run`'s NYLON_HOST/NYLON_PORT: whatever this shell has set is not the test's
    monkeypatch.delenv("NYLON_HOST", raising=False)
    monkeypatch.delenv("NYLON_PORT", raising=False)
    # nor is a `make run` serving this checkout's data: a run lock of the test's own (none yet)
    monkeypatch.setattr("teams.management.commands.create_org.run_lock_path", lambda: tmp_path / "run.lock")


def create_org(*args: str) -> tuple[str, str | None]:
    out = io.StringIO()
    call_command("create_org", *args, stdout=out)
    text = out.getvalue()
    links = re.findall(r"https?://\S+/invite/\S+", text)
    return text, (links[0] if links else None)


def test_a_new_email_gets_an_org_it_owns_by_setting_a_password(client_for):
    text, link = create_org("Acme Corp", "--owner-email", "Ana@Acme.io")
    org = Organization.objects.get(slug="acme-corp")
    assert org.name == "Acme Corp" and "acme-corp" in text
    assert not Membership.objects.filter(org=org).exists()  # nobody until the owner accepts
    assert link.startswith("http://127.0.0.1:8000/invite/")
    inv = Invitation.objects.get(org=org)
    assert inv.role == Role.OWNER and inv.invited_by is None and inv.status == "pending"

    browser = sign_up(link)
    m = Membership.objects.get(org=org)
    assert m.role == Role.OWNER and m.user.email == "ana@acme.io"
    # The new owner runs the org from here: the console, and the API as that user.
    assert browser.get("/console/members/").status_code == 200
    c = client_for(m.user)
    r = c.get("/api/v1/org", HTTP_X_NYLON_ORG="acme-corp")
    assert r.status_code == 200 and r.json()["actor"]["role"] == "owner"
    assert c.post("/api/v1/agents", {"name": "first-agent"}, format="json",
                  HTTP_X_NYLON_ORG="acme-corp").status_code == 201

    actions = list(AuditEvent.objects.filter(org=org).order_by("id").values_list("action", "actor_label"))
    assert actions[:2] == [("org.create", "system"), ("member.invite", "system")]
    assert ("member.invite_accept", "user:ana") in actions


def test_an_existing_account_signs_in_and_accepts(world):
    outsider = world["outsider"]
    _, link = create_org("Gamma", "--owner-email", outsider.email, "--slug", "gamma")
    assert not Membership.objects.filter(org__slug="gamma").exists()
    accept(outsider, link)
    assert Membership.objects.get(org__slug="gamma", user=outsider).role == Role.OWNER


def test_the_link_starts_with_the_public_url_else_the_base_url(settings):
    _, link = create_org("Eps", "--owner-email", "e@example.com", "--base-url", "https://other.example.com/")
    assert link.startswith("https://other.example.com/invite/")
    settings.NYLON_PUBLIC_URL = "https://nylon.example.com"
    _, link = create_org("Delta", "--owner-email", "d@example.com", "--base-url", "https://other.example.com/")
    assert link.startswith("https://nylon.example.com/invite/")


@pytest.mark.parametrize(("env", "base"), [
    ({"NYLON_PORT": "8100"}, "http://127.0.0.1:8100"),
    ({"NYLON_PORT": " 8100 ", "NYLON_HOST": ""}, "http://127.0.0.1:8100"),
    ({"NYLON_HOST": "nylon.lan", "NYLON_PORT": "9000"}, "http://nylon.lan:9000"),
    ({"NYLON_HOST": "0.0.0.0", "NYLON_PORT": "8100"}, "http://127.0.0.1:8100"),  # bound everywhere: loopback here
    ({"NYLON_HOST": "::", "NYLON_PORT": "8100"}, "http://[::1]:8100"),
    ({"NYLON_HOST": "::1"}, "http://[::1]:8000"),
    ({"NYLON_PORT": ""}, "http://127.0.0.1:8000"),
], ids=["port", "blank-host", "host-and-port", "wildcard", "ipv6-wildcard", "ipv6", "blank-port"])
def test_without_a_public_url_the_link_points_where_the_instance_serves(monkeypatch, env, base):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    text, link = create_org("Port Org", "--owner-email", "p@example.com")
    assert link.startswith(f"{base}/invite/"), text


def test_the_default_is_what_nylon_run_serves_on(monkeypatch):
    def served() -> str:
        opts = RunCommand().create_parser("manage.py", "nylon_run").parse_args([])
        return f"http://{opts.host}:{opts.port}"

    assert default_base_url() == served() == "http://127.0.0.1:8000"
    monkeypatch.setenv("NYLON_HOST", "127.0.0.2")
    monkeypatch.setenv("NYLON_PORT", "8100")
    assert default_base_url() == served() == "http://127.0.0.2:8100"


def test_the_help_names_the_default_in_use(monkeypatch):
    monkeypatch.setenv("NYLON_PORT", "8100")
    text = " ".join(CreateOrgCommand().create_parser("manage.py", "create_org").format_help().split())
    assert "NYLON_PORT" in text and "http://127.0.0.1:8100" in text and "127.0.0.1:8000" not in text


@pytest.mark.parametrize("port", ["eighty", "0", "70000", "8000/tcp"])
def test_a_bad_port_is_named_and_nothing_is_created(monkeypatch, port):
    monkeypatch.setenv("NYLON_PORT", port)
    with pytest.raises(CommandError, match=rf"NYLON_PORT: '{re.escape(port)}' is not a port number.*--base-url"):
        create_org("Bad Port", "--owner-email", "b@example.com")
    assert not Organization.objects.filter(slug="bad-port").exists()
    # the console's address given some other way, NYLON_PORT is not needed
    _, link = create_org("Bad Port", "--owner-email", "b@example.com", "--base-url", "http://10.0.0.5:8100")
    assert link.startswith("http://10.0.0.5:8100/invite/")


def test_the_public_url_makes_the_port_irrelevant(monkeypatch, settings):
    monkeypatch.setenv("NYLON_PORT", "eighty")
    settings.NYLON_PUBLIC_URL = "https://nylon.example.com"
    _, link = create_org("Pub Org", "--owner-email", "q@example.com")
    assert link.startswith("https://nylon.example.com/invite/")


def test_the_link_is_mailed_after_commit_when_mail_is_configured(settings, mailoutbox,
                                                                 django_capture_on_commit_callbacks):
    settings.NYLON_EMAIL_HOST, settings.NYLON_PUBLIC_URL = "smtp.example.com", "https://nylon.example.com"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        text, link = create_org("Mailed Org", "--owner-email", "owner@mailed.io")
    assert mailoutbox == []  # not before the org and its invitation are committed
    for callback in callbacks:
        callback()
    (mail,) = mailoutbox
    assert mail.to == ["owner@mailed.io"] and "Mailed Org" in mail.subject and "Owner" in mail.body
    assert "emailed to owner@mailed.io" in text
    assert link in mail.body  # the operator, who can read the database anyway, sees it as well


@pytest.mark.django_db(transaction=True)  # the mail is sent on a real commit
def test_a_failed_send_says_so_and_the_same_command_with_the_slug_reissues(settings, mailoutbox):
    refuse_smtp(settings)
    with pytest.raises(CommandError, match="could not be sent.*--slug zeta"):
        create_org("Zeta", "--owner-email", "z@zeta.io")
    assert Invitation.objects.get(org__slug="zeta").status == "revoked"

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    text, link = create_org("ignored", "--owner-email", "z@zeta.io", "--slug", "zeta")
    assert "exists: a new owner invitation" in text
    assert Organization.objects.get(slug="zeta").name == "Zeta"
    (mail,) = mailoutbox
    assert link in mail.body
    statuses = sorted(i.status for i in Invitation.objects.filter(org__slug="zeta"))
    assert statuses == ["pending", "revoked"]


def test_reissuing_ends_the_old_link():
    _, first = create_org("Eta", "--owner-email", "h@eta.io", "--slug", "eta")
    _, second = create_org("Eta", "--owner-email", "H@ETA.io", "--slug", "eta")
    assert first != second
    assert Client().get(link_path(first)).status_code == 410
    sign_up(second)
    assert Membership.objects.get(org__slug="eta").role == Role.OWNER


def test_an_existing_member_is_made_owner_at_once(world):
    a = world["a"]
    text, link = create_org("x", "--owner-email", a.member.email, "--slug", "alpha")
    assert link is None and "now its owner" in text
    assert Membership.objects.get(org=a.org, user=a.member).role == Role.OWNER
    ev = AuditEvent.objects.filter(org=a.org, action="member.role").latest("id")
    assert ev.actor_label == "system" and ev.detail == {"from": "member", "to": "owner"}
    with pytest.raises(CommandError, match="Already an owner"):
        create_org("x", "--owner-email", a.member.email, "--slug", "alpha")


@pytest.mark.parametrize("args, field", [
    (["", "--owner-email", "a@b.io"], "name"),
    (["   ", "--owner-email", "a@b.io"], "name"),
    (["N" * 201, "--owner-email", "a@b.io"], "name"),
    (["Fine", "--owner-email", "not-an-email"], "owner_email"),
    (["Fine", "--owner-email", "a@b.io", "--slug", "Has Spaces"], "slug"),
    (["Fine", "--owner-email", "a@b.io", "--slug=-edge-"], "slug"),
])
def test_bad_input_is_refused_and_writes_nothing(args, field):
    orgs, invitations, events = Organization.objects.count(), Invitation.objects.count(), AuditEvent.objects.count()
    with pytest.raises(CommandError, match=f"^{field}: "):
        create_org(*args)
    assert (Organization.objects.count(), Invitation.objects.count(), AuditEvent.objects.count()) == (
        orgs, invitations, events)


def test_a_name_without_a_slug_gets_a_free_one():
    # (the same name twice is refused: test_a_second_org_of_the_same_name_needs_a_slug)
    create_org("Same Name", "--owner-email", "one@x.io")
    create_org("Same: Name", "--owner-email", "two@x.io")
    assert set(Organization.objects.values_list("name", "slug")) == {("Same Name", "same-name"),
                                                                     ("Same: Name", "same-name-2")}


def _hold_run_lock(path, line: str):
    """A run lock as nylon_run holds it (nylon_run.lock_instance): flocked, ``pid host:port``."""
    import fcntl
    import os

    fh = open(path, "w")
    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fh.write(f"{os.getpid()} {line}\n")
    fh.flush()
    return fh


@pytest.mark.parametrize("served, base", [
    ("127.0.0.1:8123", "http://127.0.0.1:8123"),
    ("0.0.0.0:8124", "http://127.0.0.1:8124"),
    ("::1:8125", "http://[::1]:8125"),
])
def test_the_link_points_where_the_running_instance_serves(monkeypatch, tmp_path, served, base):
    """Without NYLON_PORT in the operator's shell, the link followed nylon_run's default (:8000)
    although `make run` served elsewhere: the run lock of the data dir says where it serves."""
    fh = _hold_run_lock(tmp_path / "run.lock", served)
    try:
        assert default_base_url() == base
        assert create_org("Lockco", "--owner-email", "ana@lock.co")[1].startswith(f"{base}/invite/")
        monkeypatch.setenv("NYLON_PORT", "8999")  # the live run is where this data is served
        assert default_base_url() == base
    finally:
        fh.close()
    # a lock nobody holds is a run that ended: its port is not served
    assert default_base_url() == "http://127.0.0.1:8999"


def test_the_public_url_comes_before_the_running_instance(settings, tmp_path):
    settings.NYLON_PUBLIC_URL = "https://nylon.example.com"
    fh = _hold_run_lock(tmp_path / "run.lock", "127.0.0.1:8123")
    try:
        assert create_org("Pubco", "--owner-email", "ana@pub.co")[1].startswith("https://nylon.example.com/invite/")
    finally:
        fh.close()


def test_a_second_org_of_the_same_name_needs_a_slug():
    create_org("Acme", "--owner-email", "ana@acme.io")
    for name in ("Acme", " acme ", "ACME"):
        with pytest.raises(CommandError, match=r"An organisation named Acme exists \(slug acme\); pass --slug acme "
                                               r"to invite its owner again, or a new --slug to create another"):
            create_org(name, "--owner-email", "ana@acme.io")
    assert list(Organization.objects.values_list("slug", flat=True)) == ["acme"]
    # asked explicitly: a slug of its own
    text, link = create_org("Acme", "--owner-email", "bo@acme.io", "--slug", "acme-emea")
    assert link and Organization.objects.get(slug="acme-emea").name == "Acme"
