"""Write-back: after the upstream answered, the user turn and the assistant answer become leaves
of the agent's memory. Never on the request path: a Celery task (or, when background tasks are
off or the broker is down, a thread of this process)."""

from __future__ import annotations

import hashlib
import logging
import threading

from django.conf import settings
from django.db import close_old_connections

log = logging.getLogger("nylon.proxy")


def session_key_for(*, agent_id: int, explicit: str, first_user_text: str) -> str:
    """The caller's ``X-Nylon-Session``, else one conversation = one session, recognised by its
    first user message (every request of a chat resends it)."""
    if explicit:
        return explicit[:200]
    digest = hashlib.sha256(f"{agent_id}\n{first_user_text}".encode()).hexdigest()[:16]
    return f"proxy-{digest}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def turns_for(*, session_key: str, position: int, user_text: str, answer: str, model: str) -> list[dict]:
    """Event ids tie each turn to its place in its conversation: a retried request writes nothing twice.

    Idempotency is unique per (org, owner, event_id), across all of the agent's sessions, so the
    session is part of the id: two conversations that happen to repeat a turn at the same position
    ("Hello" / the same greeting) each keep theirs. The session key is hashed because it may be 200
    characters and the event id has room for 200 in all.

    The user turn is keyed by its text: a retry resends it verbatim, while an edited question at
    that position is a new turn. The answer is keyed by the question it answers, not by its own
    text: a retry of the same question that samples a different answer writes nothing (the first
    answer stored wins), whereas an edited question gets its own answer."""
    session = _sha(session_key)
    question = _sha(user_text)

    turns = []
    if user_text.strip():
        turns.append({"text": user_text, "speaker": "user",
                      "event_id": f"proxy:{session}:{position}:user:{question}"})
    if answer.strip():
        # "derived": what a model replied, recalled as such (assets.context.derived_kind), not as a statement.
        turns.append({"text": answer, "speaker": "assistant",
                      "event_id": f"proxy:{session}:{position}:assistant:{question}",
                      "metadata": {"derived": "model_answer", **({"model": model} if model else {})}})
    return turns


def write_back(*, key_id: int, session_key: str, turns: list[dict]) -> list[int]:
    """Runs in the worker (or a thread): re-checks the key, then weaves the turns."""
    from memory import services
    from memory.models import SourceKind
    from teams.auth import actor_for_agent
    from teams.models import ApiKey, Scope

    key = ApiKey.objects.select_related("agent", "agent__org").filter(pk=key_id, revoked_at__isnull=True).first()
    if key is None or not key.agent.is_active or not turns:
        return []
    actor = actor_for_agent(key.agent, scopes=frozenset(key.scopes), key_id=key.pk)
    if not actor.can(Scope.WRITE):
        return []
    max_chars = services.MAX_TEXT_CHARS
    # The answer is the agent's: named so, teammates recalling it see which agent said it (not
    # "assistant", which every agent's answers would share). The asker stays "user".
    result = services.weave_session(
        actor=actor, session_key=session_key, source_kind=SourceKind.PROXY,
        turns=[services.TurnIn(text=t["text"][:max_chars],
                               speaker=key.agent.name if t["speaker"] == "assistant" else t["speaker"],
                               event_id=t["event_id"], metadata=t.get("metadata") or {}) for t in turns],
    )
    return result.node_ids


def _in_thread(**kwargs) -> None:
    def run():
        close_old_connections()
        try:
            write_back(**kwargs)
        except Exception:
            log.exception("proxy write-back failed")
        finally:
            close_old_connections()

    threading.Thread(target=run, name="nylon-proxy-writeback", daemon=True).start()


def enqueue(*, key_id: int, session_key: str, turns: list[dict]) -> None:
    """Called from an executor thread after the response is sent (or while it streams its end)."""
    if not turns:
        return
    if settings.NYLON_ENQUEUE_TASKS:
        from .tasks import write_back_task

        try:
            write_back_task.delay(key_id, session_key, turns)
            return
        except Exception as exc:  # broker down: do it here rather than lose the turn
            log.warning("write-back not enqueued (%s); writing in-process", type(exc).__name__)
    _in_thread(key_id=key_id, session_key=session_key, turns=turns)
