"""The served face of the viewer: a FastAPI app over a ``Site`` (loopback by default; nothing is written)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles

from rubricgym.viewer.site import HERE, Links, NotFound, Site
from rubricgym.viewer.table import QueryError, parse_query

LINKS = Links(static=False)


def create_app(path: str | Path, show_hidden: bool = False) -> FastAPI:
    """The viewer over the run (or folder of runs) at ``path``; ``ViewerError`` if there is none."""
    site = Site(path, show_hidden=show_hidden)
    app = FastAPI(title="rubricgym view", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.site = site
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> PlainTextResponse:
        return PlainTextResponse(str(exc.args[0] if exc.args else exc), status_code=404)

    @app.exception_handler(QueryError)
    async def bad_query(_: Request, exc: QueryError) -> PlainTextResponse:
        return PlainTextResponse(f"bad filter: {exc}", status_code=400)

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        if len(site.runs) == 1:
            return site.render_run(next(iter(site.runs)), LINKS)
        return site.render_index(LINKS)

    @app.get("/r/{rid}/", response_class=HTMLResponse)
    def run(rid: str) -> str:
        return site.render_run(rid, LINKS)

    @app.get("/r/{rid}/episodes", response_class=HTMLResponse)
    def episodes(rid: str, request: Request) -> str:
        return site.render_episodes(rid, parse_query(dict(request.query_params)), LINKS)

    @app.get("/r/{rid}/ep/{store}/{line}", response_class=HTMLResponse)
    def episode(rid: str, store: int, line: int) -> str:
        return site.render_episode(rid, store, line, LINKS)

    @app.get("/r/{rid}/group/{store}/{gid}", response_class=HTMLResponse)
    def group(rid: str, store: int, gid: str, a: int | None = None, b: int | None = None) -> str:
        return site.render_group(rid, store, gid, LINKS, a, b)

    @app.get("/r/{rid}/dashboard", response_class=HTMLResponse)
    def dashboard(rid: str, fragment: bool = False) -> str:
        return site.render_dashboard(rid, LINKS, fragment=fragment)

    @app.get("/r/{rid}/arena", response_class=HTMLResponse)
    def arena(rid: str) -> str:
        return site.render_arena(rid, LINKS)

    @app.get("/r/{rid}/match/{k}", response_class=HTMLResponse)
    def match(rid: str, k: int) -> str:
        return site.render_match(rid, k, LINKS)

    return app
