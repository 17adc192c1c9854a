// ferry's configuration as values: topics, processors, failure policies,
// budgets, priorities, server and control settings (the `Config` that
// ParseConfig in core/config/config.h builds), and the limits on what a config
// may hold. Users include core/config/config.h, which includes this.
//
// Threading: plain values; build once, then share read-only.
#ifndef FERRY_CORE_CONFIG_CONFIG_TYPES_H_
#define FERRY_CORE_CONFIG_CONFIG_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/config/keepalive.h"

namespace ferry {

// Where an Event field (key or type) is taken from.
struct FieldSource {
  enum class Kind {
    kRecordKey,  // the Kafka record key            (`record_key`)
    kHeader,     // a record header by name         (`header:NAME`)
    kJson,       // a JSON Pointer into the payload (`json:/a/b`)
    kTopic,      // the topic name                  (`topic`)
    kConstant,   // a fixed string                  (`const:VALUE`)
  };
  Kind kind = Kind::kRecordKey;
  // Header name, JSON pointer (e.g. "/user/id") or constant value.
  std::string argument;
};

enum class Ordering {
  kKey,        // per-key FIFO, at most one event in flight per key lane
  kPartition,  // strict per-partition order
  kUnordered,  // only worker credit limits concurrency
};

struct TopicConfig {
  std::string name;
  Ordering ordering = Ordering::kKey;
  // Defaults: key from the record key, type = topic name.
  FieldSource key{FieldSource::Kind::kRecordKey, ""};
  FieldSource type{FieldSource::Kind::kTopic, ""};
  // Delivery delay (`delay`): an event is dispatched no earlier than its
  // record timestamp + delay. 0 = no delay.
  absl::Duration delay = absl::ZeroDuration();
  // Per event type delays of this topic (`delays: {type: duration}`); they
  // replace `delay` for those types (0s: no delay for that type).
  // (These members have default member initializers, so brace-initializing
  // the fields above, e.g. TopicConfig{"t", Ordering::kKey, {}, {}}, stays
  // warning-free under -Wmissing-field-initializers.)
  std::map<std::string, absl::Duration> delays = {};
  // Priority class (`priority`, a name under priorities.classes). Empty:
  // priorities.default.
  std::string priority = {};
};

// A priority class (`priorities.classes`): its share of worker credit is
// weight / (sum of the weights of the classes that have work).
struct PriorityClass {
  std::string name;
  int weight = 1;
};

// What happens to an event whose processing failed for good (FAIL, attempts
// exhausted, timeout, no processor for its type) and to a poison record.
enum class FailurePolicy {
  kDeadLetter,  // write it to the dead-letter topic, then count it done
  kSkip,        // log and count it, then count it done
  kBlock,       // hold its partition (no commit past it) until an operator acts
};

// PEM files for a TLS endpoint. Empty cert_file: plaintext.
struct TlsFiles {
  // Server: this endpoint's certificate chain and private key. Client: the
  // client certificate and key presented for mTLS (optional).
  std::string cert_file;
  std::string key_file;
  // Server: CA that client certificates must chain to (set: mTLS required).
  // Client: CA that the server's certificate must chain to (empty: the
  // system roots).
  std::string ca_file;
  // Client only: the name to verify in the server certificate (default: the
  // target's host).
  std::string server_name;
  bool enabled = false;  // the `tls:` section is present
};

// processors[].rate_limit: a token bucket at dispatch (core/engine/rate_limiter.h).
// Events wait in their queues while it is empty; nothing is dropped.
struct RateLimitConfig {
  // Events per second; 0 means no limit.
  double events_per_second = 0;
  // Most tokens the bucket holds: events that may go at once after a quiet
  // spell. 0 means the default: events_per_second / 10 (100 ms worth), at
  // least 1.
  int64_t burst = 0;
  bool limited() const { return events_per_second > 0; }
  // burst, or its default.
  int64_t EffectiveBurst() const;
};

// processors[].concurrency: how many events the processor's workers may hold
// together. `fixed` (the default): streams x max_in_flight and the workers'
// own credit. `adaptive`: ferry moves its own limit below that from the
// latency and drops it sees (core/engine/concurrency_limiter.h).
enum class ConcurrencyMode { kFixed, kAdaptive };
struct ConcurrencyConfig {
  ConcurrencyMode mode = ConcurrencyMode::kFixed;
  // adaptive: where the limit starts, and the least it goes to. Both are
  // capped by streams x max_in_flight.
  int initial_limit = 20;
  int min_limit = 1;
};

// processors[].circuit_breaker (core/engine/circuit_breaker.h). Off by
// default; `circuit_breaker: on` takes these defaults.
struct CircuitBreakerConfig {
  bool enabled = false;
  // Opens when, among the outcomes of the last `window`, there are at least
  // min_outcomes and failure_ratio or more of them were RETRY, FAIL or
  // timeouts.
  double failure_ratio = 0.5;
  int min_outcomes = 20;
  absl::Duration window = absl::Seconds(10);
  // Open: nothing is dispatched for open_for, then `probes` events go
  // (half-open). All succeed: closed. One fails: open again, for twice as
  // long, up to open_max.
  absl::Duration open_for = absl::Seconds(1);
  absl::Duration open_max = absl::Seconds(30);
  int probes = 3;
};

struct ProcessorConfig {
  std::string name;
  // gRPC target: `dns:///svc:port`, `ipv4:127.0.0.1:1,127.0.0.1:2`, `unix:/p`.
  std::string target;
  // Event types this processor handles; "*" (the default) handles every type
  // that no other processor names.
  std::vector<std::string> event_types{"*"};
  // Streams kept open to the target (spread over its addresses round-robin).
  int streams = 2;
  // ferry-side cap on events outstanding per stream (the worker's own credit
  // may be lower; the smaller wins).
  int max_in_flight = 256;
  // Most events packed into one Events message.
  int max_batch = 64;
  // Most bytes of events packed into one Events message. gRPC servers refuse
  // messages over 4 MiB by default, so batches stay under that; an event
  // bigger than this still goes, alone.
  int64_t max_batch_bytes = 3LL << 20;
  // Per-event deadline, dispatch to result.
  absl::Duration timeout = absl::Seconds(30);
  // Attempts (1 + retries) before a RETRY-ing event is a terminal failure.
  int max_attempts = 5;
  // Exponential backoff between attempts (with jitter), unless the worker's
  // retry_after_ms asks for longer; nothing waits past retry_backoff_max.
  absl::Duration retry_backoff = absl::Milliseconds(100);
  absl::Duration retry_backoff_max = absl::Seconds(30);
  // A timeout is terminal by default (retrying a slow processor makes
  // throughput worse); true treats it like RETRY.
  bool retry_on_timeout = false;
  // Overrides Config::on_failure / dead_letter_topic for this processor.
  bool has_on_failure = false;
  FailurePolicy on_failure = FailurePolicy::kSkip;
  std::string dead_letter_topic;
  // `tls:` for the channel to this processor's workers.
  TlsFiles tls;
  // `keepalive:` on that channel: how soon a vanished worker is noticed.
  KeepaliveConfig keepalive = {};
  // Protecting what the workers call (README "Protecting downstream").
  RateLimitConfig rate_limit;
  ConcurrencyConfig concurrency;
  CircuitBreakerConfig circuit_breaker;
};

// The lane count `lanes.count: auto` resolves to: four lanes per event the
// processors can hold in flight together (sum of streams x max_in_flight),
// rounded up to a power of two, between 64 and 16384. A key hashes to a
// busy lane with probability (events in flight / lanes), so with four times
// as many lanes as credit at most a quarter of dispatches wait on a
// collision rather than on a worker.
int AutoLaneCount(const std::vector<ProcessorConfig>& processors);

struct Config {
  // Passed to librdkafka as-is (`bootstrap.servers`, `group.id`, security...).
  // ferry sets `enable.auto.commit=false` itself and refuses a config that
  // turns it on.
  std::map<std::string, std::string> kafka;
  std::vector<TopicConfig> topics;
  std::vector<ProcessorConfig> processors;

  // Failures: the default for every processor and the policy for poison
  // records (undecodable or bigger than max_event_bytes). Default: dlq when a
  // dead_letter_topic is set, else skip.
  FailurePolicy on_failure = FailurePolicy::kSkip;
  std::string dead_letter_topic;
  // Records bigger than this (key + payload + headers) are poison.
  int64_t max_event_bytes = 3LL << 20;

  // Key lanes per flow (topic and priority class, see core/engine/scheduler.h):
  // more lanes = more parallelism across keys. Unset in the file (or `auto`):
  // AutoLaneCount(processors), so that worker credit, not key collisions in
  // too few lanes, limits how much is in flight.
  int lane_count = 64;
  // Events one lane may queue before it counts as full.
  int lane_capacity = 4096;

  // Backpressure budgets for buffered (consumed, not yet finished) events.
  // Above either high watermark ferry stops taking records (and pauses
  // fetching after a second); below resume_fraction of both it takes them
  // again. 50,000 events: a larger buffer costs KEY ordering CPU per event
  // (lanes dispatch out of consumption order, from colder memory) and RSS,
  // and gains nothing once a full buffer no longer stalls fetching
  // (bench/RESULTS.md, issue 17, 2026-12-05).
  int64_t max_buffered_events = 50000;
  int64_t max_buffered_bytes = 256LL << 20;
  double resume_fraction = 0.5;
  // Events the delay stage (topics[].delay) may hold; at this many fetching
  // pauses, like at the budgets above. Unset in the file: max_buffered_events.
  int64_t max_delayed_events = 50000;

  // Priority classes (`priorities:`), in the order listed. Empty: one class,
  // every topic in it.
  std::vector<PriorityClass> priority_classes;
  // The class of topics with no `priority` (`priorities.default`).
  std::string default_priority;
  // Event type -> class (`priorities.event_types`); wins over the topic's.
  std::map<std::string, std::string> priority_by_type;

  // How often finished offsets are committed.
  absl::Duration commit_interval = absl::Seconds(1);
  // How long SIGTERM waits for in-flight events before committing and exiting.
  absl::Duration shutdown_grace = absl::Seconds(20);
  // How often a progress line is logged (0 = never).
  absl::Duration progress_interval = absl::Seconds(5);

  // ferry's own gRPC server (health now; Control later). Port 0 = pick one.
  std::string listen_address = "127.0.0.1:7070";
  // `server.health_listen`: an extra plaintext port serving only the gRPC
  // health service, for probes that cannot speak TLS (the kubelet's).
  // Empty: none.
  std::string health_listen_address;

  // TLS for server.listen (Control, health, reflection), `server.tls`.
  TlsFiles server_tls;

  // Control plane (`control:`). A file holding the bearer token every Control
  // call must present (`authorization: Bearer <token>`); empty: no token.
  std::string control_token_file;
  // The group's control topic (one partition, every replica reads it).
  // Default: `ferry.control.<group.id>`.
  std::string control_topic;
  // How long a replica that was just assigned partitions waits to read the
  // control topic to its end before fetching them (so a pause or reset
  // issued elsewhere applies before any record is dispatched).
  absl::Duration control_catch_up_timeout = absl::Seconds(10);

  // Prometheus metrics over HTTP (GET /metrics), `server.metrics_listen`.
  // Unset in the file: server.listen's host with port 9464, or port 0 when
  // server.listen's port is 0 (tests). `off` disables it: empty here.
  std::string metrics_listen_address = "127.0.0.1:9464";

  // Log line format, `log.format`: "text" (`time LEVEL component: message`)
  // or "json" (one object per line). Empty: FERRY_LOG_FORMAT, else text.
  std::string log_format;

  // Embedded mock cluster, used when `kafka.bootstrap.servers` is absent.
  int embedded_partitions = 8;
  // If set, the embedded cluster's bootstrap address is written here.
  std::string embedded_bootstrap_file;

  // The failure policy and dead-letter topic that apply to processor `index`
  // (or to poison records when index < 0).
  FailurePolicy PolicyFor(int processor_index) const {
    if (processor_index >= 0 && processors[processor_index].has_on_failure) {
      return processors[processor_index].on_failure;
    }
    return on_failure;
  }
  const std::string& DeadLetterTopicFor(int processor_index) const {
    if (processor_index >= 0 && !processors[processor_index].dead_letter_topic.empty()) {
      return processors[processor_index].dead_letter_topic;
    }
    return dead_letter_topic;
  }

  // True when ferry should start the in-process mock cluster.
  bool UsesEmbeddedCluster() const { return kafka.count("bootstrap.servers") == 0; }

  // Where settings were written, `<file>:<line>` by dotted key, for the
  // settings checked after parsing: every `kafka.*` key and every setting
  // that names a file (control.token_file, server.tls.cert_file,
  // processors[0].tls.ca_file, ...). See LocateConfigError.
  std::map<std::string, std::string> locations = {};
};

// Limits on what a config may hold, checked before (file size) and while
// parsing: a pathological file must be refused, not parsed into hundreds of
// megabytes (yaml-cpp holds about 100 bytes per byte of YAML).
inline constexpr int64_t kMaxConfigFileBytes = int64_t{1} << 20;
// Scalars, lists and maps, counted before the tree is built.
inline constexpr size_t kMaxConfigValues = 100000;
inline constexpr size_t kMaxTopics = 1000;
inline constexpr size_t kMaxProcessors = 256;

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_CONFIG_TYPES_H_
