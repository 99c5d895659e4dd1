"""URLs kept, shown or quoted in errors carry no userinfo, query or fragment (assembler/wire/urls.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toollatch.wire.capture import CaptureError
from toollatch.cli import main
from toollatch.wire.har import read_har
from toollatch.wire.urls import UNKNOWN, scrub_url
from toollatch.web.live.proxy import connect_error

SECRET = "AIzaSyURLCANARY0123456789"


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("https://api.example/v1/chat", "https://api.example/v1/chat"),
        (f"https://api.example/v1/chat?alt=sse&key={SECRET}", "https://api.example/v1/chat"),
        (f"https://user:{SECRET}@gw.example.com/v1/chat", "https://gw.example.com/v1/chat"),
        (f"https://{SECRET}@gw.example.com/v1", "https://gw.example.com/v1"),  # a token as the user name
        (f"https://gw.example.com/v1#token={SECRET}", "https://gw.example.com/v1"),
        (f"https://user:{SECRET}@gw.example.com:8443/v1?key={SECRET}#{SECRET}", "https://gw.example.com:8443/v1"),
        # IPv6 hosts and ports stay whole
        (f"http://u:{SECRET}@[::1]:8080/v1?key={SECRET}", "http://[::1]:8080/v1"),
        ("http://[fe80::1%25eth0]:80/x", "http://[fe80::1%25eth0]:80/x"),
        ("http://[::1]/", "http://[::1]/"),
        # an @ in the path (or after the host) is not userinfo
        ("https://host.example/users/a@b.example/x", "https://host.example/users/a@b.example/x"),
        ("https://host.example/@scope/pkg", "https://host.example/@scope/pkg"),
        # the last @ of the authority ends the userinfo, even when the password holds @, ? or #
        (f"https://user:p@ss{SECRET}@host.example/x", "https://host.example/x"),
        (f"https://user:p#{SECRET}@host.example/x", "https://host.example/x"),
        (f"https://user:p?{SECRET}@host.example/x", "https://host.example/x"),
        # no scheme, scheme-relative, a bare path
        (f"user:{SECRET}@host.example:80/x?k={SECRET}", "host.example:80/x"),
        ("localhost:8080/v1/chat", "localhost:8080/v1/chat"),
        (f"//user:{SECRET}@host.example/x", "//host.example/x"),
        (f"/v1beta/models/g:streamGenerateContent?key={SECRET}", "/v1beta/models/g:streamGenerateContent"),
        (f"{SECRET}:x-oauth-basic@host.example/repo", "host.example/repo"),
        # what browsers also read as an authority
        (f"https:/user:{SECRET}@host.example/x", "https:/host.example/x"),
        (f"http:user:{SECRET}@host.example/x", "host.example/x"),
        (f"https:\\\\user:{SECRET}@host.example\\x", "https:\\\\host.example\\x"),
        # a URL inside the path loses its userinfo too
        (f"https://gw.example/https://user:{SECRET}@api.example/v1", "https://gw.example/https://api.example/v1"),
        # control characters and surrounding blanks
        (f" https://h.example/a\tb\n?key={SECRET} ", "https://h.example/ab"),
        ("", ""),
    ],
)
def test_scrub_url(url: str, want: str) -> None:
    assert scrub_url(url) == want
    assert SECRET not in scrub_url(url)


@pytest.mark.parametrize("value", [None, 42, {"url": SECRET}, [SECRET], b"https://x"])
def test_scrub_url_of_a_non_string_is_unknown(value: Any) -> None:
    assert scrub_url(value) == UNKNOWN


def test_scrub_url_limit_cuts_with_an_ellipsis() -> None:
    long = "https://h.example/" + "a" * 500
    assert scrub_url(long, limit=40) == long[:39] + "…"
    assert scrub_url("https://h.example/x", limit=40) == "https://h.example/x"


# ------------------------------------------------------------------ HAR


def _har(url: Any, text: str | None, method: Any = "POST") -> bytes:
    content: dict[str, Any] = {"mimeType": "text/event-stream"}
    if text is not None:
        content["text"] = text
    entry = {"request": {"method": method, "url": url, "headers": []}, "response": {"status": 200, "content": content}}
    other = {"request": {"method": "GET", "url": "https://x.example/favicon.ico"}, "response": {"content": {"mimeType": "image/png"}}}
    return json.dumps({"log": {"entries": [other, entry]}}).encode()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://g.example/v1/m:stream?alt=sse&key={SECRET}", "https://g.example/v1/m:stream"),
        (f"https://user:{SECRET}@g.example/v1/m", "https://g.example/v1/m"),
        (f"https://g.example/v1/m#{SECRET}", "https://g.example/v1/m"),
    ],
)
def test_har_error_names_the_entry_and_quotes_no_credential(url: str, shown: str) -> None:
    with pytest.raises(CaptureError) as caught:
        read_har(_har(url, None), "trace.har")
    assert str(caught.value) == f"trace.har: entry 1 ({shown}): the response body was not saved in the HAR"


@pytest.mark.parametrize("url", [None, 7, {"href": SECRET}, ""])
def test_har_error_with_an_odd_url_still_names_the_entry(url: Any) -> None:
    with pytest.raises(CaptureError, match=r"^trace\.har: entry 1 \(\?\): the response body was not saved"):
        read_har(_har(url, None), "trace.har")


def test_har_entries_keep_scheme_host_and_path_only() -> None:
    (entry,) = read_har(_har(f"https://user:{SECRET}@gw.example:8443/v1/chat?key={SECRET}#{SECRET}", "data: {}\n\n"), "t.har")
    assert entry.url == "https://gw.example:8443/v1/chat" and entry.method == "POST"
    (odd,) = read_har(_har(["not", "a", "url"], "data: {}\n\n", method={"x": SECRET}), "t.har")
    assert odd.url == "?" and odd.method == "?"


def test_cli_har_listing_quotes_no_credential(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "t.har"
    target.write_bytes(_har(f"https://user:{SECRET}@gw.example/v1/chat?key={SECRET}", None))
    assert main(["assemble", str(target)]) == 2
    err = capsys.readouterr().err
    assert "entry 1 (https://gw.example/v1/chat)" in err and SECRET not in err


# ------------------------------------------------------------------ configured upstreams


def test_connect_error_quotes_the_upstream_without_credentials() -> None:
    message = connect_error("gw", f"https://user:{SECRET}@gw.example/v1?key={SECRET}", OSError("x"))
    assert message == "toollatch proxy: cannot reach upstream 'gw' at https://gw.example/v1 (OSError)."


@pytest.mark.parametrize(
    "option",
    [f"gw=ftp://user:{SECRET}@gw.example/v1", f"https://gw.example/v1?key={SECRET}", f"https://user:{SECRET}@gw.example"],
)
def test_serve_option_errors_quote_no_credential(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--upstream", option]) == 2
    err = capsys.readouterr().err
    assert "upstream" in err and SECRET not in err
