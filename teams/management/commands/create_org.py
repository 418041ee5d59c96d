"""An operator's new tenant: ``manage.py create_org "Acme" --owner-email ana@acme.io``.

With ``--slug`` of an existing organisation it issues a new owner invitation instead (the first
one expired unused, or the org lost its owners); a member with that email is made owner at once."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from rest_framework.exceptions import ValidationError

from teams import services
from teams.models import Organization

DEFAULT_BASE_URL = "http://127.0.0.1:8000"


class Command(BaseCommand):
    help = ("Create an organisation and invite its first owner by email. The owner opens the link to "
            "set a password (new email) or sign in and accept (existing account); the link is mailed "
            "when NYLON_EMAIL_HOST is set, and printed here either way.")

    def add_arguments(self, parser):
        parser.add_argument("name", help="the organisation's display name (kept as it is for an existing --slug)")
        parser.add_argument("--owner-email", required=True, help="who becomes its owner on accepting")
        parser.add_argument("--slug", default=None, help="its short name (X-Nylon-Org); made from the name "
                                                         "when omitted")
        parser.add_argument("--base-url", default=None,
                            help=f"where the console is reached, for the link when NYLON_PUBLIC_URL is unset "
                                 f"(default {DEFAULT_BASE_URL})")

    def handle(self, *args, name: str, owner_email: str, slug: str | None, base_url: str | None, **opts):
        base_url = base_url or DEFAULT_BASE_URL  # NYLON_PUBLIC_URL, when set, comes first (services)
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
