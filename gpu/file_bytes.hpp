#pragma once

// An outputs file read whole into memory that kiln owns. The evaluator reads the reference's
// outputs and then removes the files, so nothing is left on disk for the candidate to read or
// overwrite; the candidate's file is read once its runner has ended. A copy, not a mapping: a
// process that outlived its runner could shrink a mapped file and kill kiln with SIGBUS.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace kiln {

class file_bytes {
public:
  file_bytes() = default;
  /// Reads all of `path`, a regular file (not followed through a symlink, never a FIFO);
  /// `max_bytes` > 0 refuses a larger one. Throws std::runtime_error naming the file.
  static file_bytes open(const std::string& path, size_t max_bytes = 0);

  std::string_view bytes() const { return {data_.get(), size_}; }
  /// The path it was read from (for messages; the file may be gone by now).
  const std::string& name() const { return name_; }
  bool empty() const { return size_ == 0; }

private:
  std::shared_ptr<char[]> data_;
  size_t size_ = 0;
  std::string name_;

  friend std::shared_ptr<const void> keep_alive(const file_bytes& f);
};

/// Something that keeps `f`'s memory alive for as long as it lives, even after `f` is gone
/// (tensors made over the bytes hold one).
std::shared_ptr<const void> keep_alive(const file_bytes& f);

} // namespace kiln
