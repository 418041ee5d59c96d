"""The asset page's destructive actions ask first, as the rest of the console does (data-confirm,
handled by console.js): deprecating or archiving an asset, and removing an agent's binding."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.assets.test_approved_edit_review import _approved_team_skill, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def test_deprecating_and_unbinding_ask_first(world, client_for):
    aid, carol, bob = _approved_team_skill(world, client_for)
    console = Client()
    console.force_login(get_user_model().objects.get(username="alpha-bob"))
    html = console.get(f"/console/assets/{aid}/").content.decode()
    deprecate = re.search(r'<form[^>]*data-confirm="([^"]*)"[^>]*>(?:(?!</form>).)*value="deprecated"', html, re.S)
    assert deprecate and "Deprecate Deploys?" in deprecate.group(1)
    unbind = re.search(r'<form[^>]*data-confirm="([^"]*)"[^>]*>(?:(?!</form>).)*value="unbind"', html, re.S)
    assert unbind and f"from {world['a'].agent.name}?" in unbind.group(1)
