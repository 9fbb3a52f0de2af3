#!/usr/bin/env python3
"""Takes a lockstream lock, holds it while it "works", and releases it.

    .venv/bin/python examples/python/acquire.py --name examples/report --mode write --work-ms 2000

The lock is an open Acquire stream: send `start`, read `queued` until `acquired`, do the work,
then half-close the stream; the server answers `released` and ends the call with OK.
Prints "queued ahead=N", "acquired token=T", "in doubt"/"confirmed" and "released" on stdout; on a failing status,
"error: <CODE>: <details>" on stderr, and exits 1.

Credentials, as in the other examples: --ca ca.crt for TLS (with --cert and --key for a server
that wants a client certificate), and a bearer token in LOCKSTREAM_TOKEN.
"""

import argparse
import os
import queue
import sys
import threading
import time
from pathlib import Path

# The generated stubs live in gen/python at the repository's root (scripts/gen-polyglot.sh).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "gen" / "python"))

import grpc  # noqa: E402
from lockstream.v1 import lockstream_pb2 as pb  # noqa: E402
from lockstream.v1 import lockstream_pb2_grpc as pb_grpc  # noqa: E402

MODES = {"mutex": pb.LOCK_MODE_MUTEX, "read": pb.LOCK_MODE_READ, "write": pb.LOCK_MODE_WRITE}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:50051", help="lockstream server, host:port")
    parser.add_argument("--name", default="examples/report", help="lock name")
    parser.add_argument("--mode", choices=MODES, default="mutex", help="how the lock is shared")
    parser.add_argument("--owner", default="example-python", help="who is asking, for operators")
    parser.add_argument("--wait-timeout-ms", type=int, help="give up queuing after this many ms "
                        "(0: only if free now; absent: wait as long as it takes)")
    parser.add_argument("--work-ms", type=int, default=1000, help="simulated work, in ms")
    parser.add_argument("--ca", help="PEM CA certificates to trust: use TLS")
    parser.add_argument("--cert", help="PEM client certificate (with --key), for mTLS")
    parser.add_argument("--key", help="PEM private key of --cert")
    parser.add_argument("--hold-until-eof", action="store_true",
                        help="hold the lock until stdin reaches EOF instead")
    return parser.parse_args()


def open_channel(args: argparse.Namespace) -> grpc.Channel:
    """Plaintext, or TLS trusting --ca, with a client certificate if --cert and --key are given."""
    if args.ca is None:
        return grpc.insecure_channel(args.address)

    def pem(path):
        return Path(path).read_bytes() if path else None

    tls = grpc.ssl_channel_credentials(pem(args.ca), pem(args.key), pem(args.cert))
    return grpc.secure_channel(args.address, tls)


def main() -> int:
    args = parse_args()
    start = pb.AcquireStart(name=args.name, mode=MODES[args.mode], owner=args.owner)
    if args.wait_timeout_ms is not None:  # absent: leave wait_timeout unset
        start.wait_timeout.FromMilliseconds(args.wait_timeout_ms)

    # gRPC reads the request stream from an iterator in a thread of its own. This generator
    # blocks on a queue, so the stream stays open for as long as we hold the lock; putting None
    # in the queue ends the generator, which half-closes the stream and so releases the lock.
    outbox: "queue.Queue[pb.AcquireRequest | None]" = queue.Queue()
    outbox.put(pb.AcquireRequest(start=start))

    def requests():
        while (request := outbox.get()) is not None:
            yield request

    def work_then_release():
        if args.hold_until_eof:
            while os.read(0, 65536):  # unbuffered: no lock on sys.stdin left held at exit
                pass
        else:
            time.sleep(args.work_ms / 1000)
        outbox.put(None)

    token = os.environ.get("LOCKSTREAM_TOKEN")
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with open_channel(args) as channel:
        responses = pb_grpc.LockServiceStub(channel).Acquire(requests(), metadata=metadata)
        released = False
        try:
            # Iterating yields the server's messages until the call ends with OK, and raises
            # grpc.RpcError if it ends with any other status.
            for response in responses:
                kind = response.WhichOneof("kind")
                if kind == "queued":
                    print(f"queued ahead={response.queued.ahead}", flush=True)
                elif kind == "acquired":
                    # The fencing token: pass it to whatever the lock protects.
                    print(f"acquired token={response.acquired.fencing_token}", flush=True)
                    # Work in another thread and keep reading here: if the call ends meanwhile
                    # (ABORTED: the lock was lost), we learn it at once.
                    threading.Thread(target=work_then_release, daemon=True).start()
                elif kind == "in_doubt":
                    # The server lost contact with ZooKeeper: pause writes to what the lock guards.
                    print("in doubt", flush=True)
                elif kind == "confirmed":
                    print("confirmed", flush=True)
                elif kind == "released":
                    released = True
        except grpc.RpcError as error:
            # e.g. DEADLINE_EXCEEDED when --wait-timeout-ms ran out.
            print(f"error: {error.code().name}: {error.details()}", file=sys.stderr, flush=True)
            return 1
        finally:
            outbox.put(None)  # let the request generator finish in every case
    if not released:
        print("error: INTERNAL: the call ended without `released`", file=sys.stderr, flush=True)
        return 1
    print("released", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
