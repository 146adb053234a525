#include "gpu/python.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "gpu/process.hpp"

namespace kiln {

namespace {

namespace fs = std::filesystem;

struct candidate {
  std::string label; ///< what the user would call it: `python3` or the configured value
  std::string path;  ///< what we run
};

std::string parent_path_var() {
  const char* p = ::getenv("PATH");
  return p != nullptr ? p : "/usr/local/bin:/usr/bin:/bin";
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::vector<candidate> candidates_for(const std::string& configured) {
  std::vector<candidate> raw;
  if (!configured.empty()) {
    std::string path = configured;
    if (configured.find('/') == std::string::npos) {
      auto found = find_on_path(configured);
      if (!found.empty())
        path = found.front();
    }
    raw.push_back({configured, path});
    return raw;
  }
  for (auto& p : find_on_path("python3"))
    raw.push_back({"python3", p});
  raw.push_back({"/usr/bin/python3", "/usr/bin/python3"});
  // /bin/python3 and /usr/bin/python3 are the same file on a merged-/usr system: probe each
  // interpreter once. The path itself is kept as found (a venv's python3 is a symlink whose
  // location matters).
  std::vector<candidate> out;
  std::vector<fs::path> seen;
  for (auto& c : raw) {
    std::error_code ec;
    fs::path real = fs::canonical(c.path, ec);
    if (ec)
      real = c.path;
    bool dup = false;
    for (auto& s : seen)
      dup = dup || s == real;
    if (!dup) {
      seen.push_back(real);
      out.push_back(c);
    }
  }
  return out;
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

/// Empty when `c` imports torch, else why not.
std::string probe(const candidate& c) {
  if (c.path.find('/') == std::string::npos)
    return "not found on PATH";
  if (!is_executable_file(c.path))
    return "not an executable file";
  std::error_code ec;
  fs::path dir = fs::temp_directory_path(ec);
  if (ec)
    dir = "/tmp";
  std::string err_file = (dir / ("kiln-python-probe-XXXXXX")).string();
  int fd = ::mkstemp(err_file.data());
  if (fd < 0)
    return "cannot create a temporary file in " + dir.string();
  ::close(fd);

  process_options opts;
  // Whether torch can be found, not imported: an import costs a second or more on every kiln
  // command, and the runners import it anyway (a torch that is found but broken fails there,
  // with its own message).
  // -I as the runners run: no current folder or user site can supply a torch they would not see;
  // a bare `torch` folder (a namespace package, no origin) is not torch.
  opts.argv = {c.path, "-I", "-c",
               "import importlib.util, sys; s = importlib.util.find_spec('torch'); "
               "sys.exit(s is None or not s.origin)"};
  // The same kind of minimal environment the runners get: whatever works here must work there.
  opts.env = {"PATH=" + parent_path_var(), "HOME=/tmp", "LANG=C.UTF-8"};
  opts.stderr_path = err_file;
  opts.timeout_s = 60;
  opts.kill_grace_s = 2;
  process_result r = run_process(opts);
  std::string err_tail = last_line(tail_of_file(err_file, 4096));
  ::unlink(err_file.c_str());

  if (!r.started)
    return r.error;
  if (r.timed_out)
    return "looking for torch did not finish within 60 s";
  if (r.exit_code == 0)
    return {};
  std::string why = r.exit_code == 1 && r.signal == 0 ? "no torch module" : "cannot look for torch";
  if (r.signal != 0)
    why += " (killed by signal " + std::to_string(r.signal) + ")";
  if (!err_tail.empty())
    why += " (" + err_tail + ")";
  return why;
}

} // namespace

std::string find_python(const std::string& configured) {
  // Probing costs a Python start (tens of milliseconds): once per process and setting.
  // The lock is held while probing so that concurrent evaluators do not all probe at once.
  static std::mutex mutex;
  static std::map<std::string, std::string> found;
  std::lock_guard<std::mutex> guard(mutex);
  if (auto it = found.find(configured); it != found.end())
    return it->second;

  std::string tried;
  for (const auto& c : candidates_for(configured)) {
    std::string why = probe(c);
    if (why.empty()) {
      found.emplace(configured, c.path);
      return c.path;
    }
    if (!tried.empty())
      tried += "; ";
    tried += c.label == c.path ? c.path : c.label + " (" + c.path + ")";
    tried += ": " + why;
  }
  std::string what = configured.empty() ? "no Python interpreter with torch found"
                                        : "the configured Python interpreter does not work";
  throw std::runtime_error(what + "; tried " + tried);
}

} // namespace kiln
