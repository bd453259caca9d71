"""The web console (`--console`, docs/console.md): stored responses, conversations, files, vector stores,
containers and usage, and the responses in flight, served by the gateway itself as server-rendered HTML.

It reads the store across owners (store/browse.py) and the live responses through the event tap (tap.py), so
it sits with the transports, at the top. Its own key (RG_CONSOLE_KEY) guards it, never an API key; nothing of
it runs, and nothing is added to the request path, without `--console`.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from . import auth, views
from .service import Console, start

__all__ = ["Console", "routes", "start"]

CSS = resources.files(__package__).joinpath("static/console.css").read_bytes()


async def stylesheet(request: Request) -> Response:
    return Response(CSS, media_type="text/css", headers={"cache-control": "max-age=3600",
                                                          "x-content-type-options": "nosniff"})


async def home(request: Request) -> Response:
    return RedirectResponse("/console/responses", status_code=303)


def routes() -> list[BaseRoute]:
    """The console's routes, all under /console (none reaches /v1: API keys do not open it)."""
    g = auth.guarded
    return [
        Route("/console", home, methods=["GET"]),
        Route("/console/", home, methods=["GET"]),
        Route("/console/static/console.css", stylesheet, methods=["GET"]),
        Route("/console/login", auth.show_login, methods=["GET"]),
        Route("/console/login", auth.login, methods=["POST"]),
        Route("/console/logout", auth.logout, methods=["POST"]),
        Route("/console/responses", g(views.responses), methods=["GET"]),
        Route("/console/responses/{response_id}", g(views.response), methods=["GET"]),
        Route("/console/conversations", g(views.conversations), methods=["GET"]),
        Route("/console/conversations/{conversation_id}", g(views.conversation), methods=["GET"]),
        Route("/console/files", g(views.files), methods=["GET"]),
        Route("/console/vector_stores/{vector_store_id}", g(views.vector_store), methods=["GET"]),
        Route("/console/containers", g(views.containers), methods=["GET"]),
        Route("/console/usage", g(views.usage), methods=["GET"]),
        Route("/console/live", g(views.live), methods=["GET"]),
        Route("/console/live/{response_id}", g(views.follow), methods=["GET"]),
    ]
