"""The console's door: the login and logout forms, and `guarded`, which every other page goes through.

A page without a valid session cookie redirects to the login (an HTML page: the console is for a browser).
Every form that changes something is a POST with its CSRF token (session.py); one without the right token is a
403 and changes nothing. A wrong key is a 401, after a short pause (a slower guess)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .html import HEADERS, esc, href, page
from .service import console_of
from .session import LOGIN_COOKIE, LOGIN_SECONDS, SESSION_COOKIE, SESSION_SECONDS, login_nonce

MAX_FORM = 16 * 1024
WRONG_KEY_PAUSE = 0.25

Handler = Callable[[Request, str], Awaitable[Response]]  # (request, its CSRF token) -> page


def html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def set_cookie(request: Request, response: Response, name: str, value: str, seconds: int) -> None:
    response.set_cookie(name, value, max_age=seconds, path="/console", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


async def form(request: Request) -> dict[str, str]:
    """An urlencoded form, bounded (the console's own limit, far below --max-body-bytes)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return {}
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}


def login_page(csrf: str, message: str = "", status: int = 200) -> HTMLResponse:
    note = f'<p class="error">{esc(message)}</p>' if message else ""
    body = (f'{note}<form method="post" action="{href("login")}" class="login">'
            f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
            '<label>Console key <input type="password" name="key" autocomplete="current-password" autofocus '
            'required></label><button>Log in</button></form>'
            '<p class="hint">The key is the gateway\'s RG_CONSOLE_KEY (not an API key).</p>')
    return html(page("Log in", body), status)


async def show_login(request: Request) -> Response:
    console = console_of(request)
    nonce = request.cookies.get(LOGIN_COOKIE) or login_nonce()
    response = login_page(console.keys.csrf(nonce))
    set_cookie(request, response, LOGIN_COOKIE, nonce, LOGIN_SECONDS)
    return response


async def login(request: Request) -> Response:
    console = console_of(request)
    nonce = request.cookies.get(LOGIN_COOKIE)
    fields = await form(request)
    if not console.keys.valid_csrf(nonce, fields.get("csrf")):
        return forbidden()
    if not console.keys.is_key(fields.get("key", "")):
        await asyncio.sleep(WRONG_KEY_PAUSE)
        return login_page(console.keys.csrf(nonce or ""), "Wrong key.", 401)
    response = RedirectResponse(href("responses").replace("&amp;", "&"), status_code=303, headers=HEADERS)
    set_cookie(request, response, SESSION_COOKIE, console.keys.session(), SESSION_SECONDS)
    response.delete_cookie(LOGIN_COOKIE, path="/console", httponly=True, samesite="strict")
    return response


async def logout(request: Request) -> Response:
    console = console_of(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    fields = await form(request)
    if not console.keys.valid_session(cookie) or not console.keys.valid_csrf(cookie, fields.get("csrf")):
        return forbidden()
    response = RedirectResponse("/console/login", status_code=303, headers=HEADERS)
    response.delete_cookie(SESSION_COOKIE, path="/console", httponly=True, samesite="strict")
    return response


def forbidden() -> HTMLResponse:
    return html(page("Forbidden", '<p class="error">This form did not come from this console session (a missing '
                                  'or wrong CSRF token). Nothing was changed.</p>'
                                  '<p><a href="/console/login">Log in again</a></p>'), 403)


def guarded(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """`handler` for a logged-in admin only, given the CSRF token of the forms it shows."""

    async def endpoint(request: Request) -> Response:
        console = console_of(request)
        cookie = request.cookies.get(SESSION_COOKIE)
        if not console.keys.valid_session(cookie):
            return RedirectResponse("/console/login", status_code=303, headers=HEADERS)
        return await handler(request, console.keys.csrf(cookie or ""))

    endpoint.__name__ = getattr(handler, "__name__", "console")
    endpoint.__doc__ = handler.__doc__
    return endpoint
