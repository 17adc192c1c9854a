#include "clients/ferryctl/usage.h"

namespace ferry::ferryctl {

const char* const kUsage = R"help(ferryctl: the operator's command line for a running ferry group

Commands (ferry's Control gRPC service):
  ferryctl status [--output=table|json]
      This replica's partitions (offsets, lag, commit blocker, pauses),
      processors (rate limit, concurrency limit, circuit breaker), worker
      streams, lanes and operator pauses (GetStatus).
  ferryctl pause (--topic=T [--partitions=0,3] | --all)
  ferryctl resume (--topic=T [--partitions=0,3] | --all)
      Stop / restart fetching and dispatching, group-wide and across
      rebalances; in-flight events finish and commit. --topic=T:0,3 is
      the same as --topic=T --partitions=0,3; ranges (0-3) work too.
  ferryctl reset --topic=T [--partitions=0,3]
                 (--to-datetime=TIME | --to-earliest | --to-latest | --to-offset=N)
                 [--dry-run] [--wait=15s]
      Move the group's position (all partitions of T, or the listed ones).
      TIME is RFC 3339: 2026-12-01T10:00:00Z or 2026-12-01T12:00:00+02:00.
      --dry-run shows the planned offsets and changes nothing. --wait is how
      long ferry waits for the owning replicas to apply it (default: the
      server's, 15s).
  ferryctl skip --topic=T --partition=P --offset=O [--wait=10s]
      Give up on one stuck event: to the dead-letter topic (or marked done)
      and the partition moves on.
  ferryctl rate-limit PROCESSOR EVENTS_PER_SECOND [--burst=N]
  ferryctl rate-limit PROCESSOR --clear
      Override a processor's rate limit (processors[].rate_limit) on every
      replica, across restarts: events wait in their queues, none is
      dropped. 0 lifts the limit; --burst is the bucket's size (default
      EVENTS_PER_SECOND/10, at least 1); --clear returns to the configured
      limit. `ferryctl status` shows the limit in force, "(operator)" when
      overridden.

  ferryctl status --metrics [--watch] [--interval=1s]
      The live view: events per second, lag, commit blockers, buffers,
      workers and where time goes, from two GetStatus answers --interval
      apart (the same counters ferry's /metrics serves). --watch refreshes
      in place until interrupted.

Connection flags (every command):
  --server=HOST:PORT     ferry's server.listen, or any gRPC target
                         (default 127.0.0.1:7070)
  --token_file=PATH      bearer token (else $FERRY_CONTROL_TOKEN), sent as
                         `authorization: Bearer <token>` metadata
  --tls_ca=PEM           CA that signed ferry's certificate; turns TLS on
  --tls_cert=PEM --tls_key=PEM
                         client certificate and key, for mTLS
  --tls_server_name=NAME the name ferry's certificate carries, when --server
                         does not (e.g. an IP address)
  --timeout=30s          deadline of the call (reset and skip get at least
                         their wait + 20s)
  --output=table|json    json: the response as one JSON object (proto3 JSON:
                         lowerCamelCase names, int64 as strings); not with
                         status --metrics

Flags may be written --dry-run or --dry_run, --name=value or --name value.

Exit codes:
  0  done
  1  the call failed; stderr says `ferryctl: <CODE>: <message>` (NOT_FOUND,
     INVALID_ARGUMENT, FAILED_PRECONDITION, UNAVAILABLE, UNAUTHENTICATED, ...)
  2  usage error (unknown command or flag, missing or conflicting flags, bad
     value, unreadable --token_file/--tls_* file); nothing was sent
  3  reset: not every partition was applied yet (applied=false; not for
     --dry-run); the owners apply it later
)help";

const std::map<std::string, std::string>& CommandUsages() {
  static const auto* usages = new std::map<std::string, std::string>{
      {"status",
       "ferryctl status [--server=HOST:PORT] [--output=table|json]\n"
       "       ferryctl status --metrics [--server=HOST:PORT] [--watch] [--interval=1s]"},
      {"pause", "ferryctl pause (--topic=T [--partitions=0,3] | --all)"},
      {"resume", "ferryctl resume (--topic=T [--partitions=0,3] | --all)"},
      {"reset",
       "ferryctl reset --topic=T [--partitions=0,3] (--to-datetime=2026-12-01T10:00:00Z | "
       "--to-earliest | --to-latest | --to-offset=N) [--dry-run] [--wait=15s]"},
      {"skip", "ferryctl skip --topic=T --partition=P --offset=O [--wait=10s]"},
      {"rate-limit",
       "ferryctl rate-limit PROCESSOR EVENTS_PER_SECOND [--burst=N]\n"
       "       ferryctl rate-limit PROCESSOR --clear"},
  };
  return *usages;
}

}  // namespace ferry::ferryctl
