// The shared build cache and the publishing of runners' staged builds (build_cache.hpp).
//
//   runner ends ─> publish_staged(<runner>/stage, <cache>)
//     stage/ext/<key>/           every file regular, one link, within limits; manifest.json's
//                                canonical sha256 == <key>; meta.json names the library
//     stage/pch-requests/<k>.json  {"extra_cflags": [strings], "with_cuda": bool}
//     stage/triton/<arch>/<group>/ regular files, no host code (.so)
//   ─> copied by kiln into <cache>/tmp/pub-XXXXXX (the runner's files are never moved: a
//      process it left behind could still hold them open)
//   ─> renameat2(RENAME_NOREPLACE) to its place; the name exists: the first publisher's stays
//
// The staging folder is walked with openat(O_NOFOLLOW) from a descriptor of `stage`, so no link
// the runner planted leads kiln anywhere else.

#include "gpu/build_cache.hpp"
#include "gpu/json_text.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <simdjson.h>
#include <spdlog/spdlog.h>

namespace kiln {

namespace fs = std::filesystem;

namespace {

/// kiln_build.py's manifest version (`_KEY_VERSION`).
constexpr std::string_view manifest_version = "kiln-ext-2";
/// Lock stripes: a key's first three hex digits name its lock file.
constexpr int lock_stripes = 4096;

/// Names kiln's own temporary files apart when several engines of a process publish at once.
std::atomic<uint64_t> publish_counter{0};

std::string errno_text(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof buf);
}

// -- sha256 (FIPS 180-4) --------------------------------------------------------------------------

class sha256 {
public:
  void update(std::string_view data) {
    for (unsigned char c : data) {
      block_[fill_++] = c;
      if (fill_ == 64) {
        compress();
        fill_ = 0;
      }
    }
    bytes_ += data.size();
  }

  std::string hex() {
    const uint64_t bits = bytes_ * 8;
    block_[fill_++] = 0x80;
    if (fill_ > 56) {
      while (fill_ < 64)
        block_[fill_++] = 0;
      compress();
      fill_ = 0;
    }
    while (fill_ < 56)
      block_[fill_++] = 0;
    for (int i = 7; i >= 0; --i)
      block_[fill_++] = static_cast<unsigned char>(bits >> (8 * i));
    compress();
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (uint32_t word : state_)
      for (int shift = 28; shift >= 0; shift -= 4)
        out += digits[(word >> shift) & 0xF];
    return out;
  }

private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void compress() {
    static constexpr std::array<uint32_t, 64> k = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    std::array<uint32_t, 64> w{};
    for (int i = 0; i < 16; ++i)
      w[i] = (uint32_t{block_[4 * i]} << 24) | (uint32_t{block_[4 * i + 1]} << 16)
             | (uint32_t{block_[4 * i + 2]} << 8) | uint32_t{block_[4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    auto v = state_;
    for (int i = 0; i < 64; ++i) {
      uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
      uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
      uint32_t t1 = v[7] + s1 + ch + k[i] + w[i];
      uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
      uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
      uint32_t t2 = s0 + maj;
      v = {t1 + t2, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
    }
    for (int i = 0; i < 8; ++i)
      state_[i] += v[i];
  }

  std::array<uint32_t, 8> state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  size_t fill_ = 0;
  uint64_t bytes_ = 0;
};

// -- canonical JSON -------------------------------------------------------------------------------

// Python's json string, as json.dumps(..., ensure_ascii=False) writes it.
void append_python_json_string(std::string& out, std::string_view s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

bool append_canonical(simdjson::dom::element e, std::string& out, std::string& error, int depth) {
  if (depth > 64) {
    error = "nested more than 64 levels deep";
    return false;
  }
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      simdjson::dom::array items;
      if (e.get(items)) {
        error = "an unreadable array";
        return false;
      }
      out += '[';
      bool first = true;
      for (auto item : items) {
        if (!first)
          out += ',';
        first = false;
        if (!append_canonical(item, out, error, depth + 1))
          return false;
      }
      out += ']';
      return true;
    }
    case simdjson::dom::element_type::OBJECT: {
      simdjson::dom::object object;
      if (e.get(object)) {
        error = "an unreadable object";
        return false;
      }
      std::vector<std::pair<std::string_view, simdjson::dom::element>> fields;
      for (auto field : object)
        fields.emplace_back(field.key, field.value);
      std::sort(fields.begin(), fields.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < fields.size(); ++i) {
        if (i > 0 && fields[i].first == fields[i - 1].first) {
          error = "the key '" + std::string{fields[i].first} + "' twice";
          return false;
        }
        if (i > 0)
          out += ',';
        append_python_json_string(out, fields[i].first);
        out += ':';
        if (!append_canonical(fields[i].second, out, error, depth + 1))
          return false;
      }
      out += '}';
      return true;
    }
    case simdjson::dom::element_type::STRING: {
      std::string_view text;
      if (e.get(text)) {
        error = "an unreadable string";
        return false;
      }
      append_python_json_string(out, text);
      return true;
    }
    case simdjson::dom::element_type::INT64: {
      int64_t v = 0;
      if (e.get(v))
        return false;
      out += std::to_string(v);
      return true;
    }
    case simdjson::dom::element_type::UINT64: {
      uint64_t v = 0;
      if (e.get(v))
        return false;
      out += std::to_string(v);
      return true;
    }
    case simdjson::dom::element_type::DOUBLE:
      error = "a number that is not an integer";
      return false;
    case simdjson::dom::element_type::BOOL: {
      bool v = false;
      if (e.get(v))
        return false;
      out += v ? "true" : "false";
      return true;
    }
    case simdjson::dom::element_type::NULL_VALUE:
      out += "null";
      return true;
  }
  error = "an unknown JSON value";
  return false;
}

// -- files of a staging folder
// ----------------------------------------------------------------------

class unique_fd {
public:
  explicit unique_fd(int fd = -1) : fd_(fd) {}
  ~unique_fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0)
        ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

private:
  int fd_;
};

bool is_hex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

/// A plain file name: letters, digits and `_.+-`, not starting with a dot.
bool is_plain_name(std::string_view s, size_t max = 255) {
  return !s.empty() && s.size() <= max && s.front() != '.'
         && std::all_of(s.begin(), s.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+'
                     || c == '-';
            });
}

unique_fd open_dir_at(int at, const std::string& name) {
  return unique_fd(
      ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
}

/// The names in a folder, sorted; at most `max` (+1, so that the caller sees it was more).
std::vector<std::string> names_in(int dirfd, size_t max) {
  std::vector<std::string> out;
  int fd = ::dup(dirfd);
  if (fd < 0)
    return out;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return out;
  }
  ::rewinddir(dir);
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    out.push_back(std::move(name));
    if (out.size() > max)
      break;
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

/// What a name in a staging folder is, without following it.
enum class node_kind { missing, regular, directory, other };

node_kind kind_at(int dirfd, const std::string& name, struct stat& st) {
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return node_kind::missing;
  if (S_ISREG(st.st_mode))
    return node_kind::regular;
  if (S_ISDIR(st.st_mode))
    return node_kind::directory;
  return node_kind::other;
}

/// One regular file of a staging folder, opened without following links.
struct staged_file {
  std::string name;
  unique_fd fd;
  int64_t size = 0;
};

bool open_staged(int dirfd, const std::string& name, int64_t max_bytes, staged_file& out,
                 std::string& why) {
  struct stat st {};
  switch (kind_at(dirfd, name, st)) {
    case node_kind::missing:
      why = "no " + name;
      return false;
    case node_kind::directory:
      why = name + " is a folder";
      return false;
    case node_kind::other:
      why = name + (S_ISLNK(st.st_mode) ? " is a symbolic link" : " is not a regular file");
      return false;
    case node_kind::regular:
      break;
  }
  if (st.st_nlink != 1) {
    why = name + " has " + std::to_string(st.st_nlink) + " hard links";
    return false;
  }
  if (st.st_size > max_bytes) {
    why = name + " is larger than " + std::to_string(max_bytes) + " bytes";
    return false;
  }
  unique_fd fd{::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  struct stat opened {};
  if (!fd.ok() || ::fstat(fd.get(), &opened) != 0 || opened.st_ino != st.st_ino
      || opened.st_dev != st.st_dev || !S_ISREG(opened.st_mode) || opened.st_nlink != 1
      || opened.st_size > max_bytes) {
    why = name + " changed while kiln opened it";
    return false;
  }
  out.name = name;
  out.fd = std::move(fd);
  out.size = opened.st_size;
  return true;
}

bool read_staged(const staged_file& f, std::string& out, std::string& why) {
  out.assign(static_cast<size_t>(f.size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(f.fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (n > 0)
      got += static_cast<size_t>(n);
    else if (n == 0 || errno != EINTR)
      break;
  }
  if (got != out.size()) {
    why = f.name + ": short read";
    return false;
  }
  return true;
}

/// Creates `name` in `dirfd` read-only (0444) with `data`, synced.
bool write_new(int dirfd, const std::string& name, std::string_view data, std::string& why) {
  unique_fd fd{
      ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)};
  if (!fd.ok()) {
    why = "cannot create " + name + ": " + errno_text(errno);
    return false;
  }
  size_t put = 0;
  while (put < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + put, data.size() - put);
    if (n > 0)
      put += static_cast<size_t>(n);
    else if (n < 0 && errno == EINTR)
      continue;
    else {
      why = "cannot write " + name + ": " + errno_text(errno);
      return false;
    }
  }
  if (::fsync(fd.get()) != 0) {
    why = "cannot sync " + name + ": " + errno_text(errno);
    return false;
  }
  return true;
}

/// Copies exactly `f.size` bytes of `f` to a new read-only file `f.name` in `dirfd`.
bool copy_new(const staged_file& f, int dirfd, std::string& why) {
  unique_fd out{
      ::openat(dirfd, f.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)};
  if (!out.ok()) {
    why = "cannot create " + f.name + ": " + errno_text(errno);
    return false;
  }
  std::vector<char> buf(1 << 20);
  int64_t done = 0;
  while (done < f.size) {
    size_t want = static_cast<size_t>(std::min<int64_t>(f.size - done, buf.size()));
    ssize_t n = ::pread(f.fd.get(), buf.data(), want, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      why = f.name + ": shorter than it was";
      return false;
    }
    size_t put = 0;
    while (put < static_cast<size_t>(n)) {
      ssize_t w = ::write(out.get(), buf.data() + put, static_cast<size_t>(n) - put);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        why = "cannot write " + f.name + ": " + errno_text(errno);
        return false;
      }
      put += static_cast<size_t>(w);
    }
    done += n;
  }
  if (::fsync(out.get()) != 0) {
    why = "cannot sync " + f.name + ": " + errno_text(errno);
    return false;
  }
  return true;
}

/// A folder of kiln's own in `<cache>/tmp` that becomes one published entry; removed unless it
/// was renamed into place.
class publish_dir {
public:
  bool make(const std::string& cache, std::string& why) {
    std::error_code ec;
    fs::create_directories(fs::path{cache} / "tmp", ec);
    std::string pattern = (fs::path{cache} / "tmp" / "pub-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      why = "cannot make a folder in " + cache + "/tmp: " + errno_text(errno);
      return false;
    }
    path_ = pattern;
    ::chmod(path_.c_str(), 0755);
    fd_ = open_dir_at(AT_FDCWD, path_);
    if (!fd_.ok()) {
      why = "cannot open " + path_ + ": " + errno_text(errno);
      return false;
    }
    return true;
  }
  ~publish_dir() {
    if (path_.empty())
      return;
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  publish_dir() = default;
  publish_dir(const publish_dir&) = delete;
  publish_dir& operator=(const publish_dir&) = delete;

  int fd() const { return fd_.get(); }

  /// Renames it to `target` unless that exists. `existed` says whether another entry was there.
  bool commit(const std::string& target, bool& existed, std::string& why) {
    existed = false;
    ::fsync(fd_.get());
    std::error_code ec;
    fs::create_directories(fs::path{target}.parent_path(), ec);
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0) {
      path_.clear();
      return true;
    }
    int err = errno;
    if (err == EEXIST || err == ENOTEMPTY) {
      existed = true;
      return false;
    }
    if (err == EINVAL || err == ENOSYS) {
      // A file system without RENAME_NOREPLACE: rename(2) still fails onto a folder that is
      // not empty, and every entry is complete before it is renamed.
      if (fs::exists(target, ec)) {
        existed = true;
        return false;
      }
      if (::rename(path_.c_str(), target.c_str()) == 0) {
        path_.clear();
        return true;
      }
      err = errno;
      if (err == EEXIST || err == ENOTEMPTY) {
        existed = true;
        return false;
      }
    }
    why = "cannot rename into " + target + ": " + errno_text(err);
    return false;
  }

private:
  std::string path_;
  unique_fd fd_;
};

/// Gathers one staging folder's outcome.
struct publisher {
  std::string stage;
  std::string cache;
  staging_report& report;

  /// False for an entry an earlier call looked at already; marks it.
  bool first_time(const std::string& what) { return report.handled.insert(what).second; }

  void reject(const std::string& what, const std::string& why) {
    ++report.rejected;
    report.problems.push_back(what + ": " + why);
    spdlog::warn("build cache: {}: rejected {}: {}", stage, what, why);
  }

  void finish(publish_dir& dir, const std::string& what, const std::string& target) {
    bool existed = false;
    std::string why;
    if (dir.commit(target, existed, why)) {
      ++report.published;
      spdlog::debug("build cache: published {} from {}", what, stage);
    } else if (existed) {
      ++report.existing;
    } else {
      reject(what, why);
    }
  }
};

bool exists_at(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string get_string(simdjson::dom::element e, const char* key) {
  std::string_view v;
  if (e[key].get(v))
    return {};
  return std::string{v};
}

void publish_ext_entry(publisher& p, int ext_fd, const std::string& name) {
  const std::string what = "ext/" + name;
  if (!p.first_time(what))
    return;
  if (!is_hex64(name))
    return p.reject(what, "not a cache key");
  auto dir = open_dir_at(ext_fd, name);
  if (!dir.ok())
    return p.reject(what, "not a folder (" + errno_text(errno) + ")");
  auto names = names_in(dir.get(), 8);
  if (names.size() > 8)
    return p.reject(what, "more than 8 files");
  std::string why;
  staged_file manifest_file;
  staged_file meta_file;
  std::string manifest;
  std::string meta;
  if (!open_staged(dir.get(), "manifest.json", staging_limits::manifest_bytes, manifest_file, why)
      || !read_staged(manifest_file, manifest, why)
      || !open_staged(dir.get(), "meta.json", staging_limits::meta_bytes, meta_file, why)
      || !read_staged(meta_file, meta, why))
    return p.reject(what, why);
  auto key = manifest_key(manifest, why);
  if (key.empty())
    return p.reject(what, "manifest.json: " + why);
  if (key != name)
    return p.reject(what, "its manifest's key is " + key);

  // meta.json is what a runner reads on a hit: it must name this entry's library.
  simdjson::dom::parser parser;
  simdjson::padded_string meta_padded{meta};
  simdjson::padded_string manifest_padded{manifest};
  simdjson::dom::element m;
  simdjson::dom::element man;
  if (parser.parse(meta_padded).get(m) || !m.is_object())
    return p.reject(what, "meta.json is not a JSON object");
  const auto artifact = get_string(m, "artifact");
  const auto module = get_string(m, "module");
  bool python_module = false;
  bool standalone = false;
  if (m["is_python_module"].get(python_module) || m["is_standalone"].get(standalone))
    return p.reject(what, "meta.json without is_python_module/is_standalone");
  if (!is_plain_name(artifact) || artifact == "manifest.json" || artifact == "meta.json"
      || artifact == "main.cpp" || artifact == "cuda.cu")
    return p.reject(what, "meta.json names no plain artifact ('" + artifact + "')");
  if (module != artifact.substr(0, artifact.find('.')))
    return p.reject(what, "meta.json's module '" + module + "' is not its artifact's");
  if (!standalone && (artifact.size() < 4 || artifact.substr(artifact.size() - 3) != ".so"))
    return p.reject(what, "its artifact '" + artifact + "' is no shared library");
  simdjson::dom::parser manifest_parser;
  if (manifest_parser.parse(manifest_padded).get(man))
    return p.reject(what, "manifest.json is unreadable");
  std::string_view man_name;
  if (get_string(m, "kind") != get_string(man, "kind") || man["args"]["name"].get(man_name)
      || get_string(m, "name") != man_name)
    return p.reject(what, "meta.json and manifest.json name different builds");

  std::vector<staged_file> rest;
  int64_t total = manifest_file.size + meta_file.size;
  bool have_artifact = false;
  for (const auto& n : names) {
    if (n == "manifest.json" || n == "meta.json")
      continue;
    const bool is_artifact = n == artifact;
    if (!is_artifact && n != "main.cpp" && n != "cuda.cu")
      return p.reject(what, "an unexpected file '" + n + "'");
    staged_file f;
    if (!open_staged(dir.get(), n,
                     is_artifact ? staging_limits::ext_entry_bytes : staging_limits::source_bytes,
                     f, why))
      return p.reject(what, why);
    total += f.size;
    have_artifact = have_artifact || is_artifact;
    rest.push_back(std::move(f));
  }
  if (!have_artifact)
    return p.reject(what, "no " + artifact);
  if (total > staging_limits::ext_entry_bytes)
    return p.reject(what,
                    "larger than " + std::to_string(staging_limits::ext_entry_bytes) + " bytes");

  const auto target = (fs::path{p.cache} / "ext" / name).string();
  if (exists_at(target)) {
    ++p.report.existing;
    return;
  }
  publish_dir out;
  if (!out.make(p.cache, why) || !write_new(out.fd(), "manifest.json", manifest, why)
      || !write_new(out.fd(), "meta.json", meta, why))
    return p.reject(what, why);
  for (const auto& f : rest)
    if (!copy_new(f, out.fd(), why))
      return p.reject(what, why);
  p.finish(out, what, target);
}

void publish_exts(publisher& p, int stage_fd) {
  auto ext = open_dir_at(stage_fd, "ext");
  if (!ext.ok()) {
    if (errno != ENOENT)
      p.reject("ext", "not a folder (" + errno_text(errno) + ")");
    return;
  }
  int entries = 0;
  for (const auto& name : names_in(ext.get(), 4 * staging_limits::ext_entries)) {
    if (name.rfind(".tmp-", 0) == 0)
      continue; // a build the runner had not finished staging
    if (++entries > staging_limits::ext_entries) {
      p.reject("ext", "more than " + std::to_string(staging_limits::ext_entries) + " entries");
      return;
    }
    publish_ext_entry(p, ext.get(), name);
  }
}

// A precompiled-header request names a flag set, never a command: exactly these two fields.
void publish_requests(publisher& p, int stage_fd) {
  auto dir = open_dir_at(stage_fd, "pch-requests");
  if (!dir.ok())
    return;
  int count = 0;
  for (const auto& name : names_in(dir.get(), 4 * staging_limits::requests)) {
    const std::string what = "pch-requests/" + name;
    if (name.find(".tmp") != std::string::npos || !p.first_time(what))
      continue;
    if (++count > staging_limits::requests)
      return p.reject("pch-requests", "too many requests");
    if (name.size() != 69 || name.substr(64) != ".json" || !is_hex64(name.substr(0, 64))) {
      p.reject(what, "not a request name");
      continue;
    }
    std::string why;
    staged_file f;
    std::string text;
    if (!open_staged(dir.get(), name, staging_limits::request_bytes, f, why)
        || !read_staged(f, text, why)) {
      p.reject(what, why);
      continue;
    }
    simdjson::dom::parser parser;
    simdjson::padded_string padded{text};
    simdjson::dom::element doc;
    simdjson::dom::object object;
    simdjson::dom::array flags;
    bool with_cuda = false;
    if (parser.parse(padded).get(doc) || doc.get(object) || object.size() != 2
        || doc["extra_cflags"].get(flags) || doc["with_cuda"].get(with_cuda)) {
      p.reject(what, "not {\"extra_cflags\": [...], \"with_cuda\": ...}");
      continue;
    }
    std::string out = "{\"extra_cflags\": [";
    bool ok = true;
    bool first = true;
    for (auto flag : flags) {
      std::string_view s;
      if (flag.get(s)) {
        ok = false;
        break;
      }
      out += first ? "" : ", ";
      first = false;
      append_python_json_string(out, s);
    }
    if (!ok) {
      p.reject(what, "a flag that is not a string");
      continue;
    }
    out += std::string{"], \"with_cuda\": "} + (with_cuda ? "true" : "false") + "}";
    const auto requests = fs::path{p.cache} / "pch" / "requests";
    if (exists_at((requests / name).string())) {
      ++p.report.existing;
      continue;
    }
    std::error_code ec;
    fs::create_directories(requests, ec);
    unique_fd parent{::open(requests.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    const auto tmp = name + ".tmp." + std::to_string(::getpid()) + "."
                     + std::to_string(publish_counter.fetch_add(1));
    if (!parent.ok() || !write_new(parent.get(), tmp, out, why)) {
      p.reject(what, why.empty() ? "cannot open " + requests.string() : why);
      continue;
    }
    if (::renameat2(parent.get(), tmp.c_str(), parent.get(), name.c_str(), RENAME_NOREPLACE) == 0) {
      ++p.report.published;
    } else {
      ::unlinkat(parent.get(), tmp.c_str(), 0);
      ++p.report.existing;
    }
  }
}

bool is_arch_tag(const std::string& tag) {
  static const std::regex re{R"(^(cpu|sm[0-9A-Za-z+]+(-sm[0-9A-Za-z+]+)*)$)"};
  return tag.size() <= 64 && std::regex_match(tag, re);
}

void publish_triton_group(publisher& p, int tag_fd, const std::string& tag,
                          const std::string& group, int64_t& total) {
  const std::string what = "triton/" + tag + "/" + group;
  if (!is_plain_name(group, 128))
    return p.reject(what, "not a Triton cache key");
  auto dir = open_dir_at(tag_fd, group);
  if (!dir.ok())
    return p.reject(what, "not a folder (" + errno_text(errno) + ")");
  std::vector<staged_file> files;
  int64_t bytes = 0;
  auto names = names_in(dir.get(), staging_limits::triton_group_files);
  if (names.size() > static_cast<size_t>(staging_limits::triton_group_files))
    return p.reject(what,
                    "more than " + std::to_string(staging_limits::triton_group_files) + " files");
  for (const auto& n : names) {
    struct stat st {};
    // Triton writes through `tmp.pid_<pid>_<uuid>/` folders; one left over is an
    // interrupted write, not part of the group.
    if (kind_at(dir.get(), n, st) == node_kind::directory && n.rfind("tmp.", 0) == 0)
      continue;
    if (!is_plain_name(n))
      return p.reject(what, "a file name kiln does not publish ('" + n + "')");
    // Host code (Triton's compiled launchers) is not shared between runners.
    if (n.size() > 3 && n.substr(n.size() - 3) == ".so") {
      ++p.report.skipped;
      return;
    }
    staged_file f;
    std::string why;
    if (!open_staged(dir.get(), n, staging_limits::triton_group_bytes, f, why))
      return p.reject(what, why);
    bytes += f.size;
    files.push_back(std::move(f));
  }
  if (files.empty())
    return; // a folder Triton made for a lookup
  if (!p.first_time(what))
    return;
  if (bytes > staging_limits::triton_group_bytes)
    return p.reject(what,
                    "larger than " + std::to_string(staging_limits::triton_group_bytes) + " bytes");
  if ((total += bytes) > staging_limits::triton_bytes)
    return p.reject(what, "the runner's Triton groups are larger than "
                              + std::to_string(staging_limits::triton_bytes) + " bytes");
  const auto target = (fs::path{p.cache} / "triton" / tag / group).string();
  if (exists_at(target)) {
    ++p.report.existing;
    return;
  }
  std::string why;
  publish_dir out;
  if (!out.make(p.cache, why))
    return p.reject(what, why);
  for (const auto& f : files)
    if (!copy_new(f, out.fd(), why))
      return p.reject(what, why);
  p.finish(out, what, target);
}

void publish_triton(publisher& p, int stage_fd) {
  auto triton = open_dir_at(stage_fd, "triton");
  if (!triton.ok())
    return;
  int groups = 0;
  int64_t total = 0;
  for (const auto& tag : names_in(triton.get(), 16)) {
    if (!is_arch_tag(tag)) {
      p.reject("triton/" + tag, "not a device arch");
      continue;
    }
    auto tag_fd = open_dir_at(triton.get(), tag);
    if (!tag_fd.ok()) {
      p.reject("triton/" + tag, "not a folder");
      continue;
    }
    for (const auto& group : names_in(tag_fd.get(), 2 * staging_limits::triton_groups)) {
      if (++groups > staging_limits::triton_groups)
        return p.reject("triton",
                        "more than " + std::to_string(staging_limits::triton_groups) + " groups");
      publish_triton_group(p, tag_fd.get(), tag, group, total);
    }
  }
}

unique_fd open_stage(const std::string& stage) {
  return unique_fd(::open(stage.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

} // namespace

std::string sha256_hex(std::string_view data) {
  sha256 h;
  h.update(data);
  return h.hex();
}

std::string canonical_json(std::string_view json, std::string& error) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded{json};
  simdjson::dom::element doc;
  if (auto err = parser.parse(padded).get(doc)) {
    error = std::string{"not JSON ("} + simdjson::error_message(err) + ")";
    return {};
  }
  std::string out;
  out.reserve(json.size());
  if (!append_canonical(doc, out, error, 0))
    return {};
  return out;
}

std::string manifest_key(std::string_view manifest, std::string& error) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded{manifest};
  simdjson::dom::element doc;
  if (auto err = parser.parse(padded).get(doc)) {
    error = std::string{"not JSON ("} + simdjson::error_message(err) + ")";
    return {};
  }
  std::string_view version;
  std::string_view kind;
  std::string_view name;
  if (doc["v"].get(version) || version != manifest_version) {
    error = "not a manifest of version " + std::string{manifest_version};
    return {};
  }
  if (doc["kind"].get(kind) || (kind != "load" && kind != "load_inline")) {
    error = "no kind load or load_inline";
    return {};
  }
  if (doc["args"]["name"].get(name)) {
    error = "no args.name";
    return {};
  }
  std::string text;
  if (!append_canonical(doc, text, error, 0))
    return {};
  return sha256_hex(text);
}

std::string resolve_cache_dir(const std::string& configured) {
  if (!configured.empty())
    return fs::absolute(configured).lexically_normal().string();
  // The XDG spec says a relative $XDG_CACHE_HOME is invalid and must be ignored.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/')
    return (fs::path{xdg} / "kiln").lexically_normal().string();
  if (const char* home = std::getenv("HOME"); home && home[0] == '/')
    return (fs::path{home} / ".cache" / "kiln").lexically_normal().string();
  throw std::runtime_error("cannot place the build cache: neither XDG_CACHE_HOME nor HOME is an "
                           "absolute path; set [evaluator] cache_dir");
}

void prepare_cache_dir(const std::string& dir) {
  if (dir.empty())
    throw std::runtime_error("build cache: empty path");
  for (const char* sub : {"ext", "pch/requests", "triton", "locks", "tmp"}) {
    std::error_code ec;
    fs::create_directories(fs::path{dir} / sub, ec);
    if (ec)
      throw std::runtime_error("build cache: cannot create " + (fs::path{dir} / sub).string() + ": "
                               + ec.message());
  }
  // kiln publishes by renaming from tmp/; find an unwritable cache here, not as a failure to
  // publish after every build.
  auto probe = fs::path{dir} / "tmp" / ("probe." + std::to_string(::getpid()));
  {
    std::ofstream out{probe};
    if (!out)
      throw std::runtime_error("build cache: " + dir + " is not writable");
  }
  std::error_code ignored;
  fs::remove(probe, ignored);
  // Runners may not create files in the cache, so the lock files of every stripe of keys exist
  // beforehand; runners open them read-only to flock them.
  auto done = fs::path{dir} / "locks" / "stripes";
  if (fs::exists(done, ignored))
    return;
  char name[16];
  for (int i = 0; i < lock_stripes; ++i) {
    std::snprintf(name, sizeof name, "%03x.lock", i);
    int fd = ::open((fs::path{dir} / "locks" / name).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw std::runtime_error("build cache: cannot create " + (fs::path{dir} / "locks").string()
                               + "/" + name + ": " + errno_text(errno));
    ::close(fd);
  }
  std::ofstream{done} << lock_stripes << "\n";
}

bool prepare_cache_dir_once(const std::string& dir) {
  static std::mutex mutex;
  static std::set<std::string> done;
  std::lock_guard<std::mutex> lock{mutex};
  if (done.count(dir) != 0)
    return true;
  try {
    prepare_cache_dir(dir);
  } catch (const std::exception& e) {
    spdlog::warn("build cache: {}", e.what());
    return false;
  }
  done.insert(dir);
  return true;
}

size_t sweep_cache_tmp(const std::string& dir, std::chrono::seconds max_age) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  size_t removed = 0;
  for (fs::directory_iterator it{fs::path{dir} / "tmp", ec}, end; !ec && it != end;
       it.increment(ec)) {
    std::error_code e;
    auto when = it->last_write_time(e);
    if (e || now - when < max_age)
      continue;
    if (fs::remove_all(it->path(), e) > 0 && !e)
      ++removed;
  }
  return removed;
}

std::string pch_lock_path(const std::string& cache, const std::string& key) {
  return (fs::path{cache} / "locks" / ("pch-" + key + ".lock")).string();
}

staging_report publish_staged(const std::string& stage, const std::string& cache) {
  staging_report report;
  publish_staged(stage, cache, report);
  return report;
}

void publish_staged(const std::string& stage, const std::string& cache, staging_report& report) {
  publisher p{stage, cache, report};
  try {
    auto fd = open_stage(stage);
    if (!fd.ok()) {
      const int err = errno;
      if (err != ENOENT && p.first_time("stage"))
        p.reject("stage", "not a folder (" + errno_text(err) + ")");
      return;
    }
    publish_exts(p, fd.get());
    publish_requests(p, fd.get());
    publish_triton(p, fd.get());
  } catch (const std::exception& e) {
    p.reject("stage", e.what());
  }
}

staging_report publish_pch(const std::string& stage, const std::string& cache,
                           const std::string& key) {
  staging_report report;
  publisher p{stage, cache, report};
  const std::string what = "pch/" + key;
  try {
    if (!is_hex64(key)) {
      p.reject(what, "not a precompiled header key");
      return p.report;
    }
    auto fd = open_stage(stage);
    auto pch = fd.ok() ? open_dir_at(fd.get(), "pch") : unique_fd{};
    auto entry = pch.ok() ? open_dir_at(pch.get(), key) : unique_fd{};
    if (!entry.ok()) {
      p.reject(what, "the runner staged no such header");
      return p.report;
    }
    if (names_in(entry.get(), 2) != std::vector<std::string>{"torch"}) {
      p.reject(what, "holds more than torch/");
      return p.report;
    }
    auto torch = open_dir_at(entry.get(), "torch");
    if (!torch.ok()) {
      p.reject(what, "torch is not a folder");
      return p.report;
    }
    if (names_in(torch.get(), 3) != std::vector<std::string>{"extension.h", "extension.h.gch"}) {
      p.reject(what, "torch/ holds other files than extension.h and extension.h.gch");
      return p.report;
    }
    std::string why;
    staged_file header;
    staged_file gch;
    if (!open_staged(torch.get(), "extension.h", staging_limits::header_bytes, header, why)
        || !open_staged(torch.get(), "extension.h.gch", staging_limits::pch_bytes, gch, why)) {
      p.reject(what, why);
      return p.report;
    }
    const auto target = (fs::path{cache} / "pch" / key).string();
    if (exists_at(target)) {
      ++p.report.existing;
      return p.report;
    }
    publish_dir out;
    if (!out.make(cache, why)) {
      p.reject(what, why);
      return p.report;
    }
    if (::mkdirat(out.fd(), "torch", 0755) != 0) {
      p.reject(what, "cannot create torch/: " + errno_text(errno));
      return p.report;
    }
    auto out_torch = open_dir_at(out.fd(), "torch");
    if (!out_torch.ok() || !copy_new(header, out_torch.get(), why)
        || !copy_new(gch, out_torch.get(), why)) {
      p.reject(what, why.empty() ? "cannot open torch/" : why);
      return p.report;
    }
    ::fsync(out_torch.get());
    p.finish(out, what, target);
  } catch (const std::exception& e) {
    p.reject(what, e.what());
  }
  return p.report;
}

} // namespace kiln
