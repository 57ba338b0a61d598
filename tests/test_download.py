"""Downloads of the official weights (elmo_features.formats.download.download_url): resumed after a dropped connection,
checked by size, sha256 and ETag, one writer per file. Against a local HTTP server on the loopback address."""
from __future__ import annotations

import hashlib
import http.server
import threading

import pytest

from elmo_features.formats.download import DownloadError, download_url

DATA = bytes(range(256)) * 4096  # 1 MiB


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves DATA at any path; honours Range; the first ``drops`` responses stop after 100 kB; ``etag`` is sent."""

    drops = 0
    etag = hashlib.md5(DATA).hexdigest()
    ranges: list = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        rng = self.headers.get("Range")
        start = int(rng.split("=")[1].split("-")[0]) if rng else 0
        type(self).ranges.append(start)
        body = DATA[start:]
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", f'"{self.etag}"')
        self.end_headers()
        if type(self).drops > 0:
            type(self).drops -= 1
            self.wfile.write(body[:100_000])
            self.wfile.flush()
            self.connection.shutdown(2)  # the connection drops mid-file
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Handler.drops, Handler.ranges, Handler.etag = 0, [], hashlib.md5(DATA).hexdigest()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/weights.hdf5"
    httpd.shutdown()


def test_a_dropped_connection_is_resumed_from_where_it_stopped(server, tmp_path, capsys):
    Handler.drops = 2
    dest = download_url(server, tmp_path / "w.hdf5", sha256=hashlib.sha256(DATA).hexdigest(), backoff=0.01)
    assert dest.read_bytes() == DATA
    assert Handler.ranges == [0, 100_000, 200_000]  # each retry asked for the rest only
    assert "retrying" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.hdf5"]


def test_a_failed_download_keeps_its_part_and_the_next_call_continues(server, tmp_path):
    Handler.drops = 10
    with pytest.raises(DownloadError, match="after 2 tries.*kept in .*w.hdf5.part"):
        download_url(server, tmp_path / "w.hdf5", retries=1, backoff=0.01)
    assert (tmp_path / "w.hdf5.part").stat().st_size == 200_000
    Handler.drops = 0
    assert download_url(server, tmp_path / "w.hdf5").read_bytes() == DATA
    assert Handler.ranges[-1] == 200_000


def test_checksum_and_etag_mismatches_delete_the_file(server, tmp_path):
    with pytest.raises(DownloadError, match="sha256 .* differs from the expected"):
        download_url(server, tmp_path / "a.hdf5", sha256="0" * 64)
    Handler.etag = "0" * 32
    with pytest.raises(DownloadError, match="differs from the server's ETag"):
        download_url(server, tmp_path / "b.hdf5")
    assert list(tmp_path.iterdir()) == []


def test_http_errors_are_one_line_without_retrying_a_404(tmp_path):
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_error(404)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(DownloadError, match="HTTP 404"):
            download_url(f"http://127.0.0.1:{httpd.server_address[1]}/x", tmp_path / "x", backoff=10)
    finally:
        httpd.shutdown()
