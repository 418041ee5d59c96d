"""Writes for tenancy objects: keyword-only, atomic, audited."""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import asdict, dataclass
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, connection, transaction
from django.http import Http404
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify
from rest_framework.exceptions import PermissionDenied, Throttled, ValidationError

from assets import audit
from assets.models import AccessGrant, Asset
from assets.services import grant_label, promotions_withdraw_for_team
from memory.models import Node, Visibility
from nylon_project.errors import Conflict

from . import selectors as team_selectors
from .access import require_org_admin
from .auth import KEY_PREFIX, Actor, hash_secret
from .models import (
    ROLE_RANK,
    Agent,
    ApiKey,
    Invitation,
    InvitationStatus,
    Membership,
    Organization,
    Role,
    Scope,
    Team,
    TeamMembership,
    TeamRole,
)

User = get_user_model()
log = logging.getLogger("nylon.invitations")
INVITE_RATE_WINDOW = timedelta(hours=1)


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
def organization_create_for_email(*, name: str, owner_email: str, base_url: str, slug: str | None = None,
                                  request_id: str = "") -> tuple[Organization, Invitation, str]:
    """An operator's new tenant: the organisation, with no member yet, and an invitation to the
    owner role for ``owner_email`` (mailed after commit when mail is configured). Returns the org,
    the invitation and its link. The owner joins as every invitee does: a new email sets a
    password, an existing account signs in and accepts; nobody is made owner of anything without
    their consent, and the org has no other way in until they do."""
    errors: dict[str, list[str]] = {}
    name = " ".join(name.split())
    owner_email = owner_email.strip()
    if not name:
        errors["name"] = ["This field may not be blank."]
    elif len(name) > Organization._meta.get_field("name").max_length:
        errors["name"] = [f"Ensure this field has at most {Organization._meta.get_field('name').max_length} "
                          "characters."]
    try:
        validate_email(owner_email)
    except DjangoValidationError:
        errors["owner_email"] = ["Enter a valid email address."]
    else:
        if len(owner_email) > _max_email_length():
            errors["owner_email"] = [f"Ensure this email has at most {_max_email_length()} characters."]
    if slug is not None and (not slug or slug != slugify(slug) or len(slug) > 80):
        errors["slug"] = ["Use lower-case letters, digits, hyphens and underscores (at most 80)."]
    if errors:
        raise ValidationError(errors)
    if slug is None:
        # Running the same command twice must not quietly make a second "Acme" (slug acme-2): a
        # second tenant of one name is asked for by giving it a slug of its own.
        folded = name.casefold()
        same = [o for o in Organization.objects.filter(name__iexact=name).order_by("id")
                if " ".join(o.name.split()).casefold() == folded]
        if same:
            raise ValidationError({"name": [f"An organisation named {same[0].name} exists (slug {same[0].slug}); "
                                            f"pass --slug {same[0].slug} to invite its owner again, or a new "
                                            "--slug to create another."]})
    slug = slug or _unique_slug(name, lambda s: Organization.objects.filter(slug=s).exists())
    try:
        with transaction.atomic():
            org = Organization.objects.create(name=name, slug=slug)
    except IntegrityError:  # the slug is taken (or was, a moment ago, by a concurrent create)
        raise ValidationError({"slug": ["An organisation with this slug exists."]}) from None
    audit.record(actor=None, org=org, action="org.create", object_type="org", object_id=org.id,
                 detail={"owner_email": owner_email.lower()}, request_id=request_id)
    invitation, url = organization_invite_owner(org=org, owner_email=owner_email, base_url=base_url,
                                                request_id=request_id)
    return org, invitation, url


@transaction.atomic
def organization_invite_owner(*, org: Organization, owner_email: str, base_url: str,
                              request_id: str = "") -> tuple[Invitation | None, str]:
    """The operator's owner invitation to an existing org: the first owner's link expired unused,
    or an org lost its owners. Ends the email's open invitations to the org, as a resend does.
    A member with that email is made owner at once (returns no invitation): they consented to the
    membership, and an invitation would leave their role as it is (``_accept``)."""
    owner_email = owner_email.strip()
    try:
        validate_email(owner_email)
    except DjangoValidationError:
        raise ValidationError({"owner_email": ["Enter a valid email address."]}) from None
    Organization.objects.select_for_update(no_key=True).filter(pk=org.pk).first()
    members = list(Membership.objects.select_for_update().filter(org=org, user__email__iexact=owner_email))
    if any(m.role == Role.OWNER for m in members):
        raise ValidationError({"owner_email": ["Already an owner of this organisation."]})
    if members:
        if len(members) > 1:  # emails are not unique across accounts: the operator must say which
            raise ValidationError({"owner_email": ["Several members have this email; change the role of the "
                                                   "right account (Django admin or another owner)."]})
        membership = members[0]
        old = membership.role
        membership.role = Role.OWNER
        membership.save(update_fields=["role"])
        audit.record(actor=None, org=org, action="member.role", object_type="user", object_id=membership.user_id,
                     detail={"from": old, "to": Role.OWNER}, request_id=request_id)
        return None, ""
    now = timezone.now()
    open_ = Invitation.objects.filter(org=org, email__iexact=owner_email, accepted_at__isnull=True,
                                      revoked_at__isnull=True)
    replaced = sorted(open_.values_list("id", flat=True))
    open_.update(revoked_at=now)
    return _issue_invitation(org=org, email=owner_email, role=Role.OWNER, invited_by=None, inviter="",
                             base_url=base_url, now=now, audit_actor=None, detail={"replaced": replaced},
                             request_id=request_id)


@transaction.atomic
def organization_update(*, actor: Actor, name: str, request_id: str = "") -> Organization:
    require_org_admin(actor, action="change the organisation")
    org = Organization.objects.select_for_update(no_key=True).get(pk=actor.org.pk)
    org.name = name
    org.save(update_fields=["name"])
    audit.record(actor=actor, action="org.update", object_type="org", object_id=org.id,
                 detail={"name": name}, request_id=request_id)
    return org


def _team_name(org_id: int, name: str, *, team: Team | None = None) -> str:
    """``name`` trimmed, refused when another team of the org has it up to case: the Team selects
    show names only, so "Platform" next to "platform " are two choices nobody can tell apart."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": ["This field may not be blank."]})
    # The org row lock serialises the org's team names: two concurrent requests would otherwise
    # both find no clash (their slugs differ, so the slug constraint would not catch it).
    Organization.objects.select_for_update(no_key=True).filter(pk=org_id).first()
    others = Team.objects.filter(org_id=org_id)
    if team is not None:
        others = others.exclude(pk=team.pk)
    folded = name.casefold()
    # Compared here, not with iexact: case-folding ("Straße" = "STRASSE") is not SQL upper().
    if any(other.strip().casefold() == folded for other in others.values_list("name", flat=True)):
        raise ValidationError({"name": ["A team with this name already exists."]})
    return name


@transaction.atomic
def team_create(*, actor: Actor, name: str, description: str = "", request_id: str = "") -> Team:
    """Creates a team; the person creating it becomes its team admin (an agent, or no one, does not).

    An org admin is not in a team by its role: the creator of a new team was left outside it, so
    their dashboard showed none of its memories ("Nodes 0", and a note that memories are shared in
    teams they are not in) until they added themselves."""
    require_org_admin(actor, action="create teams")
    name = _team_name(actor.org.pk, name)
    slug = _unique_slug(name, lambda s: Team.objects.filter(org=actor.org, slug=s).exists())
    creator = actor.user if actor.agent is None else None
    try:
        with transaction.atomic():  # a savepoint: only the team's own insert is the name's clash
            team = Team.objects.create(org=actor.org, name=name, slug=slug, description=description)
    except IntegrityError:  # the same slug taken concurrently, between the check and the insert
        raise ValidationError({"name": ["A team with this name (or one giving the same slug) exists."]}) from None
    if creator is not None:
        TeamMembership.objects.create(org=actor.org, team=team, user=creator, role=TeamRole.ADMIN)
    detail = {"name": name} | ({"admin_user_id": creator.pk} if creator is not None else {})
    audit.record(actor=actor, action="team.create", object_type="team", object_id=team.id,
                 detail=detail, request_id=request_id)
    return team


@transaction.atomic
def team_update(*, actor: Actor, team: Team, data: dict, request_id: str = "") -> Team:
    if not data:  # an empty PATCH changes nothing: no save, no audit entry
        return team
    if "name" in data:
        data = {**data, "name": data["name"].strip()}
        # Only a new name is checked: look-alikes made before this rule keep saving their other fields.
        if data["name"].casefold() != team.name.strip().casefold():
            _team_name(team.org_id, data["name"], team=team)
    for field in ("name", "description"):
        if field in data:
            setattr(team, field, data[field])
    team.save()
    audit.record(actor=actor, action="team.update", object_type="team", object_id=team.id,
                 detail=data, request_id=request_id)
    return team


TEAM_DELETE_CHOICES = ("move", "private")


class TeamNotEmpty(Conflict):
    """409: the team still has memories or assets shared with it, and the caller chose nothing for
    them. Deleting it would leave them ``team`` with no team: readable by their owner alone, with no
    way to share them again."""

    default_code = "team_not_empty"

    def __init__(self, *, team: Team, nodes: int, assets: int):
        self.counts = {"memories": nodes, "assets": assets}
        self.fields = {"memories": [
            f"{_count(nodes, 'memory', 'memories')} and {_count(assets, 'asset', 'assets')} are shared with "
            f"team {team.name}. Choose what becomes of them: memories=move with to_team_id (another team of "
            "the organisation takes them over) or memories=private (each becomes private to its writer)."]}
        super().__init__(f"Team {team.name} still holds {_count(nodes, 'memory', 'memories')} and "
                         f"{_count(assets, 'asset', 'assets')} shared with it.")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


@dataclass(frozen=True)
class TeamDeletion:
    """What deleting a team did (the API's answer and the audit entry's detail)."""

    team: dict
    memories: str | None
    to_team: dict | None
    nodes: dict
    assets: dict
    agents: list[dict]
    grants_removed: int
    withdrawn_promotions: list[int]

    def as_dict(self) -> dict:
        return asdict(self)


# Memories a team deletion changed, named by id in its ``team.delete`` audit entry (the first ones by
# id; the entry always has the total): a team's memories can be tens of thousands.
TEAM_DELETE_AUDIT_NODE_IDS = 200


@transaction.atomic
def team_delete(*, actor: Actor, team: Team, memories: str | None = None, to_team: Team | None = None,
                request_id: str = "") -> TeamDeletion:
    """Deletes the team and settles everything that named it, in this one transaction.

    Memories and assets shared with the team (visibility ``team``) need a choice while there are
    any (else ``TeamNotEmpty``, nothing written): ``memories="move"`` gives every row naming the
    team to ``to_team`` (another team of the org: its members become their readers, which the
    caller chose), ``memories="private"`` makes the shared ones private to their writers (a
    narrowing: nobody gains a reader). Rows naming the team with another visibility keep it and
    move with ``move``, or lose the team label (its admins' write rights) otherwise. The team's
    agents leave it; one whose writes defaulted to the team now defaults to private, so its writes
    that name no visibility keep working (``team`` with no team is a 400) and share with nobody new.
    Grants to the team's roles go with it (a narrowing). No row is ever left ``team`` without a team.

    Audited: one ``team.delete`` entry (the counts of ``TeamDeletion``; the ids of every asset and
    grant changed; the total of memory rows changed and the first ``TEAM_DELETE_AUDIT_NODE_IDS`` of
    their ids, as a team's memories can be tens of thousands), then an entry in the trail of each
    object whose access changed: ``asset.move`` per asset (visibility and team, from and to) and
    ``acl.revoke`` per grant removed (as ``grant_revoke`` writes), each naming the ``team.delete``
    entry. Assets and grants are few, and each was audited once already when it was made."""
    require_org_admin(actor, action="delete teams")
    if memories is not None and memories not in TEAM_DELETE_CHOICES:
        raise ValidationError({"memories": [f"Choose one of: {', '.join(TEAM_DELETE_CHOICES)}."]})
    if memories == "move":
        if to_team is None:
            raise ValidationError({"to_team_id": ["Moving needs the team to move to."]})
        if to_team.org_id != team.org_id or to_team.pk == team.pk:
            raise ValidationError({"to_team_id": ["Choose another team of this organisation."]})
    elif to_team is not None:
        raise ValidationError({"to_team_id": ["Only with memories=move."]})
    # Pending promotions to this team could never be applied (its id would break asset.team's
    # foreign key): send those candidates back to draft, in this transaction, before the team goes.
    withdrawn = promotions_withdraw_for_team(actor=actor, team=team, request_id=request_id)
    # Assets before teams, as an approval locks its asset and then the team it targets: one order.
    list(Asset.objects.select_for_update().filter(org_id=team.org_id, team=team).order_by("id").values_list("id"))
    # The team rows (in id order: two deletions moving into each other must not deadlock). Holding
    # the team's row makes every concurrent write naming it wait, so the counts below stay exact.
    ids = sorted({team.pk, *([to_team.pk] if to_team is not None else [])})
    locked = {t.pk: t for t in Team.objects.select_for_update().filter(org_id=team.org_id, pk__in=ids)}
    if team.pk not in locked:  # deleted meanwhile
        raise Http404
    if to_team is not None and to_team.pk not in locked:
        raise ValidationError({"to_team_id": ["Choose another team of this organisation."]})
    held = team_selectors.team_holdings(team=team)
    if held.shared and memories is None:
        raise TeamNotEmpty(team=team, nodes=held.shared_nodes, assets=held.shared_assets)

    # Every row naming the team, deleted nodes included (none may stay team-shared with no team).
    node_rows = Node.objects.filter(org_id=team.org_id, team=team)
    asset_rows = Asset.objects.filter(org_id=team.org_id, team=team)
    # What the audit names, read before the rows change (the team's row is held: no new ones).
    moved_assets = list(asset_rows.order_by("id").values_list("id", "visibility"))
    node_ids = list(node_rows.order_by("id").values_list("id", flat=True)[:TEAM_DELETE_AUDIT_NODE_IDS])
    grants = list(AccessGrant.objects.filter(org_id=team.org_id, grantee_team=team).order_by("id"))
    if memories == "move":
        nodes_changed = node_rows.update(team=to_team)  # the txid trigger stamps them: the engine cache re-reads them
        asset_rows.update(team=to_team, updated_at=timezone.now())
    else:
        nodes_changed = node_rows.filter(visibility=Visibility.TEAM).update(visibility=Visibility.PRIVATE, team=None)
        nodes_changed += node_rows.update(team=None)
        asset_rows.filter(visibility=Visibility.TEAM).update(visibility=Visibility.PRIVATE, team=None,
                                                             updated_at=timezone.now())
        asset_rows.update(team=None, updated_at=timezone.now())
    agents = []
    for agent in Agent.objects.select_for_update().filter(org_id=team.org_id, team=team).order_by("id"):
        was = agent.default_visibility
        agent.team = None
        if was == Visibility.TEAM:
            agent.default_visibility = Visibility.PRIVATE
        agent.save(update_fields=["team", "default_visibility"])
        agents.append({"id": agent.id, "name": agent.name, "default_visibility": agent.default_visibility,
                       "previous_default_visibility": was})
    result = TeamDeletion(
        team={"id": team.pk, "name": team.name}, memories=memories,
        to_team={"id": to_team.pk, "name": locked[to_team.pk].name} if to_team is not None else None,
        nodes={"shared": held.shared_nodes, "other": held.other_nodes},
        assets={"shared": held.shared_assets, "other": held.other_assets},
        agents=agents, grants_removed=held.grants, withdrawn_promotions=withdrawn,
    )
    changed = {"asset_ids": [aid for aid, _ in moved_assets], "grant_ids": [g.id for g in grants],
               "nodes_changed": nodes_changed, "node_ids": node_ids,
               "node_ids_more": max(nodes_changed - len(node_ids), 0)}
    entry = audit.record(actor=actor, action="team.delete", object_type="team", object_id=team.pk,
                         detail={"name": team.name, **{k: v for k, v in result.as_dict().items() if k != "team"},
                                 **changed},
                         request_id=request_id)
    cause = {"cause": "team.delete", "team": {"id": team.pk, "name": team.name}, "audit_id": entry.id}
    to_team_id = to_team.pk if to_team is not None else None
    for aid, visibility in moved_assets:
        now_visibility = Visibility.PRIVATE if memories != "move" and visibility == Visibility.TEAM else visibility
        audit.record(actor=actor, action="asset.move", object_type="asset", object_id=aid,
                     detail={"from": {"visibility": visibility, "team_id": team.pk},
                             "to": {"visibility": now_visibility, "team_id": to_team_id}, **cause},
                     request_id=request_id)
    for g in grants:  # removed by the team's deletion (on_delete=CASCADE)
        audit.record(actor=actor, action="acl.revoke", object_type=g.object_type, object_id=g.object_id,
                     detail={"grant_id": g.id, "grantee": grant_label(g), "permission": g.permission, **cause},
                     request_id=request_id)
    team.delete()
    return result


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
    require_org_admin(actor, action="change memberships")
    # Only owners can create or demote owners: an admin must not be able to take over the org.
    if Role.OWNER in (old, new) and not actor.is_org_owner:
        raise PermissionDenied("Only owners can grant or remove the owner role.")
    if ROLE_RANK.get(new, 0) == 0:
        raise ValidationError({"role": ["Unknown role."]})


class InvitationClosed(Exception):
    """The invitation exists but can no longer be used (expired, revoked or declined, accepted):
    the invite page answers 410 Gone with ``status``, and nothing is written."""

    def __init__(self, status: str):
        super().__init__(status)
        self.status = status


def _invite_path(token: str) -> str:
    # The invitee's page is the console's: it may need a login or a new account first.
    return reverse("frontend:invite", kwargs={"token": token})


def _max_username_length() -> int:
    return User._meta.get_field(User.USERNAME_FIELD).max_length or 150


def _max_email_length() -> int:
    # what both the invitation and the account it makes can hold
    return min(Invitation._meta.get_field("email").max_length, User._meta.get_field("email").max_length)


@transaction.atomic
def member_invite(*, actor: Actor, email: str, role: str, base_url: str,
                  request_id: str = "") -> tuple[Invitation, str | None]:
    """Invites ``email`` to the actor's org with ``role``; returns the invitation and its link
    (``NYLON_PUBLIC_URL`` + ``/invite/<token>``; the caller's ``base_url``, its request's own
    address, only when that is unset) for the admin to pass on, or None when the link is mailed:
    it then exists only in the email. Whoever holds a link can sign up as its email, so an admin
    who saw mailed links could make accounts for other people's addresses (which they could then
    never claim, whichever org invites them later).

    Nobody becomes a member here: an existing account is never added without its owner's consent,
    and the answer is the same whether an account has this email or not (only an account that is
    already a member is refused, and the admin sees those anyway). Inviting an email that has an
    open invitation revokes it and issues a new link (a resend). The link is mailed after commit
    when ``NYLON_EMAIL_HOST`` is set (never one built from ``base_url``); otherwise the admin
    passes it on."""
    _check_role_change(actor, old=None, new=role)
    email = email.strip()
    # A format rule, refused for every email alike so it tells nothing about accounts.
    max_len = _max_email_length()
    if len(email) > max_len:
        raise ValidationError({"email": [f"Ensure this email has at most {max_len} characters."]})
    # The org row lock serialises the org's invitations (and role changes, ``_lock_membership``):
    # two concurrent invites of one email would otherwise both find no open invitation to revoke.
    Organization.objects.select_for_update(no_key=True).filter(pk=actor.org.pk).first()
    if Membership.objects.filter(org=actor.org, user__email__iexact=email).exists():
        raise ValidationError({"email": ["Already a member."]})
    now = timezone.now()
    _check_invite_rate(actor.org, now)
    open_ = Invitation.objects.filter(org=actor.org, email__iexact=email, accepted_at__isnull=True,
                                      revoked_at__isnull=True)
    _check_may_end_invitations(actor, open_.filter(expires_at__gt=now).values_list("role", flat=True))
    replaced = sorted(open_.values_list("id", flat=True))
    open_.update(revoked_at=now)
    inviter = actor.user.get_username() if actor.user is not None else ""
    invitation, url = _issue_invitation(org=actor.org, email=email, role=role, invited_by=actor.user,
                                        inviter=inviter, base_url=base_url, now=now, audit_actor=actor,
                                        detail={"replaced": replaced}, request_id=request_id)
    return invitation, (None if settings.NYLON_EMAIL_HOST and settings.NYLON_PUBLIC_URL else url)


def _issue_invitation(*, org: Organization, email: str, role: str, invited_by, inviter: str, base_url: str,
                      now, audit_actor: Actor | None, detail: dict, request_id: str) -> tuple[Invitation, str]:
    """Creates the invitation (the caller holds the org row lock and has ended the email's open
    ones), audits it and returns it with its link; with mail configured the link is mailed after
    commit, and the caller decides who else may see it."""
    token = secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            invitation = Invitation.objects.create(
                org=org, email=email, role=role, invited_by=invited_by, token_hash=hash_secret(token),
                expires_at=now + timedelta(days=settings.NYLON_INVITE_TTL_DAYS),
            )
    except IntegrityError:  # the open-invitation index: a concurrent invite got past the lock
        raise ValidationError({"email": ["An invitation for this email was issued at the same moment; "
                                         "try again."]}) from None
    audit.record(actor=audit_actor, org=org, action="member.invite", object_type="invitation",
                 object_id=invitation.id, detail={"email": email.lower(), "role": role, **detail},
                 request_id=request_id)
    url = (settings.NYLON_PUBLIC_URL or base_url).rstrip("/") + _invite_path(token)
    if settings.NYLON_EMAIL_HOST and not settings.NYLON_PUBLIC_URL:
        # (settings refuse this pair; only an override reaches it) The link came from the request.
        log.warning("invitation %s: not mailed, NYLON_PUBLIC_URL is not set", invitation.id)
    elif settings.NYLON_EMAIL_HOST:
        transaction.on_commit(partial(_send_invitation_email, invitation_id=invitation.id, email=email,
                                      org_name=org.name, role=invitation.get_role_display(),
                                      inviter=inviter, url=url, expires_at=invitation.expires_at))
    return invitation, url


def _check_invite_rate(org: Organization, now) -> None:
    """At most ``NYLON_INVITES_PER_HOUR`` invitations per org in any hour (0: no cap), resends
    included: each may mail a stranger from the operator's address, and the console has no API
    throttle. Counted from the rows under the org lock the caller holds, so the cap is exact."""
    cap = settings.NYLON_INVITES_PER_HOUR
    if cap <= 0:
        return
    recent = Invitation.objects.filter(org=org, created_at__gt=now - INVITE_RATE_WINDOW).order_by("-created_at")
    times = list(recent.values_list("created_at", flat=True)[:cap])
    if len(times) >= cap:
        wait = (times[-1] + INVITE_RATE_WINDOW - now).total_seconds()
        raise Throttled(wait=max(wait, 1), detail=f"At most {cap} invitations an hour per organisation; "
                                                  f"try again in {max(int(wait) // 60, 1)} minutes.")


def _send_invitation_email(*, invitation_id: int, email: str, org_name: str, role: str, inviter: str, url: str,
                           expires_at) -> None:
    """After commit. A failed send revokes the invitation: with mail the admin is never shown the
    link, so nobody holds it; the caller sees the revocation (``invitation_mail_failed``) and says so
    instead of "emailed"."""
    org_name = " ".join(org_name.split())  # a line break in a Subject header is refused
    subject = f"You are invited to {org_name} on Nylon"
    by = f"{inviter} invited you" if inviter else "You are invited"
    body = (f"{by} to join the organisation {org_name} on Nylon as {role}.\n\n"
            f"Open this link to accept (until {expires_at:%Y-%m-%d %H:%M} UTC):\n{url}\n\n"
            "If you did not expect this, ignore this email.\n")
    try:
        send_mail(subject, body, None, [email])
    except Exception:  # SMTP down, refused, timed out: the link is lost with the email
        log.warning("invitation %s: email not sent; the invitation is revoked", invitation_id, exc_info=True)
        Invitation.objects.filter(id=invitation_id, accepted_at__isnull=True, revoked_at__isnull=True).update(
            revoked_at=timezone.now())


def invitation_mail_failed(invitation: Invitation) -> bool:
    """After ``member_invite`` returned with no link (mail configured; its transaction committed, so
    the email was tried): whether the send failed, which revoked the invitation."""
    invitation.refresh_from_db(fields=["revoked_at"])
    return invitation.revoked_at is not None


def _lock_invitation(invitation: Invitation) -> Invitation | None:
    """The invitation as it is now, locked, or None (its org was deleted meanwhile).

    The org row is locked first: ``member_invite`` (and every role change, ``_lock_membership``)
    locks the org and then writes the org's invitations, while this transaction's own inserts
    (the audit row, the membership) wait for the org row. Locking the invitation first deadlocked
    with a re-invite of the same email, and Postgres failed one of the two requests."""
    Organization.objects.select_for_update(no_key=True).filter(pk=invitation.org_id).first()
    return Invitation.objects.select_for_update(of=("self",)).select_related("org").filter(pk=invitation.pk).first()


def _check_may_end_invitations(actor: Actor, roles) -> None:
    """Ending (revoking, or replacing by a new invitation) an open owner invitation is an owner's
    call, as granting or removing the owner role is (``_check_role_change``)."""
    if Role.OWNER in set(roles) and not actor.is_org_owner:
        raise PermissionDenied("Only owners can revoke or replace an invitation to the owner role.")


@transaction.atomic
def invitation_revoke(*, actor: Actor, invitation: Invitation, request_id: str = "") -> Invitation:
    require_org_admin(actor, action="manage invitations")
    invitation = _lock_invitation(invitation)
    if invitation is None:
        raise Http404
    if invitation.accepted_at is not None:
        raise ValidationError({"invitation": ["This invitation was accepted; remove the member instead."]})
    if invitation.revoked_at is None:
        _check_may_end_invitations(actor, [invitation.role])
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        audit.record(actor=actor, action="member.invite_revoke", object_type="invitation",
                     object_id=invitation.id, detail={"email": invitation.email.lower()}, request_id=request_id)
    return invitation


def _lock_open_invitation(invitation: Invitation) -> Invitation:
    """The invitation as it is now, locked: concurrent accepts (or an accept and a revoke) of one
    link are serialised, and the second finds it closed."""
    fresh = _lock_invitation(invitation)
    if fresh is None:  # its org was deleted meanwhile
        raise Http404
    if fresh.status != InvitationStatus.PENDING:
        raise InvitationClosed(fresh.status)
    return fresh


def is_invitee(invitation: Invitation, user) -> bool:
    email = (getattr(user, "email", "") or "").strip().lower()
    return bool(email) and email == invitation.email.strip().lower()


def _require_invitee(invitation: Invitation, user) -> None:
    # The link alone is not enough: a forwarded or leaked link must not let another account in.
    if not is_invitee(invitation, user):
        raise PermissionDenied("This invitation is for another email address.")


def _accept(invitation: Invitation, user, *, request_id: str) -> tuple[Membership, bool]:
    created = True
    try:
        with transaction.atomic():
            membership = Membership.objects.create(org=invitation.org, user=user, role=invitation.role)
    except IntegrityError:  # already a member (an earlier path, or a concurrent accept): kept as it is
        membership = Membership.objects.get(org=invitation.org, user=user)
        created = False
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    actor = Actor(org=invitation.org, user=user, role=membership.role)
    audit.record(actor=actor, action="member.invite_accept", object_type="invitation", object_id=invitation.id,
                 detail={"user_id": user.id, "role": membership.role, "invited_role": invitation.role,
                         "already_member": not created}, request_id=request_id)
    return membership, created


@transaction.atomic
def invitation_accept(*, invitation: Invitation, user, request_id: str = "") -> tuple[Membership, bool]:
    """Makes ``user`` (whose email must be the invitation's) a member with the invited role.
    Returns the membership and whether it is new: an account that is already a member keeps its
    role, and the link is used up either way."""
    invitation = _lock_open_invitation(invitation)
    _require_invitee(invitation, user)
    return _accept(invitation, user, request_id=request_id)


@transaction.atomic
def invitation_signup(*, invitation: Invitation, password: str, username: str = "", request_id: str = ""):
    """The invitee has no account: creates one with the invited email (in lower case), the name
    ``username`` and ``password``, and accepts. Returns the user and the membership. A blank name
    is derived from the email's local part (``suggested_username``). The name is what teammates
    and agents see (recall lines, version authors), so it may not be an address; the account
    signs in with either. A name or password the validators refuse is a 400 on that field, with
    nothing written."""
    invitation = _lock_open_invitation(invitation)
    # Sign-ups one at a time: a name is unique regardless of case by the check below, which the
    # username column's index (case-sensitive) does not back, and the org row lock above serialises
    # one org's sign-ups only: two orgs' at once as "Ana" and "ana" both passed it. Rare writes; the
    # lock ends with the transaction.
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext('nylon:account-signup'))")
    email = invitation.email.strip().lower()
    if User.objects.filter(email__iexact=email).exists():
        raise ValidationError({"email": ["An account with this email exists: sign in to accept."]})
    username = _check_new_username(username.strip()) if username.strip() else suggested_username(email)
    try:
        password_validation.validate_password(password, user=User(username=username, email=email))
    except DjangoValidationError as exc:
        raise ValidationError({"password": list(exc.messages)}) from None
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, email=email, password=password)
    except IntegrityError:  # the name was taken between the check and the insert
        raise ValidationError({"username": ["This name is taken; choose another."]}) from None
    membership, _ = _accept(invitation, user, request_id=request_id)
    return user, membership


def _username_taken(name: str) -> bool:
    # iexact: a look-alike of an existing name ("Ana" next to "ana") would be confused with it.
    return User.objects.filter(username__iexact=name).exists()


def _check_new_username(name: str) -> str:
    errors = []
    if "@" in name:
        errors.append("A name, not an email address: your teammates and their agents see it.")
    elif len(name) > _max_username_length():
        errors.append(f"Ensure this name has at most {_max_username_length()} characters.")
    else:
        try:
            User.username_validator(name)
        except DjangoValidationError as exc:
            errors.extend(exc.messages)
    if not errors and _username_taken(name):
        errors.append("This name is taken; choose another.")
    if errors:
        raise ValidationError({"username": errors})
    return name


def suggested_username(email: str) -> str:
    """A free name for a new account from its email's local part ("dana.lee@x.io" → "dana.lee",
    then "dana.lee-2", …): what the sign-up form offers, and what a blank name becomes."""
    base = re.sub(r"[^\w.+-]", "", email.split("@", 1)[0].lower())[:_max_username_length() - 8] or "member"
    name, n = base, 1
    while _username_taken(name):
        n += 1
        name = f"{base}-{n}"
    return name


@transaction.atomic
def invitation_decline(*, invitation: Invitation, user, request_id: str = "") -> Invitation:
    invitation = _lock_open_invitation(invitation)
    _require_invitee(invitation, user)
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    audit.record(actor=Actor(org=invitation.org, user=user), action="member.invite_decline",
                 object_type="invitation", object_id=invitation.id, detail={"user_id": user.id},
                 request_id=request_id)
    return invitation


def _lock_membership(membership: Membership) -> Membership:
    """The membership as it is now, with the org's row locked for the rest of the transaction.

    The API loads the membership before this transaction starts: its role may be stale (an admin
    would "demote an admin" who an owner has just made an owner, passing the owners-only check).
    And two owners demoting each other at once would each still see the other owner: locking the
    org row serialises the role changes of one org, so the last-owner check sees committed rows."""
    Organization.objects.select_for_update(no_key=True).filter(pk=membership.org_id).first()
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
    detail = {"from": old, "to": role}
    revoked = _revoke_invitations_beyond(membership, role=role)
    if revoked:
        detail["revoked_invitations"] = revoked
    audit.record(actor=actor, action="member.role", object_type="user", object_id=membership.user_id,
                 detail=detail, request_id=request_id)
    return membership


def _grantable_roles(role: str | None) -> set[str]:
    """The roles a member with ``role`` may invite with (``_check_role_change``); None: not a member."""
    if role == Role.OWNER:
        return set(Role.values)
    if role == Role.ADMIN:
        return {Role.ADMIN, Role.MEMBER}
    return set()


def _revoke_invitations_beyond(membership: Membership, *, role: str | None) -> list[int]:
    """Revokes the open invitations the member issued that ``role`` (None: removed) may no longer
    issue; returns their ids. An invitation carries its inviter's authority: a demoted or removed
    admin must not keep a way back in (an invitation of another address of theirs) nor hand out a
    role they can no longer grant. The caller holds the org row (``_lock_membership``), as an
    invite does, so no invitation of theirs is being made meanwhile."""
    open_ = (Invitation.objects.filter(org_id=membership.org_id, invited_by_id=membership.user_id,
                                       accepted_at__isnull=True, revoked_at__isnull=True)
             .exclude(role__in=_grantable_roles(role)))
    ids = sorted(open_.values_list("id", flat=True))
    if ids:
        open_.update(revoked_at=timezone.now())
    return ids


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
    revoked = _revoke_invitations_beyond(membership, role=None)
    audit.record(actor=actor, action="member.remove", object_type="user", object_id=membership.user_id,
                 detail={"revoked_invitations": revoked} if revoked else None, request_id=request_id)
    membership.delete()


def _check_default_visibility(value: str, team: Team | None) -> None:
    if value == "team" and team is None:
        raise ValidationError({"default_visibility": ["Team needs the agent to be in a team (team_id)."]})


@transaction.atomic
def agent_create(*, actor: Actor, name: str, team: Team | None = None, description: str = "",
                 default_visibility: str | None = None, request_id: str = "") -> Agent:
    """``default_visibility`` (what writes that name none get): by default the agent's team when it has
    one, else private, so a team's agents share what they write unless told otherwise."""
    require_org_admin(actor, action="create agents")
    if default_visibility is None:
        default_visibility = "team" if team is not None else "private"
    _check_default_visibility(default_visibility, team)
    if Agent.objects.filter(org=actor.org, name=name).exists():
        raise ValidationError({"name": ["An agent with this name exists."]})
    try:
        with transaction.atomic():
            agent = Agent.objects.create(org=actor.org, name=name, team=team, description=description,
                                         default_visibility=default_visibility, created_by=actor.user)
    except IntegrityError:  # the same name taken concurrently, between the check and the insert
        raise ValidationError({"name": ["An agent with this name exists."]}) from None
    audit.record(actor=actor, action="agent.create", object_type="agent", object_id=agent.id,
                 detail={"name": name, "team": team.id if team else None, "default_visibility": default_visibility},
                 request_id=request_id)
    return agent


@transaction.atomic
def agent_update(*, actor: Actor, agent: Agent, data: dict, request_id: str = "") -> Agent:
    if not data:  # an empty PATCH changes nothing: no save, no audit entry
        return agent
    changed = {}
    was_active = agent.is_active
    for field in ("name", "description", "team", "is_active", "default_visibility"):
        if field in data:
            setattr(agent, field, data[field])
            changed[field] = data[field].id if isinstance(data[field], Team) else data[field]
    if agent.default_visibility == "team" and agent.team is None:
        if "default_visibility" in data:
            _check_default_visibility(agent.default_visibility, None)
        # Taken out of its team: its later writes have no team to share with, so they turn private
        # (the narrower choice) rather than fail.
        agent.default_visibility = changed["default_visibility"] = "private"
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
        require_org_admin(actor, action="manage API keys")
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
    require_org_admin(actor, action="manage API keys")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit.record(actor=actor, action="key.revoke", object_type="api_key", object_id=key.id,
                     detail={"prefix": key.prefix}, request_id=request_id)
    return key
