#include "core/common/pem_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ferry {

absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, size_t limit,
                                         absl::string_view failure) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, failure);
  struct stat info;
  int error = 0;
  if (::fstat(fd, &info) != 0) {
    error = errno;
  } else if (S_ISDIR(info.st_mode)) {
    error = EISDIR;
  }
  std::string contents;
  char buffer[16384];
  while (error == 0 && contents.size() <= limit) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      contents.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // EAGAIN: a FIFO or device with nothing to read now; judge what came.
    if (n < 0 && errno != EAGAIN) error = errno;
    break;
  }
  ::close(fd);
  if (error != 0) return absl::ErrnoToStatus(error, failure);
  if (contents.size() > limit) contents.resize(limit + 1);
  return contents;
}

absl::StatusOr<std::string> ReadPemFile(absl::string_view setting, const std::string& path) {
  absl::StatusOr<std::string> contents =
      ReadFileUpTo(path, kMaxPemFileBytes, absl::StrCat(setting, ": cannot read ", path));
  if (!contents.ok()) return contents.status();
  if (contents->size() > kMaxPemFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(setting, ": ", path, " is over ",
                                                   kMaxPemFileBytes, " bytes; not a PEM file"));
  }
  if (absl::StripAsciiWhitespace(*contents).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(setting, ": ", path, " is empty"));
  }
  return contents;
}

bool HasPemBlock(absl::string_view contents) {
  return contents.find("-----BEGIN ") != absl::string_view::npos;
}

}  // namespace ferry
