#include "config/input_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  return "not a regular file";
}

std::string size_text(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes) {
  auto fail = [&](const std::string& why) -> input_error {
    return input_error{what + " " + path + " " + why};
  };
  auto unreadable = [&](int err) -> input_error {
    return input_error{"cannot read " + what + " " + path + ": " + std::strerror(err)};
  };
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one forever.
  fd_guard f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0)
    throw unreadable(errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0)
    throw unreadable(errno);
  if (!S_ISREG(st.st_mode))
    throw fail(std::string{"is "} + kind_of(st.st_mode) + ", not a regular file");
  if (static_cast<unsigned long long>(st.st_size) > max_bytes)
    throw fail("has " + std::to_string(st.st_size) + " bytes, more than the " + size_text(max_bytes)
               + " allowed");
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw unreadable(errno);
    if (n == 0)
      break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes)
      throw fail("grew past the " + size_text(max_bytes) + " allowed while being read");
  }
  return text;
}

} // namespace kiln
