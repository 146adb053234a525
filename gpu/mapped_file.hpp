#pragma once

// A file mapped read-only into memory. The evaluator maps the reference's outputs and then
// removes the files: the mapping stays readable to kiln, and nothing is left on disk for the
// candidate to read or overwrite. Reading costs no copy (the pages are the page cache's).

#include <memory>
#include <string>
#include <string_view>

namespace kiln {

class mapped_file {
public:
  mapped_file() = default;
  /// Maps all of `path`; throws std::runtime_error naming the file when it cannot.
  static mapped_file open(const std::string& path);

  std::string_view bytes() const;
  /// The path it was opened with (for messages; the file may be gone by now).
  const std::string& name() const { return name_; }
  bool empty() const { return !region_; }

private:
  struct region;
  std::shared_ptr<const region> region_;
  std::string name_;

  friend std::shared_ptr<const void> keep_alive(const mapped_file& f);
};

/// Something that keeps `f`'s memory mapped for as long as it lives, even after `f` is gone
/// (tensors made over the mapping hold one).
std::shared_ptr<const void> keep_alive(const mapped_file& f);

} // namespace kiln
