// The honest corpus (tests/candidates/honest/README.md): the idioms of published, LLM-written
// solutions that kiln must accept. The static scan passes every file, CUDA ones included; every
// row that runs on a CPU goes through the compile stage and evaluation_engine, as `kiln eval`
// does, and must be correct. The GPU rows are run with `kiln eval --stream` from gpu.tsv.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/build_cache.hpp"
#include "gpu/compile.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/python.hpp"
#include "gpu/scan.hpp"

namespace fs = std::filesystem;
using kiln::verdict_status;

namespace {

const std::string corpus_dir = KILN_SOURCE_DIR "/tests/candidates/honest";

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::string trim(std::string s) {
  auto b = s.find_first_not_of(" \t");
  auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

/// One row of the manifest table.
struct entry {
  std::string candidate;
  std::string task; ///< from the repository root
  std::string idiom;
  std::string needs; ///< empty: runs on the CPU; `cuda`: GPU only
  std::string verdict;
  std::string note;
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
    if (cells.size() < 6 || cells[0].size() < 4 || cells[0].substr(cells[0].size() - 3) != ".py")
      continue; // the header and the separator
    rows.push_back({cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]});
  }
  return rows;
}

std::vector<std::string> corpus_files() {
  std::vector<std::string> names;
  for (const auto& f : fs::directory_iterator{corpus_dir})
    if (f.path().extension() == ".py")
      names.push_back(f.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// Shared by every run: the corpus's five C++ extensions are built once per machine, and later
/// runs only load them (the cache is content-addressed, so what a run left is never wrong).
const std::string shared_cache = KILN_TEST_TMP "/honest-cache";

std::string work_dir() {
  return std::string{KILN_TEST_TMP} + "/honest/" + std::to_string(::getpid());
}

/// The compile stage and one CPU lane, with integrity_test.cpp's cheap timing. Builds on two
/// busy cores can take most of a minute, hence the long timeouts.
struct stages {
  std::unique_ptr<kiln::compile_engine> compiler;
  std::unique_ptr<kiln::evaluation_engine> evaluator;

  stages() {
    fs::remove_all(work_dir());
    kiln::prepare_cache_dir(shared_cache);
    const auto python = kiln::find_python("");
    kiln::compile_settings cs;
    cs.python = python;
    cs.work_dir = work_dir() + "/compile";
    cs.cache_dir = shared_cache;
    cs.timeout_s = 300;
    compiler = std::make_unique<kiln::compile_engine>(cs);
    kiln::eval_settings s;
    s.python = python;
    s.work_dir = work_dir() + "/eval";
    s.cache_dir = shared_cache;
    s.device = "cpu";
    s.cfg.trials = 2;
    s.cfg.warmup_calls = 1;
    s.cfg.min_samples = 3;
    s.cfg.max_samples = 5;
    s.cfg.max_timing_s = 0.05;
    s.cfg.timeout_s = 300;
    evaluator = std::make_unique<kiln::evaluation_engine>(s);
  }
  ~stages() {
    evaluator.reset();
    compiler.reset();
    std::error_code ignored;
    fs::remove_all(work_dir(), ignored);
  }
};

kiln::eval_job job_of(const entry& e) {
  kiln::eval_job job;
  job.task.path = KILN_SOURCE_DIR "/" + e.task;
  job.task.name = fs::path{e.task}.stem().string();
  job.task.source = slurp(job.task.path);
  job.candidate_id = job.task.name + "#" + e.candidate;
  job.code = slurp(corpus_dir + "/" + e.candidate);
  return job;
}

} // namespace

TEST_CASE("honest corpus: the manifest, the folder and gpu.tsv agree", "[honest][scan]") {
  const auto rows = manifest();
  CHECK(rows.size() >= 40);
  std::set<std::string> listed;
  std::set<std::pair<std::string, std::string>> cuda_rows;
  for (const auto& e : rows) {
    INFO(e.candidate);
    CHECK(listed.insert(e.candidate).second);
    REQUIRE(fs::exists(corpus_dir + "/" + e.candidate));
    CHECK(fs::exists(KILN_SOURCE_DIR "/" + e.task));
    // Each file says which task it is for; the row must not say otherwise.
    CHECK(slurp(corpus_dir + "/" + e.candidate).find(e.task) != std::string::npos);
    CHECK_FALSE(e.idiom.empty());
    CHECK((e.needs.empty() || e.needs == "cuda"));
    verdict_status parsed;
    CHECK(kiln::from_string(e.verdict, parsed));
    if (e.needs == "cuda")
      cuda_rows.emplace(fs::weakly_canonical(KILN_SOURCE_DIR "/" + e.task).string(), e.candidate);
  }
  for (const auto& name : corpus_files()) {
    INFO(name << " has no row in the manifest");
    CHECK(listed.count(name) == 1);
  }

  // gpu.tsv: `task<TAB>candidate`, relative to its folder, exactly the rows that need CUDA.
  std::set<std::pair<std::string, std::string>> tsv;
  std::istringstream in{slurp(corpus_dir + "/gpu.tsv")};
  for (std::string line; std::getline(in, line);) {
    if (auto hash = line.find('#'); hash != std::string::npos)
      line.erase(hash);
    std::istringstream fields{line};
    std::string task, candidate, extra;
    if (!(fields >> task))
      continue;
    INFO(line);
    CHECK((fields >> candidate));
    CHECK_FALSE((fields >> extra));
    tsv.emplace(fs::weakly_canonical(corpus_dir + "/" + task).string(), candidate);
  }
  CHECK(tsv == cuda_rows);
  CHECK_FALSE(cuda_rows.empty());
}

TEST_CASE("honest corpus: the static scan rejects none of it", "[honest][scan]") {
  const auto names = corpus_files();
  CHECK(names.size() >= 40);
  for (const auto& name : names) {
    auto r = kiln::scan_candidate(slurp(corpus_dir + "/" + name));
    std::string found;
    for (const auto& f : r.rejections)
      found += "\n  " + f.text();
    INFO(name << found);
    CHECK(r.rejections.empty());
  }
}

TEST_CASE("honest corpus: every CPU row is correct through the compile stage and the evaluator",
          "[honest]") {
  stages run;
  int evaluated = 0;
  int skipped = 0;
  for (const auto& e : manifest()) {
    if (e.needs == "cuda") {
      ++skipped; // on a GPU machine: kiln eval --stream tests/candidates/honest/gpu.tsv
      continue;
    }
    const auto job = job_of(e);
    if (job.code.find("cpp_extension") != std::string::npos) {
      // As `kiln eval` does: builds happen ahead, without the device, into the shared cache.
      // Only for the files that build: for the others it is one more torch import each.
      auto built = run.compiler->compile(job);
      INFO(e.candidate << ": compile stage: " << built.reason << built.problem
                       << "\nstderr: " << built.stderr_tail);
      CHECK_FALSE(built.failed);
      CHECK(built.problem.empty());
    }
    auto v = run.evaluator->evaluate(job, 23);
    std::string notes;
    for (const auto& n : v.notes)
      notes += "\n  note: " + n;
    INFO(e.candidate << " (" << e.idiom << ") on " << e.task << ": " << to_string(v.status) << " ("
                     << v.reason << ")" << notes << "\nstdout: " << v.stdout_tail
                     << "\nstderr: " << v.stderr_tail);
    CHECK(std::string{to_string(v.status)} == e.verdict);
    if (!e.note.empty())
      CHECK(std::any_of(v.notes.begin(), v.notes.end(),
                        [&](const std::string& n) { return n.find(e.note) != std::string::npos; }));
    ++evaluated;
  }
  CHECK(evaluated >= 40);
  WARN(skipped << " rows need CUDA: kiln eval --stream tests/candidates/honest/gpu.tsv");
}
