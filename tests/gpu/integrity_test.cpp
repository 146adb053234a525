// The integrity corpus (tests/candidates/integrity/README.md): every cheating candidate gets the
// verdict and reason its manifest row names, and every honest one passes. Real runner processes
// of the embedded harness on the CPU; rows that need CUDA are skipped here.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/judge.hpp"
#include "gpu/build_cache.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/python.hpp"
#include "gpu/sandbox.hpp"

namespace fs = std::filesystem;
using kiln::verdict_status;

namespace {

const std::string corpus_dir = KILN_SOURCE_DIR "/tests/candidates/integrity";

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::string trim(std::string s) {
  auto b = s.find_first_not_of(" \t`");
  auto e = s.find_last_not_of(" \t`");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

/// One row of the manifest table.
struct entry {
  std::string mode; ///< PEERS (c) number, or `ok` for an honest rewrite
  std::string candidate;
  std::string task;
  std::string verdict;
  std::string reason;
  std::string note;
  std::string needs;
};

std::vector<entry> manifest() {
  std::istringstream in{slurp(corpus_dir + "/README.md")};
  std::vector<entry> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| ", 0) != 0)
      continue;
    std::vector<std::string> cells;
    std::istringstream row{line.substr(1)};
    for (std::string cell; std::getline(row, cell, '|');)
      cells.push_back(trim(cell));
    if (cells.size() < 7 || cells[1].size() < 4 || cells[1].substr(cells[1].size() - 3) != ".py")
      continue; // the header, the separator and the rows without a candidate
    rows.push_back({cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]});
  }
  return rows;
}

std::string task_path(const std::string& task) {
  if (task.rfind("task_", 0) == 0)
    return corpus_dir + "/" + task + ".py";
  return KILN_SOURCE_DIR "/tests/tasks/cpu/" + task + ".py";
}

/// Few trials and short timing: the procedure is the one of a run, only cheaper.
kiln::evaluation_engine& engine() {
  struct owner {
    std::string dir = std::string{KILN_TEST_TMP} + "/integrity/" + std::to_string(::getpid());
    std::unique_ptr<kiln::evaluation_engine> engine;
    owner() {
      fs::remove_all(dir);
      fs::remove_all(dir + "-cache");
      kiln::eval_settings s;
      s.python = kiln::find_python("");
      s.work_dir = dir;
      s.device = "cpu";
      s.cfg.trials = 3; // fast_when_timed.py turns after three honest calls
      s.cfg.warmup_calls = 1;
      s.cfg.min_samples = 3;
      s.cfg.max_samples = 10;
      s.cfg.max_timing_s = 0.1;
      s.cfg.timeout_s = 60;
      // A build cache, as in a run (the cache cheats look for it), beside the work folder as
      // the default one is: never in `<work_dir>/cache`, which runners may write.
      s.cache_dir = dir + "-cache";
      engine = std::make_unique<kiln::evaluation_engine>(s);
    }
    ~owner() {
      engine.reset();
      std::error_code ignored;
      fs::remove_all(dir, ignored);
      fs::remove_all(dir + "-cache", ignored);
    }
  };
  static owner o;
  return *o.engine;
}

kiln::verdict evaluate(const std::string& task, const std::string& candidate) {
  kiln::eval_job job;
  job.task.path = task_path(task);
  job.task.name = task;
  job.task.source = slurp(job.task.path);
  job.candidate_id = task + "#" + candidate;
  job.code = slurp(corpus_dir + "/" + candidate);
  return engine().evaluate(job, 17);
}

bool has_cuda() {
  static const bool cuda = engine().facts().cuda;
  return cuda;
}

/// Evaluates the rows `pick` selects and checks each against its row.
void check_rows(bool (*pick)(const entry&)) {
  int ran = 0;
  for (const auto& e : manifest()) {
    if (!pick(e))
      continue;
    if (e.needs == "cuda" && !has_cuda()) {
      WARN("skipped without CUDA: " << e.candidate);
      continue;
    }
    if (e.needs == "landlock" && kiln::probe_sandbox().landlock_abi == 0) {
      WARN("skipped without Landlock: " << e.candidate);
      continue;
    }
    auto v = evaluate(e.task, e.candidate);
    std::string notes;
    for (const auto& n : v.notes)
      notes += "\n  note: " + n;
    INFO("#" << e.mode << " " << e.candidate << " on " << e.task << ": " << to_string(v.status)
             << " (" << v.reason << ")" << notes << "\nstderr: " << v.stderr_tail);
    CHECK(std::string{to_string(v.status)} == e.verdict);
    CHECK(v.reason.find(e.reason) != std::string::npos);
    const auto& codes = kiln::verdict_codes();
    CHECK(std::find(codes.begin(), codes.end(), v.code) != codes.end());
    if (!e.note.empty())
      CHECK(std::any_of(v.notes.begin(), v.notes.end(),
                        [&](const std::string& n) { return n.find(e.note) != std::string::npos; }));
    if (e.reason.rfind("static scan:", 0) == 0) {
      // Rejected from the text alone: no runner ever started, so there is no output of one.
      CHECK(v.stdout_tail.empty());
      CHECK(v.stderr_tail.empty());
    }
    ++ran;
  }
  CHECK(ran > 0);
}

bool is_static(const entry& e) {
  return e.reason.rfind("static scan:", 0) == 0;
}

} // namespace

TEST_CASE("the manifest and the corpus folder agree", "[integrity]") {
  auto rows = manifest();
  std::set<std::string> listed;
  std::set<std::string> modes;
  for (const auto& e : rows) {
    INFO(e.candidate);
    CHECK(fs::exists(corpus_dir + "/" + e.candidate));
    CHECK(fs::exists(task_path(e.task)));
    verdict_status parsed;
    CHECK(kiln::from_string(e.verdict, parsed));
    CHECK_FALSE(e.reason.empty());
    listed.insert(e.candidate);
    modes.insert(e.mode);
  }
  for (const auto& f : fs::directory_iterator{corpus_dir}) {
    auto name = f.path().filename().string();
    if (f.path().extension() == ".py" && name.rfind("task_", 0) != 0) {
      INFO(name << " has no row in the manifest");
      CHECK(listed.count(name) == 1);
    }
  }
  // Every failure mode of PEERS (c) that a candidate can express has a candidate.
  for (const auto* mode : {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "12", "13", "14",
                           "16", "17", "18", "ok"})
    CHECK(modes.count(mode) == 1);
}

TEST_CASE("corpus: the static scan rejects tampering before any runner starts", "[integrity]") {
  check_rows(is_static);
}

TEST_CASE("corpus: cheats the runtime checks catch are rejected", "[integrity]") {
  check_rows([](const entry& e) { return e.verdict == "rejected" && !is_static(e); });
}

TEST_CASE("corpus: cheats that get the numbers wrong never pass", "[integrity]") {
  check_rows([](const entry& e) { return e.verdict == "incorrect"; });
}

TEST_CASE("corpus: a crash is a runtime error and the next evaluation is unaffected",
          "[integrity]") {
  check_rows([](const entry& e) { return e.verdict == "runtime_error"; });
  auto v = evaluate("1_MLP", "identity_control.py");
  INFO(v.reason);
  CHECK(v.status == verdict_status::correct);
}

TEST_CASE("corpus: honest rewrites and allowed shortcuts are correct", "[integrity]") {
  check_rows([](const entry& e) { return e.verdict == "correct"; });
}

TEST_CASE("corpus: a cache keyed on input values never answers a timed call", "[integrity]") {
  // Every timed call gets new values (kiln_timing's refresh), so the cache only ever misses; with
  // cloned sets alone it would answer every call after the first round of sets.
  auto v = evaluate("1_MLP", "cache_values.py");
  INFO(v.reason << "\nstdout: " << v.stdout_tail << "\nstderr: " << v.stderr_tail);
  CHECK(v.status == verdict_status::correct);
  CHECK(v.stdout_tail.find("cache hit") == std::string::npos);
}

TEST_CASE("corpus: cheats on the build cache leave it byte for byte unchanged", "[integrity]") {
  // An entry as kiln publishes one, for the cheats to overwrite if they could.
  const auto cache = engine().settings().cache_dir;
  const auto entry = cache + "/ext/" + std::string(64, '9');
  fs::create_directories(entry);
  std::ofstream{entry + "/meta.json"} << "{}";
  std::ofstream{entry + "/kiln_x.so"} << "library";
  // kiln itself writes reference timings and facts into the cache while it evaluates.
  auto snapshot = [&] {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator{cache}) {
      auto rel = fs::relative(e.path(), cache).string();
      if (rel.rfind("reference", 0) == 0 || rel.rfind("facts", 0) == 0)
        continue;
      files[rel] = e.is_regular_file() ? slurp(e.path().string()) : "<dir>";
    }
    return files;
  };
  kiln::prepare_cache_dir(cache); // as the first runner's start does
  const auto before = snapshot();
  for (const auto* candidate : {"cache_write.py", "cache_stage_forged.py"}) {
    if (kiln::probe_sandbox().landlock_abi == 0 && std::string{candidate} == "cache_write.py")
      continue;
    auto v = evaluate("3_Softmax", candidate);
    INFO(candidate << ": " << v.reason << "\nstderr: " << v.stderr_tail);
    CHECK(v.status == verdict_status::correct);
  }
  std::string changed;
  const auto after = snapshot();
  for (const auto& [path, bytes] : after)
    if (auto it = before.find(path); it == before.end() || it->second != bytes)
      changed += "\n  " + path;
  for (const auto& [path, bytes] : before)
    if (after.count(path) == 0)
      changed += "\n  gone: " + path;
  INFO("changed in the cache:" << changed);
  CHECK(changed.empty());
}
