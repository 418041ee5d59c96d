"""Property-based fuzzing of the HTTP API from its own OpenAPI schema (schemathesis + Hypothesis).

Shared by ``bench/fuzz_api.py`` (≥ 1,000 cases, figures in docs/benchmarks.md) and the slow test
``tests/nylon_project/test_fuzz.py``. Every operation of ``/api/schema/`` is called through a real
uvicorn process with an agent key, with schema-valid (positive) and schema-invalid (negative)
inputs; half of the cases use ids of real objects of the agent's org for the path parameters so
they reach past the 404. Each response goes through the checks below; nothing is mocked.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

# Applied to every case. negative_data_rejection only judges negative cases (it needs a 4xx for
# input the schema forbids).
CHECKS = {
    "not_a_server_error": not_a_server_error,
    "response_schema_conformance": response_schema_conformance,
    "status_code_conformance": status_code_conformance,
    "content_type_conformance": content_type_conformance,
    "response_headers_conformance": response_headers_conformance,
    "negative_data_rejection": negative_data_rejection,
}
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
AUTH_HEADERS = {"authorization", "x-api-key", "x-csrftoken", "x-nylon-org", "cookie"}
AUTH_COOKIES = {"sessionid", "csrftoken"}


@dataclass(frozen=True)
class Credentials:
    """Who the fuzzer is: an agent key (a header) or a console session (cookies + CSRF header)."""

    label: str
    headers: dict[str, str]
    cookies: dict[str, str] = field(default_factory=dict)

    @classmethod
    def agent_key(cls, key: str) -> Credentials:
        return cls(label="agent key", headers={"Authorization": f"Bearer {key}"})

    @classmethod
    def console_session(cls, user) -> Credentials:
        """A logged-in Django session for ``user``, made the way ``login()`` makes one."""
        from importlib import import_module

        from django.conf import settings as django_settings
        from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
        from django.utils.crypto import get_random_string

        store = import_module(django_settings.SESSION_ENGINE).SessionStore()
        store[SESSION_KEY] = str(user.pk)
        store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        store[HASH_SESSION_KEY] = user.get_session_auth_hash()
        store.create()
        csrf = get_random_string(32)
        return cls(label=f"console session of {user.get_username()}", headers={"X-CSRFToken": csrf},
                   cookies={django_settings.SESSION_COOKIE_NAME: store.session_key,
                            django_settings.CSRF_COOKIE_NAME: csrf})


@dataclass
class FailureRecord:
    operation: str
    mode: str
    check: str
    status: int
    title: str
    message: str
    curl: str


@dataclass
class FuzzReport:
    label: str = ""
    cases: int = 0
    operations: int = 0
    seconds: float = 0.0
    by_mode: Counter = field(default_factory=Counter)
    by_status: Counter = field(default_factory=Counter)
    by_operation: Counter = field(default_factory=Counter)
    by_error: Counter = field(default_factory=Counter)  # (status, error message) of 4xx answers
    failures: Counter = field(default_factory=Counter)  # check name -> failing cases
    errors: list[str] = field(default_factory=list)  # transport errors, generation errors
    examples: dict[tuple[str, str, str], FailureRecord] = field(default_factory=dict)

    @property
    def server_errors(self) -> int:
        return self.failures["not_a_server_error"]

    @property
    def schema_violations(self) -> int:
        return sum(n for name, n in self.failures.items() if name != "not_a_server_error")

    def summary(self) -> str:
        lines = [
            f"{self.label}: {self.cases} cases over {self.operations} operations in {self.seconds:.1f} s "
            f"({', '.join(f'{m} {n}' for m, n in sorted(self.by_mode.items()))})",
            "statuses: " + ", ".join(f"{s}: {n}" for s, n in sorted(self.by_status.items())),
            "most frequent refusals: " + "; ".join(f"{st} {msg!r} x{n}" for (st, msg), n in
                                                   self.by_error.most_common(6)),
            "failing cases by check:",
        ]
        lines += [f"  {name}: {self.failures[name]}" for name in CHECKS]
        lines.append(f"server errors: {self.server_errors}, schema violations: {self.schema_violations}, "
                     f"errors: {len(self.errors)}")
        for (op, check, title), rec in sorted(self.examples.items()):
            lines.append(f"\n--- {check} on {op} ({rec.mode}, HTTP {rec.status}): {title}\n"
                         f"{rec.message[:1500]}\n    {rec.curl[:1500]}")
        lines += [f"\n--- error: {e[:1500]}" for e in self.errors[:20]]
        return "\n".join(lines)


def load_schema(base_url: str):
    return schemathesis.openapi.from_url(f"{base_url}/api/schema/?format=json")


def run_fuzz(
    base_url: str,
    credentials: Credentials,
    *,
    cases: int,
    path_ids: dict[str, list[int]] | None = None,
    seed_value: int = 0,
    include: str = "/api/v1/",
    protect: dict[str, list[int]] | None = None,
) -> FuzzReport:
    """About ``cases`` calls spread evenly over the operations and both generation modes
    (operations with few distinct inputs stop early, when Hypothesis has exhausted them).
    ``protect`` names path ids no case may use (the session's own membership: once the fuzzer has
    removed or demoted it, every later case would only be a 403)."""
    schema = load_schema(base_url)
    operations = [r.ok() for r in schema.get_all_operations() if _is_ok(r)]
    operations = [op for op in operations if op.path.startswith(include)]
    report = FuzzReport(label=credentials.label, operations=len(operations))
    per_run = max(1, math.ceil(cases / (len(operations) * len(MODES))))
    session = requests.Session()
    started = time.perf_counter()
    for op in operations:
        for mode in MODES:
            try:
                strategy = _strategy(op, mode, path_ids or {}, protect or {})
                _fuzz_operation(op, mode, base_url, session, credentials, strategy, per_run, seed_value, report)
            except Exception as exc:  # a generation error or a dead server: reported, never hidden
                report.errors.append(f"{op.label} ({mode.value}): {type(exc).__name__}: {exc}")
    report.seconds = time.perf_counter() - started
    session.close()
    return report


def _is_ok(result) -> bool:
    try:
        result.ok()
    except Exception:
        return False
    return True


def _strategy(op, mode: GenerationMode, path_ids: dict[str, list[int]], protect: dict[str, list[int]]):
    generated = op.as_strategy(generation_mode=mode)
    names = [p.name for p in op.path_parameters]
    strategy = generated
    if names and all(path_ids.get(n) for n in names):
        real = st.fixed_dictionaries({n: st.sampled_from(path_ids[n]) for n in names}).flatmap(
            lambda ids: op.as_strategy(generation_mode=mode, path_parameters=ids))
        strategy = st.one_of(generated, real)
    banned = {n: {str(v) for v in protect[n]} for n in names if n in protect}
    if banned:
        strategy = strategy.filter(
            lambda case: all(str((case.path_parameters or {}).get(n)) not in vs for n, vs in banned.items()))
    return strategy


def _fuzz_operation(op, mode, base_url, session, credentials, strategy, examples, seed_value, report) -> None:
    headers = credentials.headers

    @seed(seed_value)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, report_multiple_bugs=False)
    @given(case=strategy)
    def one(case) -> None:
        # The schema's security schemes make schemathesis generate credentials of every kind; the
        # run's own replace them (a generated Authorization would win over a session cookie).
        for name in list(case.headers or {}):
            if name.lower() in AUTH_HEADERS:
                del case.headers[name]
        for name in list(case.cookies or {}):
            if name in AUTH_COOKIES:
                del case.cookies[name]
        response = case.call(base_url=base_url, session=session, headers=headers, cookies=credentials.cookies,
                             timeout=60)
        report.cases += 1
        report.by_mode[mode.value] += 1
        report.by_status[response.status_code] += 1
        report.by_operation[op.label] += 1
        if 400 <= response.status_code < 500:
            report.by_error[(response.status_code, _error_message(response))] += 1
        for name, check in CHECKS.items():
            if name == "negative_data_rejection" and mode is not GenerationMode.NEGATIVE:
                continue
            try:
                case.validate_response(response, checks=[check], headers=headers)
            except FailureGroup as group:
                _record(report, op.label, mode, name, response.status_code, list(group.exceptions), case, headers)
            except Failure as failure:
                _record(report, op.label, mode, name, response.status_code, [failure], case, headers)

    one()


def _error_message(response) -> str:
    try:
        return str(response.json()["error"]["message"])[:60]
    except Exception:
        return response.text[:60]


def _record(report: FuzzReport, op: str, mode, check: str, status: int, failures: list[Failure], case,
            headers) -> None:
    report.failures[check] += 1
    for f in failures:
        key = (op, check, f.title)
        if key not in report.examples:
            report.examples[key] = FailureRecord(operation=op, mode=mode.value, check=check, status=status,
                                                 title=f.title, message=f.message,
                                                 curl=case.as_curl_command(headers=headers))


@dataclass
class FuzzOrg:
    key: str  # the fuzzing agent's read+write key
    owner: object  # the org owner (a django User)
    ids: dict[str, list[int]]  # path parameter name -> ids of real objects of the org


def prepare_org(slug: str) -> FuzzOrg:
    """A fresh org ``slug`` (an existing one is deleted): owner, member, a team, the fuzzing agent
    in that team with a read+write key, and a second agent."""
    from django.contrib.auth import get_user_model

    from teams import services
    from teams.models import Agent, Membership, Organization, Role, Team, TeamMembership, TeamRole

    Organization.objects.filter(slug=slug).delete()
    User = get_user_model()
    User.objects.filter(username__in=[f"{slug}-owner", f"{slug}-member"]).delete()
    owner = User.objects.create_user(f"{slug}-owner", f"{slug}-owner@example.com", "pw-fuzz-owner")
    member = User.objects.create_user(f"{slug}-member", f"{slug}-member@example.com", "pw-fuzz-member")
    org = services.organization_create(name=f"Fuzz {slug}", slug=slug, owner=owner)
    Membership.objects.create(org=org, user=member, role=Role.MEMBER)
    team = Team.objects.create(org=org, name=f"{slug} team", slug="fuzz")
    TeamMembership.objects.create(org=org, team=team, user=member, role=TeamRole.MEMBER)
    agent = Agent.objects.create(org=org, name=f"{slug}-agent", team=team)
    other = Agent.objects.create(org=org, name=f"{slug}-other")
    key_row, key = services.api_key_create(actor=None, agent=agent, name="fuzz")
    ids = {"agent_id": [agent.id, other.id], "team_id": [team.id], "user_id": [owner.id, member.id],
           "key_id": [key_row.id]}
    return FuzzOrg(key=key, owner=owner, ids=ids)


def seed_via_api(base_url: str, org: FuzzOrg) -> None:
    """Memory and an asset written through the API itself, so node and asset ids exist."""
    headers = {"Authorization": f"Bearer {org.key}"}
    ids = org.ids
    turns = [{"speaker": "Ana", "text": "We moved the billing service to the new region yesterday."},
             {"speaker": "Ben", "text": "I will update the runbook for billing tomorrow, 100% sure."},
             {"speaker": "Ana", "text": "The on-call rota starts on Monday; Priya owns it."}]
    r = requests.post(f"{base_url}/api/v1/memories/weave-session", headers=headers, timeout=120,
                      json={"session_key": "fuzz-seed", "turns": turns, "visibility": "team",
                            "team_id": ids["team_id"][0]})
    r.raise_for_status()
    node_ids = r.json()["node_ids"]
    r = requests.post(f"{base_url}/api/v1/assets", headers=headers, timeout=60,
                      json={"kind": "chat_memory", "title": "Billing chat", "body": "Steps.", "node_ids": node_ids})
    r.raise_for_status()
    ids.update(node_id=node_ids, asset_id=[r.json()["id"]], version=[1])


def server_errors(log: str) -> list[str]:
    """The distinct tracebacks of the server's 500s in its log (Django logs each one)."""
    seen: dict[str, str] = {}
    for block in log.split("ERROR django.request Internal Server Error")[1:]:
        lines = block.splitlines()
        trace = []
        for line in lines[1:]:
            if line[:4].isdigit() and line[4:5] == "-":  # the next timestamped log line
                break
            trace.append(line)
        last = next((t for t in reversed(trace) if t and not t.startswith(" ")), "")
        seen.setdefault(last, lines[0].strip() + "\n" + "\n".join(trace[-30:]))
    return list(seen.values())
