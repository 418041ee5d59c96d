"""The console's request plumbing: session user → org → ``Actor``, the same ``Actor`` the API
builds (``teams.auth.actor_for_user``), and the same access modules decide every action.

``console_view`` is the one decorator of every console page: login required, an org membership
required (an outsider gets a 403 page with no data), and the access errors raised by
``teams.access`` / ``assets.access`` / the services mapped to 403/404 pages or form errors. A
refusal reaches the audit log once, as through the API (``nylon_project.errors``).
"""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from rest_framework import exceptions as drf

from nylon_project.errors import Conflict
from teams.auth import Actor, actor_for_user, resolve_user_org
from teams.models import Organization


def user_orgs(user):
    return Organization.objects.filter(memberships__user=user).order_by("name", "id")


def console_actor(request) -> Actor | None:
    """The org is resolved by ``teams.auth.resolve_user_org``, the API's own rule: the session's
    org while the user is still a member of it (a stale one is dropped), else the org of their
    oldest membership, pinned in the session so it never changes under them."""
    org = resolve_user_org(request.user, getattr(request, "session", None))
    return actor_for_user(request.user, org) if org is not None else None


# The largest id a bigint primary key holds: a longer run of digits names no row.
MAX_ID = 2**63 - 1


def parse_id(value) -> int | None:
    """A positive id typed or posted as text, else None. ASCII digits only: ``str.isdigit`` also
    accepts characters such as "²" that ``int`` cannot parse (a ValueError, a 500)."""
    text = str(value).strip() if value is not None else ""
    if not (text.isascii() and text.isdigit()):
        return None
    n = int(text)
    return n if 0 < n <= MAX_ID else None


def is_htmx(request) -> bool:
    return request.headers.get("HX-Request") == "true"


def error_text(detail) -> str:
    """Flattens a DRF ValidationError detail into one readable line."""
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {error_text(v)}" if k != "non_field_errors" else error_text(v)
                         for k, v in detail.items())
    if isinstance(detail, list | tuple):
        return " ".join(error_text(x) for x in detail)
    return str(detail)


def form_error_text(form) -> str:
    """A bound form's errors as one line ("field: message")."""
    return error_text({k: [str(e) for e in v] for k, v in form.errors.items()})


def add_form_errors(form, detail) -> None:
    """Puts a service's ValidationError detail on the form: a field's errors on that field when
    the form has it, anything else as a form-wide error (the view re-renders the form)."""
    if not isinstance(detail, dict):
        form.add_error(None, error_text(detail))
        return
    for key, value in detail.items():
        if key not in form.fields and key.endswith("_id") and key[:-3] in form.fields:
            key = key[:-3]  # the services speak the API's ``team_id``; the console's forms say ``team``
        form.add_error(key if key in form.fields else None, error_text(value))


# The org a console page was rendered for: base.html's <meta name="nylon-org">, sent back by
# console.js with every form the page posts (a field) and every htmx request (a header).
ORG_FIELD = "nylon_org"
ORG_HEADER = "X-Nylon-Page-Org"  # not the API's X-Nylon-Org, which chooses an org
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def stated_org(request) -> str:
    """The slug a state-changing request says its page was rendered for, "" when it says none."""
    return request.headers.get(ORG_HEADER) or request.POST.get(ORG_FIELD) or ""


def console_view(fn=None, *, back: str | None = None, any_org: bool = False):
    """``back``: the URL name (resolved with the view's URL kwargs it takes) a service error
    redirects to. Needed by the POST-only action URLs: redirecting to the URL itself answered the
    browser's GET with a 405 page and the error message never showed.

    A state-changing request whose page was rendered for another org than the session's current
    one (switched since in another tab) is refused with a 409 before the view runs, so nothing is
    written in an org the user did not look at. A request naming no org (a client without the
    console's script) acts in the session's org as before. ``any_org``: the org switch itself,
    which may be sent from any tab."""
    if fn is None:
        return lambda f: console_view(f, back=back, any_org=any_org)

    @wraps(fn)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated or not request.user.is_active:
            if is_htmx(request):
                resp = render(request, "frontend/partials/error.html",
                              {"message": _("Your session has ended. Please sign in again.")}, status=401)
                resp["HX-Redirect"] = "/login/"
                return resp
            return redirect_to_login(request.get_full_path())
        actor = console_actor(request)
        if actor is None:
            if is_htmx(request):
                return htmx_error(request, _("You are not a member of any organisation."), status=403)
            return render(request, "frontend/no_org.html", status=403)
        request.actor = actor
        request.org = actor.org
        if not any_org and request.method not in SAFE_METHODS:
            stated = stated_org(request)
            if stated and stated != actor.org.slug:
                return _org_changed(request, stated)
        try:
            return fn(request, *args, **kwargs)
        except drf.NotFound:
            raise Http404 from None
        except drf.PermissionDenied as exc:
            _audit_denial(request, fn.__name__, exc, kwargs)
            if is_htmx(request):
                return htmx_error(request, str(exc.detail), status=403)
            return render(request, "frontend/forbidden.html", {"message": str(exc.detail)}, status=403)
        except (drf.ValidationError, Conflict) as exc:
            if is_htmx(request):
                # htmx follows a redirect inside the XHR and would swap the whole page it lands on
                # into the fragment's target; the fragment gets the error line instead.
                return htmx_error(request, error_text(exc.detail),
                                  status=409 if isinstance(exc, Conflict) else 400)
            if request.method == "GET" and not back:
                # A page that cannot be shown for its query: redirecting to the same URL would
                # raise again, a loop the browser ends with "too many redirects".
                return render(request, "frontend/forbidden.html",
                              {"message": error_text(exc.detail), "heading": _("Cannot show this page")},
                              status=409 if isinstance(exc, Conflict) else 400)
            # Services validate too (the last line of defence), and a stale expected_version is a
            # conflict: show it on the page it came from (console pages POST to their own URL).
            messages.error(request, error_text(exc.detail))
            return redirect(_back_url(back, kwargs) if back else request.get_full_path())

    return wrapper


def _org_changed(request, stated: str):
    """The refusal of a request sent from a page of another org than the session's (409): the
    page says which org it was for and which one is current, and nothing was done."""
    then = user_orgs(request.user).filter(slug=stated).first()
    message = _("This page was for organisation %(then)s; you have since switched to %(now)s in another tab. "
                "Nothing was changed. Reload the page.") % {
        "then": then.name if then is not None else stated, "now": request.org.name}
    if is_htmx(request):
        return htmx_error(request, message, status=409)
    referer = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        referer = ""
    return render(request, "frontend/forbidden.html",
                  {"message": message, "heading": _("Organisation changed"), "reload": referer}, status=409)


def _back_url(name: str, kwargs: dict) -> str:
    """``reverse(name)`` with those of the view's URL kwargs that the target URL takes."""
    try:
        return reverse(name, kwargs=kwargs)
    except NoReverseMatch:
        return reverse(name)


def htmx_error(request, message: str, *, status: int):
    """The error fragment for an htmx request. The console's htmx config swaps 400, 403 and 409 into
    the target (base.html ``responseHandling``), so a full page there (forbidden.html, a page with
    its own <html> and shell) would be nested inside the drawer or the list."""
    return render(request, "frontend/partials/error.html", {"message": message}, status=status)


def _audit_denial(request, view_name: str, exc, kwargs: dict) -> None:
    """The same record as a refusal through the API (``assets.audit.record_denial``)."""
    from assets import audit

    audit.record_denial(actor=request.actor, exc=exc, action=f"{request.method.lower()}.console.{view_name}",
                        object_type="console", url_kwargs=kwargs, request_id=request_id(request))


def request_id(request) -> str:
    return getattr(request, "request_id", "")
