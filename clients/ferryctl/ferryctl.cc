// ferryctl: the operator's command line for a running ferry group.
//
//   ferryctl status [--output=table|json]                 GetStatus of one replica
//   ferryctl status --metrics [--watch] [--interval=1s]   the live view (rates from
//                                                         two GetStatus answers)
//   ferryctl pause  (--topic=T[:0,3] [--partitions=0,3] | --all)
//   ferryctl resume (--topic=T[:0,3] [--partitions=0,3] | --all)
//   ferryctl reset  --topic=T [--partitions=0,3]
//                   (--to-datetime=2026-12-01T10:00:00Z | --to-earliest | --to-latest |
//                    --to-offset=N) [--dry-run] [--wait=15s]
//   ferryctl skip   --topic=T --partition=P --offset=O [--wait=10s]
//   ferryctl rate-limit PROCESSOR (EVENTS_PER_SECOND [--burst=N] | --clear)
//
// Every command calls ferry's Control gRPC service
// (proto/ferry/v1/control.proto) on --server (default 127.0.0.1:7070), with
// `authorization: Bearer <token>` metadata when --token_file or
// $FERRY_CONTROL_TOKEN gives a token, over TLS when --tls_ca is given (mTLS
// with --tls_cert/--tls_key), with a --timeout deadline (default 30s).
// --output=json prints the response as one JSON object instead of tables.
// Flags may be spelled with dashes or underscores (--dry-run, --dry_run), as
// Kafka's tools and absl spell them.
//
// Exit codes, which scripts may rely on:
//   0  done
//   1  the call failed: `ferryctl: <CODE>: <message>` on stderr (e.g.
//      NOT_FOUND, UNAUTHENTICATED, UNAVAILABLE)
//   2  usage: unknown command or flag, missing or conflicting flags, a bad
//      value, or a file a flag names cannot be read; nothing was sent
//   3  `reset` (not --dry-run) answered, but not every partition was applied
//      yet (applied=false): their owners apply it later
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/ferryctl/cli_flags.h"
#include "clients/ferryctl/control_client.h"
#include "clients/ferryctl/control_view.h"
#include "clients/ferryctl/rate_limit_view.h"
#include "clients/ferryctl/status_view.h"
#include "clients/ferryctl/usage.h"

namespace ferry::ferryctl {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitCallFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNotApplied = 3;

const std::vector<std::string> kConnectionFlags = {
    "server", "token_file", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "timeout",
    "output"};
const std::vector<std::string> kMetricsFlags = {"metrics", "watch", "interval"};

std::vector<FlagSpec> AllFlags() {
  std::vector<FlagSpec> flags = {
      {"help", true},      {"h", true},          {"metrics", true},      {"watch", true},
      {"interval", false}, {"all", true},        {"topic", false},       {"partitions", false},
      {"partition", false}, {"offset", false},   {"to_datetime", false}, {"to_earliest", true},
      {"to_latest", true}, {"to_offset", false}, {"dry_run", true},      {"wait", false},
      {"burst", false},    {"clear", true},
  };
  for (const std::string& name : kConnectionFlags) flags.push_back({name, false});
  return flags;
}

// The flags `command` accepts (`metrics_view`: status --metrics).
std::set<std::string> AllowedFlags(const std::string& command, bool metrics_view) {
  std::set<std::string> allowed(kConnectionFlags.begin(), kConnectionFlags.end());
  if (metrics_view) {
    // The live view is a table that refreshes; JSON is `status --output=json`.
    allowed.erase("output");
    allowed.insert(kMetricsFlags.begin(), kMetricsFlags.end());
    return allowed;
  }
  std::vector<std::string> own;
  if (command == "pause" || command == "resume") own = {"all", "topic", "partitions"};
  if (command == "reset") {
    own = {"topic",     "partitions", "to_datetime", "to_earliest",
           "to_latest", "to_offset",  "dry_run",     "wait"};
  }
  if (command == "skip") own = {"topic", "partition", "offset", "wait"};
  if (command == "rate-limit") own = {"burst", "clear"};
  allowed.insert(own.begin(), own.end());
  return allowed;
}

int UsageError(const std::string& command, absl::string_view message) {
  std::fprintf(stderr, "ferryctl: %s\n", std::string(message).c_str());
  auto usage = CommandUsages().find(command);
  if (usage != CommandUsages().end()) {
    std::fprintf(stderr, "usage: %s\n", usage->second.c_str());
  } else {
    std::fprintf(stderr, "commands: status, pause, resume, reset, skip, rate-limit\n");
  }
  std::fprintf(stderr, "(ferryctl --help explains every command, flag and exit code)\n");
  return kExitUsage;
}

int CallFailed(const absl::Status& status) {
  const std::string code = absl::StatusCodeToString(status.code());
  if (status.message().empty()) {
    std::fprintf(stderr, "ferryctl: %s\n", code.c_str());
  } else {
    std::fprintf(stderr, "ferryctl: %s: %s\n", code.c_str(),
                 std::string(status.message()).c_str());
  }
  return kExitCallFailed;
}

// "0,3", "0-3,7" (what RenderPause prints reads back).
absl::StatusOr<std::vector<int32_t>> ParsePartitionList(absl::string_view text) {
  std::vector<int32_t> partitions;
  const auto bad = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partitions \"", text, "\": ", why, "; write them like 0,3 or 0-3,7"));
  };
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    std::vector<absl::string_view> bounds = absl::StrSplit(item, absl::MaxSplits('-', 1));
    int32_t first = 0;
    int32_t last = 0;
    const bool parsed = absl::SimpleAtoi(bounds[0], &first) &&
                        absl::SimpleAtoi(bounds.size() == 2 ? bounds[1] : bounds[0], &last);
    if (!parsed) return bad(absl::StrCat("\"", item, "\" is not a partition number or range"));
    // The bound keeps a typo (0-30000000) from allocating gigabytes.
    if (first < 0 || last < first || last - first > 100000) {
      return bad(absl::StrCat("\"", item, "\" is not a valid range"));
    }
    for (int64_t p = first; p <= last; ++p) partitions.push_back(static_cast<int32_t>(p));
  }
  return partitions;
}

struct TopicPartitions {
  std::string topic;
  std::vector<int32_t> partitions;  // empty: every partition
};

// --topic=T [--partitions=0,3], or Kafka's spelling --topic=T:0,3 (topic
// names cannot hold ':').
absl::StatusOr<TopicPartitions> ParseTopicPartitions(const CommandLine& line) {
  absl::StatusOr<std::string> topic = line.Get<std::string>("topic", "");
  absl::StatusOr<std::string> list = line.Get<std::string>("partitions", "");
  if (!topic.ok()) return topic.status();
  if (!list.ok()) return list.status();
  TopicPartitions result;
  result.topic = *topic;
  if (const size_t colon = topic->find(':'); colon != std::string::npos) {
    if (line.Has("partitions")) {
      return absl::InvalidArgumentError(
          "partitions given twice: write --topic=T --partitions=0,3 or --topic=T:0,3");
    }
    result.topic = topic->substr(0, colon);
    *list = topic->substr(colon + 1);
    if (list->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--topic=", *topic, " names no partitions: write --topic=", result.topic,
          " for every partition, or --topic=", result.topic, ":0,3"));
    }
  } else if (line.Has("partitions") && list->empty()) {
    return absl::InvalidArgumentError("--partitions is empty; drop it to select every partition");
  }
  if (result.topic.empty()) return absl::InvalidArgumentError("--topic=T is required");
  if (!list->empty()) {
    absl::StatusOr<std::vector<int32_t>> partitions = ParsePartitionList(*list);
    if (!partitions.ok()) return partitions.status();
    result.partitions = *std::move(partitions);
  }
  return result;
}

absl::StatusOr<ControlClientOptions> ParseClientOptions(const CommandLine& line) {
  ControlClientOptions options;
  for (auto [name, field] : std::vector<std::pair<const char*, std::string*>>{
           {"server", &options.server},
           {"token_file", &options.token_file},
           {"tls_ca", &options.tls_ca_file},
           {"tls_cert", &options.tls_cert_file},
           {"tls_key", &options.tls_key_file},
           {"tls_server_name", &options.tls_server_name}}) {
    absl::StatusOr<std::string> value = line.Get<std::string>(name, *field);
    if (!value.ok()) return value.status();
    *field = *std::move(value);
  }
  if (options.server.empty()) return absl::InvalidArgumentError("--server is empty");
  absl::StatusOr<absl::Duration> timeout = line.Get<absl::Duration>("timeout", options.timeout);
  if (!timeout.ok()) return timeout.status();
  if (*timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--timeout must be positive, e.g. --timeout=30s");
  }
  options.timeout = *timeout;
  if (const char* token = std::getenv("FERRY_CONTROL_TOKEN"); token != nullptr) {
    options.token = token;
  }
  return options;
}

// --wait as the request's wait_ms (0: the server's default).
absl::StatusOr<int64_t> ParseWaitMs(const CommandLine& line) {
  absl::StatusOr<absl::Duration> wait = line.Get<absl::Duration>("wait", absl::ZeroDuration());
  if (!wait.ok()) return wait.status();
  if (*wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--wait must not be negative, e.g. --wait=15s");
  }
  return absl::ToInt64Milliseconds(*wait);
}

// What a Control command needs besides its request.
struct Session {
  std::unique_ptr<ControlClient> client;
  bool json = false;
  std::string server;  // --server, as given
};

// Prints what went wrong and returns the exit code on failure.
std::optional<int> OpenSession(const std::string& command, const CommandLine& line,
                               Session* session) {
  absl::StatusOr<std::string> output = line.Get<std::string>("output", "table");
  if (!output.ok()) return UsageError(command, output.status().message());
  if (*output != "table" && *output != "json") {
    return UsageError(command, absl::StrCat("--output=", *output, ": write --output=table or "
                                            "--output=json"));
  }
  session->json = *output == "json";
  absl::StatusOr<ControlClientOptions> options = ParseClientOptions(line);
  if (!options.ok()) return UsageError(command, options.status().message());
  absl::StatusOr<std::unique_ptr<ControlClient>> client = ControlClient::Create(*options);
  if (!client.ok()) return UsageError(command, client.status().message());
  session->client = *std::move(client);
  session->server = options->server;
  return std::nullopt;
}

int ControlStatus(const CommandLine& line) {
  Session session;
  if (std::optional<int> failed = OpenSession("status", line, &session)) return *failed;
  absl::StatusOr<v1::GetStatusResponse> response =
      session.client->GetStatus(v1::GetStatusRequest());
  if (!response.ok()) return CallFailed(response.status());
  std::fputs((session.json ? RenderJson(*response) : RenderStatusTables(*response)).c_str(),
             stdout);
  return kExitOk;
}

// The live view: GetStatus answers an interval apart (rates need two). The
// rates are taken here rather than in ferry: ferry keeps no window or
// sampling thread, the operator picks the interval, and the counters are
// the ones Prometheus takes rate() of, so the view and dashboards agree.
int MetricsStatus(const CommandLine& line) {
  absl::StatusOr<bool> on = line.Get<bool>("metrics", true);
  if (!on.ok()) {
    return UsageError("status",
                      "--metrics takes no address: the view comes from GetStatus on "
                      "--server=HOST:PORT (ferry's server.listen, default 127.0.0.1:7070); "
                      "write ferryctl status --metrics --server=HOST:PORT");
  }
  if (!*on) return ControlStatus(line);
  absl::StatusOr<bool> watch_flag = line.Get<bool>("watch", false);
  absl::StatusOr<absl::Duration> interval_flag =
      line.Get<absl::Duration>("interval", absl::Seconds(1));
  for (const absl::Status& status : {watch_flag.status(), interval_flag.status()}) {
    if (!status.ok()) return UsageError("status", status.message());
  }
  Session session;
  if (std::optional<int> failed = OpenSession("status", line, &session)) return *failed;
  const absl::Duration interval = std::max(*interval_flag, absl::Milliseconds(100));
  const bool watch = *watch_flag;
  const bool tty = isatty(STDOUT_FILENO) != 0;
  std::optional<v1::GetStatusResponse> before;
  for (;;) {
    absl::StatusOr<v1::GetStatusResponse> now =
        session.client->GetStatus(v1::GetStatusRequest());
    if (!now.ok()) {
      // Watching goes on through a restart of ferry; one view fails.
      const int failed = CallFailed(now.status());
      if (!watch) return failed;
    } else if (watch || before.has_value()) {
      const std::string view =
          RenderStatus(session.server, *now, before ? &*before : nullptr);
      // Home the cursor and clear the screen, so the view refreshes in place.
      if (watch && tty) std::fputs("\033[H\033[2J", stdout);
      std::fputs(view.c_str(), stdout);
      if (watch && !tty) std::fputs("\n", stdout);
      std::fflush(stdout);
      if (!watch) return kExitOk;
    }
    if (now.ok()) before = *std::move(now);
    absl::SleepFor(interval);
  }
}

// Pause and Resume take the same selection.
template <typename Request>
absl::StatusOr<Request> ParseSelection(const CommandLine& line) {
  absl::StatusOr<bool> all = line.Get<bool>("all", false);
  if (!all.ok()) return all.status();
  Request request;
  if (*all) {
    if (line.Has("topic") || line.Has("partitions")) {
      return absl::InvalidArgumentError(
          "--all selects every partition of every topic: drop --topic/--partitions, or drop "
          "--all");
    }
    request.set_all(true);
    return request;
  }
  if (!line.Has("topic")) {
    return absl::InvalidArgumentError(
        "say what to select: --topic=T (every partition), --topic=T --partitions=0,3, or --all");
  }
  absl::StatusOr<TopicPartitions> selection = ParseTopicPartitions(line);
  if (!selection.ok()) return selection.status();
  request.set_topic(selection->topic);
  for (int32_t p : selection->partitions) request.add_partitions(p);
  return request;
}

int Pause(const CommandLine& line) {
  absl::StatusOr<v1::PauseRequest> request = ParseSelection<v1::PauseRequest>(line);
  if (!request.ok()) return UsageError("pause", request.status().message());
  Session session;
  if (std::optional<int> failed = OpenSession("pause", line, &session)) return *failed;
  absl::StatusOr<v1::PauseResponse> response = session.client->Pause(*request);
  if (!response.ok()) return CallFailed(response.status());
  std::fputs((session.json ? RenderJson(*response) : RenderPause(*response)).c_str(), stdout);
  return kExitOk;
}

int Resume(const CommandLine& line) {
  absl::StatusOr<v1::ResumeRequest> request = ParseSelection<v1::ResumeRequest>(line);
  if (!request.ok()) return UsageError("resume", request.status().message());
  Session session;
  if (std::optional<int> failed = OpenSession("resume", line, &session)) return *failed;
  absl::StatusOr<v1::ResumeResponse> response = session.client->Resume(*request);
  if (!response.ok()) return CallFailed(response.status());
  std::fputs((session.json ? RenderJson(*response) : RenderResume(*response)).c_str(), stdout);
  return kExitOk;
}

absl::StatusOr<v1::ResetOffsetsRequest> ParseReset(const CommandLine& line) {
  absl::StatusOr<bool> earliest = line.Get<bool>("to_earliest", false);
  absl::StatusOr<bool> latest = line.Get<bool>("to_latest", false);
  absl::StatusOr<bool> dry_run = line.Get<bool>("dry_run", false);
  for (const absl::Status& status : {earliest.status(), latest.status(), dry_run.status()}) {
    if (!status.ok()) return status;
  }
  std::vector<std::string> targets;
  if (line.Has("to_datetime")) targets.push_back("--to-datetime");
  if (*earliest) targets.push_back("--to-earliest");
  if (*latest) targets.push_back("--to-latest");
  if (line.Has("to_offset")) targets.push_back("--to-offset");
  if (targets.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "give exactly one of --to-datetime, --to-earliest, --to-latest, --to-offset (got ",
        targets.empty() ? "none" : absl::StrJoin(targets, " and "), ")"));
  }

  absl::StatusOr<TopicPartitions> selection = ParseTopicPartitions(line);
  if (!selection.ok()) return selection.status();
  v1::ResetOffsetsRequest request;
  request.set_topic(selection->topic);
  for (int32_t p : selection->partitions) request.add_partitions(p);

  if (line.Has("to_datetime")) {
    const std::string text = *line.Get<std::string>("to_datetime", "");
    absl::Time time;
    std::string error;
    if (!absl::ParseTime(absl::RFC3339_full, text, &time, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--to-datetime=", text, " is not an RFC 3339 time; write e.g. "
          "2026-12-01T10:00:00Z or 2026-12-01T12:00:00+02:00"));
    }
    request.set_to_timestamp_ms(absl::ToUnixMillis(time));
  } else if (*earliest) {
    request.set_to_earliest(true);
  } else if (*latest) {
    request.set_to_latest(true);
  } else {
    absl::StatusOr<int64_t> offset = line.Get<int64_t>("to_offset", 0);
    if (!offset.ok()) return offset.status();
    if (*offset < 0) {
      return absl::InvalidArgumentError(
          "--to-offset must not be negative; for the earliest offset write --to-earliest");
    }
    request.set_to_offset(*offset);
  }
  request.set_dry_run(*dry_run);
  absl::StatusOr<int64_t> wait_ms = ParseWaitMs(line);
  if (!wait_ms.ok()) return wait_ms.status();
  request.set_wait_ms(*wait_ms);
  return request;
}

int Reset(const CommandLine& line) {
  absl::StatusOr<v1::ResetOffsetsRequest> request = ParseReset(line);
  if (!request.ok()) return UsageError("reset", request.status().message());
  Session session;
  if (std::optional<int> failed = OpenSession("reset", line, &session)) return *failed;
  absl::StatusOr<v1::ResetOffsetsResponse> response = session.client->ResetOffsets(*request);
  if (!response.ok()) return CallFailed(response.status());
  std::fputs((session.json ? RenderJson(*response) : RenderReset(*response)).c_str(), stdout);
  // A dry run applies nothing by design; only a real reset left waiting for
  // an owner is worth a distinct exit code.
  if (request->dry_run() || response->dry_run()) return kExitOk;
  const bool all_applied =
      std::all_of(response->partitions().begin(), response->partitions().end(),
                  [](const v1::PartitionReset& p) { return p.applied(); });
  return all_applied ? kExitOk : kExitNotApplied;
}

absl::StatusOr<v1::SkipOffsetRequest> ParseSkip(const CommandLine& line) {
  for (const char* name : {"topic", "partition", "offset"}) {
    if (!line.Has(name)) return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  }
  absl::StatusOr<std::string> topic = line.Get<std::string>("topic", "");
  absl::StatusOr<int32_t> partition = line.Get<int32_t>("partition", 0);
  absl::StatusOr<int64_t> offset = line.Get<int64_t>("offset", 0);
  absl::StatusOr<int64_t> wait_ms = ParseWaitMs(line);
  for (const absl::Status& status :
       {topic.status(), partition.status(), offset.status(), wait_ms.status()}) {
    if (!status.ok()) return status;
  }
  if (topic->empty()) return absl::InvalidArgumentError("--topic is empty");
  if (*partition < 0 || *offset < 0) {
    return absl::InvalidArgumentError("--partition and --offset must not be negative");
  }
  v1::SkipOffsetRequest request;
  request.set_topic(*topic);
  request.set_partition(*partition);
  request.set_offset(*offset);
  request.set_wait_ms(*wait_ms);
  return request;
}

int Skip(const CommandLine& line) {
  absl::StatusOr<v1::SkipOffsetRequest> request = ParseSkip(line);
  if (!request.ok()) return UsageError("skip", request.status().message());
  Session session;
  if (std::optional<int> failed = OpenSession("skip", line, &session)) return *failed;
  absl::StatusOr<v1::SkipOffsetResponse> response = session.client->SkipOffset(*request);
  if (!response.ok()) return CallFailed(response.status());
  std::fputs((session.json ? RenderJson(*response) : RenderSkip(*request, *response)).c_str(),
             stdout);
  return kExitOk;
}

int RateLimit(const CommandLine& line) {
  absl::StatusOr<v1::SetRateLimitRequest> request = ParseRateLimit(line);
  if (!request.ok()) return UsageError("rate-limit", request.status().message());
  Session session;
  if (std::optional<int> failed = OpenSession("rate-limit", line, &session)) return *failed;
  absl::StatusOr<v1::SetRateLimitResponse> response = session.client->SetRateLimit(*request);
  if (!response.ok()) return CallFailed(response.status());
  std::fputs(
      (session.json ? RenderJson(*response) : RenderRateLimit(*request, *response)).c_str(),
      stdout);
  return kExitOk;
}

int Run(const std::vector<std::string>& args) {
  absl::StatusOr<CommandLine> line = CommandLine::Parse(args, AllFlags());
  if (!line.ok()) {
    // Name the command when it can be found, for its usage line.
    std::string command;
    for (const std::string& arg : args) {
      if (CommandUsages().count(arg) > 0) {
        command = arg;
        break;
      }
    }
    return UsageError(command, line.status().message());
  }
  const std::vector<std::string>& positional = line->positional();
  if (line->Has("help") || line->Has("h") || (!positional.empty() && positional[0] == "help")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (positional.empty()) return UsageError("", "no command given");
  const std::string& command = positional[0];
  if (CommandUsages().count(command) == 0) {
    return UsageError("", absl::StrCat("unknown command \"", command, "\""));
  }
  // rate-limit takes PROCESSOR and EVENTS_PER_SECOND (ParseRateLimit checks).
  const size_t accepted = command == "rate-limit" ? 3 : 1;
  if (positional.size() > accepted) {
    return UsageError(command, absl::StrCat("unexpected argument \"", positional[accepted],
                                            "\" (flags are written --name=value)"));
  }
  // --metrics=HOST:PORT (the old /metrics address) reaches MetricsStatus,
  // which says what to write instead.
  const bool metrics_view = command == "status" && line->Has("metrics");
  const std::set<std::string> allowed = AllowedFlags(command, metrics_view);
  for (const std::string& name : line->Given()) {
    if (allowed.count(name) == 0) {
      return UsageError(command, absl::StrCat("--", name, " does not apply to ferryctl ", command,
                                              metrics_view ? " --metrics" : "",
                                              name == "watch" || name == "interval"
                                                  ? " (it needs --metrics)"
                                                  : ""));
    }
  }
  if (metrics_view) return MetricsStatus(*line);
  if (command == "status") return ControlStatus(*line);
  if (command == "pause") return Pause(*line);
  if (command == "resume") return Resume(*line);
  if (command == "reset") return Reset(*line);
  if (command == "rate-limit") return RateLimit(*line);
  return Skip(*line);
}

}  // namespace
}  // namespace ferry::ferryctl

int main(int argc, char** argv) {
  return ferry::ferryctl::Run(std::vector<std::string>(argv + 1, argv + argc));
}
