#!/usr/bin/env python3
"""Takes several lockstream locks over one Session stream, holds them while it "works", and
releases each one.

    .venv/bin/python examples/python/session.py --name examples/a --name examples/b --work-ms 2000

One stream carries every request: `open`, then an `acquire` per lock, each with a request id we
choose (1, 2, ...). Every answer names its request: `queued`, `acquired`, and at the end
`ended` with the status the request ended with (OK after `released`). A request that fails
ends alone; the others go on. Prints "queued NAME ahead=N", "acquired NAME token=T" and
"released NAME"; a failed request prints "error: NAME: CODE: message" on stderr, and the program
exits 1 once the others are released.

Credentials as in acquire.py: --ca (TLS), --cert/--key (mTLS), LOCKSTREAM_TOKEN.
"""

import argparse
import os
import queue
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "gen" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import grpc  # noqa: E402
from acquire import MODES, open_channel  # noqa: E402
from lockstream.v1 import lockstream_pb2 as pb  # noqa: E402
from lockstream.v1 import lockstream_pb2_grpc as pb_grpc  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:50051", help="lockstream server, host:port")
    parser.add_argument("--name", action="append", required=True, help="a lock name (repeat it)")
    parser.add_argument("--mode", choices=MODES, default="mutex", help="how the locks are shared")
    parser.add_argument("--owner", default="example-python-session", help="who is asking")
    parser.add_argument("--wait-timeout-ms", type=int, help="give up queuing after this many ms")
    parser.add_argument("--work-ms", type=int, default=1000, help="simulated work, in ms")
    parser.add_argument("--ca", help="PEM CA certificates to trust: use TLS")
    parser.add_argument("--cert", help="PEM client certificate (with --key), for mTLS")
    parser.add_argument("--key", help="PEM private key of --cert")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    names = {request_id: name for request_id, name in enumerate(args.name, start=1)}

    # As in acquire.py: gRPC reads the request stream from this generator in a thread of its
    # own; None ends it, which half-closes the stream (and would release whatever is still held).
    outbox: "queue.Queue[pb.SessionRequest | None]" = queue.Queue()
    outbox.put(pb.SessionRequest(open=pb.SessionOpen()))
    for request_id, name in names.items():
        acquire = pb.SessionAcquire(request_id=request_id, name=name, mode=MODES[args.mode],
                                    owner=args.owner)
        if args.wait_timeout_ms is not None:
            acquire.wait_timeout.FromMilliseconds(args.wait_timeout_ms)
        outbox.put(pb.SessionRequest(acquire=acquire))

    def requests():
        while (request := outbox.get()) is not None:
            yield request

    undecided = set(names)  # neither acquired nor ended yet
    held = set()
    failed = False
    working = False

    def work_then_release():
        if not failed:
            time.sleep(args.work_ms / 1000)
        for request_id in sorted(held):
            outbox.put(pb.SessionRequest(release=pb.SessionRelease(request_id=request_id)))

    token = os.environ.get("LOCKSTREAM_TOKEN")
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with open_channel(args) as channel:
        responses = pb_grpc.LockServiceStub(channel).Session(requests(), metadata=metadata)
        try:
            for response in responses:
                request_id = response.request_id
                kind = response.WhichOneof("kind")
                if kind == "queued":
                    print(f"queued {names[request_id]} ahead={response.queued.ahead}", flush=True)
                elif kind == "acquired":
                    print(f"acquired {names[request_id]} token={response.acquired.fencing_token}",
                          flush=True)
                    held.add(request_id)
                    undecided.discard(request_id)
                elif kind == "ended":
                    ended = response.ended
                    if ended.code == grpc.StatusCode.OK.value[0]:
                        print(f"released {names[request_id]}", flush=True)
                    else:
                        code = next(c.name for c in grpc.StatusCode if c.value[0] == ended.code)
                        print(f"error: {names[request_id]}: {code}: {ended.message}",
                              file=sys.stderr, flush=True)
                        failed = True
                    held.discard(request_id)
                    undecided.discard(request_id)
                    if not held and not undecided:
                        outbox.put(None)  # all done: half-close; the call ends with OK
                if not undecided and held and not working:
                    # Every request is decided: work in another thread while we keep reading
                    # (if a lock is lost meanwhile, its `ended` arrives here at once).
                    working = True
                    threading.Thread(target=work_then_release, daemon=True).start()
        except grpc.RpcError as error:
            print(f"error: {error.code().name}: {error.details()}", file=sys.stderr, flush=True)
            return 1
        finally:
            outbox.put(None)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
