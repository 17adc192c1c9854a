// ferryctl: operator's command line for a running ferry.
//
//   ferryctl status [--metrics=127.0.0.1:9464] [--interval=1s]
//   ferryctl status --watch [--metrics=...] [--interval=2s]
//
// `status` scrapes ferry's /metrics (server.metrics_listen) twice, an
// interval apart, and prints events per second, lag, committed offset and the
// commit blocker (oldest unfinished offset and its age) per partition,
// buffers, worker streams, and per processor and event type the enqueue and
// processing times. --watch refreshes the view in place until interrupted.
// Exit codes: 0 ok, 1 ferry unreachable or its metrics unreadable, 2 usage.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/clock.h"
#include "clients/ferryctl/status_view.h"
#include "core/metrics_text.h"

ABSL_FLAG(std::string, metrics, "127.0.0.1:9464",
          "host:port of ferry's metrics endpoint (server.metrics_listen)");
ABSL_FLAG(bool, watch, false, "Refresh the status in place until interrupted.");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1),
          "Time between the scrapes the rates are computed over (and between refreshes).");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "Timeout of one scrape.");

namespace ferry::ferryctl {
namespace {

int Status() {
  const std::string target = absl::GetFlag(FLAGS_metrics);
  const absl::Duration interval = std::max(absl::GetFlag(FLAGS_interval), absl::Milliseconds(100));
  const bool watch = absl::GetFlag(FLAGS_watch);
  const bool tty = isatty(STDOUT_FILENO) != 0;
  std::optional<Exposition> before;
  absl::Time before_time;
  for (int round = 0;; ++round) {
    absl::StatusOr<Exposition> now = ScrapeMetrics(target, absl::GetFlag(FLAGS_timeout));
    const absl::Time now_time = absl::Now();
    if (!now.ok()) {
      std::fprintf(stderr, "ferryctl: cannot read ferry's metrics at %s: %s\n", target.c_str(),
                   std::string(now.status().message()).c_str());
      if (!watch) return 1;
    } else if (watch || before.has_value()) {
      const std::string view = RenderStatus(target, *now, before ? &*before : nullptr,
                                            now_time - before_time);
      // Home the cursor and clear the screen, so the view refreshes in place.
      if (watch && tty) std::fputs("\033[H\033[2J", stdout);
      std::fputs(view.c_str(), stdout);
      if (watch && !tty) std::fputs("\n", stdout);
      std::fflush(stdout);
      if (!watch) return 0;
    }
    if (now.ok()) {
      before = *std::move(now);
      before_time = now_time;
    }
    absl::SleepFor(interval);
  }
}

}  // namespace
}  // namespace ferry::ferryctl

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ferryctl status [--metrics=HOST:PORT] [--watch] [--interval=1s]\n"
      "  Shows a running ferry's progress from its /metrics endpoint.");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2 || std::string(args[1]) != "status") {
    std::fprintf(stderr, "usage: ferryctl status [--metrics=HOST:PORT] [--watch] "
                         "[--interval=1s]\n");
    return 2;
  }
  return ferry::ferryctl::Status();
}
