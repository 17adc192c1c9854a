#include "bench/floor_sink.h"

namespace ferry::bench {

grpc::Status FloorSink::Process(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<ferry::v1::ProcessResponse, ferry::v1::ProcessRequest>* stream) {
  const auto& metadata = context->client_metadata();
  const auto header = metadata.find(kResultsCreditHeader);
  const bool results_credit = header != metadata.end() && header->second == "1";
  ferry::v1::ProcessResponse response;
  response.mutable_ready()->set_max_in_flight(credit_);
  response.mutable_ready()->set_worker_name("transport-floor-sink");
  if (!stream->Write(response)) return grpc::Status::OK;
  ferry::v1::ProcessRequest request;
  ferry::v1::ProcessResponse credit;
  while (stream->Read(&request)) {
    if (!request.has_events()) continue;
    // One Results per Events message; the message objects are reused, so
    // the steady state allocates nothing per event here.
    ferry::v1::Results* results = response.mutable_results();
    results->Clear();
    for (const ferry::v1::Event& event : request.events().events()) {
      ferry::v1::Result* result = results->add_results();
      result->set_id(event.id());
      result->set_status(ferry::v1::Result::OK);
    }
    const uint32_t n = static_cast<uint32_t>(results->results_size());
    if (results_credit) results->set_credit(n);
    if (!stream->Write(response)) break;
    if (!results_credit) {
      credit.mutable_credit()->set_n(n);
      if (!stream->Write(credit)) break;
    }
  }
  return grpc::Status::OK;
}

}  // namespace ferry::bench
