"""Console forms. They only parse and bound input; the services and access modules decide."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from assets.models import AssetKind, AssetStatus, AuditEvent, BindingMode, Permission
from memory.engine.types import MAX_K
from memory.models import NodeKind, Visibility
from teams.models import AGENT_DEFAULT_VISIBILITIES, Role, Scope, TeamRole

from .console import parse_id
from .selectors import MAX_PAGE_SIZE, PAGE_SIZE, AssetFilters, NodeFilters


def day_start(d: date | None) -> datetime | None:
    """The inclusive lower bound of a "from" day: its first instant. None (no bound) without a day and
    for the calendar's first day: nothing is earlier, and an aware datetime on 0001-01-01 could fall
    before ``datetime.min`` once shifted to UTC under a time zone east of it."""
    if d is None or d == date.min:
        return None
    return timezone.make_aware(datetime.combine(d, time.min))


def day_end(d: date | None) -> datetime | None:
    """The exclusive upper bound that makes an "until" day inclusive: the first instant of the next
    day. None (no bound) without a day and for the calendar's last day (9999-12-31, which the date
    picker offers): there is no next day to add (OverflowError, a 500), and nothing is later."""
    if d is None or d == date.max:
        return None
    return timezone.make_aware(datetime.combine(d + timedelta(days=1), time.min))


class KeysetPageMixin:
    """``after`` / ``limit`` of a keyset-paginated list form."""

    cleaned_data: dict

    @property
    def after_id(self) -> int | None:
        return self.cleaned_data.get("after")

    @property
    def page_size(self) -> int:
        return self.cleaned_data.get("limit") or PAGE_SIZE


class NodeFilterForm(KeysetPageMixin, forms.Form):
    owner = forms.ChoiceField(label=_("Owner"), required=False)
    team = forms.TypedChoiceField(label=_("Team"), required=False, coerce=int, empty_value=None)
    kind = forms.ChoiceField(label=_("Kind"), required=False,
                             choices=[("", _("any kind"))] + list(NodeKind.choices))
    visibility = forms.ChoiceField(label=_("Visibility"), required=False,
                                   choices=[("", _("any visibility"))] + list(Visibility.choices))
    q = forms.CharField(label=_("Text"), required=False, max_length=500)
    since = forms.DateField(label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label=_("Until"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    after = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    limit = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_SIZE, widget=forms.HiddenInput)

    def __init__(self, *args, owners=(), teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["owner"].choices = [("", _("anyone")), ("me", _("me"))] + list(owners)
        self.fields["team"].choices = [("", _("any team"))] + [(t.id, t.name) for t in teams]

    def filters(self) -> NodeFilters:
        d = self.cleaned_data
        return NodeFilters(owner=d.get("owner") or "", team_id=d.get("team"), kind=d.get("kind") or "",
                           visibility=d.get("visibility") or "", q=(d.get("q") or "").strip(),
                           since=day_start(d.get("since")), until=day_end(d.get("until")))


class ResonateForm(forms.Form):
    query = forms.CharField(label=_("Query"), max_length=4000, widget=forms.Textarea(attrs={"rows": 2}))
    k = forms.IntegerField(label=_("Results (k)"), min_value=1, max_value=MAX_K, initial=10)
    depth = forms.TypedChoiceField(label=_("Depth"), required=False, coerce=int, empty_value=None,
                                   choices=[("", _("auto (router)")), (0, "0"), (1, "1"), (2, "2"), (3, "3"),
                                            (4, "4")])
    reinforce = forms.BooleanField(label=_("Reinforce recalled memories"), required=False, initial=False)


class TeamForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=200)
    description = forms.CharField(label=_("Description"), max_length=2000, required=False)


class TeamDeleteForm(forms.Form):
    """What becomes of the memories and assets shared with a team that is deleted (teams.services.team_delete)."""

    memories = forms.ChoiceField(label=_("Memories and assets shared with the team"), required=False,
                                 widget=forms.RadioSelect,
                                 choices=[("move", _("Move them to another team")),
                                          ("private", _("Make each private to its writer"))])
    to_team = forms.TypedChoiceField(label=_("Team taking them over"), required=False, coerce=int, empty_value=None)

    def __init__(self, *args, teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["to_team"].choices = [("", "—")] + [(t.id, t.name) for t in teams]


class TeamMemberForm(forms.Form):
    user_id = forms.TypedChoiceField(label=_("Member"), coerce=int)
    role = forms.ChoiceField(label=_("Team role"), choices=TeamRole.choices, initial=TeamRole.MEMBER)

    def __init__(self, *args, members=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user_id"].choices = [(m.user_id, m.user.username) for m in members]


class MemberAddForm(forms.Form):
    """An invitation (``teams.services.member_invite``): nobody is a member before accepting."""

    email = forms.EmailField(label=_("Email"))
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER)


class InviteSignupForm(forms.Form):
    """The name and password of a new account made from an invitation. Only the two password
    entries are compared here: the name and password rules run in the service
    (``teams.services.invitation_signup``), whose refusals land on their fields. The name comes
    filled in from the email (a blank one is derived the same way)."""

    username = forms.CharField(label=_("Your name"), required=False, max_length=150,
                               help_text=_("What your teammates and their agents see; you sign in with it "
                                           "or with your email."),
                               widget=forms.TextInput(attrs={"autocomplete": "username"}))
    password = forms.CharField(label=_("Password"), strip=False, max_length=4096,
                               widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))
    password_again = forms.CharField(label=_("Password (again)"), strip=False, max_length=4096,
                                     widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean(self):
        data = super().clean()
        if data.get("password") and data.get("password_again") and data["password"] != data["password_again"]:
            self.add_error("password_again", _("The two passwords differ."))
        return data


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices)


class AgentForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=200)
    description = forms.CharField(label=_("Description"), max_length=2000, required=False)
    team = forms.TypedChoiceField(label=_("Team"), required=False, coerce=int, empty_value=None)
    default_visibility = forms.TypedChoiceField(
        label=_("Its writes are shared with"), required=False, empty_value=None,
        choices=[("", _("its team if it has one, else nobody"))] + AGENT_DEFAULT_VISIBILITIES)

    def __init__(self, *args, teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", _("no team"))] + [(t.id, t.name) for t in teams]


class AgentSharingForm(forms.Form):
    default_visibility = forms.ChoiceField(label=_("Its writes are shared with"), choices=AGENT_DEFAULT_VISIBILITIES)


class KeyForm(forms.Form):
    name = forms.CharField(label=_("Key name"), max_length=200, required=False)
    scopes = forms.MultipleChoiceField(label=_("Scopes"), choices=Scope.choices, initial=[Scope.READ, Scope.WRITE],
                                       widget=forms.CheckboxSelectMultiple)


class AuditFilterForm(forms.Form):
    action = forms.CharField(label=_("Action"), required=False, max_length=64)
    actor = forms.CharField(label=_("Actor"), required=False, max_length=255)
    object_type = forms.CharField(label=_("Object type"), required=False, max_length=64)
    object_id = forms.CharField(label=_("Object id"), required=False, max_length=64)
    outcome = forms.ChoiceField(label=_("Outcome"), required=False,
                                choices=[("", _("any outcome"))] + list(AuditEvent.Outcome.choices))
    since = forms.DateField(label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label=_("Until"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    after = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)


# --- assets ---------------------------------------------------------------------------------------


class AssetFilterForm(KeysetPageMixin, forms.Form):
    kind = forms.ChoiceField(label=_("Kind"), required=False, choices=[("", _("any kind"))] + list(AssetKind.choices))
    status = forms.ChoiceField(label=_("Lifecycle state"), required=False,
                               choices=[("", _("any state"))] + list(AssetStatus.choices))
    visibility = forms.ChoiceField(label=_("Visibility"), required=False,
                                   choices=[("", _("any visibility"))] + list(Visibility.choices))
    team = forms.TypedChoiceField(label=_("Team"), required=False, coerce=int, empty_value=None)
    owner = forms.ChoiceField(label=_("Owner"), required=False, choices=[("", _("anyone")), ("me", _("me"))])
    q = forms.CharField(label=_("Text"), required=False, max_length=200,
                        widget=forms.TextInput(attrs={"placeholder": _("title or summary")}))
    after = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    limit = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_SIZE, widget=forms.HiddenInput)

    def __init__(self, *args, teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", _("any team"))] + [(t.id, t.name) for t in teams]

    def filters(self) -> AssetFilters:
        d = self.cleaned_data
        return AssetFilters(kind=d.get("kind") or "", status=d.get("status") or "",
                            visibility=d.get("visibility") or "", team_id=d.get("team"),
                            owner=d.get("owner") or "", q=(d.get("q") or "").strip())


class NodeIdsField(forms.CharField):
    """Memory ids typed as "12, 15 18": parsed to a list; which of them the writer may reference is
    decided by the service (``assets.services._check_node_ids``)."""

    def to_python(self, value) -> list[int]:
        text = super().to_python(value)
        parts = [p for p in text.replace(",", " ").split() if p]
        # parse_id, not str.isdigit: "²" is a digit to isdigit but not to int (a 500 before).
        ids = [parse_id(p) for p in parts]
        if any(i is None for i in ids):
            raise forms.ValidationError(_("Memory ids are positive whole numbers."))
        if len(ids) > 1000:
            raise forms.ValidationError(_("At most 1,000 memories."))
        return ids


class TextField(forms.CharField):
    r"""A CharField whose line breaks are ``\n``: browsers submit a textarea's breaks as ``\r\n`` (the
    HTML form encoding), and an old Mac's or a pasted text's as a lone ``\r``; stored as typed they
    reach the agents served the text. Normalised before the length check, so a break counts once."""

    def to_python(self, value):
        value = super().to_python(value)
        return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else value


class AssetCreateForm(forms.Form):
    kind = forms.ChoiceField(label=_("Kind"), choices=AssetKind.choices, initial=AssetKind.WIKI)
    title = TextField(label=_("Title"), max_length=200)
    summary = TextField(label=_("Summary (one line)"), max_length=300, required=False)
    body = TextField(label=_("Body"), max_length=100_000, required=False, strip=False,
                           widget=forms.Textarea(attrs={"rows": 6}))
    node_ids = NodeIdsField(label=_("Memory ids (chat memory only)"), required=False)
    visibility = forms.ChoiceField(label=_("Visibility"), choices=Visibility.choices, initial=Visibility.PRIVATE)
    team = forms.TypedChoiceField(label=_("Team"), required=False, coerce=int, empty_value=None)

    def __init__(self, *args, teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", _("no team"))] + [(t.id, t.name) for t in teams]


class AssetEditForm(forms.Form):
    expected_version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    title = TextField(label=_("Title"), max_length=200)
    summary = TextField(label=_("Summary (one line)"), max_length=300, required=False)
    body = TextField(label=_("Body"), max_length=100_000, required=False, strip=False,
                           widget=forms.Textarea(attrs={"rows": 12}))
    node_ids = NodeIdsField(label=_("Memory ids"), required=False)

    def __init__(self, *args, chat_memory: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        if not chat_memory:  # only chat-memory assets hold memories
            del self.fields["node_ids"]


class AssetTransitionForm(forms.Form):
    to = forms.ChoiceField(choices=AssetStatus.choices)
    expected_version = forms.IntegerField(min_value=1, required=False)
    note = forms.CharField(max_length=500, required=False)


class AssetVisibilityForm(forms.Form):
    """private ↔ restricted is an edit of the asset; team and org are a promotion (the asset
    becomes a candidate until an approver applies it), as in the API."""

    visibility = forms.ChoiceField(label=_("Visibility"), choices=Visibility.choices)
    team = forms.TypedChoiceField(label=_("Team (for team visibility)"), required=False, coerce=int,
                                  empty_value=None)
    expected_version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", _("the asset's team"))] + [(t.id, t.name) for t in teams]


class GrantForm(forms.Form):
    grantee = forms.CharField(label=_("Grantee"), max_length=64)
    permission = forms.ChoiceField(label=_("Permission"), choices=Permission.choices, initial=Permission.READ,
                                   required=False)

    def __init__(self, *args, grantees=(), **kwargs):
        super().__init__(*args, **kwargs)
        # A select of the org's members, agents and team roles; whether the id exists in this org is
        # checked by ``assets.services.grant_create``.
        self.fields["grantee"].widget = forms.Select(choices=list(grantees))

    def clean_grantee(self) -> dict:
        from assets.services import parse_grantee_key

        grantee = parse_grantee_key(self.cleaned_data["grantee"])
        if grantee is None:
            raise forms.ValidationError(_("Unknown grantee."))
        return grantee

    def clean_permission(self) -> str:
        return self.cleaned_data.get("permission") or Permission.READ  # the API's default too


class BindingForm(forms.Form):
    # Any id is accepted here: access to the agent and the right to bind it are decided by
    # ``teams.access`` and ``assets.services.require_binding_admin`` (refusals are audited).
    agent = forms.IntegerField(label=_("Agent"), min_value=1)
    mode = forms.ChoiceField(label=_("Mode"), choices=BindingMode.choices, initial=BindingMode.FULL)
    priority = forms.IntegerField(label=_("Priority (lower first)"), min_value=0, max_value=10_000, initial=100)

    def __init__(self, *args, agents=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].widget = forms.Select(choices=[(a.id, a.name) for a in agents])
