"""Writes for tenancy objects: keyword-only, atomic, audited."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone
from django.utils.text import slugify
from rest_framework.exceptions import PermissionDenied, ValidationError

from assets import audit
from assets.services import promotions_withdraw_for_team

from .access import require_org_admin
from .auth import KEY_PREFIX, Actor, hash_secret
from .models import ROLE_RANK, Agent, ApiKey, Membership, Organization, Role, Scope, Team, TeamMembership

User = get_user_model()


def _unique_slug(base: str, exists) -> str:
    root = slugify(base)[:70] or "x"
    slug, n = root, 1
    while exists(slug):
        n += 1
        slug = f"{root}-{n}"
    return slug


@transaction.atomic
def organization_create(*, name: str, owner, slug: str | None = None) -> Organization:
    slug = slug or _unique_slug(name, lambda s: Organization.objects.filter(slug=s).exists())
    if Organization.objects.filter(slug=slug).exists():
        raise ValidationError({"slug": ["An organisation with this slug exists."]})
    org = Organization.objects.create(name=name, slug=slug)
    Membership.objects.create(org=org, user=owner, role=Role.OWNER)
    audit.record(actor=None, org=org, action="org.create", object_type="org", object_id=org.id,
                 detail={"owner": owner.get_username()})
    return org


@transaction.atomic
def organization_update(*, actor: Actor, name: str, request_id: str = "") -> Organization:
    require_org_admin(actor, action="organisation changes")
    org = Organization.objects.select_for_update().get(pk=actor.org.pk)
    org.name = name
    org.save(update_fields=["name"])
    audit.record(actor=actor, action="org.update", object_type="org", object_id=org.id,
                 detail={"name": name}, request_id=request_id)
    return org


@transaction.atomic
def team_create(*, actor: Actor, name: str, description: str = "", request_id: str = "") -> Team:
    require_org_admin(actor, action="team creation")
    slug = _unique_slug(name, lambda s: Team.objects.filter(org=actor.org, slug=s).exists())
    try:
        with transaction.atomic():
            team = Team.objects.create(org=actor.org, name=name, slug=slug, description=description)
    except IntegrityError:  # the same slug taken concurrently, between the check and the insert
        raise ValidationError({"name": ["A team with this name (or one giving the same slug) exists."]}) from None
    audit.record(actor=actor, action="team.create", object_type="team", object_id=team.id,
                 detail={"name": name}, request_id=request_id)
    return team


@transaction.atomic
def team_update(*, actor: Actor, team: Team, data: dict, request_id: str = "") -> Team:
    if not data:  # an empty PATCH changes nothing: no save, no audit entry
        return team
    for field in ("name", "description"):
        if field in data:
            setattr(team, field, data[field])
    team.save()
    audit.record(actor=actor, action="team.update", object_type="team", object_id=team.id,
                 detail=data, request_id=request_id)
    return team


@transaction.atomic
def team_delete(*, actor: Actor, team: Team, request_id: str = "") -> None:
    require_org_admin(actor, action="team deletion")
    # Pending promotions to this team could never be applied (its id would break asset.team's
    # foreign key): send those candidates back to draft, in this transaction, before the team goes.
    promotions_withdraw_for_team(actor=actor, team=team, request_id=request_id)
    audit.record(actor=actor, action="team.delete", object_type="team", object_id=team.id,
                 detail={"name": team.name}, request_id=request_id)
    team.delete()


def _is_org_admin_user(org, user_id: int) -> bool:
    role = Membership.objects.filter(org=org, user_id=user_id).values_list("role", flat=True).first()
    return role is not None and ROLE_RANK.get(role, 0) >= ROLE_RANK[Role.ADMIN]


def _check_team_change_of(actor: Actor, *, user_id: int, what: str) -> None:
    """A team admin who is a plain org member may not remove an org owner/admin from the team or
    change their team role: the team would otherwise lock out the people who run the org. Org
    admins and owners keep full rights. The refusal rolls the transaction back and is audited as
    a denial by the API's (and the console's) error handling."""
    if actor.is_org_admin:
        return
    if _is_org_admin_user(actor.org, user_id):
        raise PermissionDenied(f"Only organisation admins may {what} an organisation owner or admin in a team.")


def _find_team_membership(*, team: Team, user_id: int) -> TeamMembership | None:
    return TeamMembership.objects.select_for_update().filter(team=team, user_id=user_id).first()


@transaction.atomic
def team_member_put(*, actor: Actor, team: Team, user_id: int, role: str,
                    request_id: str = "") -> tuple[TeamMembership, bool]:
    """Adds the user to the team with this role, or sets the role of an existing member.
    Returns the membership and whether it was created."""
    if not Membership.objects.filter(org=actor.org, user_id=user_id).exists():
        raise ValidationError({"user_id": ["Not a member of this organisation."]})
    tm = _find_team_membership(team=team, user_id=user_id)
    created = False
    if tm is None:
        try:
            with transaction.atomic():
                tm = TeamMembership.objects.create(org=actor.org, team=team, user_id=user_id, role=role)
            created = True
        except IntegrityError:  # added concurrently, between the lookup and the insert
            tm = TeamMembership.objects.select_for_update().get(team=team, user_id=user_id)
    old_role = None if created else tm.role
    if not created and old_role != role:
        _check_team_change_of(actor, user_id=user_id, what="change the team role of")
        tm.role = role
        tm.save(update_fields=["role"])
    audit.record(actor=actor, action="team.member_set", object_type="team", object_id=team.id,
                 detail={"user_id": user_id, "role": role, "old_role": old_role, "created": created},
                 request_id=request_id)
    return tm, created


def team_member_set(*, actor: Actor, team: Team, user_id: int, role: str, request_id: str = "") -> TeamMembership:
    return team_member_put(actor=actor, team=team, user_id=user_id, role=role, request_id=request_id)[0]


@transaction.atomic
def team_member_remove(*, actor: Actor, team: Team, user_id: int, request_id: str = "") -> bool:
    tm = TeamMembership.objects.select_for_update().filter(org=actor.org, team=team, user_id=user_id).first()
    if tm is None:
        return False
    _check_team_change_of(actor, user_id=user_id, what="remove")
    tm.delete()
    audit.record(actor=actor, action="team.member_remove", object_type="team", object_id=team.id,
                 detail={"user_id": user_id}, request_id=request_id)
    return True


def _check_role_change(actor: Actor, *, old: str | None, new: str) -> None:
    require_org_admin(actor, action="membership changes")
    # Only owners can create or demote owners: an admin must not be able to take over the org.
    if Role.OWNER in (old, new) and not actor.is_org_owner:
        raise PermissionDenied("Only owners can grant or remove the owner role.")
    if ROLE_RANK.get(new, 0) == 0:
        raise ValidationError({"role": ["Unknown role."]})


@transaction.atomic
def member_add(*, actor: Actor, email: str, role: str, request_id: str = "") -> Membership:
    """Adds the account with this email, or a new passwordless account named after it.

    Adding an existing account does not change the org that user works in: sessions resolve to
    the org they already had (``teams.auth.resolve_user_org``); the new org is theirs to choose.
    Callers show the admin only the email they typed, never the account's username."""
    _check_role_change(actor, old=None, new=role)
    email = email.strip()
    user = User.objects.filter(email__iexact=email).first()
    if user is None:
        user = _user_for_new_email(email)
    try:
        with transaction.atomic():
            membership = Membership.objects.create(org=actor.org, user=user, role=role)
    except IntegrityError:
        raise ValidationError({"email": ["Already a member."]}) from None
    audit.record(actor=actor, action="member.add", object_type="user", object_id=user.id,
                 detail={"role": role, "email": email.lower()}, request_id=request_id)
    return membership


def _user_for_new_email(email: str):
    """A new account whose username is the email. Refused (400, nothing written: the caller's
    transaction rolls back) when that username is taken by an account with another email, or
    does not fit the username column: create_user would fail with an IntegrityError (a 500)."""
    username = email.lower()
    max_len = User._meta.get_field(User.USERNAME_FIELD).max_length or 150
    if len(username) > max_len:
        raise ValidationError({"email": [f"Ensure this email has at most {max_len} characters."]})
    taken = ["An account with this name exists under another email; it cannot be added by this email."]
    # iexact: a look-alike of an existing name ("Ana@x.io" next to "ana@x.io") is refused as well.
    if User.objects.filter(**{f"{User.USERNAME_FIELD}__iexact": username}).exists():
        raise ValidationError({"email": taken})
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, email=username)
    except IntegrityError:  # created concurrently between the check and the insert
        raise ValidationError({"email": taken}) from None
    user.set_unusable_password()
    user.save(update_fields=["password"])
    return user


def _lock_membership(membership: Membership) -> Membership:
    """The membership as it is now, with the org's row locked for the rest of the transaction.

    The API loads the membership before this transaction starts: its role may be stale (an admin
    would "demote an admin" who an owner has just made an owner, passing the owners-only check).
    And two owners demoting each other at once would each still see the other owner: locking the
    org row serialises the role changes of one org, so the last-owner check sees committed rows."""
    Organization.objects.select_for_update().filter(pk=membership.org_id).first()
    fresh = Membership.objects.filter(pk=membership.pk).select_related("user").first()
    if fresh is None:  # removed meanwhile
        raise Http404
    return fresh


@transaction.atomic
def member_set_role(*, actor: Actor, membership: Membership, role: str, request_id: str = "") -> Membership:
    membership = _lock_membership(membership)
    _check_role_change(actor, old=membership.role, new=role)
    if membership.role == Role.OWNER and role != Role.OWNER:
        _ensure_other_owner(membership)
    old = membership.role
    membership.role = role
    membership.save(update_fields=["role"])
    audit.record(actor=actor, action="member.role", object_type="user", object_id=membership.user_id,
                 detail={"from": old, "to": role}, request_id=request_id)
    return membership


def _ensure_other_owner(membership: Membership) -> None:
    others = Membership.objects.filter(org=membership.org, role=Role.OWNER).exclude(pk=membership.pk)
    if not others.exists():
        raise ValidationError({"role": ["An organisation needs at least one owner."]})


@transaction.atomic
def member_remove(*, actor: Actor, membership: Membership, request_id: str = "") -> None:
    membership = _lock_membership(membership)
    _check_role_change(actor, old=membership.role, new=Role.MEMBER)
    if membership.role == Role.OWNER:
        _ensure_other_owner(membership)
    TeamMembership.objects.filter(org=actor.org, user_id=membership.user_id).delete()
    audit.record(actor=actor, action="member.remove", object_type="user", object_id=membership.user_id,
                 request_id=request_id)
    membership.delete()


@transaction.atomic
def agent_create(*, actor: Actor, name: str, team: Team | None = None, description: str = "",
                 request_id: str = "") -> Agent:
    require_org_admin(actor, action="agent creation")
    if Agent.objects.filter(org=actor.org, name=name).exists():
        raise ValidationError({"name": ["An agent with this name exists."]})
    try:
        with transaction.atomic():
            agent = Agent.objects.create(org=actor.org, name=name, team=team, description=description,
                                         created_by=actor.user)
    except IntegrityError:  # the same name taken concurrently, between the check and the insert
        raise ValidationError({"name": ["An agent with this name exists."]}) from None
    audit.record(actor=actor, action="agent.create", object_type="agent", object_id=agent.id,
                 detail={"name": name, "team": team.id if team else None}, request_id=request_id)
    return agent


@transaction.atomic
def agent_update(*, actor: Actor, agent: Agent, data: dict, request_id: str = "") -> Agent:
    if not data:  # an empty PATCH changes nothing: no save, no audit entry
        return agent
    changed = {}
    was_active = agent.is_active
    for field in ("name", "description", "team", "is_active"):
        if field in data:
            setattr(agent, field, data[field])
            changed[field] = data[field].id if isinstance(data[field], Team) else data[field]
    if "name" in data and Agent.objects.filter(org=actor.org, name=agent.name).exclude(pk=agent.pk).exists():
        raise ValidationError({"name": ["An agent with this name exists."]})
    try:
        with transaction.atomic():
            agent.save()
    except IntegrityError:  # the same name taken concurrently, between the check and the save
        raise ValidationError({"name": ["An agent with this name exists."]}) from None
    if was_active and not agent.is_active:
        # Deactivating by PATCH is deactivating: its keys are revoked as DELETE revokes them.
        # Otherwise a later reactivation would bring every old key (perhaps the leaked one the
        # agent was switched off for) back to life.
        changed["revoked_keys"] = _revoke_agent_keys(agent)
    audit.record(actor=actor, action="agent.update", object_type="agent", object_id=agent.id,
                 detail=changed, request_id=request_id)
    return agent


def _revoke_agent_keys(agent: Agent) -> list[str]:
    """Revokes the agent's live keys; returns their prefixes for the audit entry."""
    live = ApiKey.objects.filter(org_id=agent.org_id, agent=agent, revoked_at__isnull=True)
    prefixes = sorted(live.values_list("prefix", flat=True))
    live.update(revoked_at=timezone.now())
    return prefixes


@transaction.atomic
def agent_deactivate(*, actor: Actor, agent: Agent, request_id: str = "") -> Agent:
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    was_active = agent.is_active
    if was_active:
        agent.is_active = False
        agent.save(update_fields=["is_active"])
    revoked = _revoke_agent_keys(agent)
    if not was_active and not revoked:  # already deactivated: nothing to do, nothing to record
        return agent
    audit.record(actor=actor, action="agent.deactivate", object_type="agent", object_id=agent.id,
                 detail={"revoked_keys": revoked}, request_id=request_id)
    return agent


@transaction.atomic
def api_key_create(*, actor: Actor | None, agent: Agent, name: str = "",
                   scopes: list[str] | None = None, request_id: str = "") -> tuple[ApiKey, str]:
    """Returns the key row and the plain key; the plain key exists only in this return value."""
    if actor is not None:
        require_org_admin(actor, action="API key management")
    if not agent.is_active:
        raise ValidationError({"agent": ["The agent is deactivated."]})
    scopes = sorted(set(scopes or [Scope.READ, Scope.WRITE]))
    prefix = secrets.token_hex(4)
    while ApiKey.objects.filter(prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    secret = secrets.token_urlsafe(30)
    key = ApiKey.objects.create(
        org=agent.org, agent=agent, name=name, prefix=prefix, secret_hash=hash_secret(secret),
        scopes=scopes, created_by=actor.user if actor else None,
    )
    audit.record(actor=actor, org=agent.org, action="key.create", object_type="api_key", object_id=key.id,
                 detail={"agent": agent.id, "scopes": scopes, "prefix": prefix}, request_id=request_id)
    return key, f"{KEY_PREFIX}{prefix}_{secret}"


@transaction.atomic
def api_key_revoke(*, actor: Actor, key: ApiKey, request_id: str = "") -> ApiKey:
    require_org_admin(actor, action="API key management")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit.record(actor=actor, action="key.revoke", object_type="api_key", object_id=key.id,
                     detail={"prefix": key.prefix}, request_id=request_id)
    return key
