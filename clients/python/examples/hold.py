"""Takes one lock with the Python client and holds it until told to release it, for the
cross-language tests (test/integration/interop.test.ts) and for trying the client out.

    python examples/hold.py --address 127.0.0.1:50051 --name reports/daily --mode write

Prints "queued ahead=N", "acquired token=T", then reads commands on stdin: "describe" prints
"holders tokens=T1,T2", "release" releases and prints "released"; end of input releases too. If
the lock is lost it prints "lost ERROR" and exits 3. With --history FILE it appends
"enter OWNER TOKEN" once granted and "exit OWNER TOKEN" before releasing.
"""

from __future__ import annotations

import argparse
import os
import sys

import lockstream


def record(history: str | None, event: str, owner: str, token: int) -> None:
    if history:
        with open(history, "a") as file:
            file.write(f"{event} {owner} {token}\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--name", required=True)
    parser.add_argument("--mode", default="mutex", choices=["mutex", "read", "write"])
    parser.add_argument("--owner", default="python")
    parser.add_argument("--history")
    parser.add_argument("--resume-grace", type=float, default=5.0)
    args = parser.parse_args()

    def lost(error: lockstream.LockLost) -> None:
        print("lost", error, flush=True)
        os._exit(3)

    with lockstream.Client(args.address, owner=args.owner, resume_grace=args.resume_grace) as client:
        lock = client.lock(args.name, mode=args.mode,
                           on_queued=lambda ahead: print(f"queued ahead={ahead}", flush=True))
        record(args.history, "enter", args.owner, lock.token)
        print(f"acquired token={lock.token}", flush=True)
        lock.on_lost(lost)
        for line in sys.stdin:
            command = line.strip()
            if command == "describe":
                tokens = ",".join(str(holder.token) for holder in client.describe(args.name).holders)
                print(f"holders tokens={tokens}", flush=True)
            elif command == "release":
                break
        record(args.history, "exit", args.owner, lock.token)
        lock.release()
        print("released", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
