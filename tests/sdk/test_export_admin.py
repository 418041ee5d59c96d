"""Export and import are for organisation admins, and the CLI only has an agent key: ``nylon
export`` / ``nylon import`` used to send a request that could only be refused (403). They now say
where export and import live, without calling the service; the SDK's ``export()``/``import_()``
work for an admin's console session."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client as DjangoClient
from nylon_sdk import Client, PermissionDenied

from .test_cli import nylon

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("argv", [["export"], ["export", "-o", "out.jsonl"], ["import", "-"],
                                  ["import", "dump.jsonl", "--key", "nyl_abc_def"]])
def test_cli_export_and_import_say_where_they_live(tmp_path, argv):
    # an address where nothing listens: a request would end in "error: … (url)", exit 3
    env = {"NYLON_CONFIG": str(tmp_path / "none.json"), "NYLON_URL": "http://127.0.0.1:9",
           "NYLON_API_KEY": "nyl_abc_def"}
    out = nylon(*argv, env=env, stdin="")
    assert out.returncode == 2, out.stderr
    assert "org admin" in out.stderr or "organisation admins" in out.stderr
    assert "/api/v1/export" in out.stderr and "manage.py export_memory" in out.stderr
    assert "manage.py import_memory" in out.stderr
    assert "error:" not in out.stderr and out.stdout == ""
    assert not (tmp_path / "out.jsonl").exists()


def test_sdk_export_and_import_work_with_an_admin_session(nylon_server, world):
    a = world["a"]
    with Client(nylon_server.url, a.key) as agent:
        agent.weave("Exported fact: the VPN rotates keys on Fridays.", visibility="org")
        with pytest.raises(PermissionDenied):
            agent.export()

    browser = DjangoClient()
    browser.force_login(a.owner)
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    csrf = "c" * 32  # a session's POST needs the CSRF cookie and the same token in X-CSRFToken
    cookies = f"{settings.SESSION_COOKIE_NAME}={session}; {settings.CSRF_COOKIE_NAME}={csrf}"
    with Client(nylon_server.url, None, headers={"Cookie": cookies, "X-CSRFToken": csrf}) as admin:
        text = admin.export()
        rows = [json.loads(line) for line in text.splitlines()]
        assert any("VPN rotates keys" in (r.get("text") or "") for r in rows), rows[:3]
        counts = admin.import_(text)
    assert set(counts) >= {"node", "skipped"}
