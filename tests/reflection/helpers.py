from __future__ import annotations

from memory.models import MemorySession

TURNS = [
    {"speaker": "Ana", "text": "I went to a pottery class yesterday.", "occurred_at": "2023-05-08T10:00:00Z"},
    {"speaker": "Ben", "text": "Nice! How was it?", "occurred_at": "2023-05-08T10:01:00Z"},
    {"speaker": "Ana", "text": "Great. I decided to sign up for the spring course.", "occurred_at": "2023-05-08T10:02:00Z"},
    {"speaker": "Ben", "text": "I eat spicy food every day.", "occurred_at": "2023-05-08T10:03:00Z"},
]


def weave(client, key: str, turns=None, end: bool = True, **extra) -> dict:
    body = {"session_key": key, "turns": turns or TURNS, "end_session": end, **extra}
    r = client.post("/api/v1/memories/weave-session", body, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def session(org, key: str) -> MemorySession:
    return MemorySession.objects.get(org=org, key=key)
