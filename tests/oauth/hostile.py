"""An issuer an attacker runs: any tenant admin may make their tenant trust a server of their own,
and that server says whatever it likes. It serves a discovery document naming itself, a key set and
an introspection endpoint whose answers (and failures) the test sets, and counts what it was asked.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class HostileIssuer:
    introspection: dict[str, Any] = field(default_factory=lambda: {"active": False})
    keys: list[Any] = field(default_factory=list)
    broken: bool = False  # every answer is a 500 while set
    asked: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def issuer(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, body: Any) -> None:
                owner.asked.append(self.path)
                if owner.broken:
                    self.send_response(500)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.endswith("/jwks"):
                    self._send({"keys": owner.keys})
                else:
                    self._send({
                        "issuer": owner.issuer, "jwks_uri": f"{owner.issuer}/jwks",
                        "introspection_endpoint": f"{owner.issuer}/introspect",
                    })  # fmt: skip

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self._send(owner.introspection)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
