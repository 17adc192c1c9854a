#include "core/config/config_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ferry {

absl::Status CheckNamedFile(const NamedFile& file) {
  const std::string prefix = file.location.empty()
                                 ? absl::StrCat(file.setting, ": ")
                                 : absl::StrCat(file.location, ": ", file.setting, ": ");
  auto failed = [&](int error) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "cannot read ", file.path, ": ", std::strerror(error)));
  };
  const int fd = ::open(file.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return failed(errno);
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return failed(error);
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return failed(EISDIR);
  }
  std::string contents;
  char buffer[16384];
  int error = 0;
  while (contents.size() <= kMaxNamedFileBytes) {
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
  if (error != 0) return failed(error);
  if (contents.size() > kMaxNamedFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, file.path, " is over ",
                                                   kMaxNamedFileBytes,
                                                   " bytes; not a token or PEM file"));
  }
  if (absl::StripAsciiWhitespace(contents).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, file.path, " is empty"));
  }
  return absl::OkStatus();
}

}  // namespace ferry
