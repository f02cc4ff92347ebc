"""``flowlane api`` over HTTPS, with and without client certificates, and the CLI talking to
it with the CA of ``flowlane certs init``."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from typer.testing import CliRunner

from controller.auth.model import Role
from controller.cli.main import app
from controller.store.tokens import TokenStore
from tests.support.api_process import start_api, stop_api


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    directory = tmp_path / "pki"
    assert CliRunner().invoke(app, ["certs", "init", str(directory)]).exit_code == 0
    return directory


def context(pki: Path, client: bool) -> ssl.SSLContext:
    tls = ssl.create_default_context(cafile=pki / "ca.pem")
    if client:
        tls.load_cert_chain(pki / "client.pem", pki / "client.key")
    return tls


@pytest.fixture
def https_api(
    pki: Path, redis_url: str, unused_port: int, request: pytest.FixtureRequest
) -> Iterator[str]:
    """``flowlane api`` over HTTPS; requiring client certificates when the test is marked."""
    mutual = request.node.get_closest_marker("mutual") is not None
    args = ["--tls-cert", str(pki / "api.pem"), "--tls-key", str(pki / "api.key")]
    if mutual:
        args += ["--tls-client-ca", str(pki / "ca.pem")]
    process = start_api(
        redis_url, unused_port, *args, scheme="https", verify=context(pki, client=True)
    )
    try:
        yield f"https://127.0.0.1:{unused_port}"
    finally:
        stop_api(process)


def test_https_serves_clients_that_trust_its_ca(https_api: str, pki: Path) -> None:
    response = httpx.get(f"{https_api}/healthz", verify=context(pki, client=False))
    assert response.status_code == 200
    assert response.http_version == "HTTP/1.1"
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{https_api}/healthz")  # the system's CAs do not know this one


@pytest.mark.mutual
def test_mutual_tls_refuses_clients_without_a_certificate(https_api: str, pki: Path) -> None:
    assert httpx.get(f"{https_api}/healthz", verify=context(pki, client=True)).status_code == 200
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{https_api}/healthz", verify=context(pki, client=False))


@pytest.mark.mutual
def test_the_cli_talks_https_with_the_ca_and_its_client_certificate(
    https_api: str, pki: Path, redis_client: redis.Redis
) -> None:
    _, secret = TokenStore(redis_client).create("reader", Role.viewer)
    tls = ["--ca-file", str(pki / "ca.pem")]
    client_cert = [
        "--client-cert",
        str(pki / "client.pem"),
        "--client-key",
        str(pki / "client.key"),
    ]
    command = ["--token", secret, *tls, *client_cert, "switches", "--api", https_api, "--json"]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    assert '"switches": []' in result.output
    without = CliRunner().invoke(app, ["--token", secret, *tls, "switches", "--api", https_api])
    assert without.exit_code == 3 and "cannot reach the flowlane API" in without.output
    half = CliRunner().invoke(app, [*tls, "--client-cert", str(pki / "client.pem"), "switches"])
    assert half.exit_code == 2 and "--client-cert and --client-key together" in half.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-cert", "api.pem"], "give --tls-cert and --tls-key together"),
        (["--tls-client-ca", "ca.pem"], "--tls-client-ca needs --tls-cert and --tls-key"),
        (["--tls-cert", "api.pem", "--tls-key", "switch.key"], "cannot load them"),
        (["--tls-cert", "nope.pem", "--tls-key", "api.key"], "no such file"),
    ],
)
def test_bad_tls_options_are_refused_before_listening(
    pki: Path, args: list[str], message: str
) -> None:
    paths = [str(pki / a) if a.endswith((".pem", ".key")) else a for a in args]
    result = CliRunner().invoke(app, ["api", "--port", "1", *paths])
    assert result.exit_code == 2
    assert message in result.output
