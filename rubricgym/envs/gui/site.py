"""``Site``: where a GUI episode's pages come from (packaged files on a fake origin, or a loopback server)."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit


@dataclass
class Site:
    """Where an episode's pages come from.

    ``root`` set: files under it are served on ``origin`` (a fake ``.test`` host) straight from the package, with
    no server and no socket. ``root`` unset: ``origin`` is a real loopback server whose requests go through.
    Every request to any other origin is aborted.
    """

    origin: str
    root: Path | None = None
    _cache: dict[str, tuple[bytes, str]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.origin = self.origin.rstrip("/")
        parts = urlsplit(self.origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path:
            raise ValueError(f"site origin must look like http://host[:port], got {self.origin!r}")
        if self.root is None and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"a site without files must be a loopback URL (127.0.0.1/localhost), got {self.origin!r}")

    def owns(self, url: str) -> bool:
        return url == self.origin or url.startswith(self.origin + "/")

    def file(self, url: str) -> tuple[bytes, str] | None:
        """The body and content type served for ``url``, or ``None`` (404)."""
        rel = urlsplit(url).path.lstrip("/") or "index.html"
        if rel.endswith("/"):
            rel += "index.html"
        if rel not in self._cache:
            assert self.root is not None, "file() serves a site with a root; a loopback site has no files"
            try:  # a hostile URL (NUL, 100k characters) is a 404, never an error inside the route handler
                path = (self.root / rel).resolve()
                if not path.is_relative_to(self.root.resolve()) or not path.is_file():
                    return None
                body = path.read_bytes()
            except (OSError, ValueError):
                return None
            self._cache[rel] = (body, mimetypes.guess_type(path.name)[0] or "application/octet-stream")
        return self._cache[rel]
