"""A ferry Processor worker with nothing but the gRPC-generated stubs: no SDK.

It acks every event. Generate the stubs next to this file, then run it:

    python -m grpc_tools.protoc -I ../../proto/ferry/v1 --python_out=. \\
        --grpc_python_out=. processor.proto
    python plain_worker.py --listen 127.0.0.1:50051 --max_in_flight 64

The whole protocol, as this worker speaks it (see README.md):
  1. ferry opens Process (a bidirectional stream); we send Ready{max_in_flight}
     first: that many events of credit.
  2. ferry sends Events{events}; each event uses one unit of credit.
  3. We answer each event with a Result (id, status) in a Results message,
     then return the credit with Credit{n} (results alone return none).
  4. Cancel{ids}: ferry no longer wants those results. Here every event is
     answered as soon as it arrives, so there is never anything to cancel.
"""

import argparse
import signal
import socket
import threading
from concurrent import futures

import grpc

import processor_pb2 as pb
import processor_pb2_grpc as pb_grpc


class AckEverything(pb_grpc.ProcessorServicer):
    def __init__(self, max_in_flight: int, name: str):
        self.max_in_flight = max_in_flight
        self.name = name

    def Process(self, request_iterator, context):  # noqa: N802 - the gRPC method name
        # 1. Ready: the first message, and the initial credit.
        yield pb.ProcessResponse(
            ready=pb.Ready(max_in_flight=self.max_in_flight, worker_name=self.name)
        )
        for request in request_iterator:
            if request.WhichOneof("kind") != "events":
                continue  # Cancel: nothing is pending here, so nothing to do.
            events = request.events.events
            if not events:
                continue
            # 2./3. Process, answer every event once, then give the credit back.
            results = [pb.Result(id=e.id, status=pb.Result.OK) for e in events]
            yield pb.ProcessResponse(results=pb.Results(results=results))
            yield pb.ProcessResponse(credit=pb.Credit(n=len(events)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:50051", help="port 0 = any free port")
    parser.add_argument("--max_in_flight", type=int, default=64)
    parser.add_argument("--name", default=socket.gethostname())
    args = parser.parse_args()

    # One thread per open stream: ferry keeps `streams` (default 4) per target.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    pb_grpc.add_ProcessorServicer_to_server(AckEverything(args.max_in_flight, args.name), server)
    port = server.add_insecure_port(args.listen)
    server.start()
    print(f"plain_worker listening on {args.listen.rsplit(':', 1)[0]}:{port}", flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    # Streams end (ferry redelivers anything unanswered); a real worker would
    # first stop sending credit and finish its in-flight events.
    server.stop(grace=5).wait()


if __name__ == "__main__":
    main()
