"""An all-reduce over TCP with the standard library: rank 0 listens on MASTER_ADDR:MASTER_PORT,
every other rank connects, sends its value, and receives the sum. Stands in for
torch.distributed.init_process_group("gloo", init_method="env://") without needing torch."""

from __future__ import annotations

import argparse
import json
import os
import socket
import time

try:
    import hypertune
except ImportError:
    hypertune = None


def recv_json(conn: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("peer closed the connection")
        data += chunk
    return json.loads(data)


def all_reduce(value: float, rank: int, world: int, addr: str, port: int, timeout: float = 120) -> float:
    if world == 1:
        return value
    if rank == 0:
        with socket.create_server((addr, port)) as server:
            server.settimeout(timeout)
            peers = [server.accept()[0] for _ in range(world - 1)]
            total = value + sum(recv_json(p)["value"] for p in peers)
            for peer in peers:
                peer.sendall(json.dumps({"sum": total}).encode() + b"\n")
                peer.close()
            return total
    deadline = time.monotonic() + timeout
    while True:  # the chief may not be listening yet
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with conn:
        conn.sendall(json.dumps({"rank": rank, "value": value}).encode() + b"\n")
        return recv_json(conn)["sum"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "29500"))
    total = 0.0
    for step in range(args.steps):
        total = all_reduce(float(rank + 1 + step), rank, world, addr, port + step)
        print(f"rank {rank}/{world} step {step}: global sum {total:g}", flush=True)
    if rank == 0 and hypertune is not None:
        hypertune.HyperTune().report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="global_sum", metric_value=total, global_step=args.steps)


if __name__ == "__main__":
    main()
