"""An operator's new tenant: ``manage.py create_org "Acme" --owner-email ana@acme.io``.

With ``--slug`` of an existing organisation it issues a new owner invitation instead (the first
one expired unused, or the org lost its owners); a member with that email is made owner at once."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from rest_framework.exceptions import ValidationError

from teams import services
from teams.models import Organization

# nylon_run's own defaults for NYLON_HOST and NYLON_PORT (tests/teams/test_create_org.py holds the
# two together). A fixed http://127.0.0.1:8000 pointed at another service, or at nothing, whenever
# the instance served on another port.
SERVE_HOST = "127.0.0.1"
SERVE_PORT = 8000
# A server bound to every interface is reached on this machine through loopback; a browser cannot
# open http://0.0.0.0:8000.
LOOPBACK_FOR = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def run_lock_path() -> Path:
    from nylon_project import embedded
    from nylon_project.management.commands.nylon_run import LOCK_NAME

    return embedded.nylon_home() / LOCK_NAME


def running_address() -> tuple[str, int] | None:
    """(host, port) of the ``nylon_run`` serving this data dir now, from its ``run.lock`` (``pid
    host:port``), or None. The lock must be held: a file left by a run that ended names a port
    nothing (or something else) listens on."""
    try:
        fh = open(run_lock_path())
    except OSError:
        return None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: a run is serving
            parts = fh.read().split()
        else:  # nobody holds it: the last run ended
            fcntl.flock(fh, fcntl.LOCK_UN)
            return None
    if len(parts) < 2 or ":" not in parts[1]:
        return None
    host, _, raw_port = parts[1].rpartition(":")
    try:
        port = int(raw_port)
    except ValueError:
        return None
    return (host.strip("[]") or SERVE_HOST, port) if 1 <= port <= 65535 else None


def _url(host: str, port: int) -> str:
    host = LOOPBACK_FOR.get(host, host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address, as a URL writes it
    return f"http://{host}:{port}"


def default_base_url() -> str:
    """Where this instance's console is served on this machine: the address of the ``nylon_run``
    running on this data dir (its run.lock), else NYLON_HOST and NYLON_PORT as ``manage.py
    nylon_run`` (``make run``) reads them, blank meaning its default."""
    running = running_address()
    if running is not None:
        return _url(*running)
    host = os.environ.get("NYLON_HOST", "").strip() or SERVE_HOST
    raw_port = os.environ.get("NYLON_PORT", "").strip()
    try:
        port = int(raw_port) if raw_port else SERVE_PORT
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise CommandError(f"NYLON_PORT: {raw_port!r} is not a port number (1-65535): fix it, or give the "
                           f"console's address with --base-url")
    return _url(host, port)


def default_base_url_or_why() -> str:
    # --help must work whatever NYLON_PORT holds: it is where an operator looks to find out why.
    try:
        return default_base_url()
    except CommandError as exc:
        return str(exc)


class Command(BaseCommand):
    help = ("Create an organisation and invite its first owner by email. The owner opens the link to "
            "set a password (new email) or sign in and accept (existing account); the link is mailed "
            "when NYLON_EMAIL_HOST is set, and printed here either way. The link starts with "
            "NYLON_PUBLIC_URL, else --base-url, else the address the running `make run` serves on (its run.lock "
            "in NYLON_HOME), else NYLON_HOST and NYLON_PORT. A name an organisation already has needs --slug.")

    def add_arguments(self, parser):
        parser.add_argument("name", help="the organisation's display name (kept as it is for an existing --slug)")
        parser.add_argument("--owner-email", required=True, help="who becomes its owner on accepting")
        parser.add_argument("--slug", default=None, help="its short name (X-Nylon-Org); made from the name "
                                                         "when omitted, refused then if an organisation has "
                                                         "this name (give a new slug to create another)")
        parser.add_argument("--base-url", default=None,
                            help="where the console is reached, for the link when NYLON_PUBLIC_URL is unset "
                                 "(default: where the running `make run` serves, else "
                                 "http://NYLON_HOST:NYLON_PORT, as `make run` would serve it, "
                                 f"{SERVE_HOST} and {SERVE_PORT} when unset; here {default_base_url_or_why()})")

    def handle(self, *args, name: str, owner_email: str, slug: str | None, base_url: str | None, **opts):
        # NYLON_PUBLIC_URL, when set, comes first (services): NYLON_PORT does not matter then.
        base_url = base_url or settings.NYLON_PUBLIC_URL or default_base_url()
        existing = Organization.objects.filter(slug=slug).first() if slug else None
        try:
            with transaction.atomic():
                if existing is not None:
                    org = existing
                    invitation, url = services.organization_invite_owner(org=org, owner_email=owner_email,
                                                                         base_url=base_url)
                else:
                    org, invitation, url = services.organization_create_for_email(
                        name=name, owner_email=owner_email, slug=slug, base_url=base_url)
        except ValidationError as exc:
            lines = [f"{field}: {' '.join(str(m) for m in msgs)}" for field, msgs in exc.detail.items()]
            raise CommandError("; ".join(lines)) from None
        if invitation is None:
            self.stdout.write(self.style.SUCCESS(f"{owner_email} was a member of '{org.slug}' and is now its owner."))
            return
        mailed = bool(settings.NYLON_EMAIL_HOST and settings.NYLON_PUBLIC_URL)
        if mailed and services.invitation_mail_failed(invitation):
            raise CommandError(f"The invitation email to {owner_email} could not be sent (see the log), so it "
                               f"was revoked. Once mail works, run this again with --slug {org.slug}.")
        if existing is None:
            self.stdout.write(self.style.SUCCESS(f"Organisation '{org.slug}' ({org.name}) created."))
        else:
            self.stdout.write(f"Organisation '{org.slug}' exists: a new owner invitation was issued.")
        how = f"emailed to {owner_email}" if mailed else f"pass it to {owner_email}"
        self.stdout.write(f"  owner invitation ({how}; valid {settings.NYLON_INVITE_TTL_DAYS} days):")
        self.stdout.write(f"  {url}")
