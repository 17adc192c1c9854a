// EngineModel, worker side: streams, messages, dispatch and snapshot checks,
// timers and the final drain (engine_model.h).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/redelivery.h"
#include "core/common/worker_text.h"
#include "tests/fuzz/utf8.h"
#include "tests/fuzz/engine_model.h"

namespace ferry::fuzz {
namespace {

bool KnownStatus(v1::Result::Status status) {
  return status == v1::Result::OK || status == v1::Result::RETRY ||
         status == v1::Result::FAIL || status == v1::Result::STATUS_UNSPECIFIED ||
         status == v1::Result::NOT_ATTEMPTED;
}

}  // namespace

int EngineModel::OpenStream() {
  StreamModel stream;
  stream.index = stream_count();
  stream.fake = std::make_unique<testing::FakeWorkerStream>(absl::StrCat("s", streams_.size()));
  stream.engine_id = engine_->AddStream(0, stream.fake.get());
  streams_.push_back(std::move(stream));
  int open = 0;
  for (const StreamModel& candidate : streams_) open += candidate.open ? 1 : 0;
  return open - 1;  // the newest open stream
}

absl::Status EngineModel::Ready(int stream, uint32_t credit, uint32_t max_run) {
  v1::ProcessResponse response;
  response.mutable_ready()->set_max_in_flight(credit);
  response.mutable_ready()->set_max_run(max_run);
  response.mutable_ready()->set_worker_name("model");
  return Respond(stream, response);
}

absl::Status EngineModel::Credit(int stream, uint32_t credit) {
  v1::ProcessResponse response;
  response.mutable_credit()->set_n(credit);
  return Respond(stream, response);
}

absl::Status EngineModel::Answer(int stream, int pick, v1::Result::Status status,
                                 uint32_t credit, uint32_t retry_after_ms) {
  StreamModel* model = StreamAt(stream);
  if (model == nullptr || !model->open) return absl::OkStatus();
  const int index = model->index;
  std::vector<uint64_t> ids;
  for (uint64_t id : outstanding_) {
    if (deliveries_.at(id).stream == index) ids.push_back(id);
  }
  v1::ProcessResponse response;
  v1::Results* results = response.mutable_results();
  results->set_credit(credit);
  if (!ids.empty()) {
    v1::Result* result = results->add_results();
    result->set_id(ids[Wrap(pick, static_cast<int>(ids.size()))]);
    result->set_status(status);
    result->set_retry_after_ms(retry_after_ms);
    result->set_message("model");
  }
  return RespondTo(*model, response);
}

absl::Status EngineModel::WorkerBytes(int stream, const std::string& bytes) {
  StreamModel* model = StreamAt(stream);
  if (model == nullptr) return absl::OkStatus();
  v1::ProcessResponse response;
  if (response.ParseFromString(bytes)) return RespondTo(*model, response);
  // As server/workers/worker_pool.cc: a protocol error, then the stream is reset.
  engine_->OnProtocolError(model->engine_id, "unparsable");
  if (std::find(reset_requests_.begin(), reset_requests_.end(), model->fake.get()) ==
      reset_requests_.end()) {
    reset_requests_.push_back(model->fake.get());
  }
  return AfterStep();
}

absl::Status EngineModel::Respond(int stream, const v1::ProcessResponse& response) {
  StreamModel* model = StreamAt(stream);
  if (model == nullptr) return absl::OkStatus();
  return RespondTo(*model, response);
}

absl::Status EngineModel::RespondTo(StreamModel& stream, const v1::ProcessResponse& response) {
  if (!stream.open) return absl::OkStatus();  // nothing reads it
  StreamModel* model = &stream;
  const int index = model->index;
  switch (response.kind_case()) {
    case v1::ProcessResponse::kReady:
      engine_->OnReady(model->engine_id, response.ready().max_in_flight(),
                       response.ready().worker_name(), response.ready().max_run());
      if (!model->ready) {
        model->ready = true;  // a second Ready is ignored (and counted)
        model->granted += response.ready().max_in_flight();
      }
      break;
    case v1::ProcessResponse::kCredit:
      engine_->OnCredit(model->engine_id, response.credit().n());
      if (model->ready) model->granted += response.credit().n();
      break;
    case v1::ProcessResponse::kResults: {
      engine_->OnResults(model->engine_id, response.results());
      const bool reset = std::find(reset_requests_.begin(), reset_requests_.end(),
                                   model->fake.get()) != reset_requests_.end();
      ApplyResults(index, response.results(), reset);
      break;
    }
    default:
      break;  // the pool ignores an empty message
  }
  return AfterStep();
}

void EngineModel::ApplyResults(int stream, const v1::Results& results, bool reset) {
  StreamModel& model = streams_[stream];
  bool any_unknown_status = false;
  for (const v1::Result& result : results.results()) {
    if (!KnownStatus(result.status())) any_unknown_status = true;
  }
  for (const v1::Result& result : results.results()) {
    auto it = deliveries_.find(result.id());
    if (it == deliveries_.end() || it->second.stream != stream) continue;  // stale
    Delivery& delivery = it->second;
    if (delivery.state != DeliveryState::kOutstanding) continue;  // stale or unknown anyway
    if (any_unknown_status) {
      // The engine stops at the first unknown status of an id it knows:
      // which results before it applied is not worth modelling.
      SetState(it->first, delivery, DeliveryState::kUnknown);
      continue;
    }
    if (!model.ready) continue;  // results before Ready are dropped
    delivery.answer = result.status();
    SetState(it->first, delivery, DeliveryState::kAnswered);
  }
  if (model.ready && !reset) model.granted += results.credit();
}

absl::Status EngineModel::CloseStream(int stream) {
  StreamModel* model = StreamAt(stream);
  if (model == nullptr || !model->open) return absl::OkStatus();
  const int index = model->index;
  StreamLost(index);
  model->open = false;
  engine_->OnStreamClosed(model->engine_id);
  OpenStream();  // the pool opens another in its place
  return AfterStep();
}

void EngineModel::StreamLost(int stream) {
  std::vector<uint64_t> lost;
  for (uint64_t id : outstanding_) {
    if (deliveries_.at(id).stream == stream) lost.push_back(id);
  }
  for (uint64_t id : lost) {
    Delivery& delivery = deliveries_.at(id);
    PartitionModel& partition = partitions_[delivery.partition];
    auto offset = partition.offsets.find(delivery.offset);
    bool may_fail = true;
    if (delivery.epoch == partition.epoch && offset != partition.offsets.end()) {
      may_fail = ++offset->second.losses > kMaxRedeliveries;
    }
    // Within the bound it is certainly redelivered; past it, maybe failed.
    SetState(id, delivery, may_fail ? DeliveryState::kUnknown : DeliveryState::kRequeued);
  }
}

absl::Status EngineModel::Tick(absl::Duration advance) {
  clock_.Advance(advance);
  const int64_t now_ms = absl::ToUnixMillis(clock_.Now());
  // Deadlines are in whole milliseconds on the wire: within one of now, the
  // engine may or may not have expired the delivery.
  std::vector<uint64_t> maybe_expired;
  for (uint64_t id : outstanding_) {
    if (deliveries_.at(id).deadline_ms <= now_ms + 1) maybe_expired.push_back(id);
  }
  // A run member that expires takes the later members of its run with it
  // (cancelled and given back).
  std::map<uint64_t, int> runs_cut;  // run id -> first position maybe expired
  for (uint64_t id : maybe_expired) {
    const Delivery& delivery = deliveries_.at(id);
    if (delivery.run_id == 0) continue;
    auto [it, added] = runs_cut.emplace(delivery.run_id, delivery.run_position);
    if (!added) it->second = std::min(it->second, delivery.run_position);
  }
  for (uint64_t id : outstanding_) {
    const Delivery& delivery = deliveries_.at(id);
    auto it = runs_cut.find(delivery.run_id);
    if (delivery.run_id != 0 && it != runs_cut.end() && delivery.run_position > it->second) {
      maybe_expired.push_back(id);
    }
  }
  for (uint64_t id : maybe_expired) SetState(id, deliveries_.at(id), DeliveryState::kUnknown);
  engine_->OnTimer();
  return AfterStep();
}

// ---- After every step ----

absl::Status EngineModel::AfterStep() {
  while (true) {
    std::vector<int> reset;
    for (WorkerStream* requested : reset_requests_) {
      for (int i = 0; i < stream_count(); ++i) {
        if (streams_[i].fake.get() == requested && streams_[i].open &&
            std::find(reset.begin(), reset.end(), i) == reset.end()) {
          reset.push_back(i);
        }
      }
    }
    reset_requests_.clear();
    // A stream reset in this step first: what it received was sent before
    // the reset, and the reset took all of it back for redelivery.
    for (int i : reset) {
      absl::Status status = CollectDispatches(i);
      if (!status.ok()) return status;
      streams_[i].reset = true;
      StreamLost(i);
    }
    for (int i = 0; i < stream_count(); ++i) {
      if (std::find(reset.begin(), reset.end(), i) != reset.end()) continue;
      absl::Status status = CollectDispatches(i);
      if (!status.ok()) return status;
    }
    if (reset.empty()) break;
    // The pool closes a reset stream (OnStreamClosed); that may dispatch.
    for (int i : reset) {
      streams_[i].open = false;
      engine_->OnStreamClosed(streams_[i].engine_id);
      OpenStream();  // and opens another in its place
    }
  }
  return CheckSnapshot();
}

absl::Status EngineModel::CollectDispatches(int index) {
  StreamModel& stream = streams_[index];
  const std::vector<v1::Events>& batches = stream.fake->batches();
  if (batches.size() > stream.batches_seen && !stream.open) {
    return absl::InternalError(absl::StrCat("events sent to stream ", index, " after it closed"));
  }
  for (size_t b = stream.batches_seen; b < batches.size(); ++b) {
    if (batches[b].events_size() == 0) {
      return absl::InternalError(absl::StrCat("an empty (or unparsable) Events message to stream ",
                                              index));
    }
  }
  stream.batches_seen = batches.size();
  for (const v1::Event& event : stream.fake->TakeHeld()) {
    if (++stream.received > stream.granted) {
      return absl::InternalError(absl::StrCat("stream ", index, " got ", stream.received,
                                              " events but granted only ", stream.granted));
    }
    absl::Status status = CheckDispatch(event, index);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status EngineModel::CheckDispatch(const v1::Event& event, int stream) {
  const std::string what = absl::StrCat("dispatch of ", event.topic(), "/", event.partition(),
                                        "@", event.offset(), " (id ", event.id(), ", attempt ",
                                        event.attempt(), ") to stream ", stream);
  PartitionModel* partition = Find(event.topic(), event.partition());
  if (partition == nullptr || !partition->assigned) {
    return absl::InternalError(absl::StrCat(what, ": the partition is not assigned"));
  }
  auto it = partition->offsets.find(event.offset());
  if (it == partition->offsets.end()) {
    return absl::InternalError(
        absl::StrCat(what, ": not consumed in this assignment, or already committed"));
  }
  if (deliveries_.count(event.id()) != 0) {
    return absl::InternalError(absl::StrCat(what, ": the delivery id was used before"));
  }
  OffsetModel& offset = it->second;
  if (event.attempt() < 1 || event.attempt() > options_.max_attempts) {
    return absl::InternalError(absl::StrCat(what, ": attempt out of range"));
  }
  if (offset.latest != 0) {
    const Delivery& previous = deliveries_.at(offset.latest);
    if (previous.state == DeliveryState::kOutstanding || FateOf(offset) == Fate::kFinished) {
      return absl::InternalError(absl::StrCat(what, ": the offset is ", Describe(offset)));
    }
    const bool retry = previous.state == DeliveryState::kAnswered && !GivenBack(previous);
    if (GivenBack(previous) && event.attempt() != previous.attempt) {
      return absl::InternalError(absl::StrCat(what, ": a member given back NOT_ATTEMPTED must ",
                                              "keep attempt ", previous.attempt));
    }
    if (previous.state == DeliveryState::kRequeued && event.attempt() != previous.attempt) {
      return absl::InternalError(absl::StrCat(what, ": a redelivery must keep attempt ",
                                              previous.attempt));
    }
    if (retry && event.attempt() != previous.attempt + 1) {
      return absl::InternalError(absl::StrCat(what, ": a retry must be attempt ",
                                              previous.attempt + 1));
    }
  } else if (event.attempt() != 1 || offset.skipped) {
    return absl::InternalError(absl::StrCat(what, ": a first dispatch must be attempt 1"
                                            " of an offset not skipped"));
  }
  absl::Status order = CheckOrder(*partition, event.offset(), offset.key, event.run_id());
  if (!order.ok()) return absl::InternalError(absl::StrCat(what, ": ", order.message()));
  Delivery delivery;
  delivery.partition = static_cast<int>(partition - partitions_.data());
  delivery.epoch = partition->epoch;
  delivery.offset = event.offset();
  delivery.stream = stream;
  delivery.attempt = event.attempt();
  delivery.deadline_ms = event.deadline_ms();
  delivery.run_id = event.run_id();
  delivery.run_position = event.run_id() == 0 ? 0 : ++run_members_[event.run_id()];
  delivery.state = DeliveryState::kAnswered;  // SetState moves it to kOutstanding
  Delivery& stored = deliveries_[event.id()] = delivery;
  SetState(event.id(), stored, DeliveryState::kOutstanding);
  offset.latest = event.id();
  return absl::OkStatus();
}

absl::Status EngineModel::CheckOrder(const PartitionModel& partition, int64_t offset,
                                     int key, uint64_t run_id) const {
  if (partition.ordering == Ordering::kUnordered) return absl::OkStatus();
  for (const auto& [earlier, model] : partition.offsets) {
    if (earlier >= offset) break;
    if (partition.ordering == Ordering::kKey && model.key != key) continue;
    if (run_id != 0 && model.latest != 0) {
      const Delivery& previous = deliveries_.at(model.latest);
      // An earlier member of the same run: the worker handles them in order.
      if (previous.run_id == run_id && previous.state == DeliveryState::kOutstanding) continue;
    }
    if (FateOf(model) == Fate::kUnfinished) {
      return absl::InternalError(absl::StrCat(
          partition.ordering == Ordering::kKey ? "per-key" : "per-partition",
          " order broken: earlier offset ", earlier, " is ", Describe(model)));
    }
  }
  return absl::OkStatus();
}

absl::Status EngineModel::CheckSnapshot() const {
  const EngineSnapshot snapshot = engine_->Snapshot();
  std::map<int64_t, int64_t> certain_in_flight;  // engine stream id -> count
  for (uint64_t id : outstanding_) ++certain_in_flight[streams_[deliveries_.at(id).stream].engine_id];
  int64_t in_flight = 0;
  int open = 0;
  for (const StreamModel& stream : streams_) open += stream.open ? 1 : 0;
  if (static_cast<int>(snapshot.streams.size()) != open) {
    return absl::InternalError(absl::StrCat("snapshot has ", snapshot.streams.size(),
                                            " streams, ", open, " are open"));
  }
  for (const StreamSnapshot& stream : snapshot.streams) {
    // What the worker calls itself reaches logs and GetStatus: bounded, one
    // printable line of UTF-8 (issue 20 item 5).
    const std::string& name = stream.worker_name;
    if (name.size() > kMaxWorkerNameBytes + 32 || !IsUtf8(name) ||
        std::any_of(name.begin(), name.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      return absl::InternalError(absl::StrCat("stream ", stream.id, ": worker name of ",
                                              name.size(), " bytes is not bounded and sanitised"));
    }
    if (stream.credit < 0 || stream.in_flight < 0 || stream.in_flight > options_.max_in_flight ||
        stream.in_flight < certain_in_flight[stream.id]) {
      return absl::InternalError(absl::StrCat("stream ", stream.id, ": credit ", stream.credit,
                                              ", in flight ", stream.in_flight, " (at least ",
                                              certain_in_flight[stream.id], ", cap ",
                                              options_.max_in_flight, ")"));
    }
    in_flight += stream.in_flight;
  }
  if (in_flight != snapshot.in_flight || snapshot.in_flight > snapshot.buffered_events) {
    return absl::InternalError(absl::StrCat("snapshot in flight ", snapshot.in_flight,
                                            ", streams sum to ", in_flight, ", buffered ",
                                            snapshot.buffered_events));
  }
  int64_t buffered = 0;
  for (const PartitionSnapshot& partition : snapshot.partitions) {
    buffered += partition.buffered;
    const PartitionModel* model = nullptr;
    for (const PartitionModel& candidate : partitions_) {
      if (candidate.tp == partition.partition) model = &candidate;
    }
    if (model == nullptr) continue;
    int64_t unfinished = 0;
    for (const auto& [offset, state] : model->offsets) {
      unfinished += FateOf(state) == Fate::kUnfinished ? 1 : 0;
    }
    if (model->assigned && partition.buffered < unfinished) {
      return absl::InternalError(absl::StrCat(partition.partition.ToString(), " buffers ",
                                              partition.buffered, " events but ", unfinished,
                                              " offsets are certainly unfinished (lost?)"));
    }
  }
  if (buffered != snapshot.buffered_events) {
    return absl::InternalError(absl::StrCat("snapshot buffered ", snapshot.buffered_events,
                                            ", partitions sum to ", buffered));
  }
  return absl::OkStatus();
}

// ---- Drain ----

absl::Status EngineModel::Drain() {
  absl::Status status = Ready(OpenStream(), static_cast<uint32_t>(options_.max_in_flight));
  for (int round = 0; status.ok() && round < 200 && engine_->Buffered() > 0; ++round) {
    status = DrainRound(round);
  }
  if (!status.ok()) return status;
  if (engine_->Buffered() != 0) {
    const EngineSnapshot snapshot = engine_->Snapshot();
    return absl::InternalError(absl::StrCat(
        "stalled: ", snapshot.buffered_events, " events still buffered after draining (queued ",
        snapshot.queued_events, ", in flight ", snapshot.in_flight, ", delayed ",
        snapshot.delayed_events, ", blocked ", snapshot.blocked_events, ")"));
  }
  status = Commit();
  if (!status.ok()) return status;
  for (const PartitionModel& partition : partitions_) {
    if (!partition.assigned || partition.max_submitted < 0) continue;
    if (partition.committed != partition.max_submitted + 1 || !partition.offsets.empty()) {
      return absl::InternalError(absl::StrCat(
          "lost: ", partition.tp.ToString(), " consumed up to ", partition.max_submitted,
          " and drained, but commits reach only ", partition.committed));
    }
  }
  return absl::OkStatus();
}

absl::Status EngineModel::DrainRound(int round) {
  const uint32_t cap = static_cast<uint32_t>(options_.max_in_flight);
  const int streams = stream_count();  // not those opened in this round
  for (int i = 0; i < streams; ++i) {
    StreamModel& stream = streams_[i];
    if (!stream.open) continue;
    v1::ProcessResponse response;
    if (!stream.ready) {
      response.mutable_ready()->set_max_in_flight(cap);
    } else {
      v1::Results* results = response.mutable_results();
      for (uint64_t id : outstanding_) {
        if (deliveries_.at(id).stream != i) continue;
        v1::Result* result = results->add_results();
        result->set_id(id);
        result->set_status(v1::Result::OK);
      }
      results->set_credit(cap);
    }
    absl::Status status = RespondTo(stream, response);
    if (!status.ok()) return status;
  }
  // What `block` holds needs an operator: skip it.
  for (const PartitionSnapshot& held : engine_->Snapshot().partitions) {
    if (!held.blocked || !held.lowest_unfinished.has_value()) continue;
    PartitionModel* partition = Find(held.partition.topic, held.partition.partition);
    if (partition == nullptr) continue;
    // A worker that answers a run's members out of order can have one held
    // above a member given back behind it in its lane: skip what is held.
    std::vector<int64_t> to_skip = {*held.lowest_unfinished};
    for (const auto& [offset, model] : partition->offsets) {
      if (offset != to_skip.front() && model.latest != 0 && !model.skipped &&
          Held(deliveries_.at(model.latest))) {
        to_skip.push_back(offset);
      }
    }
    for (int64_t offset : to_skip) {
      absl::Status status = SkipAt(*partition, offset);
      if (!status.ok()) return status;
    }
  }
  // Retries wait out their backoff; a worker's retry_after_ms may be long.
  return Tick(round % 10 == 9 ? absl::Hours(24 * 60) : absl::Milliseconds(1100));
}

}  // namespace ferry::fuzz
