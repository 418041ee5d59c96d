"""The SDK against the real service (uvicorn on the test database): every call, and the error paths."""

from __future__ import annotations

import asyncio
import socket
import uuid

import nylon_sdk as ny
import pytest
from nylon_sdk import AsyncClient, Client, Turn

from nylon_project.live import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def test_weave_resonate_and_nodes(nylon_server, world):
    with Client(nylon_server.url, world["a"].key) as nylon:
        one = nylon.weave("Caroline adopted a grey cat named Biscuit in May.", speaker="melanie",
                          session_key="pets", event_id="e1")
        assert isinstance(one, ny.WeaveResult) and one.created == 1 and one.session_key == "pets"
        again = nylon.weave("Caroline adopted a grey cat named Biscuit in May.", speaker="melanie",
                            session_key="pets", event_id="e1")
        assert again.created == 0 and again.node_ids == one.node_ids  # idempotent on event_id

        batch = nylon.weave_session("trip", [
            "We are flying to Lisbon on Friday.",
            {"text": "The hotel is near the Alfama district.", "speaker": "bob"},
            Turn(text="Bring the charger for the camera.", speaker="alice", metadata={"n": 3}),
        ], end_session=True)
        assert batch.created == 3 and len(batch.node_ids) == 3

        res = nylon.resonate("What is the name of Caroline's cat?", k=5)
        assert isinstance(res, ny.ResonateResult) and res.served_by in ("engine", "postgres")
        top = res.hits[0]
        assert top.node_id == one.node_ids[0] and "Biscuit" in top.text
        assert isinstance(top.explanation, ny.Explanation) and top.explanation.parts
        assert top.matched is True and top.occurred_at  # when it happened, and that it matches
        assert res.route["qtype"] and "total" in res.timing_ms

        node = nylon.get_node(batch.node_ids[1])
        assert isinstance(node, ny.Node) and node.speaker == "bob" and node.silks["temporal"]["session_key"] == "trip"

        page = nylon.list_nodes(limit=2)
        assert len(page.items) == 2 and page.next_cursor
        every = list(nylon.iter_nodes(page_size=1))  # one node per page: the cursor is followed
        assert sorted(n.id for n in every) == sorted(one.node_ids + batch.node_ids)
        assert [n.id for n in nylon.iter_nodes(session_key="trip")] == sorted(batch.node_ids, reverse=True)

        assert nylon.delete_node(batch.node_ids[2]) is None
        with pytest.raises(ny.NotFound):
            nylon.get_node(batch.node_ids[2])
        # another org's memory does not exist for this key
        with Client(nylon_server.url, world["b"].key) as other, pytest.raises(ny.NotFound) as exc:
            other.get_node(one.node_ids[0])
        assert exc.value.status == 404 and exc.value.code == "not_found" and exc.value.request_id


def test_error_shapes(nylon_server, world):
    from teams import services

    with Client(nylon_server.url, "nyl_bad_key", max_retries=0) as bad, pytest.raises(ny.AuthError) as exc:
        bad.resonate("anything")
    assert exc.value.status == 401 and exc.value.message and exc.value.request_id

    with Client(nylon_server.url, world["a"].key) as nylon:
        with pytest.raises(ny.ValidationError) as exc:
            nylon.weave("   ")
        assert exc.value.status == 400 and exc.value.code == "invalid" and "text" in exc.value.fields
        with pytest.raises(ny.ValidationError) as exc:
            nylon.resonate("q", k=10_000)
        assert set(exc.value.fields) == {"k"}
        with pytest.raises(ny.ValidationError) as exc:
            nylon.list_nodes(kind="nonsense")
        assert "kind" in exc.value.fields
        with pytest.raises(ny.NotFound):
            nylon.get_node(987_654_321)

    _, read_only = services.api_key_create(actor=None, agent=world["a"].agent, name="ro", scopes=["read"])
    with Client(nylon_server.url, read_only) as ro:
        assert ro.list_nodes().items == []
        with pytest.raises(ny.PermissionDenied) as exc:
            ro.weave("I may not write this.")
        assert exc.value.status == 403


def test_rate_limit_honours_retry_after(limited_server, world):
    key = world["a"].key
    with Client(limited_server.url, key, max_retries=0) as nylon:
        with pytest.raises(ny.RateLimited) as exc:
            for _ in range(10):
                nylon.list_nodes()
        assert exc.value.status == 429 and 0 < exc.value.retry_after <= 60

    # retried: each wait is the server's Retry-After (recorded instead of slept)
    with Client(limited_server.url, key, max_retries=2, max_retry_wait=120) as nylon:
        waits: list[float] = []
        nylon._sleep = waits.append
        with pytest.raises(ny.RateLimited):
            nylon.list_nodes()
        assert len(waits) == 2 and all(0 < w <= 60 for w in waits)

    # a Retry-After beyond the client's patience is raised at once, not slept through
    with Client(limited_server.url, key, max_retries=5, max_retry_wait=1) as nylon:
        waits = []
        nylon._sleep = waits.append
        with pytest.raises(ny.RateLimited) as exc:
            nylon.list_nodes()
        assert waits == [] and exc.value.retry_after > 1


def test_default_client_waits_out_a_per_minute_rate_limit(limited_server, world):
    """The server's limit is per minute, so its Retry-After is up to 60 s. The default cap was 30:
    a client built as the README shows raised RateLimited at once instead of waiting, as it says
    it does, for the window to open."""
    from teams import services

    _, key = services.api_key_create(actor=None, agent=world["a"].agent, name="fresh window")
    with Client(limited_server.url, key, max_retries=0) as nylon, pytest.raises(ny.RateLimited) as exc:
        for _ in range(10):  # 5/min: the 6th is refused, told to wait for the window's first request to age out
            nylon.list_nodes()
    assert 30 < exc.value.retry_after <= 60

    with Client(limited_server.url, key) as nylon:
        waits: list[float] = []
        nylon._sleep = waits.append  # recorded instead of slept: still limited, so every retry is used
        with pytest.raises(ny.RateLimited) as exc:
            nylon.list_nodes()
    assert len(waits) == 3 and all(30 < w <= 60 for w in waits) and exc.value.retry_after > 30

    async def run() -> list[float]:
        async with AsyncClient(limited_server.url, key) as nylon:
            waited: list[float] = []

            async def record(seconds: float) -> None:
                waited.append(seconds)

            nylon._sleep = record
            with pytest.raises(ny.RateLimited):
                await nylon.list_nodes()
            return waited

    waited = asyncio.run(run())
    assert len(waited) == 3 and all(30 < w <= 60 for w in waited)


def test_async_client(nylon_server, world):
    async def run():
        async with AsyncClient(nylon_server.url, world["a"].key) as nylon:
            w = await nylon.weave_session("async", ["Dmitri's favourite tea is oolong.", "He drinks it cold."])
            res = await nylon.resonate("Which tea does Dmitri like?", k=3)
            ids = [n.id async for n in nylon.iter_nodes(page_size=1)]
            node = await nylon.get_node(w.node_ids[0])
            await nylon.delete_node(w.node_ids[1])
            with pytest.raises(ny.NotFound):
                await nylon.get_node(w.node_ids[1])
            with pytest.raises(ny.ValidationError) as exc:
                await nylon.weave("")
            return w, res, ids, node, exc.value

    w, res, ids, node, err = asyncio.run(run())
    assert res.hits[0].node_id == w.node_ids[0]
    assert sorted(ids) == sorted(w.node_ids)
    assert node.text == "Dmitri's favourite tea is oolong."
    assert "text" in err.fields

    async def bad():
        async with AsyncClient(nylon_server.url, "nyl_x_y") as nylon:
            await nylon.resonate("x")

    with pytest.raises(ny.AuthError):
        asyncio.run(bad())


def test_conflicts_list_and_resolve(nylon_server, world):
    from memory.models import Node
    from reflection.models import Conflict

    with Client(nylon_server.url, world["a"].key) as nylon:
        w = nylon.weave_session("moves", ["I live in Berlin.", "I live in Madrid now."])
        a, b = (Node.objects.get(pk=i) for i in sorted(w.node_ids))
        c = Conflict.objects.create(org=world["a"].org, node_a=a, node_b=b, reason="two home cities",
                                    detector=Conflict.Detector.RULE)
        page = nylon.list_conflicts(status="open")
        assert [x.id for x in page.items] == [c.id]
        assert [x.id for x in nylon.iter_conflicts()] == [c.id]
        assert page.items[0].node_a["id"] == a.id and page.items[0].reason == "two home cities"
        with pytest.raises(ny.ValidationError) as exc:
            nylon.resolve_conflict(c.id, "explode")
        assert "action" in exc.value.fields
        done = nylon.resolve_conflict(c.id, "keep_both")
        assert isinstance(done, ny.Conflict) and done.status == "kept_both" and done.resolved_by
        assert nylon.list_conflicts(status="open").items == []
        with pytest.raises(ny.NotFound):
            nylon.resolve_conflict(987_654, "reject")
    with Client(nylon_server.url, world["b"].key) as other, pytest.raises(ny.NotFound):
        other.resolve_conflict(c.id, "reject")


def test_context(nylon_server, world):
    with Client(nylon_server.url, world["a"].key) as nylon:
        w = nylon.weave("The deploy window is Tuesday 14:00 UTC.", session_key="ops")
        ctx = nylon.context("When is the deploy window?")
        again = nylon.context("Something else entirely?")
    assert isinstance(ctx, ny.Context) and ctx.stable_hash == again.stable_hash  # the stable prefix
    assert [r["node_id"] for r in ctx.recall][:1] == w.node_ids and ctx.stable in ctx.context
    assert ctx.scenarios == []


def test_export_import_are_refused_to_agents(nylon_server, world):
    with Client(nylon_server.url, world["a"].key) as nylon:
        with pytest.raises(ny.PermissionDenied) as exc:
            nylon.export()
        assert "export" in exc.value.message
        with pytest.raises(ny.PermissionDenied):
            nylon.import_([{"kind": "leaf", "text": "x"}])


def test_unknown_endpoint_is_endpoint_unavailable(nylon_server, world):
    from nylon_sdk._core import Call

    with Client(nylon_server.url, world["a"].key) as nylon, pytest.raises(ny.EndpointUnavailable):
        nylon._call(Call("GET", "/api/v1/no-such-endpoint"))


def test_health_and_transport_errors(nylon_server, world):
    with Client(nylon_server.url) as anon:
        h = anon.health()  # no worker runs for this server: 503 'down' is an answer, not an exception
        assert isinstance(h, ny.Health) and h.status in ("ok", "degraded", "down")
        assert h.raw["checks"]["database"]["status"] == "ok"

    # a port that accepts connections and never answers: the client's timeout fires
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        with Client(f"http://127.0.0.1:{silent.getsockname()[1]}", "k", timeout=0.3) as slow, \
                pytest.raises(ny.Timeout):
            slow.resonate("x")

    # nothing listening: connection errors are retried (the request never left), then raised
    port = free_port()
    with Client(f"http://127.0.0.1:{port}", "k", max_retries=2) as dead:
        waits: list[float] = []
        dead._sleep = waits.append
        with pytest.raises(ny.TransportError):
            dead.resonate(f"x{uuid.uuid4().hex}")
        assert len(waits) == 2
