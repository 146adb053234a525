// The compile stage ahead of the GPU, on the CPU: real compile runners of the embedded harness
// building real extensions into a real cache. Real compiles are slow (a pybind11-only source
// takes ~5 s here, one with torch/extension.h ~30 s), so the mechanics use pybind11-only
// sources (tests/candidates/ext_pybind_*.py) made unique by a salt, and the torch path shares
// one cache folder across test cases and runs, so that it is built once per machine.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/build_cache.hpp"
#include "gpu/compile.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/harness.hpp"
#include "gpu/python.hpp"
#include "gpu/runner.hpp"
#include "gpu/runner_pool.hpp"
#include "gpu/sandbox.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::string candidate(const std::string& name) {
  return slurp(KILN_SOURCE_DIR "/tests/candidates/" + name);
}

/// `code` with its KILN_SALT markers replaced: a C++ source no cache has seen.
std::string salted(std::string code, const std::string& salt) {
  const std::string marker = "KILN_SALT";
  REQUIRE(code.find(marker) != std::string::npos);
  for (auto at = code.find(marker); at != std::string::npos; at = code.find(marker, at))
    code.replace(at, marker.size(), salt);
  return code;
}

std::string fresh_salt() {
  std::random_device rd;
  return "salt-" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + "-"
         + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

/// Shared by every case and every run: the torch extension is built once per machine.
const std::string shared_cache = KILN_TEST_TMP "/compile-cache";

std::string work_dir() {
  return std::string{KILN_TEST_TMP} + "/compile/" + std::to_string(::getpid());
}

/// Removes this process's folder (ctest runs every case in a process of its own).
struct work_dir_cleanup {
  ~work_dir_cleanup() {
    std::error_code ignored;
    fs::remove_all(work_dir(), ignored);
  }
} cleanup_at_exit;

/// Salted sources never hit again, so the cases of the mechanics use a cache of their own.
kiln::compile_settings settings(double timeout_s = 300,
                                const std::string& cache = work_dir() + "/cache") {
  kiln::compile_settings s;
  s.python = kiln::find_python("");
  s.work_dir = work_dir();
  s.cache_dir = cache;
  s.timeout_s = timeout_s;
  s.threads = 1;
  return s;
}

kiln::eval_job job_of(const std::string& code, const std::string& id) {
  kiln::eval_job j;
  j.candidate_id = id;
  j.code = code;
  return j;
}

void require_clean(const kiln::compile_outcome& c) {
  INFO("reason: " << c.reason << "\nproblem: " << c.problem << "\nimport: " << c.import_error
                  << "\nstderr: " << c.stderr_tail);
  REQUIRE_FALSE(c.failed);
  REQUIRE(c.problem.empty());
  REQUIRE(c.import_error.empty());
}

} // namespace

TEST_CASE("a cpp_extension build happens once, later compiles load it from the cache",
          "[compile]") {
  kiln::compile_engine engine{settings()};
  auto salt = fresh_salt();
  auto code = salted(candidate("ext_pybind_add.py"), salt);

  auto first = engine.compile(job_of(code, "3_Softmax#1"));
  require_clean(first);
  CHECK(first.attempts == 1);
  CHECK(first.builds == 1);
  CHECK(first.hits == 0);
  CHECK_FALSE(first.cached);
  CHECK(first.stderr_tail.find("built in") != std::string::npos);

  // Recorded by the runner: no compiler ran, the library came from <cache>/ext/<key>/.
  auto again = engine.compile(job_of(code, "3_Softmax#2"));
  require_clean(again);
  CHECK(again.builds == 1);
  CHECK(again.hits == 1);
  CHECK(again.cached);
  CHECK(again.stderr_tail.find("cache hit") != std::string::npos);
  CHECK(again.stderr_tail.find("built in") == std::string::npos);
}

TEST_CASE("kiln publishes a compile runner's build, whose key it recomputed", "[compile]") {
  auto s = settings();
  kiln::compile_engine engine{s};
  auto entries = [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator{s.cache_dir + "/ext"})
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  auto before = entries();
  auto c = engine.compile(job_of(salted(candidate("ext_pybind_add.py"), fresh_salt()), "pub"));
  require_clean(c);
  REQUIRE(c.builds == 1);
  auto after = entries();
  std::vector<std::string> added;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(added));
  REQUIRE(added.size() == 1);
  const auto entry = s.cache_dir + "/ext/" + added.front();
  std::string error;
  CHECK(kiln::manifest_key(slurp(entry + "/manifest.json"), error) == added.front());
  CHECK(slurp(entry + "/meta.json").find("\"artifact\": \"kiln_add.so\"") != std::string::npos);
  // Copied by kiln, read-only; kiln's own staging is empty again.
  CHECK((fs::status(entry + "/kiln_add.so").permissions() & fs::perms::owner_write)
        == fs::perms::none);
  CHECK(fs::is_empty(s.cache_dir + "/tmp"));
}

TEST_CASE("a gated runner's builds are published at its gate, its locks already let go",
          "[compile]") {
  // Another lane's runner that waits for one of those locks holds the device shared; were they
  // still held while the gate waits for the device whole, each would wait for the other.
  auto dir = work_dir() + "/gate";
  fs::create_directories(dir);
  kiln::eval_settings s;
  s.python = kiln::find_python("");
  s.work_dir = dir + "/work";
  s.cache_dir = dir + "/cache";
  kiln::prepare_cache_dir(s.cache_dir);
  auto harness = kiln::install_harness(s.work_dir);
  kiln::runner_pool pool{kiln::runner_pool_launch(s, harness), 1};
  kiln::runner_context ctx{s, harness, dir, "", "cpu", 1};
  ctx.pool = &pool;
  const auto candidate_path = dir + "/candidate.py";
  std::ofstream{candidate_path} << salted(candidate("ext_pybind_add.py"), fresh_salt());
  kiln::runner_job job;
  job.mode = "candidate";
  job.task_path = KILN_SOURCE_DIR "/tests/tasks/cpu/3_Softmax.py";
  job.candidate_path = candidate_path;
  job.device = "cpu";
  job.seeds = {1};
  job.time = true;
  job.gate = true;
  int entries_at_gate = -1;
  int locks_held_at_gate = -1;
  auto r = kiln::run_runner(ctx, job, 300, [&](const std::string&) {
    entries_at_gate = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator{s.cache_dir + "/ext"})
      ++entries_at_gate;
    locks_held_at_gate = 0;
    for (const auto& e : fs::directory_iterator{s.cache_dir + "/locks"}) {
      int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0)
        ++locks_held_at_gate;
      if (fd >= 0)
        ::close(fd);
    }
    return false; // not timed: the case is over
  });
  INFO(kiln::tail_of_file(r.stderr_path, 2000));
  CHECK(r.have_result);
  CHECK(r.gate_stopped);
  CHECK(entries_at_gate == 1);
  CHECK(locks_held_at_gate == 0);
  CHECK(r.staged.published == 1);
  CHECK(r.staged.existing == 0); // the look after its end did not count it again
}

TEST_CASE("a candidate with other Python code but the same kernel source hits the cache",
          "[compile]") {
  kiln::compile_engine engine{settings()};
  auto salt = fresh_salt();
  auto built = engine.compile(job_of(salted(candidate("ext_pybind_add.py"), salt), "a"));
  require_clean(built);
  REQUIRE(built.hits == 0);
  // Another file name, another call style, other module code: same source, flags and name.
  auto other = engine.compile(job_of(salted(candidate("ext_pybind_other.py"), salt), "b"));
  require_clean(other);
  CHECK(other.builds == 1);
  CHECK(other.hits == 1);
  CHECK(other.cached);
}

TEST_CASE("compile engines in parallel build a shared extension once", "[compile]") {
  auto code = salted(candidate("ext_pybind_add.py"), fresh_salt());
  kiln::compile_engine a{settings()};
  kiln::compile_engine b{settings()};
  kiln::compile_outcome ra;
  kiln::compile_outcome rb;
  std::thread ta{[&] { ra = a.compile(job_of(code, "a")); }};
  std::thread tb{[&] { rb = b.compile(job_of(code, "b")); }};
  ta.join();
  tb.join();
  require_clean(ra);
  require_clean(rb);
  // One built it; the other waited on the key's lock (or came later) and loaded it.
  CHECK(ra.builds + rb.builds == 2);
  CHECK(ra.hits + rb.hits == 1);
}

TEST_CASE("a C++ error is a compile_error that carries the compiler's error line", "[compile]") {
  kiln::compile_engine engine{settings()};
  auto c = engine.compile(job_of(candidate("ext_pybind_error.py"), "3_Softmax#err"));
  INFO("stderr: " << c.stderr_tail);
  REQUIRE(c.failed);
  CHECK(c.status == kiln::verdict_status::compile_error);
  CHECK(c.reason.find("extension 'kiln_broken' failed to build") != std::string::npos);
  CHECK(c.reason.find("error:") != std::string::npos);
  CHECK(c.reason.find("kiln_undeclared_thing") != std::string::npos);
  CHECK(c.stderr_tail.find("kiln_undeclared_thing") != std::string::npos);
  // A compiler error is not a crash: it is not tried again.
  CHECK(c.attempts == 1);

  kiln::verdict v;
  kiln::apply_compile_outcome(c, v);
  CHECK(v.status == kiln::verdict_status::compile_error);
  CHECK(v.reason == c.reason);
  CHECK(v.compile_ms == c.wall_ms);
  CHECK_FALSE(v.compile_cached);
}

TEST_CASE("a compile stage that hangs is retried once, then reported as compile_error",
          "[compile]") {
  kiln::compile_engine engine{settings(2.5)};
  auto c = engine.compile(job_of(candidate("ext_hang.py"), "1_MLP#hang"));
  REQUIRE(c.failed);
  CHECK(c.status == kiln::verdict_status::compile_error);
  CHECK(c.attempts == 2);
  CHECK(c.reason.find("timed out after 2.5 s, twice") != std::string::npos);
}

TEST_CASE("an import that fails without a GPU is left to the GPU stage", "[compile]") {
  kiln::compile_engine engine{settings()};
  auto c = engine.compile(job_of("import torch\n"
                                 "ones = torch.ones(4, device='cuda')\n",
                                 "1_MLP#needs_gpu"));
  CHECK_FALSE(c.failed);
  CHECK(c.problem.empty());
  CHECK(c.attempts == 1);
  CHECK(c.builds == 0);
  CHECK(c.cached);
  CHECK_FALSE(c.import_error.empty());
}

TEST_CASE("compile runners run at a lower priority than the daemon", "[compile]") {
  kiln::compile_engine engine{settings()};
  auto c = engine.compile(job_of("import os\n"
                                 "raise RuntimeError('nice value %d' % os.nice(0))\n",
                                 "1_MLP#nice"));
  errno = 0;
  const int base = ::nice(0);
  REQUIRE(errno == 0);
  CHECK_THAT(c.import_error,
             Catch::Matchers::Contains("nice value " + std::to_string(std::min(base + 10, 19))));
}

TEST_CASE("a load_inline extension compiled ahead is only loaded by the evaluation",
          "[compile][torch]") {
  const auto code = salted(candidate("ext_gelu_inline.py"), "shared by every run");
  kiln::compile_engine engine{settings(300, shared_cache)};
  // The first compile on this machine builds (~30 s); every later one, in any process, loads.
  auto ahead = engine.compile(job_of(code, "8_GeluTail#1"));
  require_clean(ahead);
  REQUIRE(ahead.builds == 1);
  auto again = engine.compile(job_of(code, "8_GeluTail#2"));
  require_clean(again);
  CHECK(again.builds == 1);
  CHECK(again.hits == 1);
  CHECK(again.cached);

  kiln::eval_settings es;
  es.python = kiln::find_python("");
  es.work_dir = work_dir() + "/eval";
  es.cache_dir = shared_cache;
  es.cfg.min_samples = 5;
  es.cfg.max_timing_s = 0.3;
  es.cfg.timeout_s = 120;
  kiln::evaluation_engine evaluator{es};
  kiln::eval_job job = job_of(code, "8_GeluTail#eval");
  job.task.path = KILN_SOURCE_DIR "/tests/tasks/cpu/8_GeluTail.py";
  job.task.name = "8_GeluTail";
  job.task.source = slurp(job.task.path);
  auto v = evaluator.evaluate(job, 11);
  INFO("reason: " << v.reason << "\nstderr: " << v.stderr_tail);
  CHECK(v.status == kiln::verdict_status::correct);
  CHECK(v.stderr_tail.find("kiln_build: load_inline 'kiln_gelu_tail'") != std::string::npos);
  CHECK(v.stderr_tail.find("cache hit") != std::string::npos);
  CHECK(v.stderr_tail.find("built in") == std::string::npos);
}

TEST_CASE("a load_inline build into /tmp/torch_extensions compiles ahead and is correct",
          "[compile][torch]") {
  if (!kiln::probe_sandbox().private_tmp) {
    WARN("runners get no /tmp of their own here: " << kiln::probe_sandbox().description());
    return;
  }
  // The same sources as ext_gelu_inline.py: kiln's cache ignores build_directory, so the two
  // cases share one build per machine.
  const auto code = salted(candidate("ext_gelu_tmp_build.py"), "shared by every run");
  kiln::compile_engine engine{settings(300, shared_cache)};
  auto ahead = engine.compile(job_of(code, "8_GeluTail#tmp"));
  require_clean(ahead);
  REQUIRE(ahead.builds == 1);

  kiln::eval_settings es;
  es.python = kiln::find_python("");
  es.work_dir = work_dir() + "/eval";
  es.cache_dir = shared_cache;
  es.cfg.min_samples = 5;
  es.cfg.max_timing_s = 0.3;
  es.cfg.timeout_s = 120;
  kiln::evaluation_engine evaluator{es};
  kiln::eval_job job = job_of(code, "8_GeluTail#tmp-eval");
  job.task.path = KILN_SOURCE_DIR "/tests/tasks/cpu/8_GeluTail.py";
  job.task.name = "8_GeluTail";
  job.task.source = slurp(job.task.path);
  auto v = evaluator.evaluate(job, 11);
  INFO("reason: " << v.reason << "\nstderr: " << v.stderr_tail);
  CHECK(v.status == kiln::verdict_status::correct);
  CHECK_FALSE(fs::exists("/tmp/torch_extensions/kiln_gelu_tail"));
}

TEST_CASE("a precompiled header is requested by a build, built apart, and used by later builds",
          "[compile][torch][pch]") {
  kiln::compile_engine engine{settings(600, shared_cache)};
  std::vector<std::string> salts;
  auto build = [&](const char* id) {
    salts.push_back(fresh_salt());
    return engine.compile(job_of(salted(candidate("ext_gelu_inline.py"), salts.back()), id));
  };
  auto c = build("8_GeluTail#1");
  require_clean(c);
  REQUIRE(c.builds == 1);
  REQUIRE(c.hits == 0);
  if (c.pch_builds == 0) {
    // The first build of a flag set never waits for the header: it asks for it, and an idle
    // worker builds it apart (here: now).
    REQUIRE(c.pch_wanted.size() == 1);
    auto pch = engine.build_pch(c.pch_wanted.front());
    INFO("pch: " << pch.state << " " << pch.error);
    REQUIRE(pch.ok);
    CHECK((pch.state == "built" || pch.state == "exists"));
    c = build("8_GeluTail#2");
    require_clean(c);
    CHECK(c.hits == 0);
  }
  CHECK(c.pch_builds == 1);
  CHECK(c.pch_wanted.empty());
  CHECK(c.stderr_tail.find("with pch") != std::string::npos);

  // Salted builds are never used again: keep the shared cache from growing run by run.
  std::vector<fs::path> mine;
  for (const auto& entry : fs::directory_iterator{shared_cache + "/ext"}) {
    std::ifstream in{entry.path() / "main.cpp"};
    std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
    for (const auto& salt : salts)
      if (text.find(salt) != std::string::npos)
        mine.push_back(entry.path());
  }
  CHECK(mine.size() == salts.size());
  for (const auto& p : mine)
    fs::remove_all(p);

  auto bad = engine.build_pch("../../etc");
  CHECK_FALSE(bad.ok);
  CHECK(bad.error.find("bad precompiled header key") != std::string::npos);
}

TEST_CASE("the cache folder follows the config, then XDG_CACHE_HOME, then HOME", "[compile]") {
  CHECK(kiln::resolve_cache_dir("/x/y/../cache") == "/x/cache");
  CHECK(fs::path{kiln::resolve_cache_dir("relative/cache")}.is_absolute());
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/someone", 1);
  CHECK(kiln::resolve_cache_dir("") == "/xdg/kiln");
  ::setenv("XDG_CACHE_HOME", "not/absolute", 1);
  CHECK(kiln::resolve_cache_dir("") == "/home/someone/.cache/kiln");
  ::unsetenv("XDG_CACHE_HOME");
  CHECK(kiln::resolve_cache_dir("") == "/home/someone/.cache/kiln");
  ::unsetenv("HOME");
  CHECK_THROWS_WITH(kiln::resolve_cache_dir(""), Catch::Contains("set [evaluator] cache_dir"));
}

TEST_CASE("bad compile settings and unusable caches are refused with a reason", "[compile]") {
  auto s = settings();
  s.arch_list = "sm_90";
  CHECK_THROWS_WITH(kiln::compile_engine{s}, Catch::Contains("bad arch list 'sm_90'"));
  s = settings();
  s.cache_dir.clear();
  CHECK_THROWS_WITH(kiln::compile_engine{s}, Catch::Contains("empty cache_dir"));
  s = settings();
  s.arch_list = "8.0;9.0a 9.0+PTX";
  CHECK_NOTHROW(kiln::compile_engine{s});

  auto dir = work_dir() + "/not-a-dir";
  fs::create_directories(work_dir());
  std::ofstream{dir} << "a file";
  CHECK_THROWS_WITH(kiln::prepare_cache_dir(dir + "/cache"), Catch::Contains("cannot create"));
}

TEST_CASE("stale staging entries of the cache are swept, fresh ones kept", "[compile]") {
  auto dir = work_dir() + "/sweep";
  fs::remove_all(dir);
  kiln::prepare_cache_dir(dir);
  fs::create_directories(dir + "/tmp/old.123.abc");
  fs::create_directories(dir + "/tmp/new.456.def");
  fs::last_write_time(dir + "/tmp/old.123.abc",
                      fs::file_time_type::clock::now() - std::chrono::hours{48});
  CHECK(kiln::sweep_cache_tmp(dir, std::chrono::hours{24}) == 1);
  CHECK_FALSE(fs::exists(dir + "/tmp/old.123.abc"));
  CHECK(fs::exists(dir + "/tmp/new.456.def"));
  fs::remove_all(dir);
}
