#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <cstdlib>

#include <spdlog/spdlog.h>
#include <set>
#include <sstream>
#include <stdexcept>

#include "config/input_file.hpp"
#include "gpu/json_text.hpp"
#include "tools/cli.hpp"

namespace fs = std::filesystem;

namespace kiln::cli {

namespace {

/// Sorts `12_X` after `2_Y`: by the numeric id, then by name.
bool task_order(const fs::path& a, const fs::path& b) {
  auto id = [](const fs::path& p) {
    auto s = p.stem().string();
    size_t i = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
      ++i;
    return i == 0 ? -1L : std::stol(s.substr(0, i));
  };
  auto ia = id(a), ib = id(b);
  return ia != ib ? ia < ib : a.stem() < b.stem();
}

void write_text(const fs::path& p, const std::string& text) {
  auto tmp = p;
  tmp += ".tmp";
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    if (!out)
      throw std::runtime_error("cannot write " + tmp.string());
    out << text;
    if (!out)
      throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, p); // readers never see a half-written summary
}

} // namespace

void quiet_logging() {
  auto level = spdlog::level::warn;
  if (const char* wanted = std::getenv("KILN_LOG"); wanted != nullptr && *wanted != '\0') {
    level = spdlog::level::from_str(wanted);
    if (level == spdlog::level::off && std::string{wanted} != "off") {
      std::cerr << "kiln: KILN_LOG=" << wanted
                << " is not a log level (trace, debug, info, warn, error, off); using warn\n";
      level = spdlog::level::warn;
    }
  }
  spdlog::set_level(level);
}

std::string read_text(const std::string& path, const std::string& what) {
  return read_input_file(path, what, what == "task" ? max_task_bytes : max_candidate_bytes);
}

std::vector<task_spec> find_tasks(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (auto& p : paths) {
    fs::path path{p};
    std::error_code err;
    if (fs::is_directory(path, err)) {
      std::vector<fs::path> found;
      for (auto& e : fs::directory_iterator(path))
        if (e.is_regular_file() && e.path().extension() == ".py"
            && e.path().filename().string().front() != '_')
          found.push_back(e.path());
      if (found.empty())
        throw std::runtime_error("task folder " + p + " holds no .py task files");
      std::sort(found.begin(), found.end(), task_order);
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(path, err) || fs::exists(path, err)) {
      files.push_back(path); // anything else there is refused by name when it is read
    } else {
      throw std::runtime_error("task path " + p + " does not exist");
    }
  }
  std::vector<task_spec> out;
  std::set<std::string> seen;
  for (auto& f : files) {
    task_spec t;
    t.name = f.stem().string();
    t.path = fs::absolute(f).lexically_normal().string();
    if (!seen.insert(t.name).second)
      throw std::runtime_error("two tasks are named " + t.name + " (" + t.path + ")");
    t.source = read_text(f.string(), "task");
    if (t.source.find("class Model") == std::string::npos
        || t.source.find("def get_inputs") == std::string::npos)
      throw std::runtime_error("task " + t.path
                               + " is not in KernelBench format (needs class Model and "
                                 "get_inputs)");
    out.push_back(std::move(t));
  }
  return out;
}

double geomean_speedup(const std::vector<task_result>& tasks) {
  if (tasks.empty())
    return 1.0;
  double sum = 0;
  for (auto& t : tasks)
    sum += std::log(t.found ? std::max(1.0, t.best_speedup) : 1.0);
  return std::exp(sum / static_cast<double>(tasks.size()));
}

std::string json_escape(const std::string& s) {
  std::string out;
  append_json_escaped(out, s);
  return out;
}

void write_run_outputs(const std::string& dir, const run_summary& s) {
  fs::path root{dir};
  fs::create_directories(root / "best");
  std::ostringstream js;
  js << "{\"strategy\": \"" << json_escape(s.strategy) << "\", "
     << "\"geomean_speedup\": " << json_number(geomean_speedup(s.tasks)) << ", "
     << "\"interrupted\": " << (s.interrupted ? "true" : "false") << ",\n"
     << " \"llm\": {\"queries\": " << s.llm.queries << ", \"input_tokens\": " << s.llm.input_tokens
     << ", \"output_tokens\": " << s.llm.output_tokens
     << ", \"cost_usd\": " << json_number(s.llm.cost_usd) << "},\n \"tasks\": [";
  bool first = true;
  for (auto& t : s.tasks) {
    std::string best;
    if (t.found && !t.best_code.empty()) {
      best = "best/" + t.task + ".py";
      write_text(root / best, t.best_code);
    }
    js << (first ? "\n  " : ",\n  ") << "{\"task\": \"" << json_escape(t.task) << "\", "
       << "\"best_speedup\": " << json_number(t.found ? std::max(1.0, t.best_speedup) : 1.0) << ", "
       << "\"best_runtime_ms\": " << (t.found ? json_number(t.best_runtime_ms) : "null") << ", "
       << "\"reference_ms\": " << (t.reference_ms > 0 ? json_number(t.reference_ms) : "null")
       << ", "
       << "\"queries\": " << t.queries << ", \"evaluations\": " << t.evaluations << ", "
       << "\"correct\": " << t.correct << ", "
       << "\"best_candidate\": " << (best.empty() ? "null" : "\"" + best + "\"") << ", "
       << "\"stop_reason\": \"" << json_escape(t.stop_reason) << "\", "
       << "\"retimed\": " << (t.retimed ? "true" : "false") << ", "
       << "\"search_speedup\": " << json_number(std::max(1.0, t.search_speedup)) << ", "
       << "\"llm\": {\"queries\": " << t.llm.queries << ", \"input_tokens\": " << t.llm.input_tokens
       << ", \"output_tokens\": " << t.llm.output_tokens
       << ", \"cost_usd\": " << json_number(t.llm.cost_usd) << "}}";
    first = false;
  }
  js << "\n ]}\n";
  write_text(root / "summary.json", js.str());
}

std::string render_table(const run_summary& s, int64_t query_limit, const std::string& dir) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %12s %9s %7s %8s  %s\n", "task", "best speedup",
                "queries", "evals", "correct", "ended by");
  out << line;
  for (auto& t : s.tasks) {
    auto q = std::to_string(t.queries) + "/" + std::to_string(query_limit);
    char sp[32];
    std::snprintf(sp, sizeof sp, "%.3fx", t.found ? std::max(1.0, t.best_speedup) : 1.0);
    std::snprintf(line, sizeof line, "%-28s %12s %9s %7lld %8lld  %s\n", t.task.c_str(), sp,
                  q.c_str(), static_cast<long long>(t.evaluations),
                  static_cast<long long>(t.correct), t.stop_reason.c_str());
    out << line;
  }
  std::snprintf(line, sizeof line,
                "geomean speedup %.3fx over %zu task(s); %lld LLM queries; %s%s\n",
                geomean_speedup(s.tasks), s.tasks.size(), static_cast<long long>(s.llm.queries),
                ("results in " + dir).c_str(), s.interrupted ? " (interrupted)" : "");
  out << line;
  return out.str();
}

} // namespace kiln::cli
