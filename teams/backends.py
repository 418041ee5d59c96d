"""Console sign-in by name or by email: an invitee chooses a name at sign-up (what teammates and
agents see) but was invited, and is mailed, at an email address; either signs in."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend


class NameOrEmailBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None or not username or "@" not in username or password is None:
            return user
        # Emails are not unique across accounts (an operator may have made two): only an address
        # that names exactly one active account signs in by email, the others by their names.
        found = list(get_user_model()._default_manager.filter(email__iexact=username.strip(), is_active=True)[:2])
        if len(found) != 1:
            get_user_model()().set_password(password)  # the same work as a wrong password (timing)
            return None
        user = found[0]
        if user.check_password(password) and self.user_can_authenticate(user):
            return user
        return None
