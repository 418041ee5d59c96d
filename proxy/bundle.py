"""The context bundle the proxy injects, and where it goes in each wire protocol.

Order is by volatility (a prompt-cache argument): the stable part — persona and
the scenario index — comes first and is byte-identical from turn to turn until the memory behind
it changes; the volatile part — the hits recalled for this turn's user message — comes last. The
caller's own system text stays in front of both, and the caller's messages are never reordered. See docs/proxy.md."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

from django.conf import settings

from assets.context import neutralise_tags
from teams.auth import Actor
from teams.models import Scope

log = logging.getLogger("nylon.proxy")

# The tools the context guide (assets.context.GUIDES) tells the model about; the proxy answers them.
TOOLS = {
    "memory_resonate": ("Search the team memory (verbatim turns and distilled facts) visible to this agent.",
                        {"type": "object", "properties": {"query": {"type": "string"},
                                                          "k": {"type": "integer", "minimum": 1, "maximum": 20}},
                         "required": ["query"]}),
    "memory_get": ("Read one memory (type 'memory', the number of a [memory N] line; 'node' also works) or asset "
                   "(type 'asset', an [asset N] number, e.g. a scenario of the index) in full.",
                   {"type": "object", "properties": {"type": {"type": "string", "enum": ["memory", "node", "asset"]},
                                                     "id": {"type": "integer"}}, "required": ["type", "id"]}),
    "memory_weave": ("Save a new fact, decision or result to the agent's memory.",
                     {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
}


def offered_tools(actor: Actor) -> dict:
    """The memory tools this key may use: memory_weave needs the write scope (``run_tool`` would
    refuse it, and the context guide leaves it out for the same key)."""
    return {name: spec for name, spec in TOOLS.items() if name != "memory_weave" or actor.can(Scope.WRITE)}


@dataclass
class Bundle:
    stable: str
    volatile: str
    stable_hash: str

    @property
    def text(self) -> str:
        # The block stays even when empty (no tools, persona, index nor recall): it says memory was
        # consulted, as X-Nylon-Memory: injected does.
        # Asset bodies and recalled text are stored data: none may close the block early.
        parts = neutralise_tags("\n\n".join(p for p in (self.stable, self.volatile) if p))
        return f"<nylon_memory>\n{parts}\n</nylon_memory>" if parts else "<nylon_memory>\n</nylon_memory>"

    @property
    def approx_tokens(self) -> int:
        return (len(self.text) + 3) // 4


# The most of the user's turn the automatic recall searches with: its end, where a question after
# a long paste (a log, a document) is. The recall's cost grows with the query (its embedding above
# all, and the parsing of its times and names), and the proxy's builds run on: one given up at the
# budget keeps its thread and its build slot until it finishes.
MAX_QUERY_CHARS = 1000


def recall_query(text: str) -> str:
    """The last ``MAX_QUERY_CHARS`` characters of ``text``, starting at a word (a cut word would be
    a token matching nothing); the whole text when it is that short."""
    if len(text) <= MAX_QUERY_CHARS:
        return text
    tail = text[-MAX_QUERY_CHARS:]
    if not text[-MAX_QUERY_CHARS - 1].isspace():
        first_space = next((i for i, c in enumerate(tail) if c.isspace()), -1)
        if 0 <= first_space < 100:  # else one long word (a URL, base64): keep its end as is
            tail = tail[first_space:]
    return tail.lstrip()


def build_bundle(*, actor: Actor, query: str, tools: bool = True) -> Bundle:
    """The agent context (assets.context: guide, persona, scenario index, then recall for the last
    user message, of which ``recall_query`` keeps the end). Runs in a worker thread under the
    proxy's time budget. Recall here is automatic, not a deliberate look-up, so it does not
    reinforce the recalled memories.

    ``tools``: whether the memory tools go with this request. Without them the guide (which tells
    the model to call memory_resonate/memory_get/memory_weave, at most 3 times) is left out, and
    the scenario index no longer says to read entries with memory_get: a model told about tools it
    does not have calls them anyway, and nothing would answer."""
    from assets.context import build_context

    ctx = build_context(actor=actor, query=recall_query(query), k=settings.NYLON_PROXY_HITS_K,
                        budget=recall_budget(), reinforce=False)
    if tools:
        return Bundle(stable=ctx.stable_text, volatile=ctx.dynamic_text, stable_hash=ctx.stable_hash)
    stable = without_tool_guide(ctx.stable_text, ctx.language, can_write=actor.can(Scope.WRITE))
    return Bundle(stable=stable, volatile=ctx.dynamic_text,
                  stable_hash=hashlib.sha256(stable.encode()).hexdigest())


def recall_budget():
    """The context budget with the proxy's injection caps: ``NYLON_PROXY_HITS_K`` memories, each cut
    to ``NYLON_PROXY_MAX_HIT_CHARS``, ``NYLON_PROXY_MAX_HITS_CHARS`` in all (clamped to the context's
    hard limits, as a caller's budget is)."""
    from assets.context import Budget

    return Budget.with_overrides({"max_recall_items": settings.NYLON_PROXY_HITS_K,
                                  "max_chars_per_memory": settings.NYLON_PROXY_MAX_HIT_CHARS,
                                  "max_recall_chars": settings.NYLON_PROXY_MAX_HITS_CHARS})


def without_tool_guide(stable: str, language: str, *, can_write: bool) -> str:
    from assets.context import HEADINGS, guide

    text = guide(language, can_write=can_write)
    if stable.startswith(text):
        stable = stable[len(text):].lstrip("\n")
    index_heading = HEADINGS[language][1]
    return stable.replace(index_heading, index_heading.split(" (", 1)[0].split("（", 1)[0], 1)


def run_tool(*, actor: Actor, name: str, args: dict) -> str:
    """Answer one memory-tool call (a worker thread); errors become the tool's text, for the model."""
    from assets import mcp

    if not isinstance(args, dict):  # arguments that are not a JSON object: tell the model, run nothing
        return "Tool error: the arguments are not a valid JSON object."
    try:
        if name == "memory_resonate":
            out = mcp.tool_resonate(actor, query=str(args.get("query", "")), k=int(args.get("k") or 5))
        elif name == "memory_get":
            out = mcp.tool_get(actor, type=str(args.get("type", "")), id=int(args.get("id", 0)))
        elif name == "memory_weave" and actor.can(Scope.WRITE):
            out = mcp.tool_weave(actor, text=str(args.get("text", "")), speaker="assistant")
        else:
            return "This tool is not available to this agent."
    except Exception as exc:  # a failed tool call is an answer the model can read, not a proxy error
        log.info("memory tool %s failed: %s", name, type(exc).__name__)
        return f"Tool error: {exc}"[:500]
    return json.dumps(out, ensure_ascii=False, default=str)


# -- the two wire protocols ----------------------------------------------------------------------

def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content
                         if isinstance(p, dict) and p.get("type") in ("text", "input_text") and p.get("text"))
    return ""


class _Protocol:
    """What both wire protocols share: a ``messages`` list of {role, content}."""

    @staticmethod
    def messages(body: dict) -> list:
        msgs = body.get("messages")
        return msgs if isinstance(msgs, list) else []

    @classmethod
    def last_user_text(cls, body: dict) -> str:
        for m in reversed(cls.messages(body)):
            if isinstance(m, dict) and m.get("role") == "user":
                text = _text_of(m.get("content"))
                if text:
                    return text
        return ""

    @classmethod
    def first_user_text(cls, body: dict) -> str:
        for m in cls.messages(body):
            if isinstance(m, dict) and m.get("role") == "user":
                return _text_of(m.get("content"))
        return ""

    @classmethod
    def new_user_turn(cls, body: dict) -> str:
        msgs = cls.messages(body)
        last = msgs[-1] if msgs else None
        return _text_of(last.get("content")) if isinstance(last, dict) and last.get("role") == "user" else ""

    @staticmethod
    def _sse(data: dict, event: str = "") -> bytes:
        head = f"event: {event}\n" if event else ""
        return f"{head}data: {json.dumps(data)}\n\n".encode()


class OpenAI(_Protocol):
    name = "openai"
    path = "/chat/completions"
    stream_end = b"data: [DONE]"

    @classmethod
    def stream_error(cls, error: dict) -> bytes:
        """A data event carrying ``error``: what the OpenAI SDKs raise as an APIError mid-stream."""
        return cls._sse(error)

    @classmethod
    def inject(cls, body: dict, text: str, *, tools: dict) -> dict:
        msgs = list(cls.messages(body))
        first = msgs[0] if msgs and isinstance(msgs[0], dict) else None
        if first is not None and first.get("role") in ("system", "developer"):
            content = first.get("content")
            if isinstance(content, list):
                merged = [*content, {"type": "text", "text": text}]
            else:
                merged = f"{content}\n\n{text}" if content else text
            msgs[0] = {**first, "content": merged}
        else:
            msgs.insert(0, {"role": "system", "content": text})
        out = {**body, "messages": msgs}
        if tools:
            out["tools"] = [*body["tools"], *({"type": "function", "function": {
                "name": name, "description": desc, "parameters": schema}} for name, (desc, schema) in tools.items())]
        return out

    @staticmethod
    def answer_text(resp: dict) -> str:
        try:
            return _text_of(resp["choices"][0]["message"].get("content") or "")
        except (KeyError, IndexError, TypeError, AttributeError):
            return ""

    @staticmethod
    def stream_text(event: dict) -> str:
        try:
            return event["choices"][0]["delta"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            return ""

    @staticmethod
    def our_tool_calls(resp: dict) -> tuple[list[dict], bool]:
        """(our calls as {id, query, k}, whether the caller's own tools were called too)."""
        try:
            calls = resp["choices"][0]["message"].get("tool_calls") or []
        except (KeyError, IndexError, TypeError, AttributeError):
            return [], False
        ours, others = [], False
        for c in calls:
            fn = (c.get("function") or {}) if isinstance(c, dict) else {}
            if fn.get("name") in TOOLS:
                ours.append({"id": c.get("id"), "name": fn["name"], "input": _json_args(fn.get("arguments"))})
            else:
                others = True
        return ours, others

    @staticmethod
    def continue_with(body: dict, resp: dict, results: list[tuple[str, str]]) -> dict:
        msg = resp["choices"][0]["message"]
        extra = [msg] + [{"role": "tool", "tool_call_id": cid, "content": text} for cid, text in results]
        return {**body, "messages": [*body["messages"], *extra]}

    @staticmethod
    def strip_ours(resp: dict) -> dict:
        choice = resp["choices"][0]
        msg = choice["message"]
        left = [c for c in msg.get("tool_calls") or []
                if not (isinstance(c, dict) and (c.get("function") or {}).get("name") in TOOLS)]
        if left:
            msg["tool_calls"] = left
        else:  # an empty tool_calls is refused by the API when the caller replays this message
            msg.pop("tool_calls", None)
            if choice.get("finish_reason") == "tool_calls":
                choice["finish_reason"] = "stop"
        return resp


class Anthropic(_Protocol):
    name = "anthropic"
    path = "/messages"
    stream_end = b"event: message_stop"

    @classmethod
    def stream_error(cls, error: dict) -> bytes:
        """Anthropic's own ``error`` event (``{"type": "error", "error": {"type", "message"}}``),
        which its SDKs raise; our code and request id ride along in the same object."""
        inner = {"type": "api_error", **error["error"]}
        return cls._sse({**error, "type": "error", "error": inner}, event="error")

    @staticmethod
    def inject(body: dict, text: str, *, tools: dict) -> dict:
        system = body.get("system")
        if isinstance(system, list):
            merged = [*system, {"type": "text", "text": text}]
        else:
            merged = f"{system}\n\n{text}" if system else text
        out = {**body, "system": merged}
        if tools:
            out["tools"] = [*body["tools"], *({"name": name, "description": desc, "input_schema": schema}
                                              for name, (desc, schema) in tools.items())]
        return out

    @staticmethod
    def answer_text(resp: dict) -> str:
        return _text_of(resp.get("content")) if isinstance(resp, dict) else ""

    @staticmethod
    def stream_text(event: dict) -> str:
        delta = event.get("delta") if event.get("type") == "content_block_delta" else None
        return delta.get("text", "") if isinstance(delta, dict) and delta.get("type") == "text_delta" else ""

    @staticmethod
    def our_tool_calls(resp: dict) -> tuple[list[dict], bool]:
        ours, others = [], False
        for b in resp.get("content") or [] if isinstance(resp, dict) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                if b.get("name") in TOOLS:
                    raw = b.get("input")
                    ours.append({"id": b.get("id"), "name": b["name"], "input": {} if raw is None else raw})
                else:
                    others = True
        return ours, others

    @staticmethod
    def continue_with(body: dict, resp: dict, results: list[tuple[str, str]]) -> dict:
        extra = [{"role": "assistant", "content": resp["content"]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": text}
                                              for cid, text in results]}]
        return {**body, "messages": [*body["messages"], *extra]}

    @staticmethod
    def strip_ours(resp: dict) -> dict:
        resp["content"] = [b for b in resp.get("content") or []
                           if not (isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in TOOLS)]
        if resp.get("stop_reason") == "tool_use" and not any(
                isinstance(b, dict) and b.get("type") == "tool_use" for b in resp["content"]):
            resp["stop_reason"] = "end_turn"  # no call left for the caller to answer
        return resp


def _json_args(raw) -> dict | None:
    """The call's arguments as a dict; None when they are not a JSON object (models do emit broken
    JSON), which run_tool answers with an error instead of running the tool on empty arguments."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


PROTOCOLS = {"openai": OpenAI, "anthropic": Anthropic}
