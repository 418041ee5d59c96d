"""The question being asked, stored before (the proxy writes back every user turn; people repeat
themselves), is not recalled to the one asking it: it answers nothing and took a recall slot."""

from __future__ import annotations

import pytest

from .helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def test_the_question_asked_is_not_recalled_to_its_asker(world, client_for):
    c = client_for(world["a"].key)
    asked = weave(c, "When is the Falcon launch?", session="s1", speaker="user")
    answer = weave(c, "We decided the Falcon launch is on May 10th.", session="s2", speaker="bob")
    other = weave(c, "Is the Falcon launch moving?", session="s3", speaker="ana")  # another question stays
    body = c.post("/api/v1/context", {"query": "when is the Falcon launch", "reinforce": False},
                  format="json").json()
    ids = [r["node_id"] for r in body["recall"]]
    assert asked not in ids and answer in ids and other in ids
    assert ids[0] == answer
