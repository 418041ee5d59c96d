"""Schemathesis against the live service with an agent key: no server error and every response as
the OpenAPI schema documents it. The full run (≥ 1,000 cases, figures in docs/benchmarks.md) is
``bench/fuzz_api.py``; this one is smaller, so that a regression shows in ``make test``."""

from __future__ import annotations

import pytest

from nylon_project.live import start_live_server

from .fuzz import Credentials, prepare_org, run_fuzz, seed_via_api

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

CASES = 320


def test_fuzz_the_api_with_an_agent_key(django_db_setup):
    org = prepare_org("fuzz")
    server = start_live_server(NYLON_RATE_LIMIT="1000000/min")
    try:
        seed_via_api(server.url, org)
        report = run_fuzz(server.url, Credentials.agent_key(org.key), cases=CASES, path_ids=org.ids, seed_value=8)
    finally:
        server.stop()
    summary = report.summary()
    assert report.cases >= 300, summary
    assert report.operations >= 30, summary
    assert not report.errors, summary
    assert report.server_errors == 0, summary + "\n\n" + server.log()[-5000:]
    assert report.schema_violations == 0, summary
