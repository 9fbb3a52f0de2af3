#!/usr/bin/env python3
"""Campaigns in a lockstream election, leads for a while, then resigns.

    .venv/bin/python examples/python/election.py --name examples/scheduler --value 10.0.0.7:8080 --lead-ms 2000

With the Python client (clients/python: `pip install ./clients/python`, README "From Python").
Prints "queued ahead=N" while other candidates are ahead, "elected term=T" once it leads,
"proclaimed" after replacing its value with --proclaim, "leader term=T value=V" (the leader as
anyone asking sees it), then "resigned". If the leadership is lost meanwhile it prints "lost",
then "error: ABORTED: <details>" on stderr, and exits 1; so does any other failure, with its code.

Credentials as in acquire.py: --ca (TLS), --cert/--key (mTLS), LOCKSTREAM_TOKEN.
"""

import argparse
import os
import sys
import threading
from pathlib import Path

import grpc
import lockstream


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:50051", help="lockstream server, host:port")
    parser.add_argument("--name", default="examples/scheduler", help="election name")
    parser.add_argument("--owner", default="example-python", help="who campaigns, for observers")
    parser.add_argument("--value", default="10.0.0.7:8080", help="the candidate's value")
    parser.add_argument("--proclaim", default="10.0.0.7:9443", help="the value to proclaim once elected")
    parser.add_argument("--lead-ms", type=int, default=1000, help="how long to lead, in ms")
    parser.add_argument("--lead-until-eof", action="store_true",
                        help="lead until stdin reaches EOF instead")
    parser.add_argument("--ca", help="PEM CA certificates to trust: use TLS")
    parser.add_argument("--cert", help="PEM client certificate (with --key), for mTLS")
    parser.add_argument("--key", help="PEM private key of --cert")
    return parser.parse_args()


def tls(args: argparse.Namespace) -> grpc.ChannelCredentials | None:
    """None (plaintext), or TLS trusting --ca, with a client certificate if --cert and --key are given."""
    if args.ca is None:
        return None

    def pem(path: str | None) -> bytes | None:
        return Path(path).read_bytes() if path else None

    return grpc.ssl_channel_credentials(pem(args.ca), pem(args.key), pem(args.cert))


def lead(client: lockstream.Client, args: argparse.Namespace) -> None:
    finished = threading.Event()  # set when the leader is done
    if args.lead_until_eof:
        threading.Thread(target=read_to_eof, args=(finished,), daemon=True).start()

    # [docs:elections]
    # Waits until elected: candidates are elected one at a time, in the order they joined.
    with client.campaign(args.name, args.value,
                         on_queued=lambda ahead: print(f"queued ahead={ahead}", flush=True)) as leadership:
        # The term is the leader's fencing token: larger for every later leader.
        print(f"elected term={leadership.term}", flush=True)

        def on_lost(error: lockstream.LockLost) -> None:
            print("lost", flush=True)
            finished.set()  # stop leading at once

        leadership.on_lost(on_lost)

        leadership.proclaim(args.proclaim)  # observers are told
        print("proclaimed", flush=True)
        leader = client.leader(args.name)  # anyone can ask: a Term, or None when nobody leads
        if leader is not None:
            print(f"leader term={leader.term} value={leader.value.decode()}", flush=True)

        # Lead (passing leadership.term on) until done, or until lost.
        finished.wait(None if args.lead_until_eof else args.lead_ms / 1000)
    # Leaving the block resigns (the next candidate is elected), or raises LockLost if it was lost.
    print("resigned", flush=True)
    # [/docs:elections]


def read_to_eof(finished: threading.Event) -> None:
    while os.read(0, 65536):  # unbuffered: no lock on sys.stdin left held at exit
        pass
    finished.set()


def main() -> int:
    args = parse_args()
    token = os.environ.get("LOCKSTREAM_TOKEN") or None
    try:
        with lockstream.Client(args.address, owner=args.owner, credentials=tls(args), token=token) as client:
            lead(client, args)
    except lockstream.LockError as error:
        print(f"error: {error.code.name}: {error.message}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
