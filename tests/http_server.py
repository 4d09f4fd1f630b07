"""A local HTTP server on 127.0.0.1 for download tests: Range support and injectable faults.

Downloads refuse loopback addresses unless ``OPENBENCH_ALLOW_PRIVATE_NETWORK=1`` (a registry's
URL is shared text: :mod:`openbench._io.download`); entering the server turns that documented
switch on for the test, and leaving it restores what was there."""
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional

from openbench._io.download import ALLOW_PRIVATE_VARIABLE


class FileServer:
    """Serves ``files`` (path -> bytes). ``drop_after[path] = (n_bytes, times)`` closes the
    connection after n_bytes for the first ``times`` requests; ``ignore_range`` answers 200 to
    Range requests; ``redirects[path] = location`` answers 302 (``(status, location)``: that status); ``without_length`` (paths) are
    sent without Content-Length, ``endless`` (paths) repeat their bytes until the client leaves;
    ``trickle[path] = seconds`` sends one byte per that many seconds. ``requests`` records (path,
    Range header) of every request."""

    def __init__(self, files: Dict[str, bytes], allow_private: bool = True):
        self.files = files
        self.drop_after: Dict[str, tuple] = {}
        self.ignore_range = False
        self.redirects: Dict[str, object] = {}
        self.without_length: set = set()
        self.endless: set = set()
        self.trickle: Dict[str, float] = {}
        self.requests: List[tuple] = []
        self.allow_private = allow_private
        self._saved: Optional[str] = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                range_header: Optional[str] = self.headers.get("Range")
                server.requests.append((self.path, range_header))
                if self.path in server.redirects:
                    target = server.redirects[self.path]
                    status, location = target if isinstance(target, tuple) else (302, target)
                    self.send_response(status)
                    self.send_header("Location", location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404, "Not Found")
                    return
                start = 0
                if range_header and not server.ignore_range:
                    start = int(range_header.split("=")[1].split("-")[0])
                    if start >= len(body):
                        self.send_error(416, "Range Not Satisfiable")
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                payload = body[start:]
                if self.path not in server.without_length and self.path not in server.endless:
                    self.send_header("Content-Length", str(len(payload)))
                else:
                    self.close_connection = True
                self.end_headers()
                try:
                    self._send(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, payload):
                if self.path in server.trickle:
                    for position in range(len(payload)):
                        self.wfile.write(payload[position:position + 1])
                        self.wfile.flush()
                        time.sleep(server.trickle[self.path])
                    return
                if self.path in server.endless:
                    while True:
                        self.wfile.write(payload)
                limit, times = server.drop_after.get(self.path, (None, 0))
                if limit is not None and times > 0:
                    server.drop_after[self.path] = (limit, times - 1)
                    self.wfile.write(payload[:limit])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self._saved = os.environ.get(ALLOW_PRIVATE_VARIABLE)
        if self.allow_private:
            os.environ[ALLOW_PRIVATE_VARIABLE] = "1"
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._saved is None:
            os.environ.pop(ALLOW_PRIVATE_VARIABLE, None)
        else:
            os.environ[ALLOW_PRIVATE_VARIABLE] = self._saved
