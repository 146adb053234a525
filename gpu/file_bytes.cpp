#include "gpu/file_bytes.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kiln {

file_bytes file_bytes::open(const std::string& path, size_t max_bytes) {
  auto fail = [&](const std::string& why) {
    return std::runtime_error("cannot read outputs file '" + path + "': " + why);
  };
  // O_NONBLOCK: opening a FIFO put in the file's place must not wait for a writer forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    throw fail(errno == ELOOP ? "it is a symbolic link" : std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_it{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw fail("not a regular file");
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0)
    throw fail("the file is empty");
  if (max_bytes > 0 && size > max_bytes)
    throw fail(std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes)
               + " its outputs can take");
  // Not value-initialised: the read fills every byte, and zeroing first would cost a pass.
  std::shared_ptr<char[]> data{new char[size]};
  size_t have = 0;
  while (have < size) {
    ssize_t n = ::pread(fd, data.get() + have, size - have, static_cast<off_t>(have));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw fail(std::strerror(errno));
    if (n == 0)
      throw fail("the file shrank while it was read");
    have += static_cast<size_t>(n);
  }
  file_bytes f;
  f.data_ = std::move(data);
  f.size_ = size;
  f.name_ = path;
  return f;
}

std::shared_ptr<const void> keep_alive(const file_bytes& f) {
  return f.data_;
}

} // namespace kiln
