"""``awa-beat web``: the dashboard (needs the ``web`` extra)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..errors import ConfigError
from .context import database_url_for, database_url_option, friendly_errors

PASSWORD_ENV = "AWA_BEAT_WEB_PASSWORD"


def read_password(password_file: str | None) -> str | None:
    """Return the login password: the first line of ``password_file``, else
    $AWA_BEAT_WEB_PASSWORD."""
    if password_file:
        try:
            text = Path(password_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--password-file: cannot read {password_file}: "
                              f"{exc.strerror}") from None
        password = text.splitlines()[0].strip() if text.strip() else ""
        if not password:
            raise ConfigError(f"--password-file: {password_file} is empty")
        return password
    return os.environ.get(PASSWORD_ENV) or None


@click.command()
@database_url_option
@click.option("--bind", default="127.0.0.1", show_default=True,
              help="Address to listen on; other than loopback only with authentication.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--password-file", type=click.Path(dir_okay=False),
              help=f"File whose first line is the login password (else ${PASSWORD_ENV}).")
@click.option("--trust-user-header", metavar="HEADER",
              help="Take the user from this header set by an authenticating reverse proxy.")
@click.option("--trusted-proxy", "trusted_proxies", multiple=True, metavar="ADDR",
              help="Address or network of that proxy (repeatable; default loopback).")
@click.option("--allowed-origin", "allowed_origins", multiple=True, metavar="ORIGIN",
              help="Another origin (https://ops.example.com) whose forms are accepted.")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="HOST[:PORT]",
              help="Without a login, another name the Host header may give (repeatable; "
                   "localhost, 127.0.0.1 and [::1] always may).")
@click.option("--read-only", is_flag=True, help="Show everything, change nothing.")
@friendly_errors
def web(database_url: str | None, bind: str, port: int, password_file: str | None,
        trust_user_header: str | None, trusted_proxies: tuple[str, ...],
        allowed_origins: tuple[str, ...], allowed_hosts: tuple[str, ...],
        read_only: bool) -> None:
    """The web dashboard: schedules, their fires and history, actions, the cluster."""
    try:
        from ..web import WebConfig, create_app
        from ..web.server import check_bind, make
    except ImportError as exc:
        raise ConfigError(f"the dashboard needs the web extra: pip install 'awa-beat[web]' "
                          f"({exc})") from None
    config = WebConfig(password=read_password(password_file),
                       trusted_user_header=trust_user_header,
                       trusted_proxies=trusted_proxies or ("127.0.0.1", "::1"),
                       allowed_origins=allowed_origins, allowed_hosts=allowed_hosts,
                       read_only=read_only)
    check_bind(bind, config)  # This runs before the database opens: a refusal needs none.
    app = create_app(database_url_for(database_url), config=config)
    try:
        server = make(app, bind, port)
        host, port_ = server.host_and_port
        shown = f"[{host}]" if ":" in str(host) else host
        click.echo(f"awa-beat web on http://{shown}:{port_}/"
                   + (" (read-only)" if read_only else "")
                   + ("" if config.authenticates else " (no login: loopback only)"), err=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    finally:
        app.close()
