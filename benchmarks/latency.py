"""A registry some milliseconds away, on loopback: a TCP forwarder that delivers every chunk, each way, half the
round-trip time after it arrived (latency without a bandwidth limit: chunks keep their order and overlap as on a
real link). What an edit pays in round trips shows here, where a loopback registry hides it behind CPU time."""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _pump(source: socket.socket, target: socket.socket, one_way: float) -> None:
    chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

    def deliver() -> None:
        while True:
            due, data = chunks.get()
            time.sleep(max(0.0, due - time.monotonic()))
            if not data:
                break
            try:
                target.sendall(data)
            except OSError:
                break
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    sender = threading.Thread(target=deliver, daemon=True)
    sender.start()
    while True:
        try:
            data = source.recv(1 << 16)
        except OSError:
            data = b""
        chunks.put((time.monotonic() + one_way, data))
        if not data:
            break
    sender.join()


def _serve(listener: socket.socket, upstream: tuple[str, int], one_way: float) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        server = socket.create_connection(upstream)
        for a, b in ((client, server), (server, client)):
            a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=_pump, args=(a, b, one_way), daemon=True).start()


@contextmanager
def far(registry: str, rtt_ms: float) -> Iterator[str]:
    """HOST:PORT of REGISTRY (HOST:PORT on loopback) as if RTT_MS away."""
    host, port = registry.rsplit(":", 1)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, (host, int(port)), rtt_ms / 2000), daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
