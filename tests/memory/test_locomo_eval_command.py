"""The LoCoMo harness (`manage.py locomo_eval`) on a tiny conversation, in both layouts it reads: a
folder of one-conversation files (../shared/locomo) and the public benchmark's single
locomo10.json (a list of samples with ``sample_id``, ``conversation`` and ``qa``)."""

from __future__ import annotations

import copy
import json

import pytest
from django.core.management import call_command

from teams.models import Organization

pytestmark = pytest.mark.django_db

SESSIONS = {
    "speaker_a": "Ana",
    "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben! I adopted a grey kitten called Pixel last weekend."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I started learning the cello in March."},
        {"speaker": "Ana", "dia_id": "D1:3", "text": "My sister Lucia is moving to Lisbon for a new job."},
    ],
    "session_2_date_time": "10:02 am on 20 June, 2023",
    "session_2": [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "My teacher says I should practise scales every day."},
        {"speaker": "Ana", "dia_id": "D2:2", "text": "The kitten knocked my coffee onto the keyboard yesterday."},
        {"speaker": "Ben", "dia_id": "D2:3", "text": "Ha! Did your sister find a flat yet?"},
    ],
}
QA = [
    {"question": "What did Ana name her grey kitten?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
    {"question": "Which instrument did Ben start learning?", "answer": "cello", "evidence": ["D1:2"], "category": 4},
    {"question": "Where is Lucia moving for her new job?", "answer": "Lisbon", "evidence": ["D1:3"], "category": 1},
    {"question": "When did the kitten knock coffee onto the keyboard?", "answer": "19 June 2023",
     "evidence": ["D2:2"], "category": 2},
    # Category 5 (adversarial) and questions without evidence are not asked.
    {"question": "What is Ana's favourite opera?", "adversarial_answer": "Tosca", "evidence": ["D1:1"], "category": 5},
    {"question": "Does Ben like jazz?", "answer": "unknown", "evidence": [], "category": 4},
]


def _run(tmp_path, data, *extra: str) -> dict:
    out = tmp_path / "out.json"
    call_command("locomo_eval", "--data", str(data), "--org", "test-locomo", "--out", str(out), *extra)
    return json.loads(out.read_text())


def test_a_folder_of_conversations_is_ingested_asked_and_scored(tmp_path):
    folder = tmp_path / "locomo"
    folder.mkdir()
    (folder / "7.json").write_text(json.dumps({**SESSIONS, "qa": QA}))
    res = _run(tmp_path, folder, "--k", "1")
    nylon = res["variants"]["nylon"]
    assert nylon["n"] == 4  # the adversarial and the evidence-less questions are skipped
    assert list(res["conversations"]) == ["7"]
    # Recall@1 on questions that each share words with exactly one turn: the answering turn first.
    assert nylon["overall"] == 100.0, res
    assert res["variants"]["bm25"]["overall"] == 100.0
    assert res["latency_ms"]["p95"] > 0
    assert not Organization.objects.filter(slug="test-locomo").exists()  # thrown away without --keep


def test_the_public_benchmarks_single_file_layout_is_read_as_several_conversations(tmp_path):
    second = copy.deepcopy(SESSIONS)
    second["session_1"][0]["text"] = "Hi Ben! I adopted a black puppy called Nimbus last weekend."
    qa2 = [{"question": "What did Ana name her black puppy?", "answer": "Nimbus", "evidence": ["D1:1"],
            "category": 4}]
    samples = [{"sample_id": "conv-1", "conversation": SESSIONS, "qa": QA},
               {"sample_id": "conv-2", "conversation": second, "qa": qa2}]
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(samples))
    res = _run(tmp_path, path, "--k", "1", "--no-baselines", "--keep")
    assert list(res["conversations"]) == ["conv-1", "conv-2"]
    assert res["conversations"]["conv-2"]["n"] == 1 and res["conversations"]["conv-2"]["overall"] == 100.0
    assert res["variants"]["nylon"]["n"] == 5
    assert res["variants"]["bm25"]["n"] == 0  # --no-baselines
    # One owner per conversation (their turns are private to them), beside the eval admin.
    org = Organization.objects.get(slug="test-locomo")
    assert org.memberships.count() == 3  # the eval admin and one member per conversation
