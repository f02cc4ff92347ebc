"""Many short TCP connections (standard library only): the mice a detector must not demote.

    python -m flowlane_bench.shortflows server --port 9000
    python -m flowlane_bench.shortflows client --host H --port 9000 --count 1000 --bytes 49152

Each client connection sends ``--bytes`` (at most 64 KiB in the benchmark),
waits for the server's one-byte acknowledgement and closes. The client
prints a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import sys
import time


class _Sink(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while self.request.recv(65536):
            pass
        self.request.sendall(b"k")


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(port: int) -> None:
    with _Server(("0.0.0.0", port), _Sink) as server:
        print(f"listening 0.0.0.0:{port}", flush=True)
        server.serve_forever()


def run_clients(host: str, port: int, count: int, size: int) -> dict[str, float]:
    payload = b"x" * size
    errors = 0
    started = time.perf_counter()
    for _ in range(count):
        try:
            with socket.create_connection((host, port), timeout=5) as conn:
                conn.sendall(payload)
                conn.shutdown(socket.SHUT_WR)
                conn.recv(1)
        except OSError:
            errors += 1
    return {
        "connections": count,
        "bytes_each": size,
        "errors": errors,
        "seconds": round(time.perf_counter() - started, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    srv = sub.add_parser("server")
    srv.add_argument("--port", type=int, default=9000)
    cli = sub.add_parser("client")
    cli.add_argument("--host", required=True)
    cli.add_argument("--port", type=int, default=9000)
    cli.add_argument("--count", type=int, default=1000)
    cli.add_argument("--bytes", type=int, default=48 * 1024)
    args = parser.parse_args(argv)
    if args.command == "server":
        serve(args.port)
        return 0
    print(json.dumps(run_clients(args.host, args.port, args.count, args.bytes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
