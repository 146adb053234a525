// Reference timings cached in memory and on disk, and shared by engines.

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/evaluate.hpp"
#include "gpu/python.hpp"
#include "gpu/reference_cache.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::string test_dir(const std::string& name) {
  auto dir =
      std::string{KILN_TEST_TMP} + "/reference-cache/" + name + "-" + std::to_string(::getpid());
  fs::remove_all(dir);
  return dir;
}

kiln::reference_key sample_key() {
  kiln::reference_key k;
  k.task_source = "class Model: ...";
  k.device_name = "NVIDIA H200";
  k.capability = "9.0";
  k.torch_version = "2.11.0+cu130";
  k.python_version = "3.12.3";
  k.settings = kiln::timing_settings_text(kiln::evaluator_config{}, 16, "");
  k.harness = kiln::harness_identity();
  return k;
}

kiln::timing_stats sample_stats() {
  kiln::timing_stats s;
  s.median_ms = 0.123456789012345;
  s.p10_ms = 0.1;
  s.p90_ms = 0.2;
  s.mean_ms = 0.15;
  s.n = 77;
  s.sm_clock_mhz = 1980;
  s.mem_clock_mhz = 3201;
  return s;
}

size_t files_in(const std::string& dir) {
  if (!fs::exists(dir))
    return 0;
  return static_cast<size_t>(std::distance(fs::directory_iterator{dir}, fs::directory_iterator{}));
}

} // namespace

TEST_CASE("a stored timing is found again by a fresh cache on the same folder", "[refcache]") {
  auto dir = test_dir("disk");
  kiln::reference_cache{dir}.store(sample_key(), sample_stats());
  CHECK(files_in(dir + "/reference") == 1);
  auto found = kiln::reference_cache{dir}.find(sample_key());
  REQUIRE(found);
  CHECK(found->median_ms == sample_stats().median_ms); // to the last bit
  CHECK(found->n == 77);
  CHECK(found->sm_clock_mhz == 1980);
  CHECK(found->mem_clock_mhz == 3201);
  fs::remove_all(dir);
}

TEST_CASE("any part of the key that differs misses", "[refcache]") {
  auto dir = test_dir("miss");
  kiln::reference_cache cache{dir};
  cache.store(sample_key(), sample_stats());
  auto k = sample_key();
  SECTION("task source") {
    k.task_source += " ";
  }
  SECTION("device model") {
    k.device_name = "NVIDIA H100";
  }
  SECTION("capability") {
    k.capability = "8.0";
  }
  SECTION("torch") {
    k.torch_version = "2.10.0";
  }
  SECTION("python") {
    k.python_version = "3.11.2";
  }
  SECTION("timing settings") {
    kiln::evaluator_config cfg;
    cfg.min_samples = 11;
    k.settings = kiln::timing_settings_text(cfg, 16, "");
  }
  SECTION("compile mode") {
    k.settings = kiln::timing_settings_text({}, 16, "max-autotune");
  }
  SECTION("threads") {
    k.settings = kiln::timing_settings_text({}, 8, "");
  }
  SECTION("harness code") {
    k.harness += "# changed";
  }
  CHECK(k.digest() != sample_key().digest());
  CHECK_FALSE(cache.find(k));
  CHECK_FALSE(kiln::reference_cache{dir}.find(k));
  fs::remove_all(dir);
}

TEST_CASE("a damaged or foreign cache file is a miss, not an error", "[refcache]") {
  auto dir = test_dir("damaged");
  auto path = dir + "/reference/" + sample_key().digest() + ".json";
  fs::create_directories(dir + "/reference");
  SECTION("truncated") {
    std::ofstream{path} << "{\"version\": 1, \"key\": {";
  }
  SECTION("written for another key under this name") {
    kiln::reference_cache{dir}.store(sample_key(), sample_stats());
    auto text = slurp(path);
    auto at = text.find("NVIDIA H200");
    REQUIRE(at != std::string::npos);
    text.replace(at, 11, "NVIDIA H100");
    std::ofstream{path} << text;
  }
  SECTION("a zero timing") {
    kiln::reference_cache{dir}.store(sample_key(), kiln::timing_stats{});
  }
  CHECK_FALSE(kiln::reference_cache{dir}.find(sample_key()));
  // Storing again repairs it.
  kiln::reference_cache{dir}.store(sample_key(), sample_stats());
  CHECK(kiln::reference_cache{dir}.find(sample_key()));
  fs::remove_all(dir);
}

TEST_CASE("a key without the software versions stays in memory", "[refcache]") {
  auto dir = test_dir("incomplete");
  auto k = sample_key();
  k.torch_version.clear(); // the facts runner failed: the software is unknown
  kiln::reference_cache cache{dir};
  cache.store(k, sample_stats());
  CHECK(cache.find(k));
  CHECK(files_in(dir + "/reference") == 0);
  CHECK_FALSE(kiln::reference_cache{dir}.find(k));
  fs::remove_all(dir);
}

TEST_CASE("a cached reference figure is never the denominator, and one that is off is replaced",
          "[refcache]") {
  auto dir = test_dir("engines");
  auto settings = [&](const std::string& work) {
    kiln::eval_settings s;
    s.python = kiln::find_python("");
    s.work_dir = dir + "/" + work;
    s.cfg.cache_dir = dir + "/cache";
    s.device = "cpu";
    s.cfg.cpu_threads = 1;
    s.cfg.min_samples = 5;
    s.cfg.max_timing_s = 0.2;
    s.cfg.timeout_s = 60;
    s.cfg.pool_size = 1;
    return s;
  };
  kiln::eval_job job;
  job.task.path = KILN_SOURCE_DIR "/tests/tasks/cpu/1_MLP.py";
  job.task.name = "1_MLP";
  job.task.source = slurp(job.task.path);
  job.candidate_id = "1_MLP#good";
  job.code = slurp(KILN_SOURCE_DIR "/tests/candidates/mlp_good.py");

  kiln::verdict first;
  {
    kiln::evaluation_engine a{settings("a")};
    first = a.evaluate(job, 1);
    INFO(first.reason);
    REQUIRE(first.status == kiln::verdict_status::correct);
    CHECK(first.paired);
    auto again = a.evaluate(job, 2);
    REQUIRE(again.status == kiln::verdict_status::correct);
    // Timed again beside its candidate: two measurements never agree to the last bit.
    CHECK(a.references_timed() == 2);
    CHECK(again.per_call.reference.mean_ms != first.per_call.reference.mean_ms);
  }
  REQUIRE(files_in(dir + "/cache/reference") == 1);
  // A record taken under load (the bug this guards against: two busy loops on the CPU while the
  // reference was first timed, and every later speedup read 71x): 50 times the real figure.
  std::string path;
  for (auto& e : fs::directory_iterator{dir + "/cache/reference"})
    path = e.path().string();
  auto text = slurp(path);
  const auto at = text.find("\"median_ms\": ");
  REQUIRE(at != std::string::npos);
  const auto end = text.find(',', at);
  const double real = std::stod(text.substr(at + 13, end - at - 13));
  text.replace(at, end - at, "\"median_ms\": " + std::to_string(real * 50));
  std::ofstream{path, std::ios::trunc} << text;

  kiln::evaluation_engine b{settings("b")};
  auto second = b.evaluate(job, 3);
  INFO(second.reason);
  REQUIRE(second.status == kiln::verdict_status::correct);
  CHECK(b.references_timed() == 1);
  CHECK(second.per_call.reference.median_ms < real * 10);
  CHECK(second.speedup < 10);
  bool noted = false;
  for (const auto& n : second.notes)
    noted = noted || n.find("cached reference figure") != std::string::npos;
  CHECK(noted);
  // The record now holds what was timed beside the candidate.
  auto now = slurp(path);
  const auto at2 = now.find("\"median_ms\": ");
  CHECK(std::stod(now.substr(at2 + 13, now.find(',', at2) - at2 - 13)) < real * 10);
  fs::remove_all(dir);
}
