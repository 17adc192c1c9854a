// The harness itself: a real Toxiproxy in front of an echo server in this
// test, and each toxic the network-fault tests rely on does what they assume
// (bytes pass, latency delays them, a blackhole drops them without closing
// the connection and heals, a reset RSTs, a disabled proxy refuses).
#include "tests/netfaults/toxiproxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ferry::testing {
namespace {

// Echoes every byte back on each connection until the test ends.
class EchoServer {
 public:
  EchoServer() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(listen_fd_, 16);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] {
      while (true) {
        const int fd = accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) return;  // shutdown() of the listener
        connections_.emplace_back([fd] {
          char buffer[4096];
          ssize_t n;
          while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
            if (write(fd, buffer, static_cast<size_t>(n)) != n) break;
          }
          close(fd);
        });
      }
    });
  }
  ~EchoServer() {
    shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    close(listen_fd_);
    // Toxiproxy (stopped first by the test's fixture order) closed them.
    for (std::thread& connection : connections_) connection.join();
  }
  int port() const { return port_; }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> connections_;
};

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads up to `want` bytes within `timeout`: what arrived, "EOF" at end of
// stream, or "ERR:<errno>".
std::string ReadFor(int fd, size_t want, absl::Duration timeout) {
  std::string got;
  const absl::Time deadline = absl::Now() + timeout;
  while (got.size() < want) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
    char buffer[256];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) return got + "EOF";
    if (n < 0) return got + absl::StrCat("ERR:", errno);
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

bool Send(int fd, const std::string& bytes) {
  return write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
}

class ToxiproxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Toxiproxy>> started = Toxiproxy::Start("toxiproxy");
    ASSERT_TRUE(started.ok()) << started.status();
    toxiproxy_ = *std::move(started);
    absl::StatusOr<int> port =
        toxiproxy_->CreateProxy("echo", absl::StrCat("127.0.0.1:", echo_.port()));
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  void TearDown() override { toxiproxy_.reset(); }

  EchoServer echo_;
  std::unique_ptr<Toxiproxy> toxiproxy_;
  int port_ = 0;
};

TEST_F(ToxiproxyTest, BytesPassThrough) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(Send(fd, "hello"));
  EXPECT_EQ(ReadFor(fd, 5, absl::Seconds(10)), "hello");
  close(fd);
}

TEST_F(ToxiproxyTest, LatencyDelaysEveryAnswer) {
  ASSERT_TRUE(toxiproxy_->AddToxic("echo", LatencyToxic(ToxicStream::kDownstream, 400)).ok());
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  const absl::Time sent = absl::Now();
  ASSERT_TRUE(Send(fd, "slow"));
  EXPECT_EQ(ReadFor(fd, 4, absl::Seconds(10)), "slow");
  EXPECT_GE(absl::Now() - sent, absl::Milliseconds(400));
  close(fd);
}

TEST_F(ToxiproxyTest, BlackholeDropsSilentlyAndHeals) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(Send(fd, "a"));
  ASSERT_EQ(ReadFor(fd, 1, absl::Seconds(10)), "a");
  ASSERT_TRUE(toxiproxy_->Blackhole("echo").ok());
  ASSERT_TRUE(Send(fd, "lost"));
  // Silence: no bytes, and neither EOF nor a reset, for a whole second.
  EXPECT_EQ(ReadFor(fd, 1, absl::Seconds(1)), "");
  // Healing closes the connections that lived through the blackhole
  // (Toxiproxy closes a timeout toxic's connections when it is removed);
  // new ones pass again.
  ASSERT_TRUE(toxiproxy_->Heal("echo").ok());
  EXPECT_EQ(ReadFor(fd, 1, absl::Seconds(10)), "EOF");
  close(fd);
  const int again = Connect(port_);
  ASSERT_GE(again, 0);
  ASSERT_TRUE(Send(again, "back"));
  EXPECT_EQ(ReadFor(again, 4, absl::Seconds(10)), "back");
  close(again);
}

TEST_F(ToxiproxyTest, ResetPeerResetsTheConnection) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(toxiproxy_->AddToxic("echo", ResetPeerToxic(ToxicStream::kUpstream, 0)).ok());
  Send(fd, "x");  // the toxic acts on the next bytes the client sends
  // Toxiproxy closes both sides with SO_LINGER 0; its close of the other
  // direction can reach the client first as a FIN. Either way the connection
  // ends at once, with no echo.
  const std::string got = ReadFor(fd, 1, absl::Seconds(10));
  EXPECT_TRUE(got == absl::StrCat("ERR:", ECONNRESET) || got == "EOF") << got;
  close(fd);
}

TEST_F(ToxiproxyTest, DisabledProxyRefusesAndEnabledAcceptsAgain) {
  ASSERT_TRUE(toxiproxy_->SetEnabled("echo", false).ok());
  EXPECT_LT(Connect(port_), 0);
  ASSERT_TRUE(toxiproxy_->SetEnabled("echo", true).ok());
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(Send(fd, "up"));
  EXPECT_EQ(ReadFor(fd, 2, absl::Seconds(10)), "up");
  close(fd);
}

TEST_F(ToxiproxyTest, BadNamesAndUnknownToxicsAreErrors) {
  EXPECT_FALSE(toxiproxy_->CreateProxy("../x", "127.0.0.1:1").ok());
  EXPECT_FALSE(toxiproxy_->RemoveToxic("echo", "no-such-toxic").ok());
  Toxic bogus = LatencyToxic(ToxicStream::kUpstream, 1);
  bogus.type = "no_such_type";
  EXPECT_FALSE(toxiproxy_->AddToxic("echo", bogus).ok());
}

}  // namespace
}  // namespace ferry::testing
