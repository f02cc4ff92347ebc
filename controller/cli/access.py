"""``flowlane token create|list|revoke`` and ``flowlane audit``: access to the API (admin)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from controller.cli.credentials import ApiCallError
from controller.cli.flows import POLL_INTERVAL_S, follow_stream
from controller.cli.groups import HintingGroup
from controller.cli.remote import (
    DEFAULT_API,
    ApiClient,
    ApiOption,
    JsonOption,
    print_json,
    report_request_failure,
    when,
)
from controller.cli.render import out, table

token_app = typer.Typer(
    help="API tokens: create (shown once), list, revoke.", no_args_is_help=True, cls=HintingGroup
)


@token_app.command()
def create(
    name: Annotated[str, typer.Argument(help="The token's name: the author of what it writes")],
    role: Annotated[str, typer.Option(help="viewer, operator or admin")],
    tenant: Annotated[
        str | None, typer.Option(help="Limit the token to a tenant of the policy")
    ] = None,
    ttl: Annotated[str | None, typer.Option(help="Lifetime: 12h, 30d (default: none)")] = None,
    api: ApiOption = DEFAULT_API,
    as_json: JsonOption = False,
) -> None:
    """Create token NAME and print its secret: it is shown this once."""
    document: dict[str, Any] = {"name": name, "role": role}
    if tenant is not None:
        document["tenant"] = tenant
    if ttl is not None:
        document["ttl"] = ttl
    try:
        body = ApiClient(api).request("POST", "/v1/tokens", json=document)
    except ApiCallError as failure:
        raise report_request_failure(failure, as_json=as_json, what="token") from None
    if as_json:
        print_json(body)
        return
    expires = when(body["expires_at"]) if body.get("expires_at") else "never"
    tenant = f", tenant {body['tenant']}" if body.get("tenant") else ""
    out.print(f"token {body['name']} ({body['role']}{tenant}), expires {expires}:", highlight=False)
    typer.echo(body["token"])
    out.print("it is not shown again: keep it in a file only you can read", highlight=False)


@token_app.command("list")
def list_tokens(api: ApiOption = DEFAULT_API, as_json: JsonOption = False) -> None:
    """Every token: role, tenant, created, expiry and last use (never the secret)."""
    try:
        body = ApiClient(api).request("GET", "/v1/tokens")
    except ApiCallError as failure:
        raise report_request_failure(failure, as_json=as_json, what="query") from None
    if as_json:
        print_json(body)
        return
    out.print(
        table(
            "API tokens",
            ("name", "role", "tenant", "created", "expires", "last used"),
            [
                (
                    token["name"],
                    token["role"],
                    token.get("tenant") or "-",
                    when(token["created_at"]),
                    when(token["expires_at"]) if token.get("expires_at") else "never",
                    when(token["last_used"]) if token.get("last_used") else "never",
                )
                for token in body["tokens"]
            ],
        )
    )


@token_app.command()
def revoke(
    name: Annotated[str, typer.Argument(help="The token to revoke")],
    api: ApiOption = DEFAULT_API,
) -> None:
    """Revoke token NAME: the next request carrying it is refused."""
    try:
        ApiClient(api).request("DELETE", f"/v1/tokens/{name}")
    except ApiCallError as failure:
        raise report_request_failure(failure, as_json=False, what="token") from None
    out.print(f"revoked token {name}", highlight=False)


def audit_line(entry: dict[str, Any]) -> str:
    who = entry.get("token") or "(no valid token)"
    role = f" ({entry['role']})" if entry.get("role") else ""
    noted = {
        key: value
        for key, value in entry.items()
        if key
        not in {
            "id",
            "kind",
            "time",
            "token",
            "role",
            "tenant",
            "client",
            "method",
            "route",
            "path",
            "status",
            "outcome",
        }
        and value is not None
    }
    extra = "".join(f" {key}={value}" for key, value in sorted(noted.items()))
    return (
        f"{when(entry.get('time'))}  {entry.get('outcome', '?'):<8} {entry.get('status')}"
        f"  {who}{role} from {entry.get('client')}: {entry.get('method')} {entry.get('path')}"
        f"{extra}"
    )


def audit(
    since: Annotated[str | None, typer.Option(help="Only entries after this id")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Entries per request")] = 100,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new entries until Ctrl-C")
    ] = False,
    api: ApiOption = DEFAULT_API,
    as_json: JsonOption = False,
    interval: Annotated[float, typer.Option(min=0.0, hidden=True)] = POLL_INTERVAL_S,
    max_polls: Annotated[int | None, typer.Option(min=1, hidden=True)] = None,
) -> None:
    """Print the audit log: every write and refused attempt, who, from where, the outcome."""
    client = ApiClient(api)
    params: dict[str, str | int] = {"limit": limit}
    if since is not None:
        params["since"] = since

    def read(query: dict[str, str | int]) -> Any:
        return client.request("GET", "/v1/audit", params=query)

    try:
        follow_stream(
            read,
            params,
            limit=limit,
            as_json=as_json,
            interval_s=interval,
            max_polls=max_polls if follow else 1,
            line=audit_line,
        )
    except ApiCallError as failure:
        raise report_request_failure(failure, as_json=as_json, what="query") from None
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
