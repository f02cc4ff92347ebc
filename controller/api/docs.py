"""The API's documentation pages, served from the installed package.

FastAPI's ``/docs`` and ``/redoc`` load Swagger UI and ReDoc from a CDN, so on
the air-gapped networks a fabric controller often sits on they are blank pages.
Here both load their scripts and styles from the assets that ``fastapi-offline``
ships (Swagger UI 5, which renders OpenAPI 3.1), under ``/docs/assets``.  Like
FastAPI's own pages they are plain routes: open without a token, outside the
OpenAPI document; the schema they render, ``/openapi.json``, is open as well.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import HTMLResponse

ASSETS_URL = "/docs/assets"


def assets_directory() -> Path:
    """Where the installed Swagger UI and ReDoc files are."""
    return Path(str(resources.files("fastapi_offline") / "static"))


def install_docs(app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Serve ``docs_url`` (Swagger UI) and ``redoc_url`` (ReDoc) with local assets.

    ``app`` must be built with ``docs_url=None, redoc_url=None`` so that FastAPI's
    CDN pages do not shadow these."""
    openapi_url = app.openapi_url or "/openapi.json"
    app.mount(ASSETS_URL, StaticFiles(directory=assets_directory()), name="docs-assets")

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    async def redoc(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} API",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    app.add_route(docs_url, swagger_ui, include_in_schema=False)
    app.add_route(redoc_url, redoc, include_in_schema=False)
