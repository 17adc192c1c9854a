#include "tests/tools/metrics_text.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ferry {
namespace {

bool IsMetricNameStart(char c) { return absl::ascii_isalpha(c) || c == '_' || c == ':'; }
bool IsMetricNameChar(char c) { return IsMetricNameStart(c) || absl::ascii_isdigit(c); }
bool IsLabelNameStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsLabelNameChar(char c) { return IsLabelNameStart(c) || absl::ascii_isdigit(c); }

// A float as the format allows it (Go's ParseFloat): decimal, exponent,
// NaN, +Inf, -Inf (any case).
bool ParseValue(absl::string_view text, double* out) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "nan") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (lower == "+inf" || lower == "inf") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (lower == "-inf") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c) && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') {
      return false;
    }
  }
  return absl::SimpleAtod(text, out) && std::isfinite(*out);
}

class LineParser {
 public:
  explicit LineParser(absl::string_view line) : s_(line) {}

  void SkipBlanks() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  bool MetricName(std::string* out) {
    const size_t start = pos_;
    if (pos_ >= s_.size() || !IsMetricNameStart(s_[pos_])) return false;
    while (pos_ < s_.size() && IsMetricNameChar(s_[pos_])) ++pos_;
    *out = std::string(s_.substr(start, pos_ - start));
    return true;
  }
  bool LabelName(std::string* out) {
    const size_t start = pos_;
    if (pos_ >= s_.size() || !IsLabelNameStart(s_[pos_])) return false;
    while (pos_ < s_.size() && IsLabelNameChar(s_[pos_])) ++pos_;
    *out = std::string(s_.substr(start, pos_ - start));
    return true;
  }
  // A quoted label value with \\, \" and \n escapes.
  absl::Status LabelValue(std::string* out) {
    if (Peek() != '"') return absl::InvalidArgumentError("expected '\"' to open a label value");
    ++pos_;
    out->clear();
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (c == '\\') {
        if (pos_ >= s_.size()) break;
        const char e = s_[pos_++];
        if (e == '\\') {
          out->push_back('\\');
        } else if (e == '"') {
          out->push_back('"');
        } else if (e == 'n') {
          out->push_back('\n');
        } else {
          return absl::InvalidArgumentError(absl::StrCat("invalid escape \\", std::string(1, e),
                                                         " in a label value"));
        }
        continue;
      }
      out->push_back(c);
    }
    return absl::InvalidArgumentError("unterminated label value");
  }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  absl::string_view Token() {
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ' ' && s_[pos_] != '\t') ++pos_;
    return s_.substr(start, pos_ - start);
  }
  absl::string_view Rest() const { return s_.substr(pos_); }

 private:
  absl::string_view s_;
  size_t pos_ = 0;
};

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

std::string DescribeSeries(const MetricSample& sample) {
  std::string text = sample.name + "{";
  bool first = true;
  for (const auto& [name, value] : sample.labels) {
    absl::StrAppend(&text, first ? "" : ",", name, "=\"", value, "\"");
    first = false;
  }
  return text + "}";
}

// Histogram: per label set (without le), buckets cumulative, +Inf present
// and equal to _count.
absl::Status CheckHistogram(const MetricFamilyText& family) {
  struct Series {
    std::map<double, double> buckets;
    std::optional<double> count;
    bool has_sum = false;
  };
  std::map<MetricLabels, Series> series;
  for (const MetricSample& sample : family.samples) {
    MetricLabels labels = sample.labels;
    if (sample.name == family.name + "_bucket") {
      auto le = labels.find("le");
      if (le == labels.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(DescribeSeries(sample), ": a histogram bucket needs an le label"));
      }
      double bound = 0;
      if (!ParseValue(le->second, &bound)) {
        return absl::InvalidArgumentError(
            absl::StrCat(DescribeSeries(sample), ": le is not a number"));
      }
      labels.erase(le);
      series[labels].buckets[bound] = sample.value;
    } else if (sample.name == family.name + "_count") {
      series[labels].count = sample.value;
    } else if (sample.name == family.name + "_sum") {
      series[labels].has_sum = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(sample.name, ": not a sample name of histogram ", family.name));
    }
  }
  for (const auto& [labels, one] : series) {
    const std::string where = absl::StrCat("histogram ", family.name);
    if (one.buckets.empty() || !one.count.has_value() || !one.has_sum) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a series lacks buckets, _sum or _count"));
    }
    double previous = 0;
    for (const auto& [bound, count] : one.buckets) {
      if (count < previous) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": bucket le=", bound, " is below the previous bucket"));
      }
      previous = count;
    }
    auto inf = one.buckets.find(std::numeric_limits<double>::infinity());
    if (inf == one.buckets.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": no le=\"+Inf\" bucket"));
    }
    if (inf->second != *one.count) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the +Inf bucket (", inf->second, ") differs from _count (",
                       *one.count, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSummary(const MetricFamilyText& family) {
  for (const MetricSample& sample : family.samples) {
    if (sample.name == family.name) {
      if (sample.labels.count("quantile") == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(DescribeSeries(sample), ": a summary quantile needs a quantile label"));
      }
    } else if (sample.name != family.name + "_sum" && sample.name != family.name + "_count") {
      return absl::InvalidArgumentError(
          absl::StrCat(sample.name, ": not a sample name of summary ", family.name));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<const MetricSample*> Exposition::Find(const std::string& name,
                                                  const MetricLabels& match) const {
  std::vector<const MetricSample*> found;
  auto family_name = family_of_.find(name);
  if (family_name == family_of_.end()) return found;
  auto family = families.find(family_name->second);
  if (family == families.end()) return found;
  for (const MetricSample& sample : family->second.samples) {
    if (sample.name != name) continue;
    bool matches = true;
    for (const auto& [label, value] : match) {
      auto it = sample.labels.find(label);
      matches = matches && it != sample.labels.end() && it->second == value;
    }
    if (matches) found.push_back(&sample);
  }
  return found;
}

double Exposition::Sum(const std::string& name, const MetricLabels& match) const {
  double sum = 0;
  for (const MetricSample* sample : Find(name, match)) sum += sample->value;
  return sum;
}

std::optional<double> Exposition::Value(const std::string& name,
                                        const MetricLabels& labels) const {
  for (const MetricSample* sample : Find(name, labels)) {
    if (sample->labels == labels) return sample->value;
  }
  return std::nullopt;
}

std::vector<std::string> Exposition::SampleNames() const {
  std::vector<std::string> names;
  for (const auto& [name, family] : family_of_) names.push_back(name);
  return names;
}

absl::StatusOr<Exposition> ParseExposition(absl::string_view text) {
  Exposition exposition;
  std::set<std::string> typed;
  std::set<std::string> helped;
  std::set<std::string> finished;  // families whose samples ended
  std::set<std::string> series;    // name{labels}, for duplicates
  std::string current;             // family of the previous sample
  int number = 0;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // trailing newline

  auto family_for = [&exposition, &typed](const std::string& sample_name) -> std::string {
    if (typed.count(sample_name) > 0) return sample_name;
    for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (!absl::EndsWith(sample_name, suffix)) continue;
      const std::string base = sample_name.substr(0, sample_name.size() - suffix.size());
      auto it = exposition.families.find(base);
      if (it != exposition.families.end() && typed.count(base) > 0 &&
          (it->second.type == "histogram" ||
           (it->second.type == "summary" && suffix != "_bucket"))) {
        return base;
      }
    }
    return sample_name;
  };

  for (absl::string_view line : lines) {
    ++number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (line[0] == '#') {
      LineParser p(line.substr(1));
      p.SkipBlanks();
      const absl::string_view keyword = p.Token();
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a comment
      p.SkipBlanks();
      std::string name;
      if (!p.MetricName(&name) || (!p.AtEnd() && p.Peek() != ' ' && p.Peek() != '\t')) {
        return LineError(number, absl::StrCat("# ", keyword, " needs a valid metric name"));
      }
      MetricFamilyText& family = exposition.families[name];
      family.name = name;
      if (keyword == "HELP") {
        if (!helped.insert(name).second) return LineError(number, "second HELP for " + name);
        p.SkipBlanks();
        std::string help;
        const absl::string_view raw = p.Rest();
        for (size_t i = 0; i < raw.size(); ++i) {
          if (raw[i] == '\\' && i + 1 < raw.size() && (raw[i + 1] == '\\' || raw[i + 1] == 'n')) {
            help.push_back(raw[i + 1] == 'n' ? '\n' : '\\');
            ++i;
          } else {
            help.push_back(raw[i]);
          }
        }
        family.help = help;
        continue;
      }
      if (!typed.insert(name).second) return LineError(number, "second TYPE for " + name);
      if (!family.samples.empty() || finished.count(name) > 0) {
        return LineError(number, "TYPE for " + name + " after its samples");
      }
      p.SkipBlanks();
      const std::string type(p.Token());
      p.SkipBlanks();
      if (!p.AtEnd() || (type != "counter" && type != "gauge" && type != "histogram" &&
                         type != "summary" && type != "untyped")) {
        return LineError(number, absl::StrCat("unknown metric type \"", type, "\""));
      }
      family.type = type;
      continue;
    }

    LineParser p(line);
    MetricSample sample;
    if (!p.MetricName(&sample.name)) return LineError(number, "expected a metric name");
    p.SkipBlanks();
    if (p.Consume('{')) {
      p.SkipBlanks();
      while (!p.Consume('}')) {
        std::string label;
        if (!p.LabelName(&label)) return LineError(number, "expected a label name");
        if (absl::StartsWith(label, "__")) {
          return LineError(number, "label names starting with __ are reserved: " + label);
        }
        p.SkipBlanks();
        if (!p.Consume('=')) return LineError(number, "expected '=' after label " + label);
        p.SkipBlanks();
        std::string value;
        absl::Status status = p.LabelValue(&value);
        if (!status.ok()) return LineError(number, status.message());
        if (!sample.labels.emplace(label, value).second) {
          return LineError(number, "label " + label + " given twice");
        }
        p.SkipBlanks();
        if (p.Consume(',')) {
          p.SkipBlanks();
          continue;
        }
        if (p.Peek() != '}') return LineError(number, "expected ',' or '}' after a label");
      }
      p.SkipBlanks();
    }
    const absl::string_view value_text = p.Token();
    if (!ParseValue(value_text, &sample.value)) {
      return LineError(number, absl::StrCat("invalid sample value \"", value_text, "\""));
    }
    p.SkipBlanks();
    if (!p.AtEnd()) {
      int64_t timestamp = 0;
      if (!absl::SimpleAtoi(p.Token(), &timestamp)) return LineError(number, "invalid timestamp");
      p.SkipBlanks();
      if (!p.AtEnd()) return LineError(number, "unexpected text after the timestamp");
    }

    const std::string family_name = family_for(sample.name);
    if (family_name != current) {
      if (!current.empty()) finished.insert(current);
      if (finished.count(family_name) > 0) {
        return LineError(number, "samples of " + family_name + " are not together");
      }
      current = family_name;
    }
    MetricFamilyText& family = exposition.families[family_name];
    family.name = family_name;
    if (family.type == "counter" && (std::isnan(sample.value) || sample.value < 0)) {
      return LineError(number, "counter " + sample.name + " is negative or NaN");
    }
    if (family.type == "counter" || family.type == "gauge" || family.type == "untyped") {
      if (sample.name != family_name) {
        return LineError(number, sample.name + " does not belong to " + family_name);
      }
    }
    if (!series.insert(DescribeSeries(sample)).second) {
      return LineError(number, "duplicate series " + DescribeSeries(sample));
    }
    exposition.family_of_[sample.name] = family_name;
    family.samples.push_back(std::move(sample));
  }

  for (auto& [name, family] : exposition.families) {
    absl::Status status = absl::OkStatus();
    if (family.type == "histogram") status = CheckHistogram(family);
    if (family.type == "summary") status = CheckSummary(family);
    if (!status.ok()) return status;
    exposition.family_of_.emplace(name, name);
  }
  return exposition;
}

// ---- HTTP ----

namespace {

absl::StatusOr<std::pair<std::string, std::string>> SplitHostPort(const std::string& host_port) {
  std::string host;
  std::string port;
  if (!host_port.empty() && host_port[0] == '[') {
    const size_t close = host_port.find(']');
    if (close == std::string::npos || close + 1 >= host_port.size() ||
        host_port[close + 1] != ':') {
      return absl::InvalidArgumentError("expected [ipv6]:port, got " + host_port);
    }
    host = host_port.substr(1, close - 1);
    port = host_port.substr(close + 2);
  } else {
    const size_t colon = host_port.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError("expected host:port, got " + host_port);
    }
    host = host_port.substr(0, colon);
    port = host_port.substr(colon + 1);
  }
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  return std::make_pair(host, port);
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    pollfd entry{fd, events, 0};
    const int ready = poll(&entry, 1, static_cast<int>(std::min<int64_t>(ms, 1000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

absl::StatusOr<std::string> DecodeChunked(absl::string_view body) {
  std::string out;
  while (true) {
    const size_t eol = body.find("\r\n");
    if (eol == absl::string_view::npos) return absl::DataLossError("truncated chunked body");
    absl::string_view size_text = body.substr(0, eol);
    size_text = size_text.substr(0, size_text.find(';'));
    uint64_t size = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(size_text), &size)) {
      return absl::DataLossError("bad chunk size");
    }
    body.remove_prefix(eol + 2);
    if (size == 0) return out;
    if (body.size() < size + 2) return absl::DataLossError("truncated chunk");
    out.append(body.data(), size);
    body.remove_prefix(size + 2);
  }
}

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    absl::Duration timeout) {
  absl::StatusOr<std::pair<std::string, std::string>> split = SplitHostPort(host_port);
  if (!split.ok()) return split.status();
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const int resolved = getaddrinfo(split->first.c_str(), split->second.c_str(), &hints, &addresses);
  if (resolved != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host_port, ": ", gai_strerror(resolved)));
  }
  int fd = -1;
  std::string last_error = "no address";
  for (addrinfo* address = addresses; address != nullptr && fd < 0; address = address->ai_next) {
    fd = socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                address->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, address->ai_addr, address->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last_error = std::strerror(errno);
      close(fd);
      fd = -1;
      continue;
    }
    int error = 0;
    socklen_t length = sizeof(error);
    if (!WaitFor(fd, POLLOUT, deadline) ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
      last_error = error != 0 ? std::strerror(error) : "connect timed out";
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(addresses);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port, ": ", last_error));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port,
                   "\r\nAccept: text/plain\r\nConnection: close\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    if (!WaitFor(fd, POLLOUT, deadline)) {
      close(fd);
      return absl::DeadlineExceededError("timed out sending the request to " + host_port);
    }
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      const std::string error = std::strerror(errno);
      close(fd);
      return absl::UnavailableError(absl::StrCat("send to ", host_port, ": ", error));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[16384];
  while (true) {
    if (!WaitFor(fd, POLLIN, deadline)) {
      close(fd);
      return absl::DeadlineExceededError("timed out reading from " + host_port);
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      const std::string error = std::strerror(errno);
      close(fd);
      return absl::UnavailableError(absl::StrCat("recv from ", host_port, ": ", error));
    }
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::DataLossError("incomplete HTTP response from " + host_port);
  }
  const absl::string_view head = absl::string_view(response).substr(0, header_end);
  const absl::string_view status_line = head.substr(0, head.find("\r\n"));
  const std::vector<absl::string_view> status_parts =
      absl::StrSplit(status_line, absl::MaxSplits(' ', 2));
  if (status_parts.size() < 2 || !absl::StartsWith(status_parts[0], "HTTP/")) {
    return absl::DataLossError(absl::StrCat("not an HTTP response: ", status_line));
  }
  if (status_parts[1] != "200") {
    return absl::UnavailableError(absl::StrCat("GET ", path, " from ", host_port, ": ",
                                               status_line));
  }
  std::string body = response.substr(header_end + 4);
  if (absl::StrContains(absl::AsciiStrToLower(head), "transfer-encoding: chunked")) {
    return DecodeChunked(body);
  }
  return body;
}

absl::StatusOr<Exposition> ScrapeMetrics(const std::string& host_port, absl::Duration timeout) {
  absl::StatusOr<std::string> body = HttpGet(host_port, "/metrics", timeout);
  if (!body.ok()) return body.status();
  return ParseExposition(*body);
}

}  // namespace ferry
