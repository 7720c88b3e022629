"""The HTTP server around `App`: one thread per connection, each answer written whole."""

from __future__ import annotations

import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from frutebox_infra.emulator.routes import App


class EmulatorHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: App) -> None:
        self.app = app
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, RequestHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (a cancelled command) is no emulator error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; without this each answer waits ~40 ms
    # for a delayed ACK, which makes polling clients crawl.
    disable_nagle_algorithm = True
    server: EmulatorHTTPServer

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        response = self.server.app.handle(self.command, self.path, headers, raw)
        payload = response.payload()
        self.send_response(response.status)
        if payload and "Content-Type" not in response.headers:
            self.send_header("Content-Type", "application/json")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":  # a HEAD answer has the headers of the GET, no body
            self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read the request log from /_emulator/state instead."""
