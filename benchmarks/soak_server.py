"""A bounded soak of ``infercast serve``: many requests of every kind, then what is left over.

Loopback only, bounded in count and time. One server (the random ``tiny``
model, as ``serve --model tiny``) runs in this process; client threads send a
mix for ``--seconds`` or ``--requests``, whichever ends first:

- valid completions and chat requests, streaming and not (some seeded with
  negative seeds, some at a subnormal temperature: the requests that once
  killed the engine),
- invalid ones (wrong types, NaN, lone surrogates, oversized bodies),
- clients that disconnect mid-request, streaming and not,
- a slowloris socket now and then (headers never finished).

Printed: requests by outcome, unexpected answers (anything but 200/400/413/429
or a deliberate disconnect), process RSS before and after (MiB = 2**20 bytes),
KV blocks in use after the run, engine step failures and /health.

    python benchmarks/soak_server.py --seconds 60 --requests 3000 --clients 8
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))
from conftest import running_server  # noqa: E402 - the tests' loopback server helper

MODEL = "random-tiny"


def rss_mib() -> float:
    """Resident set size of this process (VmRSS), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 2**20
    return float("nan")


def _raw(url: str, payload: bytes, headers: bytes = b"") -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + headers
        + b"Content-Length: "
        + str(len(payload)).encode()
        + b"\r\n\r\n"
        + payload
    )
    return sock


def one_request(url: str, rng: random.Random, client: httpx.Client) -> str:
    """Send one request of a random kind; return its outcome label."""
    kind = rng.choices(
        [
            "ok",
            "ok_stream",
            "chat",
            "odd_sampling",
            "invalid",
            "big",
            "leave",
            "leave_stream",
            "slowloris",
        ],
        weights=[30, 20, 10, 10, 12, 3, 6, 6, 3],
    )[0]
    body = {
        "model": MODEL,
        "prompt": "soak " * rng.randint(1, 20),
        "max_tokens": rng.randint(1, 24),
    }
    if kind in ("leave", "leave_stream"):
        body.update(max_tokens=200, ignore_eos=True, stream=kind == "leave_stream")
        sock = _raw(url, json.dumps(body).encode())
        time.sleep(rng.uniform(0.01, 0.2))
        sock.close()
        return kind
    if kind == "slowloris":
        host, port = url.removeprefix("http://").split(":")
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(5)
        closed = sock.recv(10) == b""  # the server must hang up after its header timeout
        sock.close()
        return "slowloris_closed" if closed else "slowloris_UNEXPECTED"
    if kind == "odd_sampling":
        body.update(
            rng.choice(
                [
                    {"seed": -rng.randint(1, 2**63)},
                    {"temperature": 1e-320},
                    {"temperature": 5e-324, "top_p": 1e-300},
                ]
            )
        )
    if kind == "invalid":
        body.update(
            rng.choice(
                [
                    {"max_tokens": "4"},
                    {"max_tokens": True},
                    {"temperature": float("nan")},
                    {"prompt": "\ud800"},
                    {"seed": 2**70},
                    {"stop": [""]},
                    {"top_p": 0},
                ]
            )
        )
    if kind == "big":
        body["prompt"] = "x" * 5_000_000
    path = "/v1/completions"
    if kind == "chat":
        path = "/v1/chat/completions"
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": body["prompt"]}],
            "max_tokens": body["max_tokens"],
        }
    if kind == "ok_stream":
        body["stream"] = True
    raw = json.dumps(body).encode("utf-8", "surrogatepass")
    r = client.post(f"{url}{path}", content=raw, headers={"content-type": "application/json"})
    expected = {"invalid": (400,), "big": (413,)}.get(kind, (200, 429))
    return f"{kind}_{r.status_code}" + ("" if r.status_code in expected else "_UNEXPECTED")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from infercast.engine.http_limits import ServerLimits

    limits = ServerLimits(header_timeout_s=2.0, body_timeout_s=5.0)
    with running_server(max_model_len=512, max_waiting=16, max_num_seqs=8, limits=limits) as (
        url,
        engine,
    ):
        httpx.get(f"{url}/health")
        rss_before = rss_mib()
        outcomes: Counter = Counter()
        lock = threading.Lock()
        stop_at = time.monotonic() + args.seconds
        sent = iter(range(args.requests))
        t0 = time.monotonic()

        def worker(i: int) -> None:
            rng = random.Random(args.seed * 1000 + i)
            with httpx.Client(timeout=60) as client:
                while time.monotonic() < stop_at:
                    with lock:
                        if next(sent, None) is None:
                            return
                    try:
                        label = one_request(url, rng, client)
                    except (httpx.HTTPError, OSError) as exc:
                        label = f"client_error_{type(exc).__name__}_UNEXPECTED"
                    with lock:
                        outcomes[label] += 1

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        deadline = time.monotonic() + 10  # let aborts of the last leavers land
        while engine.scheduler.kv.num_used_blocks and time.monotonic() < deadline:
            time.sleep(0.05)
        health = httpx.get(f"{url}/health")
        after = httpx.post(
            f"{url}/v1/completions",
            timeout=30,
            json={"model": MODEL, "prompt": "after", "max_tokens": 3},
        )
        report = {
            "requests": sum(outcomes.values()),
            "wall_s": round(wall, 1),
            "unexpected": sum(n for k, n in outcomes.items() if k.endswith("_UNEXPECTED")),
            "outcomes": dict(sorted(outcomes.items())),
            "rss_before_mib": round(rss_before, 1),
            "rss_after_mib": round(rss_mib(), 1),
            "kv_blocks_used_after": engine.scheduler.kv.num_used_blocks,
            "kv_blocks_total": engine.scheduler.config.num_blocks,
            "running_after": engine.num_running,
            "waiting_after": engine.num_waiting,
            "health_status": health.status_code,
            "step_failures": health.json()["step_failures"],
            "request_after_soak": after.status_code,
        }
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
