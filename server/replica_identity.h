// ReplicaIdentity: the one name of this ferry replica, used everywhere a
// replica is named: the Kafka client.id of every client it opens (consumer,
// control topic, dead letters), GetStatus's `replica`, the control log's
// `issued_by`/`applied_by`, dead letters' `ferry.instance` header and its
// own log.
//
// Rule: `kafka.client.id` when the config sets it (k8s/ sets it to the pod
// name: `client.id: ${POD_NAME}`), else `ferry-<host name>/<pid>`.
//
// Threading: pure function (reads the host name and pid).
#ifndef FERRY_SERVER_REPLICA_IDENTITY_H_
#define FERRY_SERVER_REPLICA_IDENTITY_H_

#include <map>
#include <string>

namespace ferry {

std::string ReplicaIdentity(const std::map<std::string, std::string>& kafka_properties);

}  // namespace ferry

#endif  // FERRY_SERVER_REPLICA_IDENTITY_H_
