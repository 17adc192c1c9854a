"""Hello world: ack every event, fail empty ones. python -m ferry_worker.examples.hello [ADDR]"""
import sys

import ferry_worker


def handle(event):
    if not event.payload:
        return ferry_worker.fail("empty payload")
    print(f"{event.topic}/{event.partition}@{event.offset}: {event.payload!r}", flush=True)
    return ferry_worker.ok()  # or ferry_worker.retry("why", after_seconds=5)


if __name__ == "__main__":
    worker = ferry_worker.Worker(handle, name="hello")
    # Serves until SIGTERM/SIGINT, then stops gracefully.
    worker.serve(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051")
