"""The OpenAPI UI at /docs, served with its assets from the registry itself (no CDN: the Swagger UI
build the swagger-ui-bundle-v2 package ships)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs/assets"
router = APIRouter(include_in_schema=False)
assets = StaticFiles(directory=swagger_ui_path)


@router.get("/docs")
async def docs() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Prompt Registry API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
    )
