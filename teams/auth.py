"""The one authentication class of the API: it puts the tenant and the actor on the request.

An actor is either a console user (Django session, org chosen by ``X-Nylon-Org`` or the session,
see ``resolve_user_org``)
or an agent (``Authorization: Bearer nyl_…`` / ``X-Api-Key``). Views read ``request.actor`` and
``request.org``; they never decide access themselves (see ``teams.access``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions, throttling

from .models import ROLE_RANK, Agent, ApiKey, Membership, Organization, Role, Scope, TeamMembership, TeamRole

KEY_PREFIX = "nyl_"
log = logging.getLogger("nylon.auth")


@dataclass(frozen=True)
class Actor:
    org: Organization
    user: object | None = None  # django User
    agent: Agent | None = None
    role: str | None = None  # org role of a user; agents have none
    scopes: frozenset[str] = frozenset({Scope.READ, Scope.WRITE})
    team_ids: frozenset[int] = frozenset()
    team_admin_ids: frozenset[int] = frozenset()
    key_id: int | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def kind(self) -> str:
        return "agent" if self.agent is not None else "user"

    @property
    def id(self) -> int:
        return self.agent.id if self.agent is not None else self.user.id  # type: ignore[union-attr]

    @property
    def label(self) -> str:
        if self.agent is not None:
            return f"agent:{self.agent.name}"
        return f"user:{self.user.get_username()}"  # type: ignore[union-attr]

    @property
    def owner_key(self) -> int:
        """Engine owner key: users and agents live in one int64 space (user 2n, agent 2n+1)."""
        return owner_key(user_id=self.user.id if self.user is not None else None,
                         agent_id=self.agent.id if self.agent is not None else None)

    @property
    def is_org_admin(self) -> bool:
        return self.role is not None and ROLE_RANK.get(self.role, 0) >= ROLE_RANK[Role.ADMIN]

    @property
    def is_org_owner(self) -> bool:
        return self.role == Role.OWNER

    def can(self, scope: str) -> bool:
        return scope in self.scopes


def owner_key(*, user_id: int | None, agent_id: int | None) -> int:
    if agent_id is not None:
        return agent_id * 2 + 1
    if user_id is not None:
        return user_id * 2
    raise ValueError("an owner is a user or an agent")


class AgentPrincipal:
    """Stands in for ``request.user`` when an agent key authenticated the request."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False

    def __init__(self, agent: Agent):
        self.agent = agent
        self.pk = self.id = agent.pk

    def __str__(self) -> str:
        return f"agent:{self.agent.name}"


def hash_secret(secret: str) -> str:
    # Keys carry 160+ bits of randomness, so a fast hash is the right tool (no salt/KDF needed).
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(raw: str) -> tuple[str, str] | None:
    if not raw.startswith(KEY_PREFIX):
        return None
    body = raw[len(KEY_PREFIX):]
    prefix, sep, secret = body.partition("_")
    if not sep or not prefix or not secret or len(prefix) > 16:
        return None
    return prefix, secret


def actor_for_user(user, org: Organization) -> Actor | None:
    membership = Membership.objects.filter(org=org, user=user).first()
    if membership is None:
        return None
    tms = list(TeamMembership.objects.filter(org=org, user=user).values_list("team_id", "role"))
    return Actor(
        org=org,
        user=user,
        role=membership.role,
        team_ids=frozenset(t for t, _ in tms),
        team_admin_ids=frozenset(t for t, r in tms if r == TeamRole.ADMIN),
    )


def actor_for_agent(agent: Agent, *, scopes: frozenset[str], key_id: int | None = None) -> Actor:
    return Actor(
        org=agent.org,
        agent=agent,
        scopes=scopes,
        team_ids=frozenset({agent.team_id}) if agent.team_id else frozenset(),
        key_id=key_id,
    )


def authenticate_key(raw: str) -> Actor | None:
    parsed = parse_key(raw)
    if parsed is None:
        return None
    prefix, secret = parsed
    key = (
        ApiKey.objects.select_related("agent", "agent__org", "org")
        .filter(prefix=prefix, revoked_at__isnull=True)
        .first()
    )
    if key is None or not hmac.compare_digest(key.secret_hash, hash_secret(secret)):
        return None
    if not key.agent.is_active or key.agent.org_id != key.org_id:
        return None
    now = timezone.now()
    # Touch last_used_at at most once a minute: a write per request would serialise hot keys.
    if key.last_used_at is None or now - key.last_used_at > timedelta(seconds=60):
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return actor_for_agent(key.agent, scopes=frozenset(key.scopes), key_id=key.pk)


def key_from_headers(headers) -> str | None:
    auth = headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return headers.get("X-Api-Key") or None


SESSION_ORG_KEY = "org_slug"


def resolve_user_org(user, session, *, wanted: str | None = None) -> Organization | None:
    """The org a session user acts in: the one rule of the API and the console pages.

    1. ``wanted`` (the API's ``X-Nylon-Org`` header) is an explicit choice for this request only:
       an org of the user's, else 404. The session is not touched.
    2. The session's org (``session["org_slug"]``: chosen in the switcher, or pinned by an earlier
       request) while the user is still a member of it. A stale one (removed from that org, org
       deleted) is dropped from the session rather than answering 404 on every call.
    3. Otherwise the org of the user's oldest membership, and it is pinned in the session.

    Why the oldest membership and the pin: a user may join another org (by accepting an
    invitation, possibly in another browser). Picking "the org with the lowest id" could make an
    older org the current one mid-session, so the next write landed in another org than the one the
    user was working in. A newly joined org is always newer than the ones the user already has, and
    a pinned session never re-resolves, so it becomes current only when chosen (or in the session
    that accepted). ``None``: in no org.
    """
    memberships = Membership.objects.filter(user=user).select_related("org")
    if wanted:
        m = memberships.filter(org__slug=wanted).first()
        if m is None:
            # An org you are not in does not exist for you.
            raise exceptions.NotFound("No such organisation.")
        return m.org
    pinned = session.get(SESSION_ORG_KEY) if session is not None else None
    if pinned:
        m = memberships.filter(org__slug=pinned).first()
        if m is not None:
            return m.org
    m = memberships.order_by("created_at", "id").first()
    if session is not None:
        if m is not None:
            session[SESSION_ORG_KEY] = m.org.slug
        elif pinned:
            session.pop(SESSION_ORG_KEY, None)
    return m.org if m is not None else None


class NylonAuthentication(authentication.BaseAuthentication):
    """Agent key or console session; sets ``request.org`` and ``request.actor``."""

    def authenticate(self, request):
        raw = key_from_headers(request.headers)
        if raw is not None:
            actor = authenticate_key(raw)
            if actor is None:
                raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
            wanted = (request.headers.get("X-Nylon-Org") or "").strip()
            if wanted and wanted != actor.org.slug:
                # A key belongs to one org: the header naming another was ignored and the request
                # served in the key's org, so a client believing it wrote to the other never knew.
                raise exceptions.ValidationError({"X-Nylon-Org": [
                    f"An API key acts in its own organisation ({actor.org.slug!r}); X-Nylon-Org chooses an "
                    "organisation for console sessions only. Leave it out, or use a key of that organisation."]})
            request.actor, request.org = actor, actor.org
            return AgentPrincipal(actor.agent), actor

        user = getattr(request._request, "user", None)
        if user is None or not user.is_authenticated or not user.is_active:
            return None
        authentication.SessionAuthentication().enforce_csrf(request)
        org = self._org_for_user(request, user)
        actor = actor_for_user(user, org) if org is not None else None
        if actor is None:
            raise exceptions.PermissionDenied("You are not a member of any organisation.")
        request.actor, request.org = actor, org
        return user, actor

    @staticmethod
    def _org_for_user(request, user) -> Organization | None:
        return resolve_user_org(user, getattr(request._request, "session", None),
                                wanted=request.headers.get("X-Nylon-Org") or None)

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="nylon"'


def malformed_authorization(headers) -> str | None:
    """Why an ``Authorization`` header that is not a Bearer token authenticates nothing, or None when
    there is none (or it is one). A key sent without the scheme was ignored, and the request was
    answered "Authentication credentials were not provided", as if no header had been sent."""
    auth = headers.get("Authorization", "").strip()
    if not auth or auth.lower().startswith("bearer "):
        return None
    # The value is never echoed back: it may be a live key.
    if auth.startswith(KEY_PREFIX):
        return ("The Authorization header holds an API key without its scheme: send it as "
                "'Authorization: Bearer <key>' (or in the X-Api-Key header).")
    return "The Authorization header must be 'Authorization: Bearer <key>' (or send the key in the X-Api-Key header)."


class IsOrgActor(permissions.BasePermission):
    """Authenticated, inside an org, and — for agents — holding the scope the method needs."""

    message = "This key lacks the scope for this request."

    def has_permission(self, request, view) -> bool:
        actor = getattr(request, "actor", None)
        if actor is None:
            # Raised here, not in the authentication: a session (the console's) still authenticates
            # whatever Authorization header a proxy in front adds. Still a 401 with WWW-Authenticate.
            why = malformed_authorization(request.headers)
            if why is not None:
                raise exceptions.NotAuthenticated(why)
            return False
        # Query endpoints that take a body (resonate, context) are reads served over POST.
        reads = permissions.SAFE_METHODS + tuple(getattr(view, "read_methods", ()))
        needed = Scope.READ if request.method in reads else Scope.WRITE
        if actor.can(needed):
            return True
        # DRF makes a permission per request, so the refusal can name what is missing (and what the
        # key has): "lacks the scope" left a read-only key's owner guessing which one.
        held = ", ".join(f"`{s}`" for s in sorted(actor.scopes)) or "none"
        self.message = (f"This key lacks the `{needed}` scope for this request (its scopes: {held}); "
                        f"an org admin can create a key with `{needed}` for the agent.")
        return False


class ActorRateThrottle(throttling.SimpleRateThrottle):
    """Per key (or user) rate limit, counted in the Redis cache. When Redis is unreachable (a
    restart, a failover) the limit fails open: requests are served unthrottled and a warning is
    logged, rather than every API call failing with a 500 for the length of the outage."""

    scope = "actor"

    def allow_request(self, request, view) -> bool:
        from redis.exceptions import RedisError

        try:
            return super().allow_request(request, view)
        except RedisError as exc:
            log.warning("rate limit not checked (cache unavailable: %s); request allowed", type(exc).__name__)
            return True

    def get_cache_key(self, request, view):
        actor = getattr(request, "actor", None)
        if actor is None:
            return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
        ident = f"key{actor.key_id}" if actor.key_id else f"{actor.kind}{actor.id}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
