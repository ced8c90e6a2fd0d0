"""A Cloud Storage server on loopback speaking the part of the JSON API the google-cloud-storage client uses
for small objects: bucket and object metadata (GET), multipart upload (POST, with ifGenerationMatch and the
client's crc32c), media download. Objects exist only once an upload has arrived whole, as in GCS.
Point the real client at it with STORAGE_EMULATOR_HOST (anonymous credentials)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import re
import threading
import urllib.parse

import google_crc32c

from conftest import LoopbackServer


def _hashes(data: bytes) -> tuple[str, str]:
    crc = base64.b64encode(google_crc32c.value(data).to_bytes(4, "big")).decode()
    return crc, base64.b64encode(hashlib.md5(data).digest()).decode()


class GcsServer:
    def __init__(self, buckets: set[str], upload_status: int | None = None):
        self.buckets = set(buckets)
        self.upload_status = upload_status  # answer every upload with this status instead (a failing service)
        self.objects: dict[tuple[str, str], bytes] = {}
        self.uploads = 0  # upload requests received, whatever their outcome
        self._server = LoopbackServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> GcsServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _metadata(self, bucket: str, name: str) -> dict:
        data = self.objects[(bucket, name)]
        crc, md5 = _hashes(data)
        return {"kind": "storage#object", "bucket": bucket, "name": name, "size": str(len(data)), "generation": "1",
                "metageneration": "1", "contentType": "application/gzip", "crc32c": crc, "md5Hash": md5}

    def _handler(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes | dict, headers: dict | None = None) -> None:
                if isinstance(body, dict):
                    body = json.dumps(body).encode()
                    headers = {"Content-Type": "application/json", **(headers or {})}
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status: int, message: str) -> None:
                self._send(status, {"error": {"code": status, "message": message,
                                              "errors": [{"message": message, "reason": "loopback"}]}})

            def do_GET(self):
                parts = urllib.parse.urlsplit(self.path)
                match = re.fullmatch(r"/(storage|download/storage)/v1/b/([^/]+)(?:/o/([^/]+))?", parts.path)
                if not match:
                    return self._error(400, f"unsupported path {parts.path}")
                kind, bucket, name = match[1], match[2], match[3] and urllib.parse.unquote(match[3])
                if bucket not in server.buckets:
                    return self._error(404, f"The specified bucket does not exist: {bucket}")
                if name is None:
                    return self._send(200, {"kind": "storage#bucket", "name": bucket, "id": bucket})
                if (bucket, name) not in server.objects:
                    return self._error(404, f"No such object: {bucket}/{name}")
                if kind == "download/storage":
                    data = server.objects[(bucket, name)]
                    crc, md5 = _hashes(data)
                    headers = {"Content-Type": "application/octet-stream", "x-goog-hash": f"crc32c={crc},md5={md5}"}
                    ranged = re.fullmatch(r"bytes=([0-9]+)-", self.headers.get("Range", ""))
                    if ranged:  # the part from an offset on (how a growing log is followed)
                        start = int(ranged[1])
                        if start >= len(data):
                            return self._error(416, "The requested range cannot be satisfied.")
                        return self._send(206, data[start:], {**headers,
                                                              "Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})
                    return self._send(200, data, headers)
                return self._send(200, server._metadata(bucket, name))

            def do_POST(self):
                server.uploads += 1
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query))
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                match = re.fullmatch(r"/upload/storage/v1/b/([^/]+)/o", parts.path)
                if not match or query.get("uploadType") != "multipart":
                    return self._error(400, "only multipart uploads are served here")
                bucket = match[1]
                if bucket not in server.buckets:
                    return self._error(404, f"The specified bucket does not exist: {bucket}")
                if server.upload_status:
                    return self._error(server.upload_status, "the upload failed (loopback server told to fail)")
                boundary = re.search(r'boundary="?([^";]+)"?', self.headers["Content-Type"])[1].encode()
                sections = [s for s in body.split(b"--" + boundary) if s.strip(b"\r\n-")]
                meta_part, data_part = (s.split(b"\r\n\r\n", 1)[1] for s in sections)
                metadata = json.loads(meta_part.rstrip(b"\r\n"))
                data = data_part[:-2] if data_part.endswith(b"\r\n") else data_part
                name = metadata["name"]
                if query.get("ifGenerationMatch") == "0" and (bucket, name) in server.objects:
                    return self._error(412, "At least one of the pre-conditions you specified did not hold.")
                if "crc32c" in metadata and metadata["crc32c"] != _hashes(data)[0]:
                    return self._error(400, "Provided CRC32C does not match the data")
                server.objects[(bucket, name)] = data
                return self._send(200, server._metadata(bucket, name))

        return Handler
