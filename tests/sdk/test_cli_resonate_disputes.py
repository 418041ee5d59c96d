"""``nylon resonate`` marks a memory in an open conflict with the other side, as the context's lines do."""

from __future__ import annotations

import json

import pytest

from reflection.models import Conflict

from .test_cli import nylon

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_table_names_the_other_side_of_an_open_conflict(nylon_server, world, tmp_path):
    a = world["a"]
    env = {"NYLON_CONFIG": str(tmp_path / "none.json"), "NYLON_URL": nylon_server.url, "NYLON_API_KEY": a.key}
    out = nylon("weave", "--session", "s", "--json", "--quiet", env=env,
                stdin="The nightly export lands in the orange bucket.\nThe nightly export lands in the blue bucket.\n")
    assert out.returncode == 0, out.stderr
    old, new = json.loads(out.stdout)["node_ids"]
    Conflict.objects.filter(org=a.org).delete()
    Conflict.objects.create(org=a.org, node_a_id=old, node_b_id=new, reason="different bucket", detector="rule")
    out = nylon("resonate", "Where does the nightly export land?", "--no-reinforce", env=env)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[2]: line for line in out.stdout.splitlines()[2:] if line.strip()[:1].isdigit()}
    assert f"[disputed by #{new}]" in rows[str(old)] and f"[disputed by #{old}]" in rows[str(new)], out.stdout
