"""Writes for memory assets, their versions and lifecycle, ACL grants and agent bindings:
keyword-only, atomic, audited. Access to the object itself is decided by ``assets.access``."""

from __future__ import annotations

import hashlib
import json

from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone
from rest_framework.exceptions import PermissionDenied, ValidationError

from memory.models import Node, Visibility
from nylon_project.errors import Conflict
from teams.auth import Actor
from teams.models import Agent, Team

from . import access, audit, selectors
from .models import (
    AccessGrant,
    AgentBinding,
    Asset,
    AssetKind,
    AssetStatus,
    AssetVersion,
    GranteeKind,
    ObjectType,
)

CONTENT_FIELDS = ("title", "summary", "body", "node_ids")

# The lifecycle. candidate → draft is a rejection (or the owner withdrawing the candidate).
TRANSITIONS: dict[str, set[str]] = {
    AssetStatus.DRAFT: {AssetStatus.CANDIDATE},
    AssetStatus.CANDIDATE: {AssetStatus.APPROVED, AssetStatus.DRAFT},
    AssetStatus.APPROVED: {AssetStatus.DEPRECATED},
    AssetStatus.DEPRECATED: {AssetStatus.ARCHIVED},
    AssetStatus.ARCHIVED: set(),
}
EDITABLE_STATUSES = {AssetStatus.DRAFT, AssetStatus.CANDIDATE, AssetStatus.APPROVED}


def legal_moves(status: str, approved_version: int | None) -> set[str]:
    """The lifecycle moves from ``status``. An approved asset whose newer version awaits review
    (candidate) or was sent back (draft) is still served its approved version, so it can still be
    withdrawn (deprecated) without approving the pending text first.

    Such a draft (a rejected edit) may also be approved again directly, by an approver
    (``transition_allowed``: a move to approved needs ``access.can_approve``): otherwise only its
    owner could propose it again (promotion is the owner's), an approver's later edits stay drafts
    (an edit is approved as saved only in status approved), and an asset whose owner left stayed
    "draft, serving vN" for good. A draft never approved still goes through candidate (review)."""
    moves = set(TRANSITIONS.get(status, set()))
    if approved_version is not None and status in (AssetStatus.DRAFT, AssetStatus.CANDIDATE):
        moves.add(AssetStatus.DEPRECATED)
    if approved_version is not None and status == AssetStatus.DRAFT:
        moves.add(AssetStatus.APPROVED)
    return moves


def content_hash(*, title: str, summary: str, body: str, node_ids: list[int]) -> str:
    doc = json.dumps({"title": title, "summary": summary, "body": body, "node_ids": list(node_ids)},
                     sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


def _asset_hash(a) -> str:
    return content_hash(title=a.title, summary=a.summary, body=a.body, node_ids=a.node_ids)


def _owner_fields(actor: Actor) -> dict:
    if actor.agent is not None:
        return {"owner_agent": actor.agent, "owner_user": None}
    return {"owner_user": actor.user, "owner_agent": None}


def _check_node_ids(actor: Actor, node_ids: list[int]) -> list[int]:
    """A chat-memory asset may only reference nodes its writer can read (no leak by reference)."""
    ids = list(dict.fromkeys(int(x) for x in node_ids))
    nodes = Node.objects.filter(org=actor.org, id__in=ids, deleted_at__isnull=True)
    readable = {n.id for n in nodes if access.node_readable(actor, n)}
    missing = [i for i in ids if i not in readable]
    if missing:
        raise ValidationError({"node_ids": [f"No such memory: {missing[0]}."]})
    return ids


def _in_team(actor: Actor, team: Team) -> bool:
    """An agent is in its own team; a user in the teams it belongs to."""
    return team.id == actor.agent.team_id if actor.agent is not None else team.id in actor.team_ids


def _check_create_scope(actor: Actor, visibility: str, team: Team | None) -> None:
    """Direct creation of a shared asset is for admins of that scope; everyone else creates a
    personal asset and promotes it (candidate → approval)."""
    if visibility == Visibility.TEAM:
        if team is None:
            raise ValidationError({"team_id": ["Team visibility needs a team."]})
        if actor.agent is not None or not (team.id in actor.team_admin_ids
                                           or (actor.is_org_admin and team.id in actor.team_ids)):
            raise ValidationError({"visibility": ["Create a private asset and promote it to the team."]})
    elif visibility == Visibility.ORG:
        if not actor.is_org_admin:
            raise ValidationError({"visibility": ["Create a private asset and promote it to the org."]})
    # Any other visibility: the team still gives its admins write rights (and rides along a later
    # promotion), so a creator may only name a team of its own.
    if team is not None and visibility != Visibility.TEAM and not actor.is_org_admin:
        if not _in_team(actor, team):
            raise ValidationError({"team_id": ["You are not a member of this team."]})


def _approval_shared(asset: Asset) -> bool:
    """Whether an approval of the asset as it now is (its visibility, after any promotion it applies)
    is one for others: a private asset's owner approves it for themselves, which is no review. Such
    an approval is not recorded on the version (``AssetVersion.approved_at``), so an agent reading the
    asset's history once it is shared again never gets a version only its owner approved."""
    return asset.visibility != Visibility.PRIVATE


def _version_row(asset: Asset, actor: Actor, *, approved_at=None) -> AssetVersion:
    return AssetVersion.objects.create(
        org=asset.org, asset=asset, version=asset.version, title=asset.title, summary=asset.summary,
        body=asset.body, node_ids=asset.node_ids, content_hash=asset.content_hash,
        author_label=actor.label[:255] if actor else "system", approved_at=approved_at,
        author_agent=actor.agent if actor else None,
        author_user=actor.user if actor is not None and actor.agent is None else None,
    )


def _one_newline(text: str) -> str:
    """Line breaks as "\n": a browser's textarea sends "\r\n" (and a Windows client may), which the
    context served to agents as written, and which made an unchanged text a new version."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


@transaction.atomic
def asset_create(*, actor: Actor, kind: str, title: str, summary: str = "", body: str = "",
                 node_ids: list[int] | None = None, visibility: str = Visibility.PRIVATE,
                 team: Team | None = None, confidence: float = 1.0, request_id: str = "") -> Asset:
    _check_create_scope(actor, visibility, team)
    title, summary, body = _one_newline(title), _one_newline(summary), _one_newline(body)
    if kind != AssetKind.CHAT_MEMORY and node_ids:
        # the update rule: dropping them silently answered 201 for memories the asset never held
        raise ValidationError({"node_ids": ["Only chat-memory assets hold memories."]})
    node_ids = _check_node_ids(actor, node_ids or []) if kind == AssetKind.CHAT_MEMORY else []
    if kind == AssetKind.CHAT_MEMORY and not node_ids:
        raise ValidationError({"node_ids": ["A chat-memory asset is a set of memories."]})
    if team is None and actor.agent is not None and visibility != Visibility.PRIVATE:
        team = actor.agent.team
    asset = Asset(org=actor.org, kind=kind, title=title, summary=summary, body=body, node_ids=node_ids,
                  visibility=visibility, team=team, confidence=confidence, **_owner_fields(actor))
    asset.content_hash = _asset_hash(asset)
    asset.save()
    _version_row(asset, actor)
    audit.record(actor=actor, action="asset.create", object_type="asset", object_id=asset.id,
                 detail={"kind": kind, "visibility": visibility, "version": 1}, request_id=request_id)
    return asset


STALE_FOR_AGENTS = "Stale version: the asset changed since the version you read; read it again."


def _lock(asset: Asset, expected_version: int | None, actor: Actor | None = None) -> Asset:
    asset = Asset.objects.select_for_update().get(pk=asset.pk)
    if expected_version is not None and expected_version != asset.version:
        if actor is not None and selectors.reads_served(actor, asset):
            # An agent reads the served version: the current number would tell it an edit awaits
            # review, and let it write on top of text no approver has seen.
            raise Conflict(STALE_FOR_AGENTS)
        raise Conflict(f"Stale version: the asset is at version {asset.version}, you sent {expected_version}.")
    return asset


def _writes_on_what_it_reads(actor: Actor, asset: Asset) -> bool:
    """An agent writing to an asset it does not own (an ACL write grant) writes on the version it is
    served, or on its own edit awaiting review: not on another's unreviewed edit, whose text it was
    never given and would sign its name under."""
    if not selectors.reads_served(actor, asset):
        return True
    if asset.version == selectors.served_version(asset):
        return True
    return AssetVersion.objects.filter(asset=asset, version=asset.version, author_agent=actor.agent).exists()


@transaction.atomic
def asset_update(*, actor: Actor, asset: Asset, data: dict, expected_version: int,
                 request_id: str = "") -> tuple[Asset, bool]:
    """Returns (asset, created_a_version). Identical content creates no version (idempotent)."""
    asset = _lock(asset, expected_version, actor)
    if not _writes_on_what_it_reads(actor, asset):
        raise Conflict(STALE_FOR_AGENTS)
    # The caller's access check read the row before this lock. A visibility change bumps no version,
    # so expected_version cannot catch an owner narrowing the asset in between: decide again on the
    # locked row, or a team admin's stale request would still write into a now-private asset.
    if not (access.asset_readable(actor, asset)[0] and access._writable(actor, asset, ObjectType.ASSET)[0]):
        raise PermissionDenied("Only the owner, an admin of its scope or an ACL writer may change this asset.")
    if asset.status not in EDITABLE_STATUSES:
        raise ValidationError({"status": [f"A {asset.status} asset cannot be edited."]})
    if "node_ids" in data:
        if asset.kind != AssetKind.CHAT_MEMORY:
            raise ValidationError({"node_ids": ["Only chat-memory assets hold memories."]})
        data["node_ids"] = _check_node_ids(actor, data["node_ids"])
        if not data["node_ids"]:  # the create rule: an empty chat memory is not a chat memory
            raise ValidationError({"node_ids": ["A chat-memory asset is a set of memories."]})
    # Whether this edit is approved as it is saved is decided for the scope the approval covered, the
    # one before a visibility change too: narrowing to private makes the owner its approver, and a
    # member saved unreviewed text as approved that way, then shared it again through an ACL.
    approver_before = access.can_approve(actor, asset)[0]
    changed_meta = {}
    review = {}
    if "visibility" in data and data["visibility"] != asset.visibility:
        if data["visibility"] not in (Visibility.PRIVATE, Visibility.RESTRICTED):
            raise ValidationError({"visibility": ["Widening goes through promotion (POST …/promote)."]})
        if not access._owns(actor, asset):
            raise PermissionDenied("Only the owner may change the visibility of an asset.")
        changed_meta["visibility"] = [asset.visibility, data["visibility"]]
        was_private = asset.visibility == Visibility.PRIVATE
        asset.visibility = data["visibility"]
        if was_private and asset.approved_version is not None and not access.can_approve(actor, asset)[0]:
            # Private → restricted lets the owner give readers through grants, which no approval
            # covered: one made while private (the owner approves that) was for the owner alone, and
            # which audience an earlier one was for is not recorded. Unless the owner may approve the
            # restricted asset, the approval lapses: nothing is served until an approver approves.
            review = {"review": "approval_lapsed", "previously_served_version": asset.approved_version}
            asset.approved_version = asset.approved_by = asset.approved_at = None
            if asset.status == AssetStatus.APPROVED:
                asset.status = AssetStatus.CANDIDATE
    if "confidence" in data and data["confidence"] != asset.confidence:
        changed_meta["confidence"] = [asset.confidence, data["confidence"]]
        asset.confidence = data["confidence"]
    for f in CONTENT_FIELDS:
        if f in data:
            setattr(asset, f, _one_newline(data[f]) if isinstance(data[f], str) else data[f])
    new_hash = _asset_hash(asset)
    versioned = new_hash != asset.content_hash
    if versioned:
        asset.version += 1
        asset.content_hash = new_hash
    if versioned and asset.status == AssetStatus.APPROVED:
        # The approval was of the approved version's text, not of the asset: a change by someone who
        # could not approve it goes back to review, and agents keep the approved version meanwhile
        # (``assets.selectors``). An approver's own change is approved as it is saved.
        if approver_before and access.can_approve(actor, asset)[0]:
            asset.approved_version, asset.approved_by, asset.approved_at = asset.version, actor.user, timezone.now()
            review = {"review": "approved_by_editor", "served_version": asset.version}
        else:
            asset.status = AssetStatus.CANDIDATE
            review = {"review": "pending", "from": AssetStatus.APPROVED, "to": AssetStatus.CANDIDATE,
                      "served_version": asset.approved_version}
    if versioned or changed_meta:
        asset.save()
        if versioned:
            _version_row(asset, actor, approved_at=asset.approved_at if review.get("review") == "approved_by_editor"
                         and _approval_shared(asset) else None)
        audit.record(actor=actor, action="asset.update", object_type="asset", object_id=asset.id,
                     detail={"version": asset.version, "new_version": versioned, **changed_meta, **review},
                     request_id=request_id)
    return asset, versioned


@transaction.atomic
def asset_promote(*, actor: Actor, asset: Asset, visibility: str, team: Team | None,
                  expected_version: int | None = None, request_id: str = "") -> Asset:
    """Personal → team/org: the asset becomes a candidate; an approver applies the promotion."""
    asset = _lock(asset, expected_version, actor)
    if not access._owns(actor, asset):
        raise PermissionDenied("Only the owner may propose a promotion.")
    if asset.status != AssetStatus.DRAFT:
        raise ValidationError({"status": [f"Only a draft can be promoted (this one is {asset.status})."]})
    if visibility not in (Visibility.TEAM, Visibility.ORG):
        raise ValidationError({"visibility": ["Promote to team or org."]})
    if visibility == Visibility.TEAM:
        team = team or asset.team or (actor.agent.team if actor.agent is not None else None)
        if team is None:
            raise ValidationError({"team_id": ["Team visibility needs a team."]})
    if team is not None and not (visibility == Visibility.ORG and actor.is_org_admin):
        # Also for an org target: the approval writes this team onto the asset, and admins of an
        # org asset's team may change it, so a requester could hand an unrelated team write rights.
        # (An org admin may already create an org asset of any team directly.)
        if not _in_team(actor, team):
            raise ValidationError({"team_id": ["You are not a member of this team."]})
    asset.promotion = {"visibility": visibility, "team_id": team.id if team else None,
                       "requested_by": actor.label, "requested_at": timezone.now().isoformat()}
    asset.status = AssetStatus.CANDIDATE
    asset.save()
    audit.record(actor=actor, action="asset.promote", object_type="asset", object_id=asset.id,
                 detail={"to": visibility, "team_id": asset.promotion["team_id"]}, request_id=request_id)
    return asset


def _check_promotion_team(asset: Asset) -> None:
    """Refuse (409 ``target_team_gone``) to apply a promotion whose team was deleted: its id would
    be written to ``asset.team`` and fail the foreign key at commit (a 500). Deleting a team
    withdraws the promotions naming it (``promotions_withdraw_for_team``), so this is the guard for
    a promotion proposed while the team was being deleted. The row lock keeps the team from being
    deleted between this check and the commit."""
    team_id = asset.promotion.get("team_id")
    if team_id and not Team.objects.select_for_update().filter(org_id=asset.org_id, id=team_id).exists():
        raise Conflict("The team this promotion targets no longer exists: send the candidate back to draft "
                       "and promote it again.", code="target_team_gone")


@transaction.atomic
def promotions_withdraw_for_team(*, actor: Actor, team: Team, request_id: str = "") -> list[int]:
    """Called by ``teams.services.team_delete`` before the team row goes: every candidate whose
    pending promotion names the team goes back to draft, promotion cleared, each audited like a
    withdrawal. Withdrawing rather than leaving the candidate (or re-targeting it) because the
    scope its requester asked for no longer exists; approving it would fail
    (``_check_promotion_team``) and the candidate would sit in the approval queue for good. The
    asset keeps its own visibility (a candidate is still personal), so nothing is widened. Returns
    the ids of the withdrawn candidates."""
    # The assets are locked before the team row goes, as an approval locks the asset and then the
    # team (``_check_promotion_team``): one order on both paths, so the two cannot deadlock. A
    # candidate approved meanwhile no longer matches once its lock is released, and is left alone.
    candidates = list(Asset.objects.select_for_update()
                      .filter(org_id=team.org_id, status=AssetStatus.CANDIDATE, promotion__team_id=team.id)
                      .order_by("id"))
    for asset in candidates:
        withdrawn = asset.promotion
        asset.status, asset.promotion = AssetStatus.DRAFT, {}
        asset.save(update_fields=["status", "promotion", "updated_at"])
        audit.record(actor=actor, action="asset.transition", object_type="asset", object_id=asset.id,
                     reason="target_team_deleted",
                     detail={"from": AssetStatus.CANDIDATE, "to": AssetStatus.DRAFT,
                             "withdrawn_promotion": withdrawn}, request_id=request_id)
    return [a.id for a in candidates]


# Who may make a legal move: approving needs an approver (``access.can_approve``), sending a
# candidate back to draft its owner or an approver, every other move a writer of the asset.
_APPROVE, _REJECT, _WRITE = "approve", "reject", "write"
_TRANSITION_REFUSALS = {
    _APPROVE: "Only a team admin of the target team or an org admin may approve this asset.",
    _REJECT: "Only the owner or an approver may send a candidate back to draft.",
    _WRITE: "You may not change the lifecycle of this asset.",
}


def _transition_right(to: str) -> str:
    # Keyed on the target alone: draft is reachable only from candidate (TRANSITIONS), so a move
    # to draft is always the rejection, and the API can pick its access check before loading.
    if to == AssetStatus.APPROVED:
        return _APPROVE
    if to == AssetStatus.DRAFT:
        return _REJECT
    return _WRITE


def transition_allowed(*, actor: Actor, asset: Asset, to: str) -> bool:
    """May ``actor`` move ``asset`` (which it can read) to ``to`` now? The one lifecycle rule:
    ``asset_transition`` refuses every move this refuses, and the console offers exactly the moves
    it allows."""
    if to not in legal_moves(asset.status, asset.approved_version):
        return False
    right = _transition_right(to)
    if right == _APPROVE:
        return access.can_approve(actor, asset)[0]
    if right == _REJECT:
        return access._owns(actor, asset) or access.can_approve(actor, asset)[0]
    return access._writable(actor, asset, ObjectType.ASSET)[0]


def allowed_transitions(*, actor: Actor, asset: Asset) -> list[str]:
    """The moves ``transition_allowed`` lets this actor make, in lifecycle order."""
    return [to for to in AssetStatus.values if transition_allowed(actor=actor, asset=asset, to=to)]


def access_asset_for_transition(actor: Actor, asset_id: int, *, to: str, request_id: str = "") -> Asset:
    """The access check of a transition request (API and console), audited like any access: an
    approval needs an approver, a rejection only a reader (the service then wants the owner or an
    approver), any other move a writer.

    Legality comes first, for anyone who may read the asset: an illegal move is the 400 it is for
    an org admin, not a 403 that sends a team admin looking for rights no one could use.
    ``asset_transition`` checks it again on the locked row."""
    row = Asset.objects.filter(org=actor.org, id=asset_id).values_list("status", "approved_version").first()
    if row is not None and to not in legal_moves(*row):
        asset = access.access_asset_by_id(actor, asset_id, for_write=False, request_id=request_id)
        raise ValidationError({"to": [f"Illegal transition {asset.status} → {to}."]})
    right = _transition_right(to)
    return access.access_asset_by_id(actor, asset_id, for_write=right == _WRITE, for_approval=right == _APPROVE,
                                     request_id=request_id)


@transaction.atomic
def asset_transition(*, actor: Actor, asset: Asset, to: str, expected_version: int | None = None,
                     note: str = "", request_id: str = "") -> Asset:
    """``note``: why (a rejection's reason, for the author), kept in the audit entry and shown on the
    asset's page beside the move."""
    asset = _lock(asset, expected_version, actor)
    if to not in legal_moves(asset.status, asset.approved_version):
        raise ValidationError({"to": [f"Illegal transition {asset.status} → {to}."]})
    if not transition_allowed(actor=actor, asset=asset, to=to):
        raise PermissionDenied(_TRANSITION_REFUSALS[_transition_right(to)])
    if to == AssetStatus.APPROVED and expected_version is None:
        # What is approved is a version's text: the one the approver read, not whatever the owner
        # saved since (every caller: the API's input says so first, the console's form sends it).
        raise ValidationError({"expected_version": ["Required to approve: the version you reviewed."]})
    frm = asset.status
    detail: dict = {"from": frm, "to": to}
    if note.strip():
        detail["note"] = note.strip()
    if to == AssetStatus.APPROVED:
        if asset.promotion:
            _check_promotion_team(asset)
            detail["promotion"] = asset.promotion
            asset.visibility = asset.promotion["visibility"]
            if asset.promotion.get("team_id"):
                asset.team_id = asset.promotion["team_id"]
            asset.promotion = {}
        asset.approved_by = actor.user
        asset.approved_at = timezone.now()
        detail["approver"] = actor.label
        # What is approved is this version's text: from now on it is what bound agents are served.
        detail["version"] = asset.version
        detail["previously_served_version"] = asset.approved_version
        asset.approved_version = asset.version
        if _approval_shared(asset):
            AssetVersion.objects.filter(asset=asset, version=asset.version).update(approved_at=asset.approved_at)
    elif to == AssetStatus.DRAFT and asset.promotion:
        detail["rejected_promotion"] = asset.promotion
        asset.promotion = {}
    elif to == AssetStatus.DEPRECATED and asset.promotion:
        # a pending promotion of an approved asset's newer version, withdrawn with the asset
        detail["withdrawn_promotion"] = asset.promotion
        asset.promotion = {}
    if to == AssetStatus.DRAFT and asset.approved_version is not None:
        detail["served_version"] = asset.approved_version  # a rejected edit: the approved text stays served
    asset.status = to
    asset.last_move_note = ({"from": frm, "to": to, "note": detail["note"], "by": actor.label,
                             "at": timezone.now().strftime("%Y-%m-%d %H:%M UTC")} if "note" in detail else {})
    asset.save()
    audit.record(actor=actor, action="asset.transition", object_type="asset", object_id=asset.id,
                 detail=detail, request_id=request_id)
    return asset


def asset_record_use(*, asset_ids: list[int]) -> None:
    if asset_ids:
        from django.db.models import F

        Asset.objects.filter(id__in=asset_ids).update(usage_count=F("usage_count") + 1,
                                                      last_used_at=timezone.now())


# --- ACL ---------------------------------------------------------------------------------------------


def _acl_object(actor: Actor, object_type: str, object_id: int):
    model = Node if object_type == ObjectType.NODE else Asset
    qs = model.objects.filter(org=actor.org, id=object_id)
    if model is Node:
        qs = qs.filter(deleted_at__isnull=True)
    return qs.first()


def acl_object_for_admin(actor: Actor, object_type: str, object_id: int, *, request_id: str = "",
                         new_grant: bool = True):
    """Who administers an ACL: the object's owner, or an org admin (who may grant itself access).
    A private object of someone else is not found, for admins too; non-restricted objects take no
    new grant (400). Listing and revoking (``new_grant=False``) work whatever the visibility: an
    owner who narrowed a restricted object to private must still be able to see and revoke its
    old grants, which would otherwise come back to life if the object became restricted again."""
    obj = _acl_object(actor, object_type, object_id)
    owner = obj is not None and access._owns(actor, obj)
    if obj is None or (obj.visibility == Visibility.PRIVATE and not owner):
        access._deny(actor, object_type=f"{object_type}_acl", object_id=object_id, for_write=True,
                     reason="not_found" if obj is None else "visibility_private", request_id=request_id,
                     not_found=True)
    if not (owner or actor.is_org_admin):
        readable = access._visible(actor, obj, object_type)[0]
        access._deny(actor, object_type=f"{object_type}_acl", object_id=object_id, for_write=True,
                     reason="not_owner_or_org_admin", request_id=request_id, not_found=not readable,
                     message="Only the owner or an org admin may manage this ACL.")
    if new_grant and obj.visibility != Visibility.RESTRICTED:
        raise ValidationError({"object_id": ["Only restricted objects have an access list."]})
    return obj, ("owner" if owner else "org_admin")


@transaction.atomic
def grant_create(*, actor: Actor, obj, object_type: str, reason: str, grantee_kind: str, user_id=None,
                 agent_id=None, team_id=None, team_role: str = "", permission: str = "read",
                 request_id: str = "") -> AccessGrant:
    """``obj`` and ``reason`` come from ``acl_object_for_admin`` (called outside the transaction so
    a denial's audit entry survives the rollback)."""
    fields = {"grantee_user": None, "grantee_agent": None, "grantee_team": None, "grantee_team_role": ""}
    from teams.models import Membership

    if grantee_kind == GranteeKind.USER:
        m = Membership.objects.filter(org=actor.org, user_id=user_id).select_related("user").first()
        if m is None:
            raise ValidationError({"user_id": ["Not a member of this organisation."]})
        fields["grantee_user"] = m.user
    elif grantee_kind == GranteeKind.AGENT:
        agent = Agent.objects.filter(org=actor.org, id=agent_id).first()
        if agent is None:
            raise ValidationError({"agent_id": ["No such agent."]})
        fields["grantee_agent"] = agent
    else:
        team = Team.objects.filter(org=actor.org, id=team_id).first()
        if team is None:
            raise ValidationError({"team_id": ["No such team."]})
        if team_role not in ("member", "admin"):
            raise ValidationError({"team_role": ["member or admin."]})
        fields["grantee_team"], fields["grantee_team_role"] = team, team_role
    self_grant = (grantee_kind == GranteeKind.USER and actor.user is not None and fields["grantee_user"].id
                  == actor.user.id) or (grantee_kind == GranteeKind.AGENT and actor.agent is not None
                                        and fields["grantee_agent"].id == actor.agent.id)
    try:
        with transaction.atomic():
            grant = AccessGrant.objects.create(
                org=actor.org, object_type=object_type, object_id=obj.id, grantee_kind=grantee_kind,
                permission=permission, granted_by=actor.user, granted_by_label=actor.label[:255], **fields,
            )
    except IntegrityError:
        raise ValidationError({"grantee": ["This grantee already has a grant; revoke it first."]}) from None
    audit.record(actor=actor, action="acl.grant", object_type=object_type, object_id=obj.id,
                 reason=reason, detail={"grant_id": grant.id, "grantee": grant_label(grant),
                                        "permission": permission, "self_grant": bool(self_grant)},
                 request_id=request_id)
    return grant


# A grantee has two spellings. Its key names it by ids (``user:7``, ``agent:3``, ``team:2:admin``):
# stable, so the audit records it and the console's grant form sends it. Its label names it by
# names (``user:ana``, ``agent:bot``, ``team:core (admin)``) for people to read.
_KEY_PREFIX = {GranteeKind.USER: "user", GranteeKind.AGENT: "agent", GranteeKind.TEAM_ROLE: "team"}


def grantee_key(kind: str, grantee_id: int, team_role: str = "") -> str:
    key = f"{_KEY_PREFIX[kind]}:{grantee_id}"
    return f"{key}:{team_role}" if kind == GranteeKind.TEAM_ROLE else key


def grantee_label(kind: str, name: str, team_role: str = "") -> str:
    label = f"{_KEY_PREFIX[kind]}:{name}"
    return f"{label} ({team_role})" if kind == GranteeKind.TEAM_ROLE else label


def parse_grantee_key(key: str) -> dict | None:
    """A ``grantee_key`` as the keyword arguments of ``grant_create``; None if it is not one."""
    parts = key.split(":")
    try:
        if parts[0] == "user" and len(parts) == 2:
            return {"grantee_kind": GranteeKind.USER, "user_id": int(parts[1])}
        if parts[0] == "agent" and len(parts) == 2:
            return {"grantee_kind": GranteeKind.AGENT, "agent_id": int(parts[1])}
        if parts[0] == "team" and len(parts) == 3 and parts[2] in ("member", "admin"):
            return {"grantee_kind": GranteeKind.TEAM_ROLE, "team_id": int(parts[1]), "team_role": parts[2]}
    except ValueError:
        pass
    return None


def grant_label(g: AccessGrant) -> str:
    """The grant's ``grantee_key`` (what the audit records)."""
    grantee_id = {GranteeKind.USER: g.grantee_user_id, GranteeKind.AGENT: g.grantee_agent_id}.get(
        g.grantee_kind, g.grantee_team_id)
    return grantee_key(g.grantee_kind, grantee_id, g.grantee_team_role)


def grant_get_for_admin(actor: Actor, grant_id: int, *, request_id: str = "") -> AccessGrant:
    grant = AccessGrant.objects.filter(org=actor.org, id=grant_id).first()
    if grant is None:
        raise Http404
    acl_object_for_admin(actor, grant.object_type, grant.object_id, request_id=request_id, new_grant=False)
    return grant


@transaction.atomic
def grant_revoke(*, actor: Actor, grant: AccessGrant, request_id: str = "") -> None:
    audit.record(actor=actor, action="acl.revoke", object_type=grant.object_type, object_id=grant.object_id,
                 detail={"grant_id": grant.id, "grantee": grant_label(grant)}, request_id=request_id)
    grant.delete()


# --- bindings ----------------------------------------------------------------------------------------


def require_binding_admin(actor: Actor, agent: Agent) -> None:
    if actor.agent is not None or not (actor.is_org_admin or (agent.team_id and agent.team_id
                                                               in actor.team_admin_ids)):
        raise PermissionDenied("Only org admins or admins of the agent's team manage its bindings.")


@transaction.atomic
def binding_set(*, actor: Actor, agent: Agent, asset: Asset, mode: str, priority: int,
                request_id: str = "") -> AgentBinding:
    require_binding_admin(actor, agent)
    if not access.agent_eligible(agent, asset):
        raise ValidationError({"asset_id": ["This agent may not read this asset (bindings never widen "
                                            "visibility)."]})
    binding, created = AgentBinding.objects.update_or_create(
        agent=agent, asset=asset, defaults={"org": actor.org, "mode": mode, "priority": priority,
                                            "created_by": actor.user},
    )
    audit.record(actor=actor, action="binding.set", object_type="agent", object_id=agent.id,
                 detail={"asset_id": asset.id, "mode": mode, "priority": priority, "created": created},
                 request_id=request_id)
    binding.was_created = created  # the API answers 201 for a new binding, 200 for an update
    return binding


@transaction.atomic
def binding_remove(*, actor: Actor, agent: Agent, binding_id: int, request_id: str = "") -> None:
    require_binding_admin(actor, agent)
    binding = AgentBinding.objects.filter(org=actor.org, agent=agent, id=binding_id).first()
    if binding is None:
        raise Http404
    audit.record(actor=actor, action="binding.remove", object_type="agent", object_id=agent.id,
                 detail={"asset_id": binding.asset_id}, request_id=request_id)
    binding.delete()
