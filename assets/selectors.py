"""Reads of memory assets: which version of an asset its bound agents are served.

An agent is served an asset's last approved version (``Asset.approved_version``), never a newer
one waiting for review: an edit of an approved shared asset by someone who may not approve it makes
the asset a candidate again (``services.asset_update``), and until an approver approves it the
context, the index and the ``memory_get`` tool keep giving the approved text."""

from __future__ import annotations

from copy import copy

from django.db.models import F, Q

from teams.auth import Actor

from .models import Asset, AssetStatus, AssetVersion

# The states in which an asset with an approved version is served: approved, and an approved
# asset whose newer version awaits review (candidate) or was sent back (draft). Deprecated and
# archived assets are withdrawn.
SERVED_STATUSES = (AssetStatus.APPROVED, AssetStatus.CANDIDATE, AssetStatus.DRAFT)
_CONTENT = ("title", "summary", "body", "node_ids", "content_hash")


def served_version(asset: Asset) -> int | None:
    """The version bound agents receive, or None when they receive nothing from this asset."""
    if asset.approved_version is None or asset.status not in SERVED_STATUSES:
        return None
    return asset.approved_version


def pending_version(asset: Asset) -> int | None:
    """A version newer than the served one, saved since the approval (awaiting review, or sent back
    to draft); None when the served version is the current one."""
    served = served_version(asset)
    return asset.version if served is not None and asset.version != served else None


def with_served_content(assets: list[Asset]) -> list[Asset]:
    """The assets as their agents are served them: each one's approved version's content in place of
    a newer unapproved one (one query for all), in the same order. The instances are changed in
    memory only and must not be saved. Assets with nothing to serve, or whose approved version's row
    is missing (an import without it), are left out: serving the unreviewed text instead is the
    bypass this exists to close."""
    out = [a for a in assets if served_version(a) is not None]
    older = {a.id: a.approved_version for a in out if a.version != a.approved_version}
    if not older:
        return out
    which = Q()
    for asset_id, version in older.items():
        which |= Q(asset_id=asset_id, version=version)
    rows = {v.asset_id: v for v in AssetVersion.objects.filter(which)}
    served = []
    for a in out:
        if a.id in older:
            row = rows.get(a.id)
            if row is None:
                continue
            for f in _CONTENT:
                setattr(a, f, getattr(row, f))
            a.version = row.version
            # What is served is the approved version: its reader sees it as approved, not as the
            # candidate (or sent-back draft) the newer version made the asset (a client filtering on
            # status=approved dropped an asset it is served).
            a.status = AssetStatus.APPROVED
            # Nor the newer version's traces: a move note (a reviewer's reason often quotes the
            # rejected text), a pending promotion, the time of the newer save.
            a.last_move_note, a.promotion = {}, {}
            a.updated_at = a.approved_at or row.created_at
        served.append(a)
    return served


def reads_served(actor: Actor, asset: Asset) -> bool:
    """Does this reader get the served version of the asset rather than its current one? An agent
    does, for every asset it does not own (the rule of the context and ``memory_get``); its owner and
    people see the current version, which is what they review and edit."""
    return actor.agent is not None and asset.owner_agent_id != actor.agent.id


def versions_read_by(actor: Actor, asset: Asset, versions):
    """``versions`` (a queryset of the asset's versions) narrowed to what this reader may read: an agent
    reading the asset as served (``reads_served``) gets the approved versions up to the served one; a
    rejected edit older than it was never served and is not history it should build on."""
    if not reads_served(actor, asset):
        return versions
    return versions.filter(version__lte=asset.version, approved_at__isnull=False)


def served_to_q(actor: Actor) -> Q:
    """SQL: the assets this reader is given anything of: for an agent, its own and those with a served
    version (the listing's twin of ``as_read_by`` leaving an asset out); for a person, all."""
    if actor.agent is None:
        return Q()
    return Q(owner_agent=actor.agent) | Q(approved_version__isnull=False, status__in=SERVED_STATUSES)


def as_read_by(actor: Actor, assets: list[Asset]) -> list[Asset]:
    """The assets as this reader may read them, in the same order: for an agent, each asset it does
    not own as it is served (``with_served_content``: changed in memory, never to be saved), and
    left out when nothing of it is served. REST, like the context, must not hand an agent the text
    that awaits review."""
    if actor.agent is None:
        return list(assets)
    served = {a.id for a in with_served_content([a for a in assets if reads_served(actor, a)])}
    return [a for a in assets if not reads_served(actor, a) or a.id in served]


def as_written_by(actor: Actor, asset: Asset, *, built_on: int | None = None) -> Asset:
    """The asset as the answer to this actor's write of it (an edit, a move, a promotion) shows it.
    People and its owning agent get it as stored. Another agent (an ACL writer) gets what it would
    read (``as_read_by``), except a version it has just saved (``built_on``, the version the write
    started from): the service lets such an agent write only on the version it is served or on its
    own edit awaiting review (``services._writes_on_what_it_reads``), so that version holds only the
    served text and its own, and the agent sees what it wrote. An asset nothing of which is served
    to it is answered without content (title, summary, body and node ids empty), only the state the
    write left. The instance may be changed in memory and must not be saved."""
    if not reads_served(actor, asset) or built_on is not None:
        return asset
    shown = as_read_by(actor, [asset])
    if shown:
        return shown[0]
    for f in _CONTENT:
        setattr(asset, f, [] if f == "node_ids" else "")
    return asset


def served_status_q(actor: Actor, status: str) -> Q:
    """SQL: the assets (among ``served_to_q``'s) whose status, as this reader is given them, is
    ``status``. An agent is given every asset it does not own as approved (``with_served_content``
    relabels a served candidate or sent-back draft), so filtering on the stored status would tell it
    which carry an edit awaiting review, and drop from ``approved`` assets it is served."""
    if actor.agent is None:
        return Q(status=status)
    own = Q(owner_agent=actor.agent)
    relabelled = ~Q(version=F("approved_version"))  # shown as its approved version, so as approved
    if status == AssetStatus.APPROVED:
        return (own & Q(status=status)) | (~own & (Q(status=status) | relabelled))
    return Q(status=status) & (own | ~relabelled)


def titles_read_by(actor: Actor, assets: list[Asset]) -> dict[int, str | None]:
    """{asset id: its title as this reader is given it}: for an agent, None for an asset it does
    not own whose visibility no longer includes it or of which nothing is served, else the served
    version's title (a binding's answer must not name what ``GET assets/{id}`` hides). The assets are
    not changed."""
    from .access import agent_eligible

    if actor.agent is None:
        return {a.id: a.title for a in assets}
    eligible = [copy(a) for a in assets if not reads_served(actor, a) or agent_eligible(actor.agent, a)]
    shown = {a.id: a.title for a in as_read_by(actor, eligible)}
    return {a.id: shown.get(a.id) for a in assets}


def serving_note(asset: Asset) -> str:
    """What a binding of this asset gives its agent, said where the binding is made (the API's
    answer, the console): a draft binds without error but serves nothing until approved."""
    served, pending = served_version(asset), pending_version(asset)
    if served is None:
        if asset.status in (AssetStatus.DEPRECATED, AssetStatus.ARCHIVED):
            return f"This asset is {asset.status}: the agent receives nothing from it."
        return (f"Only approved versions are served: this asset is {asset.status} and has no approved version, "
                "so the agent receives nothing from it until an approver approves it.")
    if pending is not None:
        return (f"The agent is served version {served}, the last approved one; version {pending} "
                f"{'was sent back to draft' if asset.status == AssetStatus.DRAFT else 'awaits approval'}.")
    return ""


def binding_serving(binding) -> tuple[int | None, str]:
    """(the version the binding's agent is served, the note saying why not or why an older one) for
    the binding's answer. The asset's own rule (``served_version``, ``serving_note``), and nothing
    when the asset's visibility no longer includes the agent: the context then serves nothing of it
    (``context.bound_assets``), for a binding never widens visibility."""
    from .access import agent_eligible

    asset = binding.asset
    if not agent_eligible(binding.agent, asset):
        return None, (f"This asset's visibility ({asset.visibility}) no longer includes the agent, so it "
                      "receives nothing from it: a binding never widens visibility.")
    return served_version(asset), serving_note(asset)


def approval_candidates(actor: Actor):
    """The candidates ``actor`` may be asked to approve, narrowed in SQL, newest first: a promoted
    candidate (its pending promotion names the target) or an approved asset's edit awaiting review,
    into a team the actor administers, or any for an org admin; never an org-wide target for a team
    admin. The decision is ``assets.access.can_approve`` on each row (a restricted target needs an
    ACL write grant): callers filter the rows they read with it."""
    from memory.models import Visibility

    if actor.agent is not None or not (actor.is_org_admin or actor.team_admin_ids):
        return Asset.objects.none()
    qs = Asset.objects.filter(org=actor.org, status=AssetStatus.CANDIDATE).filter(
        ~Q(promotion={}) | Q(approved_version__isnull=False))
    if not actor.is_org_admin:
        admin_of = list(actor.team_admin_ids)
        qs = qs.filter(Q(promotion__team_id__in=admin_of)
                       | Q(promotion={}, visibility=Visibility.TEAM, team_id__in=admin_of))
        # can_approve refuses an org-wide target to anyone but an org admin; saying so in SQL keeps
        # those candidates (often many, all in the admin's team) from using up a scan. The has_key
        # term keeps a promotion without the key (SQL NULL there, target = the asset's own
        # visibility): NOT (NULL) would drop it.
        qs = qs.exclude(Q(promotion__has_key="visibility") & Q(promotion__visibility=Visibility.ORG))
    return qs.order_by("-id")
