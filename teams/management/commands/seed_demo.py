"""Create the demo organisation, an admin login and one agent API key (printed once)."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from teams import services
from teams.models import Agent, Organization


class Command(BaseCommand):
    help = "Create the demo org, admin login and agent key if they do not exist (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--org", default="demo")
        parser.add_argument("--username", default=os.environ.get("NYLON_ADMIN_USER", "admin"))
        parser.add_argument("--password", default=os.environ.get("NYLON_ADMIN_PASSWORD", ""))

    @transaction.atomic
    def handle(self, *args, org: str, username: str, password: str, **opts):
        User = get_user_model()
        existing = Organization.objects.filter(slug=org).first()
        if existing is not None:
            self.stdout.write(f"Demo organisation '{org}' exists; keeping its data (keys are not shown again).")
            self._login_again(existing, username, password)
            return
        password = password or secrets.token_urlsafe(12)
        user = User.objects.filter(username=username).first()
        if user is None:
            # The demo org's owner, nothing more: a superuser reaches Django's /admin/, every org's
            # accounts included (an operator makes one with ``createsuperuser`` if they want it).
            user = User.objects.create_user(username=username, email=f"{username}@example.com",
                                            password=password)
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        organisation = services.organization_create(name="Demo", slug=org, owner=user)
        # Org-wide by default: a new agent's writes are private to it, and the quick start's first
        # memories were then invisible to the login printed beside its key (the console showed none).
        agent = Agent.objects.create(org=organisation, name="demo-agent", created_by=user, default_visibility="org")
        _, plain = services.api_key_create(actor=None, agent=agent, name="demo")
        self.stdout.write(self.style.SUCCESS("Demo organisation created."))
        self.stdout.write(f"  console login : {username} / {password}")
        self.stdout.write(f"  agent API key : {plain}   (shown once; store it now)")
        self.stdout.write("  the agent's writes are org-wide unless a write names its visibility "
                          "(console: Agents → demo-agent)")

    def _login_again(self, org: Organization, username: str, password: str) -> None:
        """The login printed once, at the first run, is lost with that run's output. A password given
        (``NYLON_ADMIN_PASSWORD``, ``--password``) is set again on the demo org's member of that name,
        as the README promises; without one, say how to get back in."""
        from teams.models import Membership

        member = Membership.objects.filter(org=org, user__username=username).select_related("user").first()
        if member is None:
            return
        if password:
            member.user.set_password(password)
            member.user.save(update_fields=["password"])
            self.stdout.write(f"  console login : {username} / the NYLON_ADMIN_PASSWORD given")
        else:
            self.stdout.write(f"  console login : {username} (lost its password? run with NYLON_ADMIN_PASSWORD=<new> "
                              f"to set one, or: .venv/bin/python manage.py changepassword {username})")
