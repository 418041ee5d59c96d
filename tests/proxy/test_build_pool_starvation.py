"""One org's slow memory builds must not starve another org's key checks (a cross-tenant outage).

The proxy gives the context bundle its time budget with ``asyncio.wait_for``, but a build given up
at the budget keeps its thread until it finishes. Key checks and builds shared one 16-thread pool:
org B sending 24 requests whose builds were slow (a 4,000-character query to embed) got each of
them answered in ~0.5 s, without memory, as designed, while their threads stayed busy; org A's
next key check queued behind them and its agent got ``503 unavailable`` after 5 s.

Against the real service: uvicorn in its own process, the scripted upstream model
(``upstream.py``), and an OpenAI-compatible embeddings endpoint that answers only when the test
lets it (the slow external dependency; ``NYLON_EMBEDDER=openai`` points the service at it). Each
build then waits in the embedder, deterministically, as long as the test wants."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from memory.models import EMBEDDING_DIM
from nylon_project.live import start_live_server
from proxy import views
from teams import services
from teams.models import Scope

from .conftest import _proxy_env

pytestmark = pytest.mark.django_db(transaction=True)

OPENAI_URL = "/proxy/openai/v1/chat/completions"
FLOOD = 24
LONG = ("Monday " * 571)[:4000]  # the review's query: long, and full of times to parse
# Under the OpenAI embedder's own 10 s read timeout: an embedder call never fails in a test.
HOLD_SECS = 9.0


class HeldEmbeddings:
    """``POST /v1/embeddings`` on loopback that holds every call until ``release()`` (at most
    HOLD_SECS), then answers 384-dimension vectors. Records the texts it was asked to embed."""

    def __init__(self) -> None:
        self.inputs: list[str] = []
        self.called = threading.Event()
        self.released = threading.Event()
        held = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                texts = body.get("input") or []
                held.inputs.extend(texts)
                held.called.set()
                held.released.wait(HOLD_SECS)
                vector = [1.0] + [0.0] * (EMBEDDING_DIM - 1)
                data = json.dumps({"object": "list", "data": [
                    {"object": "embedding", "index": i, "embedding": vector} for i in range(len(texts))]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def embeddings():
    server = HeldEmbeddings()
    yield server
    server.close()


@pytest.fixture
def readers(world):
    """Read-only keys for both orgs: memory is injected, nothing is written back (no write-back
    thread embedding the turns while the test runs or its tables are flushed)."""
    keys = {}
    for name in ("a", "b"):
        _, keys[name] = services.api_key_create(actor=None, agent=world[name].agent, name="reader",
                                                scopes=[Scope.READ])
    return keys


@pytest.fixture
def start_slow_build_server(readers, embeddings, upstream):
    """start(budget_ms): the service, its embedder the held endpoint. Per test (after the world, so
    it stops before the tables are flushed): the builds a test leaves running must not outlive it."""
    servers = []

    def start(budget_ms: int):
        servers.append(start_live_server(**_proxy_env(
            upstream, NYLON_PROXY_BUDGET_MS=str(budget_ms), NYLON_EMBEDDER="openai",
            NYLON_EMBEDDING_URL=embeddings.url, NYLON_EMBEDDING_MODEL="held-test")))
        return servers[-1]

    yield start
    embeddings.release()
    for server in servers:
        server.stop()


def _body(text: str) -> dict:
    return {"model": "gpt-test", "messages": [{"role": "user", "content": text}]}


async def _post(client: httpx.AsyncClient, server, key: str, text: str) -> tuple[httpx.Response, float]:
    t0 = time.monotonic()
    r = await client.post(f"{server.url}{OPENAI_URL}", json=_body(text),
                          headers={"X-Nylon-Key": key, "Authorization": "Bearer sk-up"})
    return r, time.monotonic() - t0


def _flood_then_victim(server, embeddings, readers):
    """Org B's flood of slow builds, then org A's agent saying hi. Returns (flood responses,
    (victim response, its seconds))."""

    async def go():
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            flood = [asyncio.create_task(_post(client, server, readers["b"], LONG)) for _ in range(FLOOD)]
            # The victim goes once the flood is answered (~0.5 s, memory skipped) or 2 s have passed:
            # either way while the flood's builds are still waiting on the embedder.
            await asyncio.wait(flood, timeout=2.0)
            # the service's start-up warm-up, or a build: the embedder is held from the first call
            assert embeddings.called.is_set(), "the service never called the held embedder"
            victim = await _post(client, server, readers["a"], "hi")
            return [r for r, _ in await asyncio.gather(*flood)], victim

    return asyncio.run(go())


def _stats_row(server, key: str, timeout: float = 10.0, *, requests: int) -> dict:
    """The agent's proxy stats, once ``requests`` are recorded (off the request path)."""
    deadline = time.time() + timeout
    while True:
        r = httpx.get(f"{server.url}/api/v1/proxy/stats", headers={"Authorization": f"Bearer {key}"},
                      trust_env=False)
        assert r.status_code == 200, r.text[:300]
        [row] = r.json()["agents"]
        if row["requests"] >= requests or time.time() > deadline:
            return row
        time.sleep(0.1)


def test_another_orgs_slow_builds_do_not_starve_the_key_check(start_slow_build_server, embeddings, readers,
                                                              scripted):
    """The review's reproduction, with the default 300 ms budget: the victim was a 503 after
    AUTH_TIMEOUT_SECS (5 s)."""
    server = start_slow_build_server(300)
    flood, (victim, seconds) = _flood_then_victim(server, embeddings, readers)

    assert victim.status_code == 200, (round(seconds, 2), victim.text[:300])
    assert seconds < views.AUTH_TIMEOUT_SECS / 2, f"org A waited {seconds:.2f} s behind org B's builds"
    # its own build may wait on the (shared, held) embedder: that is the memory failing open
    assert victim.headers["x-nylon-memory"].startswith("none")
    assert victim.json()["choices"][0]["message"]["content"] == "Noted: hi"
    # the flood itself is served too, without memory
    assert [r.status_code for r in flood] == [200] * FLOOD
    assert all(r.headers["x-nylon-memory"].startswith("none") for r in flood)


def test_builds_are_bounded_per_org_counted_and_recall_a_capped_query(start_slow_build_server, embeddings,
                                                                      readers, scripted):
    from proxy.bundle import MAX_QUERY_CHARS  # (imported here: test 1 ran before it existed)

    # A budget no key check of the flood can spend on a busy machine (a request whose key check
    # took it all starts no build: over_budget, not busy), so the counts below are exact.
    server = start_slow_build_server(2000)
    flood, (victim, _) = _flood_then_victim(server, embeddings, readers)
    per_org = views.BUILD_SLOTS_PER_ORG
    assert per_org < views.BUILD_THREADS

    # Org B holds its share of the build slots; its other requests skip memory at once instead of
    # queueing a build, and say why.
    assert [r.status_code for r in flood] == [200] * FLOOD
    reasons = [r.headers["x-nylon-memory"] for r in flood]
    assert reasons.count("none; reason=busy") == FLOOD - per_org, reasons
    assert reasons.count("none") == per_org, reasons
    # Org A still gets a slot of its own: its build ran (and was given up at the budget, as the
    # embedder is held), it was not turned away as busy.
    assert victim.status_code == 200 and victim.headers["x-nylon-memory"] == "none"

    b = _stats_row(server, readers["b"], requests=FLOOD)
    assert b["requests"] == FLOOD and b["passthrough"] == FLOOD
    assert b["memory_skipped"] == {"busy": FLOOD - per_org, "over_budget": per_org}
    a = _stats_row(server, readers["a"], requests=1)
    assert a["requests"] == 1 and a["memory_skipped"] == {"busy": 0, "over_budget": 1}

    # Only the builds that got a slot asked the embedder, each with the end of the user's turn,
    # not its 4,000 characters.
    def flood_queries() -> list[str]:
        return [q for q in embeddings.inputs if q not in ("hi", "warm-up")]  # warm-up: the start-up's

    embeddings.release()
    deadline = time.time() + 10
    while (len(flood_queries()) < per_org or "hi" not in embeddings.inputs) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # and nothing more arrives
    queries = flood_queries()
    assert len(queries) == per_org and embeddings.inputs.count("hi") == 1, [q[:20] for q in embeddings.inputs]
    for q in queries:
        assert MAX_QUERY_CHARS - 10 <= len(q) <= MAX_QUERY_CHARS and LONG.rstrip().endswith(q.strip()), q

    # The given-up builds end once the embedder answers, and give their slots back: org B's memory
    # is built again.
    deadline = time.time() + 15
    while True:
        r = httpx.post(f"{server.url}{OPENAI_URL}", json=_body("Which day?"), trust_env=False, timeout=30,
                       headers={"X-Nylon-Key": readers["b"], "Authorization": "Bearer sk-up"})
        assert r.status_code == 200, r.text[:300]
        if r.headers["x-nylon-memory"] == "injected" or time.time() > deadline:
            break
        time.sleep(0.2)
    assert r.headers["x-nylon-memory"] == "injected"


def test_build_slots_are_shared_out_per_org():
    from proxy.slots import BuildSlots

    slots = BuildSlots(total=3, per_org=2)
    assert slots.try_acquire(1) and slots.try_acquire(1)
    assert not slots.try_acquire(1)  # org 1's share is taken
    assert slots.try_acquire(2)  # another org still finds one
    assert not slots.try_acquire(3) and slots.running() == 3  # all taken
    slots.release(1)
    assert slots.try_acquire(3) and not slots.try_acquire(1)
    for org in (1, 2, 3):
        slots.release(org)
    assert slots.running() == 0 and slots.try_acquire(1)
    with pytest.raises(RuntimeError):
        slots.release(2)


def test_the_recall_query_is_the_end_of_the_users_turn():
    from proxy.bundle import MAX_QUERY_CHARS, recall_query

    assert recall_query("When does the staging password rotate?") == "When does the staging password rotate?"
    text = "Here is the whole log: " + "x" * 5000 + " ... so when does the staging password rotate?"
    q = recall_query(text)
    assert len(q) <= MAX_QUERY_CHARS and q.endswith("so when does the staging password rotate?")
    # cut between words, not inside one
    words = ("alpha beta gamma " * 200).strip()
    q = recall_query(words)
    assert len(q) <= MAX_QUERY_CHARS and words.endswith(q) and q.split()[0] in ("alpha", "beta", "gamma")
