"""Adversarial: provider text in reason, type and code fields (toollatch.dialects.words).

A canary is put where a provider names why a stream stopped or failed: Gemini
``finishReason`` and ``blockReason``, an OpenAI error ``type``/``code``, an Anthropic error
``type``, a Bedrock exception name, and the later tool name of a ``name_conflict``; and an
identifier-shaped word in an error ``type`` that a failed call also holds in its argument
text. Through the CLI (``toollatch assemble``, plain and ``--json``) and an upload (its
page, JSON twin, triage, exports), no 8-character piece of a canary may show; with
``--reveal`` / *Reveal text* the canary is shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toollatch.cli import main
from toollatch.dialects.words import is_word, shown_word
from toollatch.web import Settings

from .test_adversarial_leaks import Tally, _play, check_session_outputs, hits, sse
from .test_web_app import make_client

CANARY = "XzSECRETzq7Wz3Lp9"  # no word: mixed case and digits
CODE = "YcODEmq4Rx8Tn2vB"
WORDY = "zqcanaryxv7w3lp9"  # identifier-shaped: shown, unless a failed call's arguments hold it
CANARIES = (CANARY, CODE, WORDY)
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def _chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _chat_start(name: str = "lookup", args: str = "") -> dict[str, Any]:
    return _chat({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]})


def _gemini(reason: str) -> bytes:
    part = {"functionCall": {"name": "lookup", "args": {"q": "alpha"}}}
    return sse([{"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": reason, "index": 0}]}])


#: case: (dialect, capture)
CASES: dict[str, tuple[str, bytes]] = {
    "gemini_finish_reason": ("gemini", _gemini(CANARY)),
    "chat_error_type_and_code": ("openai-chat", sse([_chat_start(args='{"q":'), {"error": {"type": CANARY, "code": CODE, "message": "m"}}])),
    "chat_finish_reason": ("openai-chat", sse([_chat_start(args='{"q": 1'), _chat({}, CANARY), "[DONE]"])),
    "anthropic_error_type": ("anthropic", (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[]}}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}}\n\n'
        'event: error\ndata: {"type":"error","error":{"type":"' + CANARY + '","message":"m"}}\n\n').encode()),
    "word_in_failed_arguments": ("openai-chat", sse([_chat_start(args='{"q": "' + WORDY), {"error": {"type": WORDY, "message": "m"}}])),
    "responses_name_conflict": ("openai-responses", sse([
        {"type": "response.created", "response": {"id": "r"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_A", "name": "lookup", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"q":"alpha"}'},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "function_call", "id": "fc_1", "call_id": "call_A", "name": CANARY, "arguments": '{"q":"alpha"}'}},
        {"type": "response.completed", "response": {"id": "r"}}])),
    "name_conflict_undeclared": ("openai-chat", sse([_chat_start(), _chat({"tool_calls": [{"index": 0, "function": {"name": CANARY, "arguments": "{}"}}]}),
                                                     _chat({}, "tool_calls"), "[DONE]"])),
}


def test_the_word_rule() -> None:
    for word in ("stop", "tool_calls", "MAX_TOKENS", "ThrottlingException", "modelStreamErrorException", "server-error", "503", "eos"):
        assert is_word(word), word
    for text in (CANARY, "AKIAIOSFODNN7EXAMPLE", "could not parse {}", "a b", "x" * 42, "Stop Now", ""):
        assert not is_word(text), text
    assert shown_word(CANARY, "reason") == f"(hidden reason, {len(CANARY)} characters)"


def test_a_gemini_block_reason_follows_the_rule() -> None:
    from toollatch.dialects.gemini import GeminiAdapter
    from toollatch.wire.capture import ProviderEvent

    for reason, shown in ((CANARY, False), ("SAFETY", True)):
        (op,) = GeminiAdapter().feed(ProviderEvent(None, {"promptFeedback": {"blockReason": reason}}, 1, 0))
        assert op.detail is not None and (reason in op.detail) is shown and "prompt blocked" in op.detail
        assert shown or (op.message is not None and reason in op.message)  # kept for Reveal


def test_bedrock_exception_names_follow_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [{"messageStart": {"role": "assistant"}}, {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "lookup"}}}},
             {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q":'}}}}]
    for name, shown in ((CANARY + "Exception", False), ("throttlingException", True)):
        src = tmp_path / "b.jsonl"
        src.write_text("\n".join(json.dumps(x) for x in [*lines, {name: {"message": "m"}}]) + "\n")
        main(["assemble", "--dialect", "bedrock-converse", str(src)])
        out = capsys.readouterr().out
        assert (name in out) is shown and "stream_error" in out
        main(["assemble", "--reveal", "--dialect", "bedrock-converse", str(src)])
        assert name in capsys.readouterr().out


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_command_line_hides_reason_text_unless_revealed(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dialect, raw = CASES[case]
    src = tmp_path / "in.sse"
    src.write_bytes(raw)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    tally = Tally()
    for extra in ([], ["--json"], ["--history"]):
        main(["assemble", "--dialect", dialect, "--tools", str(tools), str(src), *extra])
        out, err = capsys.readouterr()
        if case != "chat_finish_reason" and (extra == ["--json"] or case != "gemini_finish_reason"):
            assert "characters" in out, (case, extra, out)  # the value is named by its length
        tally.check("cli", case, f"assemble {extra}", out + err, CANARIES)
    out_path = tmp_path / "out.sse"
    assert main(["export", "--redact", "-o", str(out_path), "--dialect", dialect, "--tools", str(tools), str(src)]) == 0
    capsys.readouterr()
    for suffix in ("", ".report.json", ".md"):
        tally.check("cli", case, f"export{suffix}", Path(f"{out_path}{suffix}").read_bytes(), CANARIES)
    assert tally.leaks == [], tally.leaks
    main(["assemble", "--reveal", "--json", "--dialect", dialect, "--tools", str(tools), str(src)])
    assert hits(capsys.readouterr().out, CANARIES), case  # asked for: shown


def test_an_upload_hides_reason_text_until_revealed(tmp_path: Path) -> None:
    tally = Tally()
    with make_client(Settings(data_dir=tmp_path / "data")) as client:
        for case, (_, raw) in sorted(CASES.items()):
            files = {"file": (f"{case}.sse", raw, "text/plain"), "tools": ("tools.json", json.dumps(TOOLS).encode(), "application/json")}
            response = client.post("/sessions/upload", files=files, data={"rate": "12"}, follow_redirects=False)
            assert response.status_code == 303, (case, response.text[:300])
            sid = response.headers["location"].rsplit("/", 1)[1]
            client.post(f"/sessions/{sid}/control", data={"action": "pause"})
            for i, frame in enumerate(_play(client, sid, case)):
                tally.check("upload", case, f"ws frame {i}", frame, CANARIES)
            check_session_outputs(tally, "upload", case, client.get, sid, live=False, secrets=CANARIES)
            if "name_conflict" in case:
                continue  # a call's own text: Reveal text shows the calls' fragments, not reasons
            assert client.post(f"/sessions/{sid}/reveal", data={"reveal": "on"}, follow_redirects=False).status_code in (200, 303)
            revealed = client.get(f"/sessions/{sid}/triage").text + json.dumps(client.get(f"/api/sessions/{sid}").json()["triage"])
            assert hits(revealed, CANARIES), case  # Reveal text shows the provider's words
    assert tally.leaks == [], tally.leaks
