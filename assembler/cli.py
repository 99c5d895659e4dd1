"""The ``toollatch`` command: ``assemble`` a capture, ``serve`` the dashboard, or run the ``mock`` provider.

``toollatch assemble PATH|- [--dialect NAME] [--tools FILE] [--config FILE] [--json] [--reveal] [--history]``
(``-``: standard input, read as it arrives) exits 0 when the input was read (whatever the verdicts) and 2 with a one-line error on
stderr when it cannot be read or its dialect is not recognised.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import Any

from toollatch.core import jsontext
from toollatch.wire.capture import CaptureError
from toollatch.core.config import AssembleConfig, ConfigError
from toollatch.conformance import add_conformance
from toollatch.dialects import ADAPTERS
from toollatch.core.history import build_history
from toollatch.wire.har import is_har
from toollatch.wire.inputs import SNIFF, assemble_path, assemble_stream
from toollatch.core.model import StreamResult
from toollatch.core.registry import RegistryError, ToolRegistry
from toollatch.serve_config import check_upstreams, parse_pairs, read_serve_config


def _fail(message: str) -> int:
    print(f"toollatch: error: {message}", file=sys.stderr)
    return 2


def _load_config(path: str | None) -> AssembleConfig:
    """The ``agent_stream_assemble`` section of ``path``: a file written for ``serve`` (with
    ``upstreams``, ``api_key_env``, ``mock``) is read alike, its serve sections checked too."""
    return read_serve_config(path)[0]


def run_assemble(args: argparse.Namespace) -> int:
    try:
        config = _load_config(args.config)
        registry = ToolRegistry.load(Path(args.tools)) if args.tools else None
        path = Path(args.path)
        options: dict[str, Any] = {"dialect": args.dialect, "config": config, "registry": registry, "reveal": args.reveal}
        if args.path == "-":  # standard input, as it arrives: curl -N ... | toollatch assemble -
            sourced = assemble_stream(sys.stdin.buffer, "<stdin>", **options)
        else:
            sourced = assemble_path(path, **options)
    except (CaptureError, ConfigError, RegistryError) as exc:
        return _fail(str(exc))
    results = [r for _, r in sourced]
    if args.json:
        streams = [{"source": name, **r.to_json(), "history": build_history(r)} for name, r in sourced]
        doc: dict[str, Any] = {"source": "<stdin>" if args.path == "-" else str(path), "streams": streams}
        if args.path != "-":
            doc["timing"] = _timings(path, config)
        _write(jsontext.dumps(doc, indent=1, allow_nan=False) + "\n")
    elif args.history:
        histories = [build_history(r) for r in results]
        _write(jsontext.dumps(histories if len(histories) != 1 else histories[0], indent=1) + "\n")
    else:
        _write(format_table(results))
    return 0


def _timings(path: Path, config: AssembleConfig) -> list[dict[str, Any]]:
    """The timing lens of each streaming entry of a HAR file (:mod:`toollatch.observe.timing`;
    ``{"recorded": false}`` for an entry without ``_chunks``), or of a plain capture
    (which holds no times: one ``{"recorded": false}``)."""
    from toollatch.wire.har import read_har
    from toollatch.observe.timing import timed_pass, timing_lens

    try:
        data = path.read_bytes()
    except OSError:
        return []
    if not is_har(data[:SNIFF]):
        return [timing_lens(None, why="a plain capture holds no chunk arrival times: none are invented")]
    out = []
    for entry in read_har(data, str(path)):
        try:
            registry = ToolRegistry.from_tools(entry.tools).ensure_usable() if entry.tools else None
        except RegistryError:
            registry = None  # assembling the file already said why
        found = timed_pass(entry.times.split(entry.body), entry.name, config=config, registry=registry) if entry.times is not None else None
        doc = timing_lens(entry.times, found, idle_timeout_s=config.assemble_idle_timeout_s, why="this HAR entry has no _chunks timing")
        out.append({"source": entry.name, **doc})
    return out


def _write(text: str) -> None:
    """Write UTF-8; a lone surrogate from provider JSON becomes its ``\\udXXX`` escape,
    which inside a JSON string is exactly the JSON escape, so the output stays valid."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "backslashreplace"))
    sys.stdout.buffer.flush()


def run_export(args: argparse.Namespace) -> int:
    from toollatch.redaction.export import redact_capture
    from toollatch.redaction.report import json_report, markdown_summary

    source = Path(args.path)
    out = Path(args.output)
    try:
        data = source.read_bytes()
    except OSError as exc:
        return _fail(f"{source}: cannot read: {exc.strerror}")
    if is_har(data[:SNIFF]):
        return _fail(f"{source}: a HAR export holds several streams; assemble it, or export one entry's response body")
    try:
        config = _load_config(args.config)
        registry = ToolRegistry.load(Path(args.tools)) if args.tools else None
        # named by the file's name alone: the report and the summary go to public issues, and a
        # stream that ended at an unreadable event quotes its input's name (no local folders)
        redacted = redact_capture(data, source.name, args.dialect, registry=registry, config=config)
        results = [r for _, r in assemble_stream(io.BytesIO(data), source.name, dialect=args.dialect, config=config, registry=registry)]
    except (CaptureError, ConfigError, RegistryError, ValueError) as exc:  # ValueError: an event that cannot be redacted
        return _fail(str(exc))
    report = out.with_name(out.name + ".report.json")
    summary = out.with_name(out.name + ".md")
    try:
        out.write_bytes(redacted)
        report.write_text(jsontext.dumps(json_report(results, source.name), indent=1) + "\n", encoding="utf-8")
        summary.write_text(markdown_summary(results, source.name), encoding="utf-8")
    except OSError as exc:
        return _fail(f"{exc.filename}: cannot write: {exc.strerror}")
    _write(f"wrote {out} ({len(redacted)} bytes), {report.name}, {summary.name}\n")
    return 0


def format_table(results: list[StreamResult]) -> str:
    """A readable summary: one block per stream, one row per call (no argument text)."""
    lines: list[str] = []
    for i, stream in enumerate(results):
        quirks = ", ".join(f"{k}×{v}" for k, v in stream.quirks.items())
        end = f"{stream.end} ({stream.end_detail})" if stream.end in ("error", "truncated") and stream.end_detail else stream.end
        lines.append(f"stream {i}  {stream.dialect}  end={end}" + (f"  quirks: {quirks}" if quirks else ""))
        if not stream.calls:
            lines.append("  (no tool calls)")
        for call in stream.calls:
            verdict = call.state.value.upper() + (f"  {call.reason}" if call.reason else "")
            lines.append(
                f"  {call.name or '?':<24} {call.call_id or '?':<36} {call.bytes:>8} B {call.fragments:>5} frag"
                f"  {call.executor:<6}  {verdict}"
            )
        for result in stream.results:
            lines.append(f"  result -> {result.tool_call_id}: is_error={str(result.is_error).lower()} {result.content}")
    return "\n".join(lines) + "\n"


def _default_captures() -> Path | None:
    shared = Path(os.environ.get("TOOLLATCH_SHARED", "../shared"))
    captures = shared / "captures"
    return captures if captures.is_dir() else None


def run_serve(args: argparse.Namespace) -> int:
    try:
        config, extra = read_serve_config(args.config)
        upstreams = {**extra.get("upstreams", {}), **parse_pairs(args.upstream, "--upstream")}
        key_env = {**extra.get("api_key_env", {}), **parse_pairs(args.api_key_env, "--api-key-env")}
        check_upstreams(upstreams, key_env, args.config if extra else None)
    except ConfigError as exc:
        return _fail(str(exc))
    from toollatch.web.app import run  # the web layer is imported only for this command
    from toollatch.web.banner import port_problem, serve_banner
    from toollatch.web.settings import Settings

    captures = Path(args.captures) if args.captures else _default_captures()
    if captures is not None and not captures.is_dir():
        return _fail(f"--captures {captures}: not a directory")
    options: dict[str, Any] = {"data_dir": Path(args.data_dir)} if args.data_dir else {}
    mock = extra.get("mock", {})
    delay = args.mock_delay if args.mock_delay is not None else mock.get("delay")
    if delay is not None:
        options["mock_delay"] = float(delay)
    if mock.get("rechunk") is not None:
        options["mock_rechunk"] = mock["rechunk"]
    settings = Settings(captures_dir=captures, config=config, host=args.host, port=args.port, upstreams=upstreams, api_key_env=key_env, **options)
    problem = port_problem(args.host, args.port)
    if problem is not None:
        return _fail(f"{problem}; pick another with --port N")
    _write(serve_banner(settings))
    run(settings)
    return 0


def run_mock(args: argparse.Namespace) -> int:
    """``toollatch mock``: the built-in mock provider alone (no dashboard, no key, no network)."""
    captures = Path(args.captures) if args.captures else _default_captures()
    if captures is not None and not captures.is_dir():
        return _fail(f"--captures {captures}: not a directory")
    delay = args.delay if args.delay is not None else float(os.environ.get("TOOLLATCH_MOCK_DELAY") or 0.02)
    import uvicorn  # the web layer is imported only for this command

    from toollatch.web.banner import base_url, port_problem
    from toollatch.web.live.mock import MockProvider, create_mock_app

    problem = port_problem(args.host, args.port)
    if problem is not None:
        return _fail(f"{problem}; pick another with --port N")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"toollatch: warning: binding {args.host}: the mock is meant for loopback only", file=sys.stderr)
    hosts = ["localhost", "127.0.0.1", "::1", "[::1]", args.host]
    provider = MockProvider(captures, delay, args.rechunk)
    for recording in args.recording or []:
        try:
            names = provider.add_recording(Path(recording))
        except OSError as exc:
            return _fail(f"--recording {recording}: cannot read: {exc.strerror}")
        except CaptureError as exc:
            return _fail(f"--recording {recording}: {exc}")
        print(f"toollatch mock: serving {', '.join(names)} at its recorded pace (and for any model that is no scenario)", file=sys.stderr)
    app = create_mock_app(provider, hosts)
    _write(f"toollatch mock: {base_url(args.host, args.port)}/ (GET / lists its endpoints)\n")
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def port_number(text: str) -> int:
    """An ``argparse`` type: a TCP port, 1-65535; anything else is refused by the parser."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1-65535)")
    return port


#: The input formats every reading command takes, detected from the first bytes.
INPUT_FORMATS = (
    "raw SSE as curl -N prints it (with or without the curl -i head), JSON Lines of provider events, "
    "a JSON array of provider events, a HAR 1.2 export (each streaming entry on its own), "
    "or a binary AWS event stream (Bedrock); "
    "any of them gzip-compressed"
)
_DIALECT_HELP = "skip detection (default: detected from the first events)"
_CONFIG_HELP = "YAML file with an agent_stream_assemble section (default: the built-in limits, docs/dashboard.md)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toollatch", description="Strict streaming tool-call assembler.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    asm = sub.add_parser(
        "assemble",
        help="assemble the tool calls of a recorded stream",
        description=f"Assemble the tool calls of a recorded stream. Input: {INPUT_FORMATS}. "
        "Output (default): one table row per call, no argument text. Exits 0 when the input was read, 2 when it cannot be.",
        epilog="Example: curl -N https://... | toollatch assemble -",
    )
    asm.add_argument("path", help="capture file, or - to read standard input as it arrives")
    asm.add_argument("--dialect", choices=sorted(ADAPTERS), help=_DIALECT_HELP)
    asm.add_argument("--tools", help="JSON file with the request's tools array, OpenAI or Anthropic shape (default: none; names and schemas are not checked, a HAR entry uses its request's tools)")
    asm.add_argument("--config", help=_CONFIG_HELP)
    asm.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    asm.add_argument("--reveal", action="store_true", help="allow reasons to quote argument text and add a provider's error message (default: never; the dashboard's Reveal text shows a failed call's text)")
    asm.add_argument(
        "--history",
        action="store_true",
        help="print the finalized assistant message and error results in the dialect's shape",
    )
    asm.set_defaults(func=run_assemble)

    exp = sub.add_parser(
        "export",
        help="write a redacted reproducer, a JSON report and a Markdown summary",
        description="Write a redacted reproducer of one stream, with a JSON report and a Markdown summary beside it. "
        "Input: raw SSE as curl -N prints it (with or without the curl -i head), JSON Lines of provider events, "
        "or a binary AWS event stream (Bedrock); not a HAR export (export one entry's body) and not gzip-compressed.",
    )
    exp.add_argument("--redact", action="store_true", help="replace argument and text strings (the default, and the only mode; accepted for scripts that pass it)")
    exp.add_argument("path", help="capture file")
    exp.add_argument("-o", "--output", required=True, help="reproducer to write (OUT.report.json and OUT.md beside it)")
    exp.add_argument(
        "--tools",
        help="JSON file with the request's tools array, as for assemble (default: none): a call that fails its schema "
        "did not commit, so every scalar of its text is masked",
    )
    exp.add_argument("--config", help=_CONFIG_HELP)
    exp.add_argument("--dialect", choices=sorted(ADAPTERS), help=_DIALECT_HELP)
    exp.set_defaults(func=run_export)

    srv = sub.add_parser(
        "serve",
        help="run the dashboard",
        description=f"Run the dashboard: demos, captures, uploads ({INPUT_FORMATS}), the recording proxy at /proxy/NAME/, "
        "and live sessions mirrored from toollatch.latch(..., dashboard=URL).",
    )
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)")
    srv.add_argument("--port", type=port_number, default=8765, help="port (default: 8765)")
    srv.add_argument("--captures", help="folder of captures to list (default: $TOOLLATCH_SHARED/captures if present)")
    srv.add_argument("--config", help=_CONFIG_HELP)
    srv.add_argument("--data-dir", help="where stored sources live (default: $TOOLLATCH_DATA_DIR or the user data dir)")
    srv.add_argument("--upstream", action="append", metavar="NAME=URL", help="a proxy upstream: /proxy/NAME/... goes to URL/... (repeatable; default: openai and anthropic go to the built-in mock)")
    srv.add_argument("--api-key-env", action="append", metavar="NAME=VAR", help="direct connect reads upstream NAME's API key from $VAR (default: none)")
    srv.add_argument("--mock-delay", type=float, help="seconds between the built-in mock's writes (default $TOOLLATCH_MOCK_DELAY or 0.02)")
    srv.set_defaults(func=run_serve)

    mck = sub.add_parser(
        "mock",
        help="run the built-in mock provider alone (OpenAI Chat, Responses, Anthropic)",
        description="Run the built-in mock provider alone: /v1/chat/completions, /v1/responses, /v1/messages; "
        "the request's model names a demo scenario or a capture (GET /api/scenarios). No key, no network.",
    )
    mck.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    mck.add_argument("--port", type=port_number, default=8766, help="port (default: 8766)")
    mck.add_argument("--captures", help="folder of captures it also serves (default: $TOOLLATCH_SHARED/captures if present)")
    mck.add_argument("--delay", type=float, help="seconds between writes (default $TOOLLATCH_MOCK_DELAY or 0.02)")
    mck.add_argument("--recording", action="append", metavar="FILE", help="serve a recording (a .har download with chunk times: at its recorded pace; a plain capture: at --delay) by its name, and for any model that is no scenario (repeatable; default: none)")
    mck.add_argument("--rechunk", type=int, metavar="SEED", help="re-chunk bodies at random byte positions (seeded; default: one provider event a write)")
    mck.set_defaults(func=run_mock)
    add_conformance(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toollatch")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
