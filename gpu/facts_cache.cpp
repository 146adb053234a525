#include "gpu/facts_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

#include "gpu/reference_cache.hpp"

namespace kiln {

namespace {

constexpr const char* header = "kiln facts 1";

/// Each field as its text, in one order, for writing and reading alike.
struct field {
  const char* name;
  std::function<std::string(const runner_facts&)> get;
  std::function<bool(runner_facts&, const std::string&)> set;
};

template <class T> bool parse_number(const std::string& text, T& out) {
  std::istringstream in{text};
  in >> out;
  return !in.fail() && in.eof();
}

const std::vector<field>& fields() {
  auto text = [](const char* name, std::string runner_facts::*member) {
    return field{name, [member](const runner_facts& f) { return f.*member; },
                 [member](runner_facts& f, const std::string& v) {
                   f.*member = v;
                   return true;
                 }};
  };
  auto flag = [](const char* name, bool runner_facts::*member) {
    return field{name,
                 [member](const runner_facts& f) { return std::string{f.*member ? "1" : "0"}; },
                 [member](runner_facts& f, const std::string& v) {
                   f.*member = v == "1";
                   return v == "0" || v == "1";
                 }};
  };
  auto number = [](const char* name, auto runner_facts::*member) {
    return field{
        name,
        [member](const runner_facts& f) {
          std::ostringstream o;
          o.precision(17);
          o << f.*member;
          return o.str();
        },
        [member](runner_facts& f, const std::string& v) { return parse_number(v, f.*member); }};
  };
  static const std::vector<field> all = {
      text("device_name", &runner_facts::device_name),
      text("python", &runner_facts::python),
      text("python_version", &runner_facts::python_version),
      text("torch_version", &runner_facts::torch_version),
      flag("cuda", &runner_facts::cuda),
      flag("triton", &runner_facts::triton),
      flag("compile", &runner_facts::compile),
      number("cpu_threads", &runner_facts::cpu_threads),
      number("multiprocessors", &runner_facts::multiprocessors),
      number("memory_bytes", &runner_facts::memory_bytes),
      text("capability", &runner_facts::capability),
      number("memory_bandwidth_gbs", &runner_facts::memory_bandwidth_gbs),
      number("l2_bytes", &runner_facts::l2_bytes),
  };
  return all;
}

std::string entry_path(const std::string& dir, const std::string& identity) {
  return dir + "/" + stable_digest(identity) + ".txt";
}

bool has_newline(const std::string& s) {
  return s.find('\n') != std::string::npos || s.find('\r') != std::string::npos;
}

} // namespace

std::string cpu_host_identity() {
  std::string model;
  std::ifstream cpuinfo{"/proc/cpuinfo"};
  for (std::string line; model.empty() && std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0)
      if (auto colon = line.find(':'); colon != std::string::npos)
        model = line.substr(colon + 1);
  std::ostringstream o;
  o << "cpu=" << model << " online=" << ::sysconf(_SC_NPROCESSORS_ONLN) << " memory="
    << static_cast<long long>(::sysconf(_SC_PHYS_PAGES))
           * static_cast<long long>(::sysconf(_SC_PAGE_SIZE));
  return o.str();
}

std::string path_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT || errno == ENOTDIR ? "missing"
                                               : "unreadable " + std::string{std::strerror(errno)};
  std::ostringstream o;
  o << (static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec) << ' '
    << st.st_size << ' ' << st.st_ino;
  return o.str();
}

std::optional<runner_facts> load_facts(const std::string& dir, const std::string& identity) {
  if (dir.empty())
    return std::nullopt;
  std::ifstream in{entry_path(dir, identity)};
  std::string line;
  if (!in || !std::getline(in, line) || line != header)
    return std::nullopt;
  // The digest names the file; the identity's own line guards against a collision.
  if (!std::getline(in, line) || line != "identity " + identity)
    return std::nullopt;
  std::map<std::string, std::string> values;
  bool stamped = false;
  while (std::getline(in, line)) {
    auto sp = line.find(' ');
    if (sp == std::string::npos)
      return std::nullopt;
    auto kind = line.substr(0, sp);
    auto rest = line.substr(sp + 1);
    if (kind == "stamp") {
      // `stamp <path>\t<stamp>`: the path first, so that the stamp is all after the tab.
      auto tab = rest.rfind('\t');
      if (tab == std::string::npos)
        return std::nullopt;
      const auto now = path_stamp(rest.substr(0, tab));
      if (now.rfind("unreadable", 0) == 0 || now != rest.substr(tab + 1))
        return std::nullopt;
      stamped = true;
    } else if (kind == "fact") {
      auto eq = rest.find('=');
      if (eq == std::string::npos)
        return std::nullopt;
      values[rest.substr(0, eq)] = rest.substr(eq + 1);
    } else {
      return std::nullopt;
    }
  }
  if (!stamped)
    return std::nullopt;
  runner_facts out;
  for (const auto& f : fields()) {
    auto it = values.find(f.name);
    if (it == values.end() || !f.set(out, it->second))
      return std::nullopt;
  }
  return out;
}

void store_facts(const std::string& dir, const std::string& identity, const runner_facts& facts,
                 const std::vector<std::pair<std::string, std::string>>& stamps) {
  if (dir.empty() || stamps.empty() || has_newline(identity))
    return;
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::ostringstream o;
  o << header << "\nidentity " << identity << '\n';
  for (const auto& [path, seen] : stamps) {
    if (has_newline(path) || path.find('\t') != std::string::npos)
      return; // a path the format cannot hold: ask the runner every time instead
    const auto stamp = path_stamp(path);
    if (stamp != seen || stamp.rfind("unreadable", 0) == 0) {
      spdlog::debug("facts cache: {} changed while the runner read the facts", path);
      return;
    }
    long long mtime_ns = 0;
    if (stamp != "missing" && std::istringstream{stamp} >> mtime_ns
        && now_ns - mtime_ns < static_cast<long long>(racy_window_s * 1e9)) {
      spdlog::debug("facts cache: {} changed {} ms ago; not stored yet", path,
                    (now_ns - mtime_ns) / 1000000);
      return;
    }
    o << "stamp " << path << '\t' << stamp << '\n';
  }
  for (const auto& f : fields()) {
    const auto value = f.get(facts);
    if (has_newline(value))
      return;
    o << "fact " << f.name << '=' << value << '\n';
  }
  if (auto error = write_atomically(entry_path(dir, identity), o.str()); !error.empty())
    spdlog::warn("facts cache: {}", error);
}

} // namespace kiln
