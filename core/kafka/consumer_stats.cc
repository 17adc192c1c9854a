#include "core/kafka/consumer_stats.h"

namespace ferry {

ConsumerStats::ConsumerStats(prometheus::Registry& registry) {
  auto& commits = prometheus::BuildCounter()
                      .Name("ferry_commits_total")
                      .Help("Offset commits sent to the group coordinator that succeeded")
                      .Register(registry);
  commits_ = &commits.Add({});
  commit_errors_ = &prometheus::BuildCounter()
                        .Name("ferry_commit_errors_total")
                        .Help("Offset commits that failed (retried at the next interval)")
                        .Register(registry)
                        .Add({});
  auto& rebalances = prometheus::BuildCounter()
                         .Name("ferry_rebalances_total")
                         .Help("Consumer-group rebalance callbacks by event: assigned, "
                               "revoked (committed first), lost (not committed)")
                         .Register(registry);
  assigned_ = &rebalances.Add({{"event", "assigned"}});
  revoked_ = &rebalances.Add({{"event", "revoked"}});
  lost_ = &rebalances.Add({{"event", "lost"}});
  backpressure_pauses_ = &prometheus::BuildCounter()
                              .Name("ferry_fetch_pauses_total")
                              .Help("Times the consumer stopped taking records because buffered "
                                    "events or bytes reached their budget (or a lane filled)")
                              .Register(registry)
                              .Add({});
  consume_errors_ = &prometheus::BuildCounter()
                         .Name("ferry_consume_errors_total")
                         .Help("Errors returned by consume() (not records)")
                         .Register(registry)
                         .Add({});
  client_errors_ = &prometheus::BuildCounter()
                        .Name("ferry_kafka_client_errors_total")
                        .Help("Errors reported by the Kafka client (broker down, "
                              "authentication, ...); most are retried by the client")
                        .Register(registry)
                        .Add({});
}

}  // namespace ferry
