"""Sign-in (with a failed-attempt limit) and the self-service password reset by email.

Not ``console_view``s: the user is not signed in yet, and may be in no organisation."""

from __future__ import annotations

import functools
import logging

from django.conf import settings
from django.contrib.auth import forms as auth_forms
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.shortcuts import render
from django.urls import reverse_lazy
from django.utils.translation import gettext as _

from .. import ratelimit

log = logging.getLogger("nylon.accounts")

LOGIN_WINDOW = 15 * 60
RESET_WINDOW = 60 * 60
RESET_TEMPLATE = "frontend/password_reset.html"


def _wait_message(seconds: int) -> str:
    return _("Too many attempts. Try again in %(minutes)s minutes.") % {"minutes": max(seconds // 60, 1)}


def _too_many(request, template: str, context: dict, seconds: int):
    response = render(request, template, {**context, "throttled": _wait_message(seconds)}, status=429)
    response["Retry-After"] = str(seconds)
    return response


def _account_name(typed: str) -> str:
    """The name of the account an email signs in to (``teams.backends.NameOrEmailBackend``), so an
    account's name and its email count failures together: each had a count of its own, twice the
    guesses. An email that names no single active account is counted as typed."""
    typed = typed.strip()
    if "@" not in typed:
        return typed
    names = list(get_user_model()._default_manager.filter(email__iexact=typed, is_active=True)
                 .values_list(get_user_model().USERNAME_FIELD, flat=True)[:2])
    return names[0] if len(names) == 1 else typed


def limit_failed_logins(view):
    """Wraps a sign-in view (the console's, Django admin's): failed sign-ins are limited per account
    name and address (``NYLON_LOGIN_FAILURES`` in 15 minutes) and per address (ten times that),
    counted together across every sign-in form, so a password cannot be guessed at the server's
    speed through any of them. A refused attempt is not tried at all, so even the right password
    waits. A sign-in succeeded when the view redirects with the user signed in; anything else
    answered to a POST is a failure."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        ip = ratelimit.client_ip(request)
        account = f"{ratelimit.account_ident(_account_name(request.POST.get('username') or ''))}|{ip}"
        limit = settings.NYLON_LOGIN_FAILURES
        wait = (ratelimit.retry_after("login-ip", ip, limit=limit * 10, window=LOGIN_WINDOW)
                or ratelimit.retry_after("login", account, limit=limit, window=LOGIN_WINDOW))
        if wait:
            log.warning("sign-in refused: too many failures from %s", ip)
            context = {"form": auth_forms.AuthenticationForm(request), "next": request.POST.get("next", "")}
            return _too_many(request, LoginView.template_name, context, wait)
        response = view(request, *args, **kwargs)
        if response.status_code in (301, 302, 303) and request.user.is_authenticated:
            ratelimit.clear("login", account, window=LOGIN_WINDOW)
        else:
            ratelimit.count("login-ip", ip, window=LOGIN_WINDOW)
            ratelimit.count("login", account, window=LOGIN_WINDOW)
        return response

    return wrapped


class LoginView(auth_views.LoginView):
    """The console's sign-in (served through ``limit_failed_logins``, see ``frontend.urls``)."""

    template_name = "frontend/login.html"
    redirect_authenticated_user = True
    next_page = "frontend:dashboard"


class PasswordResetForm(auth_forms.PasswordResetForm):
    def get_users(self, email):
        """Active accounts with this email, including those with no usable password: the member-add
        of earlier versions made such accounts, and a link mailed to their address is how their
        owner gets a password without an admin ever holding one."""
        email = email.strip()
        for user in get_user_model()._default_manager.filter(email__iexact=email, is_active=True):
            if user.email.casefold() == email.casefold():
                yield user


class PasswordResetView(auth_views.PasswordResetView):
    """Mails a one-time link (``PASSWORD_RESET_TIMEOUT``) to every active account with the email;
    the answer is the same whether there is one or not (so a failed send cannot be shown without
    telling that the account exists: Django's form logs it on ``django.contrib.auth``). Needs mail: without ``NYLON_EMAIL_HOST``
    the page says who can set a password instead. At most ``NYLON_PASSWORD_RESETS_PER_HOUR`` mails
    per email (more are dropped quietly: saying so would tell that the account exists) and ten
    times that many requests per address (429)."""

    form_class = PasswordResetForm
    template_name = RESET_TEMPLATE
    email_template_name = "frontend/email/password_reset.txt"
    subject_template_name = "frontend/email/password_reset_subject.txt"
    success_url = reverse_lazy("frontend:password-reset-done")

    def dispatch(self, request, *args, **kwargs):
        if not settings.NYLON_EMAIL_HOST:
            return render(request, RESET_TEMPLATE, {"no_mail": True},
                          status=503 if request.method == "POST" else 200)
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form):
        ip = ratelimit.client_ip(self.request)
        per_hour = settings.NYLON_PASSWORD_RESETS_PER_HOUR
        wait = ratelimit.retry_after("reset-ip", ip, limit=per_hour * 10, window=RESET_WINDOW)
        if wait:
            return _too_many(self.request, RESET_TEMPLATE, self.get_context_data(form=form), wait)
        ratelimit.count("reset-ip", ip, window=RESET_WINDOW)
        email = ratelimit.account_ident(form.cleaned_data["email"])
        if ratelimit.retry_after("reset", email, limit=per_hour, window=RESET_WINDOW):
            log.info("password reset mail not sent: the hourly limit for one email was reached")
            return super(auth_views.PasswordResetView, self).form_valid(form)  # the redirect, no mail
        ratelimit.count("reset", email, window=RESET_WINDOW)
        # Links start with the configured public address, never the request's Host header (which
        # whoever asks for the reset controls).
        self.extra_email_context = {"base_url": settings.NYLON_PUBLIC_URL.rstrip("/"),
                                    "hours": max(settings.PASSWORD_RESET_TIMEOUT // 3600, 1)}
        return super().form_valid(form)


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    template_name = RESET_TEMPLATE
    extra_context = {"sent": True}


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's view: it moves the token from the URL into the session before showing the form
    (so the link is not in the form page's Referer); the new password passes the validators, and
    changing it ends the account's other sessions."""

    template_name = "frontend/password_reset_confirm.html"
    success_url = reverse_lazy("frontend:password-reset-complete")

    def form_valid(self, form):
        log.info("password reset for user %s", form.user.pk)
        return super().form_valid(form)


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = RESET_TEMPLATE
    extra_context = {"complete": True}
