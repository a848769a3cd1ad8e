"""MCP-over-HTTP benchmark: prints measured figures (Markdown) for bench/RESULTS.md.

    .venv/bin/python bench/bench_mcp.py [--calls 200] [--clients 16]

Starts `skillkb mcp --http` twice in one run — as shipped (the listening socket says it is TCP, so
asyncio sets TCP_NODELAY on every accepted connection) and with the listening socket made the old way
(proto 0, no TCP_NODELAY) — and measures, on a reused connection through the MCP SDK client:
1. sequential `search` calls: p50 / p95 per call;
2. 16 concurrent clients: calls per second;
side by side with the time the search itself takes in-process (the floor for any transport).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from mcp import Client  # noqa: E402

from skillkb.retrieval import engine_for  # noqa: E402

QUERIES = [
    "AclmdlRICaptureBegin error code is 207008",
    "显存不足 910B 推理服务",
    "host memory keeps growing with CPU KV offload",
    "Sleep mode freed 0.00 GiB",
    "Malloc pin memory failed",
    "模型权重加载报错 key mismatch",
]
# The server as it was before the fix: a listening socket created with proto 0.
OLD_SOCKET = """
import socket, sys
import skillkb.mcp_server as m
def old(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((m.HTTP_HOST, port)); sock.listen(128)
    return sock
m._bound_socket = old
sys.exit(m.cmd_mcp_main())
"""


def start(nodelay: bool) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1"}
    args = ["--root", str(ROOT), "mcp", "--http", "--port", "0"]
    if nodelay:
        command = [sys.executable, "-m", "skillkb.cli", *args]
    else:
        launcher = OLD_SOCKET.replace("m.cmd_mcp_main()", f"__import__('skillkb.cli').cli.main({args!r})")
        command = [sys.executable, "-c", launcher]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if "serving http://" not in line:
        raise SystemExit(f"server did not start: {line}")
    return proc, line.split("serving ", 1)[1].strip()


async def sequential(url: str, calls: int) -> list[float]:
    times = []
    async with Client(url) as client:
        await client.call_tool("search", {"query": "warm up", "k": 5})
        for i in range(calls):
            start = time.perf_counter()
            result = await client.call_tool("search", {"query": QUERIES[i % len(QUERIES)], "k": 5})
            times.append(time.perf_counter() - start)
            assert not result.is_error
    return times


async def concurrent(url: str, clients: int, calls: int) -> float:
    done = 0

    async def one() -> None:
        nonlocal done
        async with Client(url) as client:
            for i in range(calls):
                await client.call_tool("search", {"query": QUERIES[i % len(QUERIES)], "k": 5})
                done += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(one)
    return done / (time.perf_counter() - start)


def in_process(calls: int) -> list[float]:
    engine = engine_for(ROOT)
    engine.search("warm up")
    times = []
    for i in range(calls):
        start = time.perf_counter()
        engine.search(QUERIES[i % len(QUERIES)], k=5)
        times.append(time.perf_counter() - start)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    search_times = in_process(args.calls)
    rows = []
    for label, nodelay in (("as shipped (TCP_NODELAY)", True), ("before the fix (proto 0)", False)):
        proc, url = start(nodelay)
        try:
            seq = anyio.run(sequential, url, args.calls)
            rate = anyio.run(concurrent, url, args.clients, max(args.calls // args.clients, 5))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        rows.append((label, statistics.median(seq), pct(seq, 0.95), rate))
    print("# MCP over streamable HTTP\n")
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; {args.calls} sequential calls on one")
    print(f"session, then {args.clients} concurrent clients; tool `search` (k=5), {len(QUERIES)} rotating queries\n")
    print("| server | sequential p50 | sequential p95 | concurrency-16 calls/s |")
    print("|---|---|---|---|")
    for label, p50, p95, rate in rows:
        print(f"| {label} | {p50 * 1000:.2f} ms | {p95 * 1000:.2f} ms | {rate:.1f} |")
    print(f"| search itself, in-process | {statistics.median(search_times) * 1000:.2f} ms "
          f"| {pct(search_times, 0.95) * 1000:.2f} ms | — |")  # fmt: skip
    ratio = rows[1][1] / rows[0][1]
    print(f"\nsequential p50, before / after: {ratio:.1f}x")


if __name__ == "__main__":
    main()
