"""An all-reduce over TCP with the standard library: rank 0 listens on MASTER_ADDR:MASTER_PORT,
every other rank connects once and says its rank (rank 0 checks that they make the world: each
rank once), then each step sends its value and receives the sum. Stands in for
torch.distributed.init_process_group("gloo", init_method="env://") without needing torch; with
several processes per machine (--processes-per-node) each is a rank of its own."""

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


def recv_json(stream) -> dict:
    line = stream.readline()
    if not line:
        raise ConnectionError("peer closed the connection")
    return json.loads(line)


class Group:
    """One TCP connection per peer for the whole run, as a real process group keeps:
    reopening a port per step races with the ephemeral ports the last step's sockets hold."""

    def __init__(self, rank: int, world: int, addr: str, port: int, timeout: float = 120):
        self.rank, self.world, self.peers = rank, world, []
        if world == 1:
            return
        if rank == 0:
            with socket.create_server((addr, port)) as server:
                server.settimeout(timeout)
                conns = [server.accept()[0] for _ in range(world - 1)]
            self.peers = [(c, c.makefile("r")) for c in conns]
            ranks = sorted(recv_json(stream)["rank"] for _, stream in self.peers)
            if ranks != list(range(1, world)):
                raise RuntimeError(f"ranks {ranks} joined rank 0, which is not a world of {world}")
            return
        deadline = time.monotonic() + timeout
        while True:  # the chief may not be listening yet
            try:
                conn = socket.create_connection((addr, port), timeout=timeout)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.peers = [(conn, conn.makefile("r"))]
        conn.sendall(json.dumps({"rank": rank}).encode() + b"\n")

    def all_reduce(self, value: float) -> float:
        if self.world == 1:
            return value
        if self.rank == 0:
            total = value + sum(recv_json(stream)["value"] for _, stream in self.peers)
            for conn, _ in self.peers:
                conn.sendall(json.dumps({"sum": total}).encode() + b"\n")
            return total
        conn, stream = self.peers[0]
        conn.sendall(json.dumps({"rank": self.rank, "value": value}).encode() + b"\n")
        return recv_json(stream)["sum"]

    def close(self) -> None:
        for conn, stream in self.peers:
            stream.close()
            conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "29500"))
    group = Group(rank, world, addr, port)
    total = 0.0
    try:
        for step in range(args.steps):
            total = group.all_reduce(float(rank + 1 + step))
            print(f"rank {rank}/{world} step {step}: global sum {total:g}", flush=True)
    finally:
        group.close()
    if rank == 0 and hypertune is not None:
        hypertune.HyperTune().report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="global_sum", metric_value=total, global_step=args.steps)


if __name__ == "__main__":
    main()
