"""An episode's scope: which URLs its pages may be on, decided on the URL as the browser will parse it.

A prefix test on the raw string is not enough: browsers drop tabs and newlines, read backslashes as slashes,
treat ``%2e`` as a dot in ``..`` segments, lower-case the host, drop a default port and resolve dot segments, so
``/contacts/%2e%2e/mail/`` passes ``startswith("/contacts/")`` and opens another app. ``resolve_url`` applies
those WHATWG URL rules first; anything it cannot vouch for (another scheme, userinfo, a non-ASCII host, a bad
port) resolves to ``None`` and is out of scope.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit, urlunsplit

_STRIP = "".join(chr(c) for c in range(0x21))  # C0 controls and space, trimmed from both ends by browsers
_TAB_NEWLINE = re.compile(r"[\t\n\r]")  # removed anywhere in the URL by browsers
_DEFAULT_PORT = {"http": 80, "https": 443}
_HOST = re.compile(r"^[a-z0-9.-]+$")
_SINGLE_DOT = {".", "%2e"}
_DOUBLE_DOT = {"..", ".%2e", "%2e.", "%2e%2e"}


def resolve_url(url: str, base: str) -> str | None:
    """``url`` resolved against ``base`` the way a browser resolves it, or ``None`` when it is not a plain
    ``http(s)://host[:port]/path`` URL (other schemes, userinfo, non-ASCII or malformed hosts, bad ports)."""
    url = _TAB_NEWLINE.sub("", url.strip(_STRIP))
    cut = len(url) if (m := re.search(r"[?#]", url)) is None else m.start()
    joined = urljoin(base, url[:cut].replace("\\", "/") + url[cut:])  # backslashes are slashes before ? and #
    try:
        parts = urlsplit(joined)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if scheme not in _DEFAULT_PORT or "@" in parts.netloc or not _HOST.match(host) or ".." in host:
        return None
    netloc = host if port in (None, _DEFAULT_PORT[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, remove_dot_segments(parts.path), parts.query, parts.fragment))


def remove_dot_segments(path: str) -> str:
    """``path`` with ``.`` and ``..`` segments resolved, percent-encoded dots included (``%2e``, ``.%2E``...)."""
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        low = seg.lower()
        if low in _DOUBLE_DOT:
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        elif low in _SINGLE_DOT:
            if last:
                out.append("")
        else:
            out.append(seg)
    resolved = "/".join(out)
    return resolved if resolved.startswith("/") else "/" + resolved


def in_scope(url: str, scope: str) -> bool:
    """Whether ``url`` (absolute) is in ``scope`` once resolved: at or under a folder scope (an
    ``http(s)://host/prefix/`` URL ending in ``/``), or on a document scope (``http(s)://host/path/page.html``, that
    page with any query or fragment: one MiniWoB++ page of a folder holding a hundred others)."""
    if urlsplit(scope).query or urlsplit(scope).fragment:
        raise ValueError(f"a scope is a folder URL ending in '/' or a page URL without ? or #, got {scope!r}")
    resolved = resolve_url(url, scope)
    if resolved is None:
        return False
    if scope.endswith("/"):
        return (resolved + "/").startswith(scope)
    return urlunsplit(urlsplit(resolved)._replace(query="", fragment="")) == scope
