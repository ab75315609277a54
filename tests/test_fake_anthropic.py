"""The fake Messages API speaks the protocol the SDK and Claude Code expect."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import anthropic
import pytest

from tests.fakes.anthropic_server import (
    error_reply,
    last_user_prompt,
    tool_use_reply,
    trailing_tool_results,
)
from tests.fakes.fixtures import enqueue_replies, requests_of, spawn_fake_anthropic


def sdk(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="sk-ant-fake", base_url=server.base_url, max_retries=0)


def raw(method: str, url: str, body: dict | None = None) -> tuple[int, bytes, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_streaming_events_in_documented_order(fake_anthropic) -> None:
    fake_anthropic.enqueue(tool_use_reply("Bash", {"command": "echo hi", "description": "say hi"}, text="Running it."))
    status, body, headers = raw(
        "POST", f"{fake_anthropic.base_url}/v1/messages?beta=true",
        {"model": "claude-x", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "run echo hi"}]},
    )  # fmt: skip
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    events = [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")]
    names = [line[7:] for line in body.decode().splitlines() if line.startswith("event: ")]
    assert names == [e["type"] for e in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["text", "tool_use"]
    partial = "".join(e["delta"]["partial_json"] for e in events if e.get("delta", {}).get("type") == "input_json_delta")
    assert json.loads(partial) == {"command": "echo hi", "description": "say hi"}
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0


def test_sdk_streaming_reassembles_the_message(fake_anthropic) -> None:
    fake_anthropic.enqueue("A fairly long answer that is split into several text deltas by the fake.")
    with sdk(fake_anthropic).messages.stream(
        model="claude-x", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "A fairly long answer that is split into several text deltas by the fake."
    assert final.stop_reason == "end_turn" and final.usage.input_tokens > 0


def test_other_endpoints_and_errors(fake_anthropic) -> None:
    assert raw("HEAD", f"{fake_anthropic.base_url}/")[0] == 200
    status, body, _ = raw("POST", f"{fake_anthropic.base_url}/v1/messages/count_tokens",
                          {"model": "m", "messages": [{"role": "user", "content": "hello there"}]})  # fmt: skip
    assert status == 200 and json.loads(body)["input_tokens"] > 0
    models = sdk(fake_anthropic).models.list()
    assert "claude-haiku-4-5" in [m.id for m in models.data]
    fake_anthropic.enqueue(error_reply(429, retry_after=3))
    status, body, headers = raw("POST", f"{fake_anthropic.base_url}/v1/messages", {"model": "m", "max_tokens": 5, "messages": []})
    assert status == 429 and headers["retry-after"] == "3"
    assert json.loads(body)["error"]["type"] == "rate_limit_error"
    assert raw("POST", f"{fake_anthropic.base_url}/v1/messages", {"no": "messages"})[0] == 400
    assert raw("GET", f"{fake_anthropic.base_url}/v2/nothing")[0] == 404


def test_responder_sees_the_request_and_helpers_read_it(fake_anthropic) -> None:
    seen = []

    def respond(request):
        seen.append((last_user_prompt(request), trailing_tool_results(request)))
        return None if trailing_tool_results(request) else tool_use_reply("Read", {"file_path": "a.py"})

    fake_anthropic.responder = respond
    fake_anthropic.default = "OK"
    client = sdk(fake_anthropic)
    first = client.messages.create(model="m", max_tokens=10, messages=[
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                                     {"type": "text", "text": "read a.py"}]}])  # fmt: skip
    assert first.content[0].type == "tool_use"
    second = client.messages.create(model="m", max_tokens=10, messages=[
        {"role": "user", "content": "read a.py"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": first.content[0].id, "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": "x"}]},
    ])  # fmt: skip
    assert second.content[0].text == "OK"
    assert seen == [("read a.py", 0), ("read a.py", 1)]


def test_as_a_separate_process_with_a_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [{"text": "first"}, {"error": 529}], "default": {"json": {"d": 1}}}))
    log = tmp_path / "requests.jsonl"
    with spawn_fake_anthropic(tmp_path, script=script, log_file=log) as (base_url, process):
        assert base_url.startswith("http://127.0.0.1:")
        client = anthropic.Anthropic(api_key="k", base_url=base_url, max_retries=0)
        ask = lambda: client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}])  # noqa: E731
        assert ask().content[0].text == "first"
        with pytest.raises(anthropic.APIStatusError) as caught:
            ask()
        assert caught.value.status_code == 529
        assert json.loads(ask().content[0].text) == {"d": 1}
        enqueue_replies(base_url, {"tool_use": {"name": "Bash", "input": {"command": "ls"}}})
        assert ask().content[0].name == "Bash"
        logged = requests_of(base_url)
        assert [r["path"] for r in logged] == ["/v1/messages"] * 4
    assert len(log.read_text().splitlines()) == 4
    assert process.returncode is not None


def test_python_script_responder(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        "from tests.fakes.anthropic_server import last_user_prompt\n"
        "def respond(request):\n"
        "    return {'text': 'echo: ' + last_user_prompt(request)}\n"
    )
    with spawn_fake_anthropic(tmp_path, script=script) as (base_url, _):
        client = anthropic.Anthropic(api_key="k", base_url=base_url, max_retries=0)
        reply = client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "ping"}])
        assert reply.content[0].text == "echo: ping"
