"""/docs and /redoc load everything from the API itself: nothing from a CDN."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

REFERENCE = re.compile(r"""(?:src|href)=["']([^"']+)["']|url:\s*['"]([^'"]+)['"]""")


def references(html: str) -> list[str]:
    return [a or b for a, b in REFERENCE.findall(html)]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_a_docs_page_refers_only_to_the_api_itself(anonymous: TestClient, page: str) -> None:
    response = anonymous.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    found = references(response.text)
    assert found, response.text
    remote = [url for url in found if re.match(r"(?i)^(https?:)?//", url)]
    assert remote == [], f"{page} loads {remote} from elsewhere"
    for url in found:
        asset = anonymous.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 100, url


def test_swagger_ui_is_a_release_that_renders_openapi_3_1(anonymous: TestClient) -> None:
    """Swagger UI 4 shows 'Unable to render this definition' for OpenAPI 3.1."""
    assert anonymous.get("/openapi.json").json()["openapi"].startswith("3.1")
    bundle = anonymous.get("/docs/assets/swagger-ui-bundle.js").text
    release = re.search(r'PACKAGE_VERSION:"(\d+)\.(\d+)\.(\d+)"', bundle)
    assert release is not None, "no PACKAGE_VERSION in the bundle"
    assert int(release.group(1)) >= 5, release.group(0)
    assert "SwaggerUIBundle" in bundle


def test_the_docs_pages_stay_out_of_the_api_document(anonymous: TestClient) -> None:
    paths = anonymous.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith(("/docs", "/redoc"))]
