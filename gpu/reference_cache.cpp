#include "gpu/reference_cache.hpp"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <unistd.h>

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "gpu/build_cache.hpp"
#include "gpu/harness.hpp"
#include "gpu/json_text.hpp"

namespace kiln {

namespace fs = std::filesystem;

namespace {

constexpr int format_version = 1;

/// FNV-1a, 64 bits: stable across builds and platforms (std::hash is not), which a name on
/// disk needs. Not a defence against anyone; entries also carry the key's plain fields.
uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Each field length-prefixed, so that no two different keys serialise alike.
std::string serialise(const reference_key& k) {
  std::string out;
  for (const std::string* f : {&k.task_source, &k.device_name, &k.capability, &k.torch_version,
                               &k.python_version, &k.settings, &k.harness}) {
    out += std::to_string(f->size());
    out += ':';
    out += *f;
  }
  return out;
}

std::string exact(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::string entry_json(const reference_key& k, const timing_stats& s) {
  std::ostringstream o;
  o << "{\"version\": " << format_version
    << ",\n \"key\": {\"device_name\": " << json_quote(k.device_name)
    << ", \"capability\": " << json_quote(k.capability)
    << ", \"torch_version\": " << json_quote(k.torch_version)
    << ", \"python_version\": " << json_quote(k.python_version)
    << ", \"settings\": " << json_quote(k.settings)
    << ", \"task\": " << json_quote(hex(fnv1a(k.task_source, 7)))
    << ", \"harness\": " << json_quote(hex(fnv1a(k.harness, 7))) << "},\n \"stats\": {"
    << "\"median_ms\": " << exact(s.median_ms) << ", \"p10_ms\": " << exact(s.p10_ms)
    << ", \"p90_ms\": " << exact(s.p90_ms) << ", \"mean_ms\": " << exact(s.mean_ms)
    << ", \"n\": " << s.n << ", \"sm_clock_mhz\": " << s.sm_clock_mhz
    << ", \"mem_clock_mhz\": " << s.mem_clock_mhz << "}}\n";
  return o.str();
}

/// The entry's stats when the file is whole and was written for exactly `k`.
std::optional<timing_stats> parse_entry(const std::string& path, const reference_key& k) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.load(path).get(doc)) {
    if (err != simdjson::IO_ERROR)
      spdlog::warn("reference cache: ignoring {}: {}", path, simdjson::error_message(err));
    return std::nullopt;
  }
  int64_t version = 0;
  if (doc["version"].get(version) || version != format_version)
    return std::nullopt;
  auto field = [&](const char* name) {
    std::string_view v;
    return doc["key"][name].get(v) ? std::string{"\x01"} : std::string{v};
  };
  // The digest names the file; the plain fields guard against a collision of the digest.
  if (field("device_name") != k.device_name || field("capability") != k.capability
      || field("torch_version") != k.torch_version || field("python_version") != k.python_version
      || field("settings") != k.settings || field("task") != hex(fnv1a(k.task_source, 7))
      || field("harness") != hex(fnv1a(k.harness, 7)))
    return std::nullopt;
  timing_stats s;
  simdjson::dom::element st;
  int64_t n = 0, sm = 0, mem = 0;
  if (doc["stats"].get(st) || st["median_ms"].get(s.median_ms) || st["p10_ms"].get(s.p10_ms)
      || st["p90_ms"].get(s.p90_ms) || st["mean_ms"].get(s.mean_ms) || st["n"].get(n)
      || st["sm_clock_mhz"].get(sm) || st["mem_clock_mhz"].get(mem) || n <= 0
      || !(s.median_ms > 0)) {
    spdlog::warn("reference cache: ignoring {}: incomplete entry", path);
    return std::nullopt;
  }
  s.n = static_cast<int32_t>(n);
  s.sm_clock_mhz = static_cast<int32_t>(sm);
  s.mem_clock_mhz = static_cast<int32_t>(mem);
  return s;
}

} // namespace

bool reference_key::complete() const {
  return !device_name.empty() && !torch_version.empty() && !python_version.empty();
}

std::string reference_key::digest() const {
  return hex(fnv1a(serialise(*this)));
}

std::string timing_settings_text(const evaluator_config& cfg, int threads,
                                 const std::string& compile_mode) {
  std::ostringstream o;
  o << "mode=" << cfg.mode << " compile=" << (compile_mode.empty() ? "eager" : compile_mode)
    << " warmup_calls=" << cfg.warmup_calls << " min_samples=" << cfg.min_samples
    << " max_samples=" << cfg.max_samples << " min_timing_s=" << exact(cfg.min_timing_s)
    << " max_timing_s=" << exact(cfg.max_timing_s) << " target_ci=" << exact(cfg.target_ci)
    << " threads=" << threads;
  return o.str();
}

std::string stable_digest(std::string_view text) {
  return hex(fnv1a(text));
}

std::string harness_identity() {
  std::string out;
  for (const auto& f : harness_files()) {
    out += f.name;
    out += '\n';
    out += f.source;
  }
  return out;
}

reference_cache::reference_cache(const std::string& configured) {
  try {
    dir_ = (fs::path{resolve_cache_dir(configured)} / "reference").string();
  } catch (const std::exception& e) {
    spdlog::warn("reference cache: in memory only: {}", e.what());
  }
}

std::optional<timing_stats> reference_cache::find(const reference_key& key) {
  auto digest = key.digest();
  if (auto it = memory_.find(digest); it != memory_.end())
    return it->second;
  if (dir_.empty() || !key.complete())
    return std::nullopt;
  auto found = parse_entry(dir_ + "/" + digest + ".json", key);
  if (found)
    memory_[digest] = *found;
  return found;
}

void reference_cache::store(const reference_key& key, const timing_stats& stats) {
  auto digest = key.digest();
  memory_[digest] = stats;
  if (dir_.empty() || !key.complete())
    return;
  auto path = dir_ + "/" + digest + ".json";
  if (auto error = write_atomically(path, entry_json(key, stats)); !error.empty())
    spdlog::warn("reference cache: {}", error);
}

std::string write_atomically(const std::string& path, const std::string& text) {
  // Unique per write, not per process: devices have caches of their own over one folder, and
  // two alike GPUs may store the same task's timing at once.
  static std::atomic<uint64_t> writes{0};
  auto tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++writes);
  std::error_code ec;
  fs::create_directories(fs::path{path}.parent_path(), ec);
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    out << text;
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return "cannot write " + tmp;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::string error = "cannot rename " + tmp + " to " + path + ": " + ec.message();
    fs::remove(tmp, ec);
    return error;
  }
  return {};
}

} // namespace kiln
