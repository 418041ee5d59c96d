"""Memory-tool rounds on odd answer shapes: stripped calls leave a replayable message, and
arguments that are not a JSON object are reported to the model instead of run as empty."""

from proxy.bundle import Anthropic, OpenAI, run_tool


def _openai_answer(calls):
    return {"choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": calls}}]}


def _call(cid, name, args='{"query": "x"}'):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def test_openai_strip_leaves_no_empty_tool_calls_and_stops():
    out = OpenAI.strip_ours(_openai_answer([_call("c1", "memory_resonate")]))
    choice = out["choices"][0]
    assert "tool_calls" not in choice["message"]  # [] is refused by the API when replayed
    assert choice["finish_reason"] == "stop"


def test_openai_strip_keeps_callers_calls_and_reason():
    out = OpenAI.strip_ours(_openai_answer([_call("c1", "memory_resonate"), _call("c2", "get_weather")]))
    choice = out["choices"][0]
    assert [c["id"] for c in choice["message"]["tool_calls"]] == ["c2"]
    assert choice["finish_reason"] == "tool_calls"


def test_anthropic_strip_ends_turn_when_no_call_is_left():
    resp = {"content": [{"type": "text", "text": "hi"},
                        {"type": "tool_use", "id": "t1", "name": "memory_get", "input": {}}],
            "stop_reason": "tool_use"}
    out = Anthropic.strip_ours(resp)
    assert out["content"] == [{"type": "text", "text": "hi"}] and out["stop_reason"] == "end_turn"
    resp = {"content": [{"type": "tool_use", "id": "t1", "name": "memory_get", "input": {}},
                        {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {}}],
            "stop_reason": "tool_use"}
    assert Anthropic.strip_ours(resp)["stop_reason"] == "tool_use"


def test_invalid_json_arguments_are_an_error_for_the_model():
    ours, others = OpenAI.our_tool_calls(_openai_answer([_call("c1", "memory_resonate", '{"query": "x"'),
                                                         _call("c2", "memory_get", '[1, 2]')]))
    assert not others and [c["input"] for c in ours] == [None, None]
    text = run_tool(actor=None, name="memory_resonate", args=ours[0]["input"])
    assert text.startswith("Tool error") and "JSON" in text


def test_valid_and_missing_arguments_still_parse():
    ours, _ = OpenAI.our_tool_calls(_openai_answer([_call("c1", "memory_resonate"),
                                                    _call("c2", "memory_resonate", None)]))
    assert [c["input"] for c in ours] == [{"query": "x"}, {}]
    ours, _ = Anthropic.our_tool_calls({"content": [{"type": "tool_use", "id": "t", "name": "memory_get",
                                                     "input": "oops"}]})
    assert run_tool(actor=None, name="memory_get", args=ours[0]["input"]).startswith("Tool error")
