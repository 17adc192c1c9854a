#include "server/server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The embedded default (an in-process mock Kafka cluster, so the test needs
// nothing outside it) with every port picked by the kernel and workers at a
// port nothing listens on.
Config TestConfig() {
  absl::StatusOr<Config> config = ParseConfig(EmbeddedDefaultConfigYaml(), "<test>");
  EXPECT_TRUE(config.ok()) << config.status();
  config->listen_address = "127.0.0.1:0";
  config->health_listen_address = "127.0.0.1:0";
  config->metrics_listen_address = "127.0.0.1:0";
  config->processors[0].target = "ipv4:127.0.0.1:1";
  return *std::move(config);
}

// A TCP port held in LISTEN by this test, so binding it fails.
class TakenPort {
 public:
  TakenPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(fd_, 1), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
  }
  ~TakenPort() { close(fd_); }
  int port() const { return port_; }

 private:
  const int fd_;
  int port_ = 0;
};

std::vector<std::string> Reversed(std::vector<std::string> names) {
  return std::vector<std::string>(names.rbegin(), names.rend());
}

TEST(ServerTest, StopsEverythingInReverseOrderOfStartup) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(TestConfig());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->started(), IsEmpty());  // Create starts nothing but the cluster
  ASSERT_TRUE((*server)->Start().ok());
  EXPECT_GT((*server)->grpc_port(), 0);
  EXPECT_GT((*server)->metrics_port(), 0);
  EXPECT_THAT((*server)->started(),
              ElementsAre("control log", "Control threads", "gRPC server", "health port",
                          "metrics endpoint",
                          "worker streams", "consumer", "engine timer", "committer",
                          "progress reporter"));
  (*server)->Drain([] { return true; });
  (*server)->Stop();
  EXPECT_THAT((*server)->stopped(), ElementsAreArray(Reversed((*server)->started())));
  (*server)->Stop();  // idempotent
  EXPECT_EQ((*server)->stopped().size(), (*server)->started().size());
}

TEST(ServerTest, AFailedStartStopsWhatHadStarted) {
  TakenPort taken;
  Config config = TestConfig();
  config.metrics_listen_address = absl::StrCat("127.0.0.1:", taken.port());
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(config);
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::Status started = (*server)->Start();
  ASSERT_FALSE(started.ok());
  EXPECT_FALSE(IsConfigError(started));  // exit 3, not 2
  EXPECT_THAT(started.message(), HasSubstr("(server.metrics_listen): address in use or invalid"));
  EXPECT_THAT((*server)->started(),
              ElementsAre("control log", "Control threads", "gRPC server", "health port"));
  (*server)->Stop();
  EXPECT_THAT((*server)->stopped(),
              ElementsAre("health port", "gRPC server", "Control threads", "control log"));
}

TEST(ServerTest, AnUnusableConfigIsAConfigErrorBeforeAnythingStarts) {
  Config config = TestConfig();
  config.control_token_file = "/nonexistent/ferry-token";
  EXPECT_TRUE(IsConfigError(Server::CheckConfig(config)));
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(config);
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(IsConfigError(server.status()));
  EXPECT_THAT(server.status().message(), HasSubstr("control.token_file: cannot read"));
}

}  // namespace
}  // namespace ferry
