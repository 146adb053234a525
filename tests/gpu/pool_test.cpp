// The runner pool and what the engine does with runners that end badly: real interpreters of
// the embedded harness on the CPU, identified by their pids (never by timing or sleeping).

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <functional>
#include <iterator>
#include <memory>
#include <thread>
#include <sstream>
#include <string>
#include <chrono>
#include <vector>

#include "gpu/evaluate.hpp"
#include "gpu/harness.hpp"
#include "gpu/python.hpp"
#include "gpu/runner.hpp"
#include "gpu/runner_pool.hpp"
#include "gpu/sandbox.hpp"
#include "serving_wrapper.hpp"

namespace fs = std::filesystem;
using kiln::verdict_status;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::string fresh_dir(const std::string& name) {
  auto dir = std::string{KILN_TEST_TMP} + "/pool/" + std::to_string(::getpid()) + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

kiln::eval_settings test_settings(const std::string& work_dir) {
  kiln::eval_settings s;
  s.python = kiln::find_python("");
  s.work_dir = work_dir;
  s.device = "cpu";
  s.cfg.min_samples = 5;
  s.cfg.max_timing_s = 0.3;
  s.cfg.timeout_s = 60;
  s.cfg.pool_size = 2;
  return s;
}

/// A pool as an engine for `settings` makes it.
std::unique_ptr<kiln::runner_pool> make_pool(const kiln::eval_settings& s, size_t size) {
  fs::create_directories(s.work_dir);
  auto harness = kiln::install_harness(s.work_dir);
  return std::make_unique<kiln::runner_pool>(kiln::runner_pool_launch(s, harness), size);
}

/// Runs a facts job on `r` and returns its result.json.
std::string run_facts(kiln::runner_process& r) {
  kiln::runner_job job;
  job.mode = "facts";
  job.dir = r.dir();
  job.device = "cpu";
  job.threads = 1;
  auto path = r.dir() + "/job.json";
  kiln::write_file(path, kiln::job_json(job, kiln::evaluator_config{}));
  auto proc = r.run(path, 60);
  INFO(slurp(r.stderr_path()));
  CHECK(proc.started);
  CHECK(proc.exit_code == 0);
  return slurp(r.dir() + "/result.json");
}

bool exists_process(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

kiln::verdict evaluate(kiln::evaluation_engine& engine, const std::string& candidate,
                       double timeout_s = 0, const std::string& task = "1_MLP") {
  kiln::eval_job job;
  job.task.path = KILN_SOURCE_DIR "/tests/tasks/cpu/" + task + ".py";
  job.task.name = task;
  job.task.source = slurp(job.task.path);
  job.candidate_id = task + "#" + candidate;
  job.code = slurp(KILN_SOURCE_DIR "/tests/candidates/" + candidate);
  job.timeout_s = timeout_s;
  auto v = engine.evaluate(job, 5);
  INFO(candidate << ": " << kiln::to_string(v.status) << " (" << v.reason << ")");
  return v;
}

} // namespace

TEST_CASE("a pooled runner is started ahead and runs one job", "[pool]") {
  auto s = test_settings(fresh_dir("one"));
  auto pool = make_pool(s, 1);
  CHECK(pool->idle() == 0); // nothing starts before the first refill
  pool->refill();
  REQUIRE(pool->idle() == 1);
  const pid_t warm = pool->idle_pids().front();

  std::string error;
  auto r = pool->take(error);
  REQUIRE(r);
  CHECK(r->pid() == warm);
  CHECK(r->warm());
  CHECK(r->ready());        // CPU: take() waited until its import was over
  CHECK(pool->idle() == 0); // the CPU pool refills between evaluations, not on take
  auto result = run_facts(*r);
  CHECK(result.find("\"ok\": true") != std::string::npos);
  CHECK_FALSE(exists_process(warm)); // one job per process: it is gone
}

TEST_CASE("every job gets a fresh process, the warm ones first", "[pool]") {
  auto s = test_settings(fresh_dir("fresh"));
  auto pool = make_pool(s, 2);
  pool->refill();
  auto before = pool->idle_pids();
  REQUIRE(before.size() == 2);
  std::string error;
  auto a = pool->take(error);
  auto b = pool->take(error);
  auto c = pool->take(error); // the pool is empty: a cold one
  REQUIRE((a && b && c));
  CHECK(a->pid() == before[0]);
  CHECK(b->pid() == before[1]);
  CHECK_FALSE(c->warm());
  CHECK(c->pid() != a->pid());
  CHECK(c->pid() != b->pid());
  CHECK(a->dir() != b->dir());
  CHECK(run_facts(*c).find("\"ok\": true") != std::string::npos);
}

TEST_CASE("a runner that died while idle is replaced", "[pool]") {
  auto s = test_settings(fresh_dir("died"));
  auto pool = make_pool(s, 1);
  pool->refill();
  const pid_t doomed = pool->idle_pids().front();
  REQUIRE(::kill(doomed, SIGKILL) == 0);
  std::string error;
  auto r = pool->take(error);
  REQUIRE(r);
  CHECK(r->pid() != doomed);
  CHECK(run_facts(*r).find("\"ok\": true") != std::string::npos);
}

TEST_CASE("destroying the pool kills its idle runners and removes their folders", "[pool]") {
  auto s = test_settings(fresh_dir("destroy"));
  auto pool = make_pool(s, 2);
  pool->refill();
  auto pids = pool->idle_pids();
  REQUIRE(pids.size() == 2);
  for (pid_t pid : pids)
    CHECK(exists_process(pid));
  pool.reset();
  for (pid_t pid : pids)
    CHECK_FALSE(exists_process(pid)); // killed and reaped, not left as zombies
  int runner_dirs = 0;
  for (auto& e : fs::directory_iterator{s.work_dir})
    if (e.path().filename().string().rfind("r", 0) == 0)
      ++runner_dirs;
  CHECK(runner_dirs == 0);
}

TEST_CASE("an evaluation runs in the engine's warm runners and refills them after", "[pool]") {
  auto s = test_settings(fresh_dir("engine"));
  kiln::evaluation_engine engine{s};
  auto warm = engine.pool().idle_pids();
  REQUIRE(warm.size() == 2);
  auto v = evaluate(engine, "mlp_good.py");
  CHECK(v.status == verdict_status::correct);
  // Reference and candidate took the two warm runners; two new ones wait for the next one.
  for (pid_t pid : warm)
    CHECK_FALSE(exists_process(pid));
  auto next = engine.pool().idle_pids();
  CHECK(next.size() == 2);
  for (pid_t pid : next)
    CHECK(std::find(warm.begin(), warm.end(), pid) == warm.end());
  CHECK(engine.healthy());
}

TEST_CASE("the engine survives a crash, a hang and memory exhaustion", "[pool][health]") {
  auto s = test_settings(fresh_dir("survive"));
  s.cfg.memory_limit_gb = 2;
  kiln::evaluation_engine engine{s};

  auto crash = evaluate(engine, "mlp_signal.py");
  CHECK(crash.status == verdict_status::runtime_error);
  CHECK(crash.reason.find("signal 11") != std::string::npos);

  auto hang = evaluate(engine, "mlp_hang.py", 3);
  CHECK(hang.status == verdict_status::timeout);

  auto oom = evaluate(engine, "mlp_oom.py");
  INFO(oom.stderr_tail);
  CHECK(oom.status == verdict_status::runtime_error);
  CHECK((oom.reason.find("memory") != std::string::npos
         || oom.reason.find("MemoryError") != std::string::npos));

  // Each bad ending was followed by a health check that passed.
  auto good = evaluate(engine, "mlp_good.py");
  CHECK(good.status == verdict_status::correct);
  CHECK(engine.healthy());
  CHECK(engine.health_problem().empty());
}

TEST_CASE("a failed health check marks the device unhealthy and stops evaluations",
          "[pool][health]") {
  auto dir = fresh_dir("unhealthy");
  // An interpreter that is fine for every job but the health check. It logs every start, so
  // the case can see that an unhealthy device starts no runner.
  auto python = dir + "/python3";
  // In `<work_dir>/cache`, which a sandboxed runner may write (elsewhere Landlock refuses).
  auto starts = dir + "/work/cache/starts.log";
  kiln_test::write_serving_wrapper(python,
                                   "if grep -q '\"mode\": \"health\"' \"$job\"; then\n"
                                   "  echo 'kiln test: the device is broken' >&2; exit 3\n"
                                   "fi\n",
                                   "echo start >> " + starts + "\n");
  auto s = test_settings(dir + "/work");
  s.python = python;
  s.cfg.pool_size = 0; // the wrapper reads its job line at once: start runners cold
  kiln::evaluation_engine engine{s};

  auto good = evaluate(engine, "mlp_good.py");
  REQUIRE(good.status == verdict_status::correct); // no crash yet: no health check
  CHECK(engine.healthy());

  auto crash = evaluate(engine, "mlp_signal.py");
  CHECK(crash.status == verdict_status::runtime_error);

  auto count_starts = [&] {
    std::istringstream lines{slurp(starts)};
    int n = 0;
    for (std::string line; std::getline(lines, line);)
      ++n;
    return n;
  };
  auto v = evaluate(engine, "mlp_good.py");
  CHECK(v.status == verdict_status::runtime_error);
  CHECK(v.reason.rfind("device cpu is unhealthy: ", 0) == 0);
  CHECK(v.reason.find("signal 11") != std::string::npos);
  CHECK(v.reason.find("the device is broken") != std::string::npos);
  CHECK_FALSE(engine.healthy());
  CHECK_THAT(engine.health_problem(), Catch::Contains("exited with code 3"));

  const int started = count_starts();
  REQUIRE(started > 0); // the log works: a start would be seen
  auto again = evaluate(engine, "mlp_good.py");
  CHECK(again.reason == v.reason);
  CHECK(count_starts() == started);
}

TEST_CASE("a pooled runner asks at the gate and hears the parent's answer") {
  auto dir = fresh_dir("gate");
  auto s = test_settings(dir + "/work");
  fs::create_directories(s.work_dir);
  // A stand-in for the harness that only speaks the control protocol: ready, the job's path,
  // `trials`, then it writes down what it was told (or `eof`) next to the job.
  auto script = dir + "/gate_harness.py";
  std::ofstream{script} << R"PY(
import os, sys
try:
    os.write(0, b"ready\n")
except OSError:
    pass  # the job may have been sent (and the socket closed) before this
line = b""
while not line.endswith(b"\n"):
    line += os.read(0, 4096)
job = line.decode().strip()
answer = b""
try:
    os.write(0, b"trials\n")
    while not answer.endswith(b"\n"):
        chunk = os.read(0, 64)
        if not chunk:
            raise OSError("closed")
        answer += chunk
except OSError:
    answer = b"eof\n"
with open(os.path.join(os.path.dirname(job), "answer.txt"), "wb") as f:
    f.write(answer)
)PY";
  kiln::runner_pool pool{kiln::runner_pool_launch(s, script), 1};
  auto run = [&](std::function<bool()> gate, double timeout_s = 30) {
    std::string error;
    auto runner = pool.take(error);
    REQUIRE(runner);
    auto job = runner->dir() + "/job.json";
    std::ofstream{job} << "{}";
    runner->keep_dir();
    std::function<std::string(const std::string&)> answer;
    if (gate)
      answer = [&gate](const std::string& message) {
        return std::string{message == "trials" && gate() ? "time" : "stop"};
      };
    auto r = runner->run(job, timeout_s, 2, answer);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.timed_out);
    return slurp(fs::path(job).parent_path() / "answer.txt");
  };
  int asked = 0;
  CHECK(run([&] {
          ++asked;
          return false;
        })
        == "stop\n");
  CHECK(run([&] {
          ++asked;
          return true;
        })
        == "time\n");
  CHECK(asked == 2);
  CHECK(run({}) == "eof\n"); // no gate: the socket is closed after the job's path
  // The parent's time at the gate is not the runner's: a gate slower than the runner's whole
  // timeout (the device busy with another lane's timing) does not time it out.
  CHECK(run(
            [&] {
              std::this_thread::sleep_for(std::chrono::milliseconds(2500));
              return true;
            },
            2.0)
        == "time\n");
}

TEST_CASE("a pool resized to none starts no runner once its evaluation is done") {
  // What a one-shot `kiln eval` does: the runners warming at the start are all it takes.
  auto dir = fresh_dir("oneshot");
  kiln::evaluation_engine engine{test_settings(dir + "/work")};
  REQUIRE(engine.pool().size() > 0);
  engine.pool().resize(0);
  auto v = evaluate(engine, "mlp_good.py");
  CHECK(v.status == verdict_status::correct);
  CHECK(engine.pool().idle() == 0);
}

TEST_CASE("runners get TMPDIR and the torch, Triton and Inductor folders in their own tmp",
          "[pool][tmp]") {
  auto env = kiln::runner_env("/usr/bin/python3", "/w/r1", "/tmp", "", 2);
  auto has = [&](const std::string& var) {
    return std::find(env.begin(), env.end(), var) != env.end();
  };
  CHECK(has("HOME=/w/r1"));
  CHECK(has("TMPDIR=/tmp"));
  CHECK(has("TORCH_EXTENSIONS_DIR=/tmp/torch_extensions"));
  CHECK(has("TRITON_CACHE_DIR=/tmp/triton"));
  CHECK(has("TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor"));
  // Without a private /tmp (here: no sandbox) the pool names the folder by its real path.
  auto s = test_settings(fresh_dir("tmpdir"));
  s.cfg.sandbox = "off";
  auto pool = make_pool(s, 1);
  pool->refill();
  REQUIRE(pool->idle() == 1);
  std::string environ = slurp("/proc/" + std::to_string(pool->idle_pids().front()) + "/environ");
  std::string error;
  auto r = pool->take(error);
  REQUIRE(r);
  CHECK(environ.find(std::string{"TMPDIR="} + r->dir() + "/tmp" + '\0') != std::string::npos);
  CHECK(fs::is_directory(r->dir() + "/tmp"));
}

TEST_CASE("a candidate's /tmp and /dev/shm are its own and leave nothing on the host",
          "[pool][tmp]") {
  if (!kiln::probe_sandbox().private_tmp) {
    WARN("no private /tmp here: " << kiln::probe_sandbox().description());
    return;
  }
  // What tests/candidates/tmp_private.py writes; left over only by a run without the sandbox.
  const std::string probe = "/tmp/kiln_private_tmp_probe.txt";
  const std::string shm = "/dev/shm/kiln_private_shm_probe";
  fs::remove(probe);
  fs::remove(shm);
  kiln::evaluation_engine engine{test_settings(fresh_dir("tmp"))};
  for (int round = 0; round < 2; ++round) {
    // The second candidate runs in another runner: the first one's files are not in its /tmp.
    auto v = evaluate(engine, "tmp_private.py", 0, "3_Softmax");
    INFO(v.reason << "\nstdout: " << v.stdout_tail << "\nstderr: " << v.stderr_tail);
    CHECK(v.status == verdict_status::correct);
    CHECK_THAT(v.stdout_tail, Catch::Contains("TMPDIR=/tmp tempfile=/tmp/"));
    CHECK_THAT(v.stdout_tail, Catch::Contains("/tmp held []"));
  }
  CHECK_FALSE(fs::exists(probe));
  CHECK_FALSE(fs::exists(shm));
}
