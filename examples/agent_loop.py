"""A small agent that remembers across runs, two ways.

    # 1. with the SDK: the agent recalls and writes memory itself
    NYLON_URL=http://127.0.0.1:8000 NYLON_API_KEY=nyl_… python examples/agent_loop.py "My locker code is 4417."
    NYLON_URL=… NYLON_API_KEY=… python examples/agent_loop.py "What is my locker code?"

    # 2. through the memory proxy: the agent is a plain OpenAI client; Nylon injects what it
    #    remembers into the system prompt and writes the exchange back after the answer
    NYLON_URL=… NYLON_API_KEY=… OPENAI_API_KEY=sk-… python examples/agent_loop.py --proxy "…"

Each run is a new process: everything the agent knows from earlier runs comes from Nylon.
"""

from __future__ import annotations

import argparse
import os
import sys

from nylon_sdk import Client


def sdk_turn(nylon: Client, message: str, session: str) -> str:
    """Recall, answer, remember. The 'reasoning' is deliberately trivial: the memory is the point.

    The recall is the context's (what an agent is meant to read: of two memories in an open
    conflict the newer comes first, a correction above what it corrects). Only what the user says
    is written: a "From memory: …" reply restates a memory, and written back it ranked above the
    memory it came from (and nested "From memory: From memory: …" run after run)."""
    if message.rstrip().endswith("?"):
        ctx = nylon.context(message, k=5, reinforce=True)
        hits = ctx.recall if ctx is not None else nylon.resonate(message, k=5).hits
        said = [h for h in hits if not h.text.rstrip().endswith("?")]
        reply = f"From memory: {said[0].text}" if said else "I don't remember anything about that."
    else:
        reply = "Got it, I'll remember that."
    nylon.weave_session(session, [{"text": message, "speaker": "user"}])
    return reply


def proxy_turn(url: str, key: str, message: str, session: str) -> str:
    import openai  # only this mode needs it

    llm = openai.OpenAI(base_url=os.environ.get("NYLON_PROXY_URL", f"{url}/proxy/openai/v1"),
                        api_key=os.environ.get("OPENAI_API_KEY", "sk-unset"),
                        default_headers={"X-Nylon-Key": key, "X-Nylon-Session": session})
    out = llm.chat.completions.create(
        model=os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
        messages=[{"role": "system", "content": "You are a helpful assistant. Answer in one sentence."},
                  {"role": "user", "content": message}])
    return out.choices[0].message.content or ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("message")
    p.add_argument("--proxy", action="store_true", help="talk to an LLM through the Nylon memory proxy")
    p.add_argument("--session", default="agent-loop")
    args = p.parse_args(argv)
    url = os.environ.get("NYLON_URL", "http://127.0.0.1:8000").rstrip("/")
    key = os.environ.get("NYLON_API_KEY", "")
    if not key:
        print("set NYLON_API_KEY (an agent key, shown once by `make run`)", file=sys.stderr)
        return 2
    if args.proxy:
        reply = proxy_turn(url, key, args.message, args.session)
    else:
        with Client(url, key) as nylon:
            reply = sdk_turn(nylon, args.message, args.session)
    print(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
