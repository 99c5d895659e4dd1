"""Triage routes: the triage panel, *Reveal text*, exports and the compare page.

* ``GET /sessions/{id}/triage`` — the triage panel (HTML fragment; htmx polls it until
  the replay is over): diagnoses with token classes around each break, the naive-client
  lane, a truncation notice, the reveal control;
* ``POST /sessions/{id}/mask`` (``mask=on|off``) — *mask values* (:mod:`toollatch.web.mask_values`):
  committed argument values hidden too, on the cards, the JSON twin and the naive lane;
* ``POST /sessions/{id}/reveal`` (``reveal=on|off``) — per-session *Reveal text*, only for
  uploaded captures and capture files whose replay is over;
* ``GET /sessions/{id}/export.sse`` — the redacted reproducer
  (:func:`toollatch.redaction.export.redact_capture`: SSE stays SSE, JSON Lines and event streams
  become JSON Lines), ``export.report.json`` and ``export.md`` — the JSON report and
  Markdown summary of the whole source (no argument text). While a live stream is still
  arriving the reproducer is refused (``409``: it keeps the object keys and numbers of
  calls that have no verdict yet); the report and summary cover the bytes so far, marked
  partial, with no diagnosis for calls without a verdict;
* ``GET /compare?a=ID&b=ID`` and ``GET /api/compare?a=ID&b=ID`` — two sessions (or stored
  sources) side by side.

The ``triage`` member of ``GET /api/sessions/{id}`` comes from :func:`session_triage`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from toollatch.core import jsontext
from toollatch.wire.capture import CaptureError
from toollatch.redaction.export import redact_capture
from toollatch.core.model import StreamResult
from toollatch.redaction.report import json_report, markdown_summary

from toollatch.web.triage import compare as cmp
from toollatch.web.triage import diagnosis as triage
from toollatch.web.triage import open_streams
from toollatch.web.triage.ingest import load_stored
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.runner import SessionStore
from toollatch.web.replay.session import Session
from toollatch.web.settings import Settings
from toollatch.web.triage.sources import SourceError
from toollatch.web.live.reading import reproducer_without
from toollatch.web.store import Store, StoredSource

log = logging.getLogger("toollatch.web")

#: Sessions, and stored sources, offered in each of the compare page's dropdowns.
MAX_COMPARE_CHOICES = 50
#: The note a report of a live stream still arriving carries.
PARTIAL = (
    "The stream was still arriving: this covers the bytes received so far, as if cut off here. "
    "Calls without a verdict yet are reported cut off, with no diagnosis."
)


def _stem(name: str) -> str:
    """A safe file name stem for downloads."""
    base = name.rsplit("/", 1)[-1].replace("#", "-")
    base = re.sub(r"\.(sse|jsonl|ndjson|txt|har|bin|json)$", "", base)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base)[:80] or "capture"


def _download(body: bytes | str, filename: str, media_type: str) -> Response:
    return Response(body, media_type=media_type, headers={"Content-Disposition": f'attachment; filename="{filename}"'})


def _stored_meta(store: Store, session: Session) -> dict[str, Any] | None:
    sid = getattr(session.source, "stored_id", None)
    stored = store.get(sid, with_body=False) if sid else None
    return stored.meta if stored else None


async def session_triage(session: Session, store: Store) -> dict[str, Any]:
    """The ``triage`` member of a session's JSON twin."""
    return await triage.view(session, await store.off_loop(_stored_meta, store, session))


def build_router(settings: Settings, sessions: SessionStore, store: Store, renderer: Renderer) -> APIRouter:
    """The routes listed in the module docstring."""
    router = APIRouter()
    renderer.env.globals.update(
        other_sessions=lambda s: [o for o in sessions.all() if o.id != s.id][:50],
        strategy_text=lambda name: triage.STRATEGIES.get(name, name),
    )

    def error_page(title: str, message: str, status: int) -> HTMLResponse:
        return HTMLResponse(renderer.page("error.html", title=title, message=message), status_code=status)

    def missing(sid: str) -> HTMLResponse:
        return error_page("Session not found", f"There is no session {sid!r}; it may have expired.", 404)

    @router.get("/sessions/{sid}/triage", response_class=HTMLResponse)
    async def panel(sid: str) -> HTMLResponse:
        session = sessions.get(sid)
        if session is None:
            return missing(sid)
        data = await session_triage(session, store)
        return HTMLResponse(renderer.page("partials/_triage.html", s=session, t=data))

    @router.post("/sessions/{sid}/reveal")
    async def reveal(sid: str, request: Request) -> Response:
        session = sessions.get(sid)
        if session is None:
            return missing(sid)
        async with request.form(max_files=0, max_fields=2) as form:
            wanted = form.get("reveal") == "on"
        if wanted and not triage.reveal_allowed(session):
            return error_page(
                "Cannot reveal text",
                "Text is revealed only for uploaded captures and capture files, after the replay is over.",
                409,
            )
        triage.set_reveal(session, wanted)
        if request.headers.get("hx-request") == "true":
            data = await session_triage(session, store)
            return HTMLResponse(renderer.page("partials/_triage.html", s=session, t=data))
        return RedirectResponse(f"/sessions/{sid}#triage", status_code=303)

    @router.post("/sessions/{sid}/mask")
    async def mask_values(sid: str, request: Request) -> Response:
        session = sessions.get(sid)
        if session is None:
            return missing(sid)
        async with request.form(max_files=0, max_fields=2) as form:
            session.mask_values = form.get("mask") != "off"
        session.pending.cards.update(session.cards)  # every card drawn again, for every viewer
        sessions.flush(session)
        if request.headers.get("hx-request") == "true":
            return Response(status_code=204)
        return RedirectResponse(f"/sessions/{sid}", status_code=303)

    @router.get("/sessions/{sid}/export.sse")
    async def export_reproducer(sid: str) -> Response:
        session = sessions.get(sid)
        if session is None:
            return missing(sid)
        if open_streams.still_streaming(session):
            return error_page("Cannot export yet", open_streams.STILL_STREAMING, 409)
        source = session.source
        data = source.stream_data  # a live source joins and scrubs its chunks for each read
        if not data.strip():  # e.g. a non-streaming body that could not be read
            why = f" {session.error}" if session.error else ""
            return error_page("Cannot export", f"{source.name}: no provider stream was assembled, so there is nothing to reproduce.{why}", 422)
        secrets = list(getattr(source, "secrets", ()))  # a live stream's forwarded credentials
        make = reproducer_without if secrets else redact_capture
        try:
            body = await asyncio.to_thread(
                partial(make, registry=session.pipeline.registry, config=session.pipeline.config),
                data,
                source.name,
                session.pipeline.dialect,
                *([secrets] if secrets else []),
            )
        except (CaptureError, ValueError) as exc:
            return error_page("Cannot export", f"{source.name} cannot be redacted: {exc}", 422)
        if secrets and not body:
            return error_page("Cannot export", f"{source.name}: no reproducer without the forwarded credential it echoes can be made.", 422)
        body = session.scrubbed(body)
        if body.lstrip()[:1] == b"{":
            return _download(body, f"{_stem(source.name)}.redacted.jsonl", "application/x-ndjson")
        return _download(body, f"{_stem(source.name)}.redacted.sse", "text/event-stream")

    async def results_of(session: Session) -> list[StreamResult] | HTMLResponse:
        """The whole source assembled; for a live stream still arriving, the bytes so far,
        without a diagnosis (nor, with ``ui_forward_partial_args: false``, byte and fragment
        counts) for the calls that have no verdict yet."""
        try:
            results = await triage.full_results(session)
        except CaptureError as exc:
            return error_page("Cannot export", str(exc), 422)
        return open_streams.as_shown(session, results)

    async def shown(sid: str) -> tuple[Session, list[StreamResult]] | Response:
        """The session and its results as :func:`results_of` gives them, or the page to answer."""
        session = sessions.get(sid)
        if session is None:
            return missing(sid)
        results = await results_of(session)
        return results if isinstance(results, HTMLResponse) else (session, results)

    @router.get("/sessions/{sid}/export.report.json")
    async def export_report(sid: str) -> Response:
        found = await shown(sid)
        if isinstance(found, Response):
            return found
        session, results = found
        doc = session.scrubbed(json_report(results, session.source.name))
        if open_streams.still_streaming(session):
            doc["partial"] = PARTIAL
        return _download(jsontext.dumps(doc, indent=2) + "\n", f"{_stem(session.source.name)}.report.json", "application/json")

    @router.get("/sessions/{sid}/export.md")
    async def export_markdown(sid: str) -> Response:
        found = await shown(sid)
        if isinstance(found, Response):
            return found
        session, results = found
        text = session.scrubbed(markdown_summary(results, session.source.name))
        if open_streams.still_streaming(session):
            text = f"> {PARTIAL}\n\n{text}"
        return _download(text, f"{_stem(session.source.name)}.md", "text/markdown; charset=utf-8")

    async def side(ref: str) -> tuple[dict[str, Any], list[StreamResult]]:
        """A session id or stored source id → (description, full results); SourceError if unknown."""
        session = sessions.get(ref)
        if session is not None:
            try:
                results = open_streams.as_shown(session, await triage.full_results(session))
            except CaptureError as exc:
                raise SourceError(str(exc)) from None
            desc = {"id": ref, "kind": "session", "title": session.source.title, "url": f"/sessions/{ref}", "dialect": session.pipeline.dialect}
            return desc, results
        stored = await store.off_loop(store.get, ref) if ref else None
        if stored is None:
            raise SourceError(f"There is no session or stored source {ref!r}.", 404)
        source = await asyncio.to_thread(load_stored, stored, settings.config)
        try:
            results = await asyncio.to_thread(triage.assemble_source, source, settings.config)
        except CaptureError as exc:
            raise SourceError(str(exc)) from None
        desc = {"id": ref, "kind": "stored", "title": source.title, "url": f"/sources/{ref}", "dialect": source.dialect}
        return desc, results

    async def comparison(a: str, b: str) -> dict[str, Any]:
        da, ra = await side(a)
        db, rb = await side(b)
        pairs = cmp.compare(ra, rb)
        return {"a": da, "b": db, "summary": cmp.summary(pairs), "streams": pairs}

    def known(ref: str) -> bool:  # blocking (the store): off the event loop
        return bool(ref) and (sessions.get(ref) is not None or store.get(ref, with_body=False) is not None)

    def choices(a: str, b: str) -> tuple[list[str], list[StoredSource]]:
        """The unknown refs among ``a`` and ``b`` (as messages), and the stored sources the
        dropdowns offer. Blocking (the store): off the event loop."""
        unknown = [f"{side.upper()}: there is no session or stored source {ref!r}." for side, ref in (("a", a), ("b", b)) if ref and not known(ref)]
        # The dropdowns list only real sessions and stored sources: an unknown id is never offered as one.
        stored = list(reversed(store.list()))[:MAX_COMPARE_CHOICES]
        listed = {o.id for o in stored}
        stored += [src for ref in (a, b) if ref and ref not in listed and sessions.get(ref) is None and (src := store.get(ref, with_body=False))]
        return unknown, stored

    @router.get("/compare", response_class=HTMLResponse)
    async def compare_page(request: Request) -> HTMLResponse:
        a, b = request.query_params.get("a", "").strip()[:100], request.query_params.get("b", "").strip()[:100]
        unknown, stored = await store.off_loop(choices, a, b)
        context: dict[str, Any] = {"a": a, "b": b, "sessions": sessions.all()[:MAX_COMPARE_CHOICES], "stored": stored, "doc": None, "error": None}
        status = 200
        if unknown:
            context["error"], status = " ".join(unknown) + " Choose from the lists below.", 404
        elif a and b:
            try:
                context["doc"] = await comparison(a, b)
            except SourceError as exc:
                context["error"], status = str(exc), exc.status
        elif a or b:
            context["error"], status = "Choose two sessions (or stored sources) to compare.", 400
        return HTMLResponse(renderer.page("compare.html", **context), status_code=status)

    @router.get("/api/compare")
    async def compare_json(a: str = "", b: str = "") -> JSONResponse:
        if not a or not b:
            return JSONResponse({"error": "give two session (or stored source) ids as a and b"}, status_code=400)
        try:
            doc = await comparison(a, b)
        except SourceError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        return JSONResponse({**doc, "streams": [p.to_json() for p in doc["streams"]]})

    return router
