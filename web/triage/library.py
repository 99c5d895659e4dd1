"""Stored sources: the upload form's reader, permalinks, listing with search, delete.

Routes:

* ``GET /sources/{id}`` — the permalink of a stored source: starts a replay session for
  it and redirects to the session page (``303``);
* ``POST /sources/{id}/delete`` — removes it, back to the index (``303``);
* ``GET /api/stored`` (``?tool=&verdict=&quirk=``) — the listing's JSON twin;
  ``GET /api/stored/{id}`` one source's metadata (never its body), ``DELETE`` removes it.

The index lists stored sources through the template global ``stored_listing(query)``, which
the index route awaits: every route here reaches the SQLite store in the store's own threads
(:meth:`~toollatch.web.store.Store.off_loop`), never on the event loop, since a query may
wait for the store's lock while a worker thread saves a body of 50 MiB.
:func:`receive_upload` reads the upload form (a file *or* pasted text, an optional tools
file) for ``POST /sessions/upload`` in :mod:`toollatch.web.pages.routes`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from toollatch.wire.urls import scrub_url

from toollatch.web.replay.controls import BadValue, Pace, start_pace
from toollatch.web.triage.ingest import FORMAT_LABELS, SNIFF, detect_format, ingest, load_stored, read_upload
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.runner import SessionStore
from toollatch.web.settings import Settings
from toollatch.web.triage.sources import LoadedSource, SourceError
from toollatch.web.store import Store, StoredSource

log = logging.getLogger("toollatch.web")

#: Upload form fields other than the files.
_MAX_FORM_FIELDS = 8
#: Stored sources listed on the index at most.
MAX_LISTED = 200


def _query(query: Mapping[str, Any] | None) -> dict[str, str]:
    q = query or {}
    return {k: str(q.get(k) or "").strip()[:200] for k in ("tool", "verdict", "quirk")}


def source_json(src: StoredSource) -> dict[str, Any]:
    """A stored source's listing entry (no body, no argument text, no URL query or userinfo)."""
    summary = src.summary or {}
    har = src.meta.get("har") if isinstance(src.meta.get("har"), dict) else None
    if har is not None and "url" in har:  # scrubbed when stored; again for sources stored before that
        har = {**har, "url": scrub_url(har["url"])}
    return {
        "id": src.id,
        "kind": src.kind,
        "name": src.name,
        "created": src.created,
        "size": src.size,
        "format": src.meta.get("format"),
        "origin": src.meta.get("origin"),
        "har": har,
        "cut": src.meta.get("cut"),
        "tools": summary.get("tools", []),
        "verdicts": summary.get("verdicts", []),
        "quirks": summary.get("quirks", []),
        "dialect": summary.get("dialect"),
        "calls": summary.get("calls"),
        "url": f"/sources/{src.id}",
    }


def listing(store: Store, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Stored sources matching ``query`` (``tool``, ``verdict``, ``quirk``), newest first."""
    q = _query(query)
    found = store.search(tool=q["tool"] or None, verdict=q["verdict"] or None, quirk=q["quirk"] or None)
    found.reverse()
    return {"query": q, "total": len(found), "sources": [source_json(s) for s in found[:MAX_LISTED]]}


def _age(created: float) -> str:
    seconds = max(0.0, time.time() - created)
    if seconds < 90:
        return "just now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"


class UploadError(SourceError):
    """A rejected upload or paste; ``paste`` is the pasted text, to put back in the form."""

    def __init__(self, message: str, status: int, paste: str | None) -> None:
        super().__init__(message, status)
        self.paste = paste


async def receive_upload(request: Request, settings: Settings, store: Store) -> tuple[list[LoadedSource], Pace]:
    """Read, check and store the upload form; return the sources and the pace asked for
    (base rate, speed, notice: see :func:`toollatch.web.replay.controls.start_pace`).

    The file is read in 1 MiB pieces up to ``max_upload_bytes``; pasted text (field
    ``paste``) is used when no file was chosen. Raises :class:`UploadError` (4xx), which
    carries the pasted text so the form can be shown again with it, unless it is a HAR
    export: its request headers, cookies and URLs may hold credentials, which the dashboard
    never serves back.
    """
    pasted: list[str] = []
    try:
        return await _receive_upload(request, settings, store, pasted)
    except SourceError as exc:
        message, paste = str(exc), pasted[0] if pasted else None
        if paste is not None and detect_format(paste[:SNIFF].encode("utf-8", "surrogatepass")) == "har":
            message, paste = message + " The pasted HAR export is not shown again: it may hold credentials in its headers.", None
        raise UploadError(message, exc.status, paste) from None


async def _receive_upload(request: Request, settings: Settings, store: Store, pasted: list[str]) -> tuple[list[LoadedSource], Pace]:
    limit = settings.max_upload_bytes
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit + 2 * 1024 * 1024:
        raise SourceError(f"The upload is {int(declared) / 2**20:.1f} MiB; the limit is {limit / 2**20:.0f} MiB.", 413)
    try:
        async with request.form(max_files=2, max_fields=_MAX_FORM_FIELDS, max_part_size=limit + 1) as form:
            file, tools, paste, rate = form.get("file"), form.get("tools"), form.get("paste"), form.get("rate")
            if isinstance(paste, str) and paste.strip():
                pasted.append(paste)
            tools_raw: bytes | None = None
            tools_name = ""
            if tools is not None and not isinstance(tools, str) and tools.filename:
                tools_raw, tools_name = await tools.read(1024 * 1024 + 1), tools.filename
            if file is not None and not isinstance(file, str) and file.filename:
                data, filename, origin = await read_upload(file, limit), file.filename, "file"
            elif isinstance(paste, str) and paste.strip():
                data, origin = paste.encode("utf-8", "surrogatepass"), "paste"
                if len(data) > limit:
                    raise SourceError(f"The pasted text is larger than the {limit / 2**20:.0f} MiB limit.", 413)
                fmt = detect_format(data)
                filename = "paste." + {"har": "har", "eventstream": "bin"}.get(fmt, "jsonl" if fmt.endswith("jsonl") else "sse")
            else:
                raise SourceError("Choose a capture file to upload, or paste a capture (raw SSE, JSON Lines or HAR).", 400)
    except SourceError:
        raise
    except Exception as exc:  # malformed multipart, or a pasted field over the part limit
        log.warning("upload rejected: %s", type(exc).__name__)
        if "maximum size" in str(exc):
            raise SourceError(f"The pasted text is larger than the {limit / 2**20:.0f} MiB limit.", 413) from None
        raise SourceError("The upload could not be read as a multipart form. Use the form below.", 400) from None
    try:
        pace = start_pace(rate)  # before anything is stored
    except BadValue as exc:
        raise SourceError(str(exc), 400) from None
    sources = await asyncio.to_thread(ingest, filename, data, tools_raw, tools_name, settings.config, store, origin=origin)
    return sources, pace


def build_router(settings: Settings, sessions: SessionStore, store: Store, renderer: Renderer) -> APIRouter:
    """Routes for stored sources; also registers the ``stored_listing`` template global."""
    router = APIRouter()
    renderer.env.globals.update(
        stored_listing=lambda query=None: store.off_loop(listing, store, query),  # awaited by the index route
        format_label=lambda fmt: FORMAT_LABELS.get(str(fmt), str(fmt or "?")),
        age=_age,
    )

    def error_page(title: str, message: str, status: int) -> HTMLResponse:
        return HTMLResponse(renderer.page("error.html", title=title, message=message), status_code=status)

    @router.get("/sources/{source_id}")
    async def permalink(source_id: str) -> Response:
        stored = await store.off_loop(store.get, source_id)  # a body of up to 50 MiB; the store's lock may wait on a save
        if stored is None:
            return error_page("Source not found", f"There is no stored source {source_id!r}; it may have been deleted.", 404)
        try:
            source = await asyncio.to_thread(load_stored, stored, settings.config)
        except SourceError as exc:
            return error_page("Cannot replay this source", str(exc), exc.status)
        session = sessions.create(source)
        return RedirectResponse(f"/sessions/{session.id}", status_code=303)

    @router.post("/sources/{source_id}/delete")
    async def delete(source_id: str) -> Response:
        if not await store.off_loop(store.delete, source_id):
            return error_page("Source not found", f"There is no stored source {source_id!r}.", 404)
        return RedirectResponse("/#stored", status_code=303)

    @router.get("/api/stored")
    async def api_listing(request: Request) -> dict[str, Any]:
        return await store.off_loop(listing, store, dict(request.query_params))

    @router.get("/api/stored/{source_id}")
    async def api_source(source_id: str) -> JSONResponse:
        stored = await store.off_loop(store.get, source_id, with_body=False)
        if stored is None:
            return JSONResponse({"error": f"no stored source {source_id!r}"}, status_code=404)
        return JSONResponse(source_json(stored))

    @router.delete("/api/stored/{source_id}")
    async def api_delete(source_id: str) -> JSONResponse:
        if not await store.off_loop(store.delete, source_id):
            return JSONResponse({"error": f"no stored source {source_id!r}"}, status_code=404)
        return JSONResponse({"deleted": source_id})

    return router
