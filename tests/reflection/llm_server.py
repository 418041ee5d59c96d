"""A scripted LLM server on loopback that speaks the real wire protocols: OpenAI-compatible
``POST /v1/chat/completions`` and Anthropic ``POST /v1/messages``.

By default it answers like a tiny, deterministic model: it reads the ``TASK:`` line of the system
prompt (probe, abstract, conflict, reflect) and returns a valid JSON object for it. Tests push
scripted actions that are consumed one per request, or set a default action (an outage):

    "json"                  the default answer
    ("json", obj)           this object as the answer
    "truncated"             the answer cut in half, finish_reason "length" / stop_reason "max_tokens"
    "garbage"               prose, not JSON
    401 / 402 / 500 / 503   that HTTP status with a provider-shaped error body
    (429, retry_after)      429 with a Retry-After header (seconds)
    ("slow", secs)          sleep, then the default answer (beyond the client timeout → timeout)
    ("raw", body)           HTTP 200 with exactly this JSON body (a gateway's unexpected shape)
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def default_answer(system: str, user: str) -> dict:
    task = (re.search(r"TASK:\s*(\w+)", system) or re.search(r"TASK:\s*(\w+)", user))
    task = task.group(1) if task else "probe"
    if task == "abstract":
        facts = []
        for m in re.finditer(r"^\[(\d+)\] (?:\S+ )?([^:\n]+): (.+)$", user, re.M):
            idx, speaker, text = int(m.group(1)), m.group(2).strip(), m.group(3).strip()
            facts.append({"text": f"{speaker} said that {text}", "source_turns": [idx]})
        return {"facts": facts}
    if task == "conflict":
        return {"contradicts": True, "reason": "scripted judge: the statements disagree"}
    if task == "reflect":
        ids = [int(x) for x in re.findall(r"^\[(\d+)\]", user, re.M)]
        return {"bridges": [
            {"text": "Eating very spicy food regularly can cause heartburn in some people.", "fact_ids": ids[:2]},
            {"text": "People have preferences.", "fact_ids": ids[:1]},  # vacuous: must be filtered
        ]}
    return {"ok": True}


class ScriptedLlm:
    def __init__(self, key: str = "test-key"):
        self.key = key
        self.script: deque = deque()
        self.default = "json"
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server._handle(self, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def push(self, *actions) -> None:
        with self._lock:
            self.script.extend(actions)

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.default = "json"
            self.requests.clear()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- protocol -------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        anthropic = h.path.rstrip("/").endswith("/v1/messages")
        if not anthropic and not h.path.rstrip("/").endswith("/chat/completions"):
            return self._send(h, 404, {"error": {"message": "not found"}})
        if anthropic:
            system = body.get("system") or ""
            user = " ".join(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
                            for m in body.get("messages", []))
            key = h.headers.get("x-api-key", "")
        else:
            msgs = body.get("messages", [])
            system = " ".join(m["content"] for m in msgs if m["role"] == "system")
            user = " ".join(m["content"] for m in msgs if m["role"] == "user")
            key = (h.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        with self._lock:
            action = self.script.popleft() if self.script else self.default
            self.requests.append({"path": h.path, "body": body, "key": key, "action": action,
                                  "task": (re.search(r"TASK:\s*(\w+)", system) or [None, None])[1]})
        if self.key and key != self.key:
            action = 401
        obj = None
        if isinstance(action, tuple) and action[0] == "slow":
            time.sleep(action[1])
            action = "json"
        if isinstance(action, tuple) and action[0] == "json":
            action, obj = "json", action[1]
        if isinstance(action, tuple) and action[0] == "raw":
            return self._send(h, 200, action[1])
        if isinstance(action, tuple) and action[0] == 429:
            return self._send(h, 429, {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                              {"Retry-After": str(action[1])})
        if isinstance(action, int):
            msg = {401: "invalid api key", 402: "Insufficient Balance"}.get(action, "server error")
            return self._send(h, action, {"error": {"message": msg, "type": "error"}})
        text = json.dumps(obj if obj is not None else default_answer(system, user))
        truncated = action == "truncated"
        if truncated:
            text = text[: max(1, len(text) // 2)]
        if action == "garbage":
            text = "Sure! Here is what I think about that."
        if anthropic:
            payload = {"id": "msg_test", "type": "message", "role": "assistant", "model": body.get("model"),
                       "content": [{"type": "text", "text": text}],
                       "stop_reason": "max_tokens" if truncated else "end_turn",
                       "usage": {"input_tokens": 11, "output_tokens": 7}}
        else:
            payload = {"id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model"),
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "length" if truncated else "stop"}],
                       "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}
        self._send(h, 200, payload)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, code: int, payload, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            h.send_response(code)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout)
