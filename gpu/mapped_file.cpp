#include "gpu/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kiln {

struct mapped_file::region {
  void* base = nullptr;
  size_t size = 0;
  region(void* b, size_t s) : base(b), size(s) {}
  region(const region&) = delete;
  region& operator=(const region&) = delete;
  ~region() {
    if (base != nullptr)
      ::munmap(base, size);
  }
};

mapped_file mapped_file::open(const std::string& path) {
  auto fail = [&](const std::string& why) {
    return std::runtime_error("cannot read outputs file '" + path + "': " + why);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw fail(std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw fail("not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw fail("the file is empty");
  }
  // MAP_POPULATE maps every page now, in one go, instead of one fault per page later.
  void* base = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ,
                      MAP_PRIVATE | MAP_POPULATE, fd, 0);
  int err = errno;
  ::close(fd); // the mapping keeps the file's pages
  if (base == MAP_FAILED)
    throw fail(std::strerror(err));
  mapped_file f;
  f.region_ = std::make_shared<const region>(base, static_cast<size_t>(st.st_size));
  f.name_ = path;
  return f;
}

std::string_view mapped_file::bytes() const {
  if (!region_)
    return {};
  return {static_cast<const char*>(region_->base), region_->size};
}

std::shared_ptr<const void> keep_alive(const mapped_file& f) {
  return f.region_;
}

} // namespace kiln
