"""A node's governance reports the LLM its org uses (Organization.settings["llm"]), not the
instance default."""

from __future__ import annotations

import pytest

from reflection import llm as L

from .helpers import weave

pytestmark = pytest.mark.django_db


def test_governance_names_the_orgs_own_llm(world, client_for, no_llm, scripted_llm):
    scripted_llm.reset()
    org = world["a"].org
    org.settings = {"llm": {"url": scripted_llm.url, "provider": "openai", "model": "org-model",
                            "key": scripted_llm.key}}
    org.save()
    L.reset_state(org)
    try:
        c = client_for(world["a"].key)
        node = weave(c, "s1", end=False)["node_ids"][0]
        assert L.probe(org)["status"] == "ok"
        dep = c.get(f"/api/v1/memories/nodes/{node}/governance").json()["dependencies"]["llm"]
        assert dep["status"] == "ok" and dep["model"] == "org-model"  # before: "disabled", the default's
        org.settings = {"llm": {"enabled": False}}
        org.save()
        dep = c.get(f"/api/v1/memories/nodes/{node}/governance").json()["dependencies"]["llm"]
        assert dep["status"] == "disabled"
    finally:
        L.reset_state(org)
