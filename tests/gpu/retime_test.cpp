// The final re-timing on the CPU: real runners of the bundled 1_MLP task and candidates, tiny
// timing settings.

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/device_share.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/python.hpp"
#include "gpu/quiet_host.hpp"
#include "bystander.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

kiln::task_spec task_from(const std::string& path) {
  kiln::task_spec t;
  t.path = path;
  t.name = fs::path{path}.stem().string();
  t.source = slurp(path);
  return t;
}

std::string candidate(const std::string& name) {
  return slurp(KILN_SOURCE_DIR "/tests/candidates/" + name);
}

const std::string mlp_task = KILN_SOURCE_DIR "/tests/tasks/cpu/1_MLP.py";

struct retime_fixture {
  std::string dir;
  kiln::eval_settings s;
  retime_fixture() {
    dir = std::string{KILN_TEST_TMP} + "/retime/" + std::to_string(::getpid());
    fs::remove_all(dir);
    s.python = kiln::find_python("");
    s.work_dir = dir + "/work";
    s.cfg.cache_dir = dir + "/cache";
    s.device = "cpu";
    s.cfg.cpu_threads = 1;
    s.cfg.warmup_calls = 1;
    s.cfg.min_samples = 5;
    s.cfg.max_samples = 8;
    // The sample count ends a round, not the clock: a slow round on a busy machine would
    // otherwise stop at the floor of 3 samples.
    s.cfg.max_timing_s = 5;
    s.cfg.timeout_s = 60;
    s.cfg.pool_size = 1;
  }
  ~retime_fixture() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

} // namespace

TEST_CASE_METHOD(retime_fixture, "re-timing times reference and candidates in every round") {
  s.cfg.timing_statistic = "per_call"; // samples, not batches, pooled over the rounds
  kiln::evaluation_engine engine{s};
  kiln::retime_job job;
  job.task = task_from(mlp_task);
  job.candidate_ids = {"1_MLP#good", "1_MLP#crash", "1_MLP#good2"};
  job.codes = {candidate("mlp_good.py"), candidate("mlp_crash.py"), candidate("mlp_good.py")};
  job.rounds = 2;
  auto r = engine.retime(job, 5);
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.device == "cpu");
  REQUIRE(r.candidates.size() == 3);
  REQUIRE(r.speedups.size() == 3);
  // Two rounds of 5 to 8 samples each, pooled.
  CHECK(r.reference.n >= 10);
  CHECK(r.reference.n <= 16);
  CHECK(r.reference.median_ms > 0);
  CHECK(r.reference.p10_ms <= r.reference.median_ms);
  CHECK(r.reference.p90_ms >= r.reference.median_ms);
  CHECK(r.candidates[0].n >= 10);
  CHECK(r.speedups[0] == Approx(r.reference.median_ms / r.candidates[0].median_ms));
  CHECK(r.speedups[2] > 0);
  // The crashing candidate: no timings, speedup 0, and the others are still measured.
  CHECK(r.speedups[1] == 0);
  CHECK(r.candidates[1].n == 0);
  // Re-timing never touches the reference cache: its numbers are fresh by design.
  CHECK(engine.references_timed() == 0);
  // Each of the 7 runners (the crashing candidate is not run again in round 2) started beside
  // other work (shared) and had the device to itself only from its gate on, for its timing; the
  // crashing candidate never got there.
  const auto& lock = engine.settings().share->lock;
  CHECK(lock.shared_grants() >= 7);
  CHECK(lock.exclusive_grants() == 6);
}

TEST_CASE_METHOD(retime_fixture, "a candidate that times itself past its gate gets no figure") {
  kiln::evaluation_engine engine{s};
  kiln::retime_job job;
  job.task = task_from(mlp_task);
  job.candidate_ids = {"1_MLP#bypass", "1_MLP#good"};
  job.codes = {slurp(KILN_SOURCE_DIR "/tests/candidates/integrity/gate_bypass.py"),
               candidate("mlp_good.py")};
  job.rounds = 1;
  auto r = engine.retime(job, 5);
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.speedups[0] == 0);
  CHECK(r.candidates[0].n == 0);
  CHECK(r.speedups[1] > 0);
}

TEST_CASE_METHOD(retime_fixture, "a candidate that halves its records gets no figure, even with "
                                 "one doubtful round forgiven") {
  kiln::evaluation_engine engine{s};
  kiln::retime_job job;
  job.task = task_from(KILN_SOURCE_DIR "/tests/tasks/cpu/3_Softmax.py");
  job.candidate_ids = {"3_Softmax#halves", "3_Softmax#honest"};
  job.codes = {slurp(KILN_SOURCE_DIR "/tests/candidates/integrity/patch_samples_frames.py"),
               slurp(KILN_SOURCE_DIR "/tests/security/candidates/honest.py")};
  job.rounds = 2;
  auto r = engine.retime(job, 5);
  INFO(r.error);
  REQUIRE(r.error.empty());
  // The parent's clock doubts both of its rounds: the first is left out, the second fails it.
  CHECK(r.speedups[0] == 0);
  CHECK(r.candidates[0].n == 0);
  CHECK(r.speedups[1] > 0);
}

TEST_CASE_METHOD(retime_fixture, "a reference that fails makes the whole re-timing fail") {
  kiln::evaluation_engine engine{s};
  kiln::retime_job job;
  job.task = task_from(KILN_SOURCE_DIR "/tests/candidates/bad_task.py");
  job.candidate_ids = {"bad#1"};
  job.codes = {candidate("mlp_good.py")};
  job.rounds = 3;
  auto r = engine.retime(job, 5);
  CHECK_THAT(r.error, Catch::StartsWith("reference failed in round 1: "));
  CHECK(r.speedups == std::vector<double>{0});
}

TEST_CASE_METHOD(retime_fixture, "a re-timing job whose ids and codes disagree is refused") {
  kiln::evaluation_engine engine{s};
  kiln::retime_job job;
  job.task = task_from(mlp_task);
  job.candidate_ids = {"a", "b"};
  job.codes = {candidate("mlp_good.py")};
  auto r = engine.retime(job, 1);
  CHECK(r.error == "retime job with 2 candidate ids but 1 codes");
  CHECK(r.speedups.size() == 2);
}

TEST_CASE_METHOD(retime_fixture, "re-timing keeps the host quiet: a bystander build is frozen "
                                 "while a runner is timed, and runs again after") {
  auto build = kiln_test::start_bystander_build();
  REQUIRE(build.running());
  kiln::evaluation_engine engine{s};
  kiln::retime_job job;
  job.task = task_from(mlp_task);
  job.candidate_ids = {"1_MLP#good"};
  job.codes = {candidate("mlp_good.py")};
  job.rounds = 1;
  auto r = engine.retime(job, 5);
  INFO(r.error);
  REQUIRE(r.error.empty());
  CHECK(r.speedups[0] > 0);
  // Frozen for the two timings (from each gate's go to the runner's end), and not any more.
  CHECK(kiln::frozen_seconds(build.pid()) > 0);
  CHECK_FALSE(kiln::group_frozen(build.pid()));
}

TEST_CASE_METHOD(retime_fixture, "a baseline's reference timing keeps the host quiet for its "
                                 "whole run") {
  auto build = kiln_test::start_bystander_build();
  REQUIRE(build.running());
  kiln::evaluation_engine engine{s};
  auto r = engine.time_reference(task_from(mlp_task), "");
  INFO(r.reason);
  REQUIRE(r.ok);
  CHECK(kiln::frozen_seconds(build.pid()) > 0);
  CHECK_FALSE(kiln::group_frozen(build.pid()));
}
