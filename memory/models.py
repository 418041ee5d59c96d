"""The memory graph. Postgres is the source of truth; the per-org engine cache follows it.

A node is woven from six silks, each a real column: fact, relations, temporal, emotion,
frequency and provenance. Two columns are managed in SQL only (see migration 0002):
``search`` (a generated tsvector with a GIN index, for the cold-cache fallback) and ``txid``
(the writing transaction's xid8, stamped by trigger on insert and update) which lets every
process catch its cache up with exactly the rows committed since its last look.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from pgvector.django import HnswIndex, VectorField

EMBEDDING_DIM = 384


class NodeKind(models.TextChoices):
    LEAF = "leaf", _("Leaf (verbatim turn)")
    FACT = "fact", _("Fact (distilled)")
    BRIDGE = "bridge", _("Bridge (world knowledge)")
    PERSONA = "persona", _("Persona")
    SCENE = "scene", _("Scene")


class Visibility(models.TextChoices):
    PRIVATE = "private", _("Private: owner only")
    TEAM = "team", _("Team")
    ORG = "org", _("Organisation")
    RESTRICTED = "restricted", _("Restricted by ACL")


class SourceKind(models.TextChoices):
    API = "api", _("API write")
    IMPORT = "import", _("Bulk import")
    HEURISTIC = "heuristic", _("Heuristic abstraction")
    LLM = "llm", _("LLM abstraction")
    REFLECTION = "reflection", _("Idle reflection")
    PROXY = "proxy", _("Proxy write-back")


# A node drawn from others (a fact, a bridge: ``source_node_ids``), whatever its kind.
HAS_SOURCES = Q(source_node_ids__len__gt=0)


class Node(models.Model):
    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    owner_user = models.ForeignKey("auth.User", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    owner_agent = models.ForeignKey("teams.Agent", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    team = models.ForeignKey("teams.Team", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.PRIVATE)
    kind = models.CharField(max_length=16, choices=NodeKind.choices, default=NodeKind.LEAF)
    text = models.TextField()
    speaker = models.CharField(max_length=200, blank=True, default="")

    # fact silk: the normalised statement (for a leaf, its heuristic gist)
    fact = models.TextField(blank=True, default="")
    # relation silk
    entities = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    tags = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    # temporal silk
    occurred_at = models.DateTimeField()
    session_key = models.CharField(max_length=200, blank=True, default="")
    seq = models.IntegerField(default=0)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    time_refs = models.JSONField(default=list, blank=True)  # resolved time expressions
    # emotion silk
    valence = models.FloatField(default=0.0)
    intensity = models.FloatField(default=0.0)
    # frequency silk
    mentions = models.IntegerField(default=0)
    last_recalled_at = models.DateTimeField(null=True, blank=True)
    # provenance silk
    source_kind = models.CharField(max_length=16, choices=SourceKind.choices, default=SourceKind.API)
    source_user = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    source_agent = models.ForeignKey("teams.Agent", on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="+")
    event_id = models.CharField(max_length=200, blank=True, default="")
    source_node_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    confidence = models.FloatField(default=1.0)
    # tension T(t) = t0 * exp(-lam * days since tension_updated_at) * F(mentions)
    t0 = models.FloatField(default=1.0)
    lam = models.FloatField(default=0.01)
    tension_updated_at = models.DateTimeField()

    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    embedded = models.BooleanField(default=False)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(owner_user__isnull=False, owner_agent__isnull=True)
                           | Q(owner_user__isnull=True, owner_agent__isnull=False)),
                name="node_one_owner",
            ),
            # An event id is a retry's key among the writer's live memories only (migration 0009):
            # a write after the memory was deleted is a new memory, not a replay of a deleted one.
            models.UniqueConstraint(
                fields=["org", "owner_user", "owner_agent", "event_id"],
                condition=~Q(event_id="") & Q(deleted_at__isnull=True),
                name="node_event_idempotent",
                nulls_distinct=False,
            ),
        ]
        indexes = [
            models.Index(fields=["org", "-id"], name="node_org_recent"),
            # the console's memory browser: newest first by when things happened (keyset on both)
            models.Index(fields=["org", "-occurred_at", "-id"], name="node_org_occurred"),
            models.Index(fields=["org", "session_key", "seq"], name="node_org_session"),
            models.Index(fields=["org", "owner_agent", "-id"], name="node_org_agent"),
            models.Index(fields=["org", "owner_user", "-id"], name="node_org_user"),
            # What was drawn from a node (facts, bridges): a delete finds them through it
            # (services.node_delete, whose query repeats this condition so the planner can use it).
            # Partial: leaves have no sources, so no weave or bulk COPY of leaves writes to it.
            GinIndex(fields=["source_node_ids"], name="node_derived_sources", condition=HAS_SOURCES),
            HnswIndex(name="node_embedding_hnsw", fields=["embedding"], m=16, ef_construction=64,
                      opclasses=["vector_cosine_ops"]),
        ]

    @property
    def owner_key(self) -> int:
        return self.owner_agent_id * 2 + 1 if self.owner_agent_id else self.owner_user_id * 2


class EdgeKind(models.TextChoices):
    TEMPORAL_NEXT = "temporal_next"
    SAME_SESSION = "same_session"
    ENTITY = "entity"
    SIMILAR = "similar"
    DERIVED = "derived"
    BRIDGE = "bridge"
    CONTRADICTS = "contradicts"
    SUPERSEDES = "supersedes"
    EXPLICIT = "explicit"


class Edge(models.Model):
    """Directed for provenance; diffusion walks it both ways."""

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    src = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="out_edges")
    dst = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="in_edges")
    kind = models.CharField(max_length=16, choices=EdgeKind.choices)
    weight = models.FloatField(default=0.5)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["src", "dst", "kind"], name="edge_unique")]
        indexes = [models.Index(fields=["org", "-id"], name="edge_org_recent")]


class MemorySession(models.Model):
    """A conversation session of one owner; drives abstraction and idle reflection."""

    class Status(models.TextChoices):
        OPEN = "open"
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    owner_user = models.ForeignKey("auth.User", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    owner_agent = models.ForeignKey("teams.Agent", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    key = models.CharField(max_length=200)
    started_at = models.DateTimeField()
    last_turn_at = models.DateTimeField()
    turn_count = models.IntegerField(default=0)
    ended_at = models.DateTimeField(null=True, blank=True)
    abstraction_status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    abstraction_attempts = models.IntegerField(default=0)
    abstraction_error = models.TextField(blank=True, default="")
    reflection_status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "owner_user", "owner_agent", "key"], name="session_unique",
                                    nulls_distinct=False)
        ]
        # The reflection tick's three questions, every minute: which open sessions went idle, which
        # abstractions are owed, which reflections are owed. Partial, so each stays the size of the
        # work outstanding while the table grows with every session ever written.
        indexes = [
            models.Index(fields=["last_turn_at"], name="session_idle_open", condition=Q(ended_at__isnull=True)),
            models.Index(fields=["id"], name="session_abstraction_owed",
                         condition=Q(abstraction_status__in=["pending", "failed"])),
            models.Index(fields=["org", "id"], name="session_reflection_owed",
                         condition=Q(abstraction_status="done", reflection_status__in=["open", "failed", "pending"])),
        ]


class IngestBatch(models.Model):
    """One bulk write (a ``memories/bulk`` call or a chunk of ``manage.py nylon_ingest``): the leaves it
    created and the work deferred past its commit — vectors when it was written without them,
    entity and similarity edges, conflict checks. The beat re-runs a batch whose work is not done,
    so nothing depends on a queued message surviving."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    owner_user = models.ForeignKey("auth.User", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    owner_agent = models.ForeignKey("teams.Agent", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    node_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)
    embed_pending = models.BooleanField(default=False)  # leaves written without vectors
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.IntegerField(default=0)
    error = models.TextField(blank=True, default="")
    request_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    tried_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"], name="ingest_batch_status")]


class Followup(models.Model):
    """Post-commit work a write still owes — today the conflict check of the nodes it created (a
    weave, a bulk batch's enrichment chunk, an abstraction's facts). Inserted in the write's own
    transaction and deleted by the task once the work is done, so the table holds only unfinished
    work. The message sent after commit is lost when the broker is down; the beat
    (``memory.followup_sweep``) re-sends rows older than a grace period, so nothing depends on it."""

    class Kind(models.TextChoices):
        CONFLICTS = "conflicts"

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CONFLICTS)
    node_ids = ArrayField(models.BigIntegerField(), default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    # Last re-send by the sweep (the first send, on commit, is not stamped: no extra write on the hot path).
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.IntegerField(default=0)  # sweep re-sends that reached the broker


class RecallMark(models.Model):
    """One recall of a node, waiting to be added to its frequency silk (``mentions``,
    ``last_recalled_at``, ``tension_updated_at``).

    Recalls used to update the node rows in the request. ``txid`` is indexed and changes on every
    update, so no such update could be HOT: each rewrote the row with its vector and tsvector and
    added entries to every index (the HNSW graph included), and each told every process's cache
    to re-read the node. A read thus cost more writes than a write. An insert here touches one
    narrow table; the beat (``memory.flush_recalls``) folds the marks into the nodes, one update
    per recalled node per interval however often it was recalled. No foreign keys: a mark
    whose node is gone is dropped by the flush, and an insert checks nothing."""

    node_id = models.BigIntegerField()
    at = models.DateTimeField()
