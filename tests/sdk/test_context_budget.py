"""``context(budget=…)`` in the SDK (sync and async) and ``nylon context --budget NAME=N``: the API
took a budget, the SDK raised ``TypeError: unexpected keyword argument 'budget'``."""

from __future__ import annotations

import asyncio
import json

import nylon_sdk as ny
import pytest
from nylon_sdk import AsyncClient, Client

from .test_cli import nylon

pytestmark = pytest.mark.django_db(transaction=True)

LONG = ("The deploy window is Tuesday 14:00 UTC; the release captain announces it in the ops channel an "
        "hour before and freezes merges to main.")


def test_sync_and_async_clients_send_the_budget(nylon_server, world):
    with Client(nylon_server.url, world["a"].key) as sdk:
        w = sdk.weave(LONG, session_key="ops")
        sdk.weave("Deploys need a second reviewer.", session_key="ops2")
        free = sdk.context("When is the deploy window?", reinforce=False)
        tight = sdk.context("When is the deploy window?", k=2, reinforce=False,
                            budget={"max_recall_chars": 80, "max_stable_chars": 50000})
        with pytest.raises(ny.ValidationError) as bad:
            sdk.context("x", budget={"max_recal_chars": 10})
    assert free.recall[0]["node_id"] == w.node_ids[0] and not free.recall[0]["truncated"]
    assert tight.budget["max_recall_chars"] == 80 and tight.budget["max_stable_chars"] == 50000
    assert tight.budget["max_recall_items"] == 2  # k raised the item limit
    assert tight.recall[0]["node_id"] == w.node_ids[0] and tight.recall[0]["truncated"]
    assert sum(len(r["text"]) for r in tight.recall) <= 80 and tight.truncated["recall"] >= 1
    assert isinstance(tight.dropped, dict) and isinstance(tight.degraded, list)
    assert "budget" in bad.value.fields

    async def run():
        async with AsyncClient(nylon_server.url, world["a"].key) as sdk:
            return await sdk.context("When is the deploy window?", reinforce=False,
                                     budget={"max_chars_per_memory": 50})

    ctx = asyncio.run(run())
    assert ctx.budget["max_chars_per_memory"] == 50 and all(len(r["text"]) <= 50 for r in ctx.recall)
    assert ctx.recall[0]["truncated"] and ctx.truncated["recall"] >= 1


def test_cli_context_takes_budget_flags(nylon_server, world, tmp_path):
    env = {"NYLON_CONFIG": str(tmp_path / "none.json"), "NYLON_URL": nylon_server.url,
           "NYLON_API_KEY": world["a"].key}
    with Client(nylon_server.url, world["a"].key) as sdk:
        w = sdk.weave(LONG, session_key="ops")
    out = nylon("context", "When is the deploy window?", "-k", "3", "--budget", "max_recall_chars=75",
                "--budget", "max_chars_per_memory=500", "--no-reinforce", "--json", env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["budget"]["max_recall_chars"] == 75 and doc["budget"]["max_chars_per_memory"] == 500
    assert doc["budget"]["max_recall_items"] == 3
    assert doc["recall"][0]["node_id"] == w.node_ids[0] and len(doc["recall"][0]["text"]) <= 75
    out = nylon("context", "x", "--budget", "max_recall_chars", env=env)
    assert out.returncode == 2 and "NAME=NUMBER" in out.stderr
    out = nylon("context", "x", "--budget", "nope=3", env=env)
    assert out.returncode == 1 and "400 invalid" in out.stderr and "budget" in out.stderr
