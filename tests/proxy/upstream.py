"""A scripted LLM upstream on loopback speaking the real wire protocols, streaming included:
OpenAI ``POST /v1/chat/completions`` (chat.completion / chat.completion.chunk SSE ending in
``data: [DONE]``) and Anthropic ``POST /v1/messages`` (message / SSE events message_start …
message_stop). It records every request (path, headers, JSON body) for the tests to inspect.

It answers like a toy model that reads its system prompt: if the prompt holds recalled memories
(``[memory N] text``), the answer quotes the one sharing most words with the user's question;
otherwise it acknowledges the user's message. Tests may push actions, consumed one per request:
``("tool", query)`` makes the reply a call of the ``memory_resonate`` tool; ``"gzip"`` makes an OpenAI
stream gzip-encoded although the request asked for identity."""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODELS = ("gpt-test", "claude-test")
WORD = re.compile(r"[a-z0-9]+")
STOP = {"the", "a", "an", "is", "what", "my", "i", "to", "of", "and", "do", "you", "me", "it", "in", "on", "for"}


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") if isinstance(b, dict) else "" for b in content)
    return ""


def toy_answer(system: str, user: str) -> str:
    memories = re.findall(r"\[memory \d+\] (.+)", system)
    want = set(WORD.findall(user.lower())) - STOP
    best = max(memories, key=lambda m: len(want & set(WORD.findall(m.lower()))), default=None)
    if best and want & set(WORD.findall(best.lower())):
        return f"From memory: {best.strip()}"
    return f"Noted: {user.strip()}"


class _Server(ThreadingHTTPServer):
    # The listen backlog: socketserver's default of 5 reset connections of a burst of concurrent
    # requests (the proxy's answer to them was a 502).
    request_queue_size = 128


class ScriptedUpstream:
    def __init__(self, chunk_delay: float = 0.05):
        self.requests: list[dict] = []
        self.script: deque = deque()
        self.chunk_delay = chunk_delay
        self.emitted: list[tuple[float, str]] = []  # (time, chunk) of the last stream
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                body = json.loads(raw or b"{}")
                with upstream._lock:
                    upstream.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in
                                                                             self.headers.items()},
                                              "body": body, "raw": raw})
                    action = upstream.script.popleft() if upstream.script else "answer"
                if self.path.endswith("/chat/completions"):
                    upstream._openai(self, body, action)
                elif self.path.endswith("/messages"):
                    upstream._anthropic(self, body, action)
                else:
                    self._json(404, {"error": {"message": "no such route"}})

            def do_GET(self):
                with upstream._lock:
                    upstream.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in
                                                                             self.headers.items()},
                                              "body": None, "raw": b""})
                path = self.path.split("?", 1)[0]
                if path.endswith("/models"):
                    self._json(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "owned_by": "scripted"} for m in MODELS]})
                elif "/models/" in path and path.rsplit("/", 1)[1] in MODELS:
                    self._json(200, {"id": path.rsplit("/", 1)[1], "object": "model", "owned_by": "scripted"})
                else:
                    self._json(404, {"error": {"message": "no such route"}})

            def _json(self, status: int, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-upstream", "scripted")
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[str], *, gzip: bool = False) -> None:
                """``gzip``: compressed whatever the request's Accept-Encoding said, as some servers
                do, flushed per event so each chunk decodes as it arrives."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                if gzip:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("x-upstream", "scripted")
                self.end_headers()
                upstream.emitted = []
                packer = zlib.compressobj(wbits=31) if gzip else None
                for i, ev in enumerate(events):
                    data = ev.encode()
                    if packer is not None:
                        last = i == len(events) - 1
                        data = packer.compress(data) + packer.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                    upstream.emitted.append((time.monotonic(), ev))
                    time.sleep(upstream.chunk_delay)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.script.clear()

    # -- OpenAI -------------------------------------------------------------------------------
    def _openai(self, h, body: dict, action) -> None:
        msgs = body.get("messages", [])
        system = "\n".join(_text(m.get("content")) for m in msgs if m.get("role") in ("system", "developer"))
        last = msgs[-1] if msgs else {}
        if last.get("role") == "tool":
            answer = "From the memory tool: " + _text(last.get("content")).splitlines()[0]
        else:
            user = next((_text(m.get("content")) for m in reversed(msgs) if m.get("role") == "user"), "")
            answer = toy_answer(system, user)
        model = body.get("model", "scripted")
        if isinstance(action, tuple) and action[0] == "tool":
            call = {"id": "call_1", "type": "function",
                    "function": {"name": "memory_resonate", "arguments": json.dumps({"query": action[1]})}}
            h._json(200, {"id": "chatcmpl-tool", "object": "chat.completion", "created": int(time.time()),
                          "model": model, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                              "role": "assistant", "content": None, "tool_calls": [call]}}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
            return
        if not body.get("stream"):
            h._json(200, {"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                          "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                                       "message": {"role": "assistant", "content": answer}}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
            return
        base = {"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]}]
        events += [{**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                   for piece in re.findall(r"\S+\s*", answer)]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        h._sse([f"data: {json.dumps(e)}\n\n" for e in events] + ["data: [DONE]\n\n"], gzip=action == "gzip")

    # -- Anthropic ----------------------------------------------------------------------------
    def _anthropic(self, h, body: dict, action) -> None:
        system = _text(body.get("system", ""))
        msgs = body.get("messages", [])
        last = msgs[-1] if msgs else {}
        content = last.get("content")
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(content, list) else []
        if results:
            answer = "From the memory tool: " + _text(results[0].get("content")).splitlines()[0]
        else:
            user = next((_text(m.get("content")) for m in reversed(msgs) if m.get("role") == "user"), "")
            answer = toy_answer(system, user)
        model = body.get("model", "scripted")
        usage = {"input_tokens": 10, "output_tokens": 5}
        if isinstance(action, tuple) and action[0] == "tool":
            h._json(200, {"id": "msg_tool", "type": "message", "role": "assistant", "model": model,
                          "content": [{"type": "tool_use", "id": "toolu_1", "name": "memory_resonate",
                                       "input": {"query": action[1]}}],
                          "stop_reason": "tool_use", "stop_sequence": None, "usage": usage})
            return
        if not body.get("stream"):
            h._json(200, {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                          "content": [{"type": "text", "text": answer}], "stop_reason": "end_turn",
                          "stop_sequence": None, "usage": usage})
            return
        events = [("message_start", {"type": "message_start", "message": {
            "id": "msg_2", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("ping", {"type": "ping"})]
        events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": piece}})
                   for piece in re.findall(r"\S+\s*", answer)]
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                          "stop_sequence": None},
                                      "usage": {"output_tokens": 5}}),
                   ("message_stop", {"type": "message_stop"})]
        h._sse([f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events])
