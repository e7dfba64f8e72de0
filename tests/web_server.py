"""``awa-beat web``'s server on a throw-away database, in a thread of the test process:
for the browser tests and the matrix's HTTP cells (which run without a browser)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from awa_beat.web import WebConfig, create_app
from awa_beat.web.server import make


def serve(db_url: str, config: WebConfig | None = None) -> Iterator[str]:
    """Yield the base URL of a dashboard on ``db_url``; stop it and close its store after."""
    app = create_app(db_url, config=config or WebConfig())
    server = make(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        app.close()
