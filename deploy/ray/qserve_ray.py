#!/usr/bin/env python3
"""qserve replicas under Ray Serve (docs/SERVING.md, "Beyond one machine").

Each replica of the `QServe` deployment runs one qserve process on the artifact
(on 127.0.0.1, a free port) and forwards the OpenAI API to it: the request's
method, path, query and body as they came, the answer as qserve gives it
(server-sent events streamed through). Ray Serve's HTTP proxy spreads the
requests over the replicas (it picks the less loaded of two, by queue length)
and starts replicas on the cluster's nodes; qserve keeps its own continuous
batching inside each replica. Every answer carries `x-qcc-replica`, the replica
that served it.

    python deploy/ray/qserve_ray.py MODEL.qpkg [--replicas 2] [--port 8000]
        [--qserve build/bin/qserve] [--cpus-per-replica 1] [-- QSERVE FLAGS...]

starts Ray on this machine (or joins RAY_ADDRESS), deploys, prints
"[qserve-ray] N replicas on http://HOST:PORT" and serves until interrupted.
Ray Serve (`ray[serve]` from PyPI) runs here in its own virtual environment,
.venv-ray (scripts/setup.sh); qserve itself needs no Python.
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import aiohttp
from ray import serve
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

# Headers that describe one hop of HTTP, not the message (RFC 9110 7.6.1),
# the ones aiohttp sets itself, and the encoding: the hop to qserve is local
# and uncompressed (aiohttp would decompress an answer anyway), and Ray
# Serve's proxy encodes for the client.
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "te", "trailer",
               "upgrade", "proxy-authorization", "proxy-authenticate", "host",
               "content-length", "accept-encoding", "content-encoding"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@serve.deployment
class QServe:
    """One qserve process and a proxy to it."""

    def __init__(self, qserve, artifact, flags=(), start_timeout=120.0):
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.log = []
        self.proc = subprocess.Popen(
            [qserve, artifact, "--host", "127.0.0.1", "--port", "0", *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.monotonic() + start_timeout
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
            if time.monotonic() > deadline:
                break
        if port is None:
            self.proc.kill()
            raise RuntimeError("qserve did not start:\n" + "".join(self.log[-20:]))
        # Keep reading its stderr so qserve never blocks on a full pipe.
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr),
                         daemon=True).start()
        self.base = f"http://127.0.0.1:{port}"
        self.session = None

    async def __call__(self, request: Request):
        if self.session is None:
            # No total timeout: a long generation streams for as long as it
            # takes; qserve applies its own limits.
            self.session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        url = self.base + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in HOP_HEADERS}
        body = await request.body()
        upstream = await self.session.request(request.method, url, data=body,
                                              headers=headers)
        out_headers = {k: v for k, v in upstream.headers.items()
                       if k.lower() not in HOP_HEADERS}
        out_headers["x-qcc-replica"] = self.replica
        if upstream.headers.get("content-type", "").startswith("text/event-stream"):
            async def events():
                try:
                    async for chunk in upstream.content.iter_any():
                        yield chunk
                finally:
                    upstream.release()
            return StreamingResponse(events(), status_code=upstream.status,
                                     headers=out_headers)
        data = await upstream.read()
        upstream.release()
        return Response(data, status_code=upstream.status, headers=out_headers)

    def __del__(self):
        proc = getattr(self, "proc", None)
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def main():
    p = argparse.ArgumentParser(
        description="qserve replicas under Ray Serve",
        epilog="Arguments after -- go to every qserve (e.g. -- --max-sequences 16).")
    p.add_argument("artifact", help="the .qpkg every replica serves")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--host", default="127.0.0.1", help="Ray Serve's HTTP address")
    p.add_argument("--port", type=int, default=8000,
                   help="Ray Serve's HTTP port (0: a free one)")
    p.add_argument("--qserve", default=None,
                   help="the qserve binary (default: build/bin/qserve beside this repository)")
    p.add_argument("--cpus-per-replica", type=float, default=1.0,
                   help="CPUs Ray reserves for each replica (qserve's --threads should match)")
    p.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs of the local Ray instance (default: Ray's count)")
    args, rest = p.parse_known_args()
    flags = rest[1:] if rest[:1] == ["--"] else rest
    if args.replicas < 1:
        p.error("--replicas must be at least 1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    qserve = args.qserve or os.path.join(root, "build", "bin", "qserve")
    if not (os.path.isfile(qserve) and os.access(qserve, os.X_OK)):
        p.error(f"--qserve {qserve}: not an executable (build with scripts/build.sh)")
    if not os.path.isfile(args.artifact):
        p.error(f"{args.artifact}: no such artifact")
    port = args.port or free_port()

    # Ray Serve gives its HTTP proxy 5 s to answer a readiness check and
    # restarts it after three misses; on a busy machine of two cores its
    # imports alone take longer. (The local Ray processes inherit this.)
    os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")
    import ray
    ray.init(address=os.environ.get("RAY_ADDRESS"), num_cpus=args.num_cpus,
             include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": args.host, "port": port})
    app = QServe.options(
        num_replicas=args.replicas,
        ray_actor_options={"num_cpus": args.cpus_per_replica},
        # qserve batches concurrent requests itself: let each replica take
        # many at once rather than queueing them in Ray.
        max_ongoing_requests=256,
    ).bind(os.path.abspath(qserve), os.path.abspath(args.artifact), flags)
    serve.run(app, name="qserve", route_prefix="/")
    print(f"[qserve-ray] {args.replicas} replicas on http://{args.host}:{port}",
          file=sys.stderr, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
