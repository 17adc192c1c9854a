#include "tests/netfaults/toxiproxy.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

namespace ferry::testing {
namespace {

// tools/setup installs the pinned version here.
constexpr char kDefaultBinary[] = "/usr/local/lib/ferry/toxiproxy-v2.12.0/toxiproxy-server";
constexpr absl::Duration kStartTimeout = absl::Seconds(20);
constexpr int kStartAttempts = 5;  // a picked port can be taken before the server binds it

std::string StreamName(ToxicStream stream) {
  return stream == ToxicStream::kUpstream ? "upstream" : "downstream";
}

Toxic MakeToxic(std::string type, ToxicStream stream,
                std::map<std::string, int64_t> attributes) {
  Toxic toxic;
  toxic.name = absl::StrCat(type, "-", StreamName(stream));
  toxic.type = std::move(type);
  toxic.stream = stream;
  toxic.attributes = std::move(attributes);
  return toxic;
}

size_t AppendBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// Proxy and toxic names go into URL paths: keep them to a safe alphabet.
bool SafeName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

}  // namespace

Toxic LatencyToxic(ToxicStream stream, int64_t latency_ms, int64_t jitter_ms) {
  return MakeToxic("latency", stream, {{"latency", latency_ms}, {"jitter", jitter_ms}});
}
Toxic BandwidthToxic(ToxicStream stream, int64_t kilobytes_per_second) {
  return MakeToxic("bandwidth", stream, {{"rate", kilobytes_per_second}});
}
Toxic BlackholeToxic(ToxicStream stream) {
  return MakeToxic("timeout", stream, {{"timeout", 0}});
}
Toxic ResetPeerToxic(ToxicStream stream, int64_t after_ms) {
  return MakeToxic("reset_peer", stream, {{"timeout", after_ms}});
}

std::string ToxiproxyBinary() {
  const char* configured = std::getenv("FERRY_TOXIPROXY");
  return configured != nullptr && *configured != '\0' ? configured : kDefaultBinary;
}

absl::StatusOr<int> PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("bind to a free port: ", std::strerror(error)));
  }
  close(fd);
  return ntohs(address.sin_port);
}

absl::StatusOr<std::unique_ptr<Toxiproxy>> Toxiproxy::Start(const std::string& name) {
  static std::once_flag curl_once;
  std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  const std::string binary = ToxiproxyBinary();
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no Toxiproxy server at ", binary, " (run tools/setup)"));
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string last_error;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    absl::StatusOr<int> port = PickFreePort();
    if (!port.ok()) return port.status();
    absl::StatusOr<Subprocess> process = Subprocess::Start(
        {binary, "-host", "127.0.0.1", "-port", absl::StrCat(*port)},
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "-", attempt, ".log"));
    if (!process.ok()) return process.status();
    std::unique_ptr<Toxiproxy> proxy(new Toxiproxy(*std::move(process), *port));
    // Ready when the API answers; a server that exits lost the port race.
    const absl::Time deadline = absl::Now() + kStartTimeout;
    while (absl::Now() < deadline && !proxy->process_.TryWait().has_value()) {
      absl::StatusOr<std::string> version = proxy->Request("GET", "/version", "");
      if (version.ok()) return proxy;
      last_error = version.status().ToString();
      absl::SleepFor(absl::Milliseconds(20));  // polling a condition, bounded by `deadline`
    }
    last_error = absl::StrCat(last_error, "; log: ", proxy->process_.Log());
  }
  return absl::UnavailableError(absl::StrCat("Toxiproxy did not start: ", last_error));
}

Toxiproxy::~Toxiproxy() {
  if (!process_.TryWait().has_value()) {
    process_.Signal(SIGTERM);
    if (!process_.Wait(absl::Seconds(5)).ok()) process_.Signal(SIGKILL);
  }
}

absl::StatusOr<std::string> Toxiproxy::Request(const std::string& method,
                                               const std::string& path,
                                               const std::string& body) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  const std::string url = absl::StrCat("http://127.0.0.1:", api_port_, path);
  std::string response;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");  // loopback: never an HTTP proxy from the env
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  if (!body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  const CURLcode code = curl_easy_perform(curl);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (code != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat(method, " ", url, ": ", curl_easy_strerror(code)));
  }
  if (http_status < 200 || http_status >= 300) {
    return absl::InternalError(
        absl::StrCat(method, " ", url, ": HTTP ", http_status, ": ", response));
  }
  return response;
}

absl::StatusOr<int> Toxiproxy::CreateProxy(const std::string& proxy,
                                           const std::string& upstream) {
  if (!SafeName(proxy)) return absl::InvalidArgumentError(absl::StrCat("bad name ", proxy));
  const nlohmann::json request = {
      {"name", proxy}, {"listen", "127.0.0.1:0"}, {"upstream", upstream}, {"enabled", true}};
  absl::StatusOr<std::string> response = Request("POST", "/proxies", request.dump());
  if (!response.ok()) return response.status();
  // The answer names the address it bound: "127.0.0.1:PORT".
  const nlohmann::json created = nlohmann::json::parse(*response, nullptr, false);
  int port = 0;
  if (created.is_object() && created.contains("listen") && created["listen"].is_string()) {
    const std::string listen = created["listen"].get<std::string>();
    const size_t colon = listen.rfind(':');
    if (colon != std::string::npos && absl::SimpleAtoi(listen.substr(colon + 1), &port) &&
        port > 0) {
      return port;
    }
  }
  return absl::InternalError(absl::StrCat("unexpected answer to create proxy: ", *response));
}

absl::Status Toxiproxy::SetEnabled(const std::string& proxy, bool enabled) {
  if (!SafeName(proxy)) return absl::InvalidArgumentError(absl::StrCat("bad name ", proxy));
  const nlohmann::json request = {{"enabled", enabled}};
  return Request("POST", absl::StrCat("/proxies/", proxy), request.dump()).status();
}

absl::Status Toxiproxy::AddToxic(const std::string& proxy, const Toxic& toxic) {
  if (!SafeName(proxy) || !SafeName(toxic.name)) {
    return absl::InvalidArgumentError(absl::StrCat("bad name ", proxy, "/", toxic.name));
  }
  nlohmann::json attributes = nlohmann::json::object();
  for (const auto& [key, value] : toxic.attributes) attributes[key] = value;
  const nlohmann::json request = {{"name", toxic.name},
                                  {"type", toxic.type},
                                  {"stream", StreamName(toxic.stream)},
                                  {"toxicity", toxic.toxicity},
                                  {"attributes", attributes}};
  return Request("POST", absl::StrCat("/proxies/", proxy, "/toxics"), request.dump()).status();
}

absl::Status Toxiproxy::RemoveToxic(const std::string& proxy, const std::string& toxic_name) {
  if (!SafeName(proxy) || !SafeName(toxic_name)) {
    return absl::InvalidArgumentError(absl::StrCat("bad name ", proxy, "/", toxic_name));
  }
  return Request("DELETE", absl::StrCat("/proxies/", proxy, "/toxics/", toxic_name), "")
      .status();
}

absl::Status Toxiproxy::Blackhole(const std::string& proxy) {
  for (ToxicStream stream : {ToxicStream::kUpstream, ToxicStream::kDownstream}) {
    if (absl::Status added = AddToxic(proxy, BlackholeToxic(stream)); !added.ok()) return added;
  }
  return absl::OkStatus();
}

absl::Status Toxiproxy::Heal(const std::string& proxy) {
  for (ToxicStream stream : {ToxicStream::kUpstream, ToxicStream::kDownstream}) {
    absl::Status removed = RemoveToxic(proxy, BlackholeToxic(stream).name);
    if (!removed.ok()) return removed;
  }
  return absl::OkStatus();
}

}  // namespace ferry::testing
