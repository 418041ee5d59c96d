"""The SDK's ``Context`` carries every field the README advertises (``no_match``,
``degraded_reasons``, ``memory_call_budget``, ``tool_assets``) and typed recall items that still
read as dicts; the CLI prints the context as text (``--json`` for the answer), leaves a channel
that did not rank a hit out of resonate's why column, and names a refused field by its path."""

from __future__ import annotations

import argparse
import json

import pytest
from nylon_sdk import Client, RecallItem
from nylon_sdk import cli as nylon_cli
from nylon_sdk.errors import ValidationError, error_for, field_errors
from nylon_sdk.types import Context, ResonateResult

from .test_cli import nylon

ANSWER = {
    "language": "en", "stable_hash": "ab" * 32, "stable": "GUIDE", "dynamic": "## Memory\n- [memory 7] x",
    "context": "GUIDE\n\n## Memory\n- [memory 7] x", "persona": [], "scenario_index": [],
    "tool_assets": [{"asset_id": 3, "kind": "wiki", "title": "Runbook"}],
    "recall": [{"node_id": 7, "score": 0.5, "text": "x", "truncated": False, "matched": False,
                "occurred_at": "2026-11-26T10:00:00+00:00", "speaker": "coder", "derived": "",
                "disputed_by": []}],
    "no_match": True, "truncated": {"full": 0, "index": 0, "recall": 0},
    "dropped": {"full": 0, "index": 0, "recall": 2}, "budget": {"max_recall_chars": 4000},
    "memory_call_budget": 3, "degraded": ["llm"], "degraded_reasons": {"llm": "the LLM is failing (timeout)"},
}


def test_context_has_typed_fields_and_recall_items():
    ctx = Context.from_json(ANSWER)
    assert ctx.no_match is True and ctx.memory_call_budget == 3
    assert ctx.degraded_reasons == {"llm": "the LLM is failing (timeout)"}
    assert ctx.tool_assets == [{"asset_id": 3, "kind": "wiki", "title": "Runbook"}]
    item = ctx.recall[0]
    assert isinstance(item, RecallItem)
    assert (item.node_id, item.speaker, item.matched, item.occurred_at) == (7, "coder", False,
                                                                            "2026-11-26T10:00:00+00:00")
    # still readable as the dict it was
    assert item["node_id"] == 7 and item.get("speaker") == "coder" and item.get("nope", 1) == 1
    assert "text" in item and "nope" not in item and set(item.keys()) == set(ANSWER["recall"][0])
    with pytest.raises(KeyError):
        item["nope"]


def test_field_errors_are_dotted_paths():
    assert field_errors({"budget": {"max_recal_chars": ["Unknown field."]}}) == [
        ("budget.max_recal_chars", "Unknown field.")]
    assert field_errors({"sessions": {"0": {"turns": [{"text": ["Required."]}]}}}) == [
        ("sessions.0.turns.0.text", "Required.")]
    exc = error_for(400, {"error": {"code": "invalid", "message": "Invalid input.",
                                    "fields": {"budget": {"max_recal_chars": ["Unknown field."]}}}})
    assert isinstance(exc, ValidationError)
    assert str(exc) == "400 invalid: Invalid input. budget.max_recal_chars: Unknown field."
    assert "{" not in str(exc)


class _Fake:
    def __init__(self, context=None, resonate=None):
        self._context, self._resonate = context, resonate

    def context(self, *a, **kw):
        return self._context

    def resonate(self, *a, **kw):
        return self._resonate


def test_cli_context_prints_text_by_default_and_json_on_request(capsys):
    args = argparse.Namespace(query="q", k=None, no_reinforce=False, budget=None, json=False)
    assert nylon_cli.cmd_context(args, _Fake(context=Context.from_json(ANSWER))) == 0
    out = capsys.readouterr().out
    assert out.startswith("GUIDE\n\n## Memory\n- [memory 7] x\n") and not out.lstrip().startswith("{")
    assert "1 recalled" in out and "no match for the query" in out and "dropped: recall 2" in out
    assert "degraded: llm (the LLM is failing (timeout))" in out
    args.json = True
    nylon_cli.cmd_context(args, _Fake(context=Context.from_json(ANSWER)))
    assert json.loads(capsys.readouterr().out) == ANSWER


def test_cli_resonate_why_leaves_out_channels_that_did_not_rank(capsys):
    res = ResonateResult.from_json({
        "hits": [{"node_id": 1, "score": 0.9, "text": "a", "kind": "leaf",
                  "explanation": {"channels": {"lexical": None, "vector": 2}, "hops": 0}},
                 {"node_id": 2, "score": 0.5, "text": "b", "kind": "leaf",
                  "explanation": {"channels": {"lexical": None, "vector": None}, "hops": 1}}],
        "route": {}, "timing_ms": {"total": 1.0}, "degraded": [], "served_by": "engine", "truncated": False})
    args = argparse.Namespace(query="q", k=10, depth=None, no_reinforce=False, json=False)
    assert nylon_cli.cmd_resonate(args, _Fake(resonate=res)) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "vector#2" in out and "lexical" not in out and "hop 1" in out


@pytest.mark.django_db(transaction=True)
def test_cli_against_the_service(nylon_server, world, tmp_path):
    env = {"NYLON_CONFIG": str(tmp_path / "none.json"), "NYLON_URL": nylon_server.url,
           "NYLON_API_KEY": world["a"].key}
    with Client(nylon_server.url, world["a"].key) as sdk:
        sdk.weave("The deploy window is Tuesday 14:00 UTC.", session_key="ops")
        ctx = sdk.context("When is the deploy window?", reinforce=False)
    assert isinstance(ctx.recall[0], RecallItem) and ctx.memory_call_budget == ctx.raw["memory_call_budget"]
    assert ctx.no_match is False and isinstance(ctx.degraded_reasons, dict) and ctx.tool_assets == []
    out = nylon("context", "When is the deploy window?", "--no-reinforce", env=env)
    assert out.returncode == 0, out.stderr
    assert "Tuesday 14:00 UTC" in out.stdout and not out.stdout.lstrip().startswith("{")
    assert "-- stable_hash " in out.stdout
    out = nylon("context", "x", "--budget", "max_recal_chars=1", env=env)
    assert out.returncode == 1 and "budget.max_recal_chars: Unknown field." in out.stderr
    assert "{'max_recal_chars'" not in out.stderr
