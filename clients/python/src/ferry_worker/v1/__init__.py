"""ferry.v1 wire contract: processor_pb2 / processor_pb2_grpc are generated
from proto/ferry/v1/processor.proto by grpcio-tools (clients/python/gen_protos.py)."""
