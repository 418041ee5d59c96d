"""Console forms. They only parse and bound input; the services and access modules decide."""

from __future__ import annotations

from datetime import datetime, time

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from assets.models import AuditEvent
from memory.engine.types import MAX_K
from memory.models import NodeKind, Visibility
from teams.models import Role, Scope, TeamRole

from .selectors import MAX_PAGE_SIZE, PAGE_SIZE, NodeFilters


def _day_start(d) -> datetime | None:
    return timezone.make_aware(datetime.combine(d, time.min)) if d else None


class NodeFilterForm(forms.Form):
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
        until = _day_start(d.get("until"))
        if until is not None:
            until = until + timezone.timedelta(days=1)  # inclusive end day
        return NodeFilters(owner=d.get("owner") or "", team_id=d.get("team"), kind=d.get("kind") or "",
                           visibility=d.get("visibility") or "", q=(d.get("q") or "").strip(),
                           since=_day_start(d.get("since")), until=until)

    @property
    def after_id(self) -> int | None:
        return self.cleaned_data.get("after")

    @property
    def page_size(self) -> int:
        return self.cleaned_data.get("limit") or PAGE_SIZE


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


class TeamMemberForm(forms.Form):
    user_id = forms.TypedChoiceField(label=_("Member"), coerce=int)
    role = forms.ChoiceField(label=_("Team role"), choices=TeamRole.choices, initial=TeamRole.MEMBER)

    def __init__(self, *args, members=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user_id"].choices = [(m.user_id, m.user.username) for m in members]


class MemberAddForm(forms.Form):
    email = forms.EmailField(label=_("Email"))
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices)


class AgentForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=200)
    description = forms.CharField(label=_("Description"), max_length=2000, required=False)
    team = forms.TypedChoiceField(label=_("Team"), required=False, coerce=int, empty_value=None)

    def __init__(self, *args, teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", _("no team"))] + [(t.id, t.name) for t in teams]


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
