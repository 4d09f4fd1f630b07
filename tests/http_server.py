"""A local HTTP server on 127.0.0.1 for download tests: Range support and injectable faults."""
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional


class FileServer:
    """Serves ``files`` (path -> bytes). ``drop_after[path] = (n_bytes, times)`` closes the
    connection after n_bytes for the first ``times`` requests; ``ignore_range`` answers 200 to
    Range requests. ``requests`` records (path, Range header) of every request."""

    def __init__(self, files: Dict[str, bytes]):
        self.files = files
        self.drop_after: Dict[str, tuple] = {}
        self.ignore_range = False
        self.requests: List[tuple] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                range_header: Optional[str] = self.headers.get("Range")
                server.requests.append((self.path, range_header))
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
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                limit, times = server.drop_after.get(self.path, (None, 0))
                if limit is not None and times > 0:
                    server.drop_after[self.path] = (limit, times - 1)
                    self.wfile.write(payload[:limit])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
