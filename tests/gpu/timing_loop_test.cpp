// The harness's timing loops (gpu/harness/kiln_timing.py) in real runner processes on the CPU:
// when sampling stops, how many input sets rotate, and PIKE's do_bench arithmetic.

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/evaluate.hpp"
#include "gpu/harness.hpp"
#include "gpu/python.hpp"
#include "gpu/runner.hpp"

namespace fs = std::filesystem;

namespace {

const std::string mlp_task = KILN_SOURCE_DIR "/tests/tasks/cpu/1_MLP.py";

/// One cold runner (no pool) timing the 1_MLP reference or `candidate_code`.
struct timing_run {
  kiln::eval_settings settings;
  std::string dir;

  explicit timing_run(const std::string& name) {
    dir = std::string{KILN_TEST_TMP} + "/timing-loop/" + name + "-" + std::to_string(::getpid());
    fs::remove_all(dir);
    fs::create_directories(dir + "/tmp");
    settings.python = kiln::find_python("");
    settings.work_dir = dir;
    settings.device = "cpu";
    settings.cfg.cpu_threads = 1;
    settings.cfg.warmup_calls = 1;
  }
  ~timing_run() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }

  kiln::runner_report run(kiln::runner_job job, const std::string& candidate_code = "") {
    kiln::runner_context ctx{settings, kiln::install_harness(dir), dir, "", "cpu", 1};
    job.mode = candidate_code.empty() ? "reference" : "candidate";
    job.task_path = mlp_task;
    if (!candidate_code.empty()) {
      job.candidate_path = dir + "/candidate.py";
      kiln::write_file(job.candidate_path, candidate_code);
    }
    job.dir = dir + "/job";
    job.device = "cpu";
    job.weight_seed = 1;
    job.seeds = {3};
    job.time = true;
    job.threads = 1;
    auto r = kiln::run_runner(ctx, job, 120);
    INFO(kiln::read_file(r.stderr_path));
    REQUIRE(kiln::judge_process(r, 120).reason.empty());
    return r;
  }
};

// Prints how many distinct input addresses it has seen, after the first (untimed) call.
const char* pointer_counter = R"(
import time
import torch
import torch.nn as nn

PAUSE_S = 0

class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.calls = 0
        self.seen = set()

    def forward(self, x):
        self.calls += 1
        if self.calls > 1:
            self.seen.add(x.data_ptr())
            print("distinct", len(self.seen), flush=True)
        if PAUSE_S:
            time.sleep(PAUSE_S)
        return x * 2
)";

int last_distinct(const std::string& stdout_path) {
  std::ifstream in{stdout_path};
  std::string word;
  int n = -1;
  while (in >> word)
    if (word == "distinct")
      in >> n;
  return n;
}

} // namespace

TEST_CASE("sampling stops at min_samples once the median's CI is within target", "[timing]") {
  timing_run t{"ci"};
  t.settings.cfg.min_samples = 6;
  t.settings.cfg.max_samples = 500;
  t.settings.cfg.max_timing_s = 60;
  t.settings.cfg.target_ci = 1e9; // any CI qualifies, even one a stalled sample widens
  auto r = t.run({});
  CHECK(r.samples_ms.size() == 6);
}

TEST_CASE("sampling runs to max_samples when the CI never gets tight enough", "[timing]") {
  timing_run t{"max"};
  t.settings.cfg.min_samples = 6;
  t.settings.cfg.max_samples = 15;
  t.settings.cfg.max_timing_s = 60;
  t.settings.cfg.target_ci = 0; // real timings never agree to the nanosecond
  auto r = t.run({});
  CHECK(r.samples_ms.size() == 15);
  for (double s : r.samples_ms)
    CHECK(s > 0);
  CHECK(std::accumulate(r.samples_ms.begin(), r.samples_ms.end(), 0.0) <= r.timing_wall_ms);
}

TEST_CASE("sampling stops at the time cap, with at least three samples", "[timing]") {
  timing_run t{"cap"};
  t.settings.cfg.min_samples = 5;
  t.settings.cfg.max_samples = 1000000;
  t.settings.cfg.max_timing_s = 0.05;
  t.settings.cfg.target_ci = 0;
  auto r = t.run({});
  CHECK(r.samples_ms.size() >= 3);
  CHECK(r.samples_ms.size() < 1000000);
  CHECK(r.timing_wall_ms < 5000);
}

TEST_CASE("timed calls rotate over the reported number of input sets", "[timing]") {
  timing_run t{"rotate"};
  t.settings.cfg.min_samples = 12;
  t.settings.cfg.max_samples = 12;
  SECTION("the harness's choice: at least two sets") {
    auto r = t.run({}, pointer_counter);
    CHECK(r.buffer_sets >= 2);
    CHECK(last_distinct(r.stdout_path) == r.buffer_sets);
  }
  SECTION("a set count asked for by the job") {
    kiln::runner_job job;
    job.buffer_sets = 5;
    auto r = t.run(job, pointer_counter);
    CHECK(r.buffer_sets == 5);
    CHECK(last_distinct(r.stdout_path) == 5);
  }
}

TEST_CASE("pike mode follows do_bench's arithmetic and times fixed inputs", "[timing]") {
  timing_run t{"pike"};
  kiln::runner_job job;
  job.pike = true;
  job.pike_rep_ms = 150;
  job.pike_warmup_ms = 30;
  // Ignored in pike mode: do_bench knows no sample limits.
  t.settings.cfg.max_samples = 3;
  t.settings.cfg.max_timing_s = 0.001;
  // Calls of a steady 2 ms (a sleep, not work): a stall of a few ms on a busy machine while
  // do_bench estimates a call from five barely moves the estimate, so the counts stay large.
  std::string steady = pointer_counter;
  steady.replace(steady.find("PAUSE_S = 0"), 11, "PAUSE_S = 0.002");
  auto r = t.run(job, steady);
  REQUIRE(r.pike_estimate_ms > 0);
  // Whole calls that fit the budgets, at least one of each.
  CHECK(r.pike_n_repeat == std::max<int64_t>(1, static_cast<int64_t>(150 / r.pike_estimate_ms)));
  CHECK(r.pike_n_warmup == std::max<int64_t>(1, static_cast<int64_t>(30 / r.pike_estimate_ms)));
  CHECK(static_cast<int64_t>(r.samples_ms.size()) == r.pike_n_repeat);
  CHECK(r.samples_ms.size() > 3);
  CHECK(r.buffer_sets == 1);
  CHECK(last_distinct(r.stdout_path) == 1); // PIKE times the same tensors every call
  // The reps fill the budget about as the estimate predicted (loose: a busy CPU is noisy, and a
  // stall of tens of ms in the estimate's 10 ms still shrinks the count that many times).
  double sum = std::accumulate(r.samples_ms.begin(), r.samples_ms.end(), 0.0);
  CHECK(sum > 150 * 0.1);
  CHECK(sum < 150 * 5);
}

TEST_CASE("on a GPU sampling lasts min_seconds even when the CI is tight early", "[timing]") {
  // The stopping rule itself, with a clock the test sets (the GPU loop is not reachable on CI).
  timing_run t{"window"};
  kiln::install_harness(t.dir);
  auto script = t.dir + "/window.py";
  kiln::write_file(script, R"PY(
import sys
sys.path.insert(0, sys.argv[1])
import kiln_timing as kt
tight = [1.0] * 20
def at(seconds):
    return lambda: int(seconds * 1e9)
# CI tight, min_samples met, but only 0.1 s of the 0.3 s window: go on.
assert not kt._enough(tight, 0, 10, 4000, 2e9, 0.01, at(0.1), 0.3e9)
# The window is over: stop.
assert kt._enough(tight, 0, 10, 4000, 2e9, 0.01, at(0.31), 0.3e9)
# max_samples does not end it inside the window (a short kernel reaches it in milliseconds),
# only after; the time cap does.
assert not kt._enough(tight, 0, 10, 20, 2e9, 0.01, at(0.1), 0.3e9)
assert kt._enough(tight, 0, 10, 20, 2e9, 0.01, at(0.31), 0.3e9)
assert kt._enough(tight[:3], 0, 10, 4000, 0.05e9, 0.01, at(0.06), 0.3e9)
# Without a window (the CPU) a tight CI stops at once.
assert kt._enough(tight, 0, 10, 4000, 2e9, 0.01, at(0.1))
print("ok")
)PY");
  kiln::process_options o;
  o.argv = {t.settings.python, "-I", "-B", script, t.dir};
  o.stdout_path = t.dir + "/window.out";
  o.stderr_path = t.dir + "/window.err";
  o.timeout_s = 60;
  auto r = kiln::run_process(o);
  INFO(kiln::read_file(o.stderr_path));
  CHECK(r.exit_code == 0);
  CHECK(kiln::read_file(o.stdout_path) == "ok\n");
}
