// The lanes of one device: the device lock's rules with real threads, and two engines sharing a
// device that evaluate at once (CPU runners stand in for a GPU's: the procedure is the same).

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/build_cache.hpp"
#include "gpu/device_share.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/python.hpp"
#include "serving_wrapper.hpp"

namespace fs = std::filesystem;

namespace {

/// Spins (yielding, no sleep) until `reached()`. `done`, when given, ends the wait too: a thread
/// that never gets there must not hang the test. False after 300 s (longer than any runner's
/// timeout here), so that the caller still lets go of its holds and joins its threads.
bool spin_until(const std::function<bool()>& reached, const std::atomic<bool>* done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!reached()) {
    if ((done != nullptr && *done) || std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::yield();
  }
  return true;
}

/// Until `lock` has `n` waiters: the other thread is then blocked in the lock, not merely about
/// to call it. True also when `done` ended the wait (the callers' checks then say why).
bool until_waiting(const kiln::device_lock& lock, int n, const std::atomic<bool>* done = nullptr) {
  return spin_until([&] { return lock.waiting() >= n; }, done) || (done != nullptr && *done);
}

/// How many files called `name` lie under `dir`.
int files_named(const std::string& dir, const std::string& name) {
  int n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it{dir, ec}, end; !ec && it != end; it.increment(ec))
    n += it->path().filename() == name ? 1 : 0;
  return n;
}

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// The settings of a lane on the CPU with a fresh cache (no reference timing from an earlier
/// run) and a share of its own, under `root`.
kiln::eval_settings lane_settings(const std::string& root) {
  fs::remove_all(root);
  kiln::eval_settings s;
  s.python = kiln::find_python("");
  s.work_dir = root + "/work";
  s.device = "cpu";
  s.cfg.min_samples = 5;
  s.cfg.max_timing_s = 0.3;
  s.cfg.timeout_s = 180; // two engines' imports and facts on two loaded cores
  s.cache_dir = root + "/cache";
  kiln::prepare_cache_dir(s.cache_dir);
  s.share = std::make_shared<kiln::device_share>(s.cache_dir);
  return s;
}

/// The settings of the device's second lane: the same share, a work folder of its own.
kiln::eval_settings second_lane(kiln::eval_settings first) {
  first.work_dir += "-lane1";
  return first;
}

/// mlp_good.py against 1_MLP, as candidate `id`.
kiln::eval_job mlp_job(const std::string& id) {
  const std::string task_path = KILN_SOURCE_DIR "/tests/tasks/cpu/1_MLP.py";
  kiln::eval_job job;
  job.task.path = task_path;
  job.task.name = "1_MLP";
  job.task.source = slurp(task_path);
  job.candidate_id = id;
  job.code = slurp(KILN_SOURCE_DIR "/tests/candidates/mlp_good.py");
  return job;
}

} // namespace

TEST_CASE("untimed work waits while a timing holds the device", "[lanes]") {
  kiln::device_lock lock;
  lock.lock();
  std::atomic<bool> got{false};
  std::thread reader{[&] {
    lock.lock_shared();
    got = true;
    lock.unlock_shared();
  }};
  CHECK(until_waiting(lock, 1));
  CHECK_FALSE(got);
  CHECK(lock.shared_holders() == 0);
  lock.unlock();
  reader.join();
  CHECK(got);
  CHECK(lock.shared_grants() == 1);
  CHECK(lock.exclusive_grants() == 1);
}

TEST_CASE("a waiting timing goes before untimed work that arrives after it", "[lanes]") {
  kiln::device_lock lock;
  lock.lock_shared(); // untimed work already running: it may finish
  CHECK(lock.shared_holders() == 1);
  std::atomic<int> order{0};
  std::atomic<int> writer_at{0};
  std::atomic<int> reader_at{0};
  std::thread writer{[&] {
    lock.lock();
    writer_at = ++order;
    CHECK(lock.shared_holders() == 0);
    lock.unlock();
  }};
  CHECK(until_waiting(lock, 1));
  std::thread reader{[&] {
    lock.lock_shared(); // would fit beside the running work, but a timing is waiting
    reader_at = ++order;
    lock.unlock_shared();
  }};
  CHECK(until_waiting(lock, 2));
  CHECK(order == 0);
  lock.unlock_shared();
  writer.join();
  reader.join();
  CHECK(writer_at == 1);
  CHECK(reader_at == 2);
}

TEST_CASE("a hold moves between shared and exclusive and lets go when it ends", "[lanes]") {
  kiln::device_lock lock;
  {
    kiln::device_hold a{lock};
    kiln::device_hold b{lock};
    a.shared();
    b.shared();
    CHECK(lock.shared_holders() == 2);
    a.shared(); // already held: nothing changes
    CHECK(lock.shared_holders() == 2);
    b.release();
    a.exclusive(); // lets go of its share first, so it never waits on itself
    CHECK(a.is_exclusive());
    CHECK(lock.exclusive_held());
    CHECK(lock.shared_holders() == 0);
  }
  CHECK_FALSE(lock.exclusive_held());
  CHECK(lock.shared_holders() == 0);
}

TEST_CASE("a GPU gets gpu_lanes lanes with one share, the CPU one", "[lanes]") {
  kiln::eval_settings s;
  s.work_dir = "/nonexistent/work-cuda:0";
  s.device = "cuda:0";
  s.cfg.gpu_lanes = 3;
  auto gpu = kiln::device_lanes(s);
  REQUIRE(gpu.size() == 3);
  CHECK(gpu[0].work_dir == s.work_dir);
  CHECK(gpu[1].work_dir == s.work_dir + "-lane1");
  CHECK(gpu[2].work_dir == s.work_dir + "-lane2");
  REQUIRE(gpu[0].share);
  CHECK(gpu[1].share == gpu[0].share);
  CHECK(gpu[2].share == gpu[0].share);
  s.device = "cpu";
  auto cpu = kiln::device_lanes(s);
  CHECK(cpu.size() == 1);
}

TEST_CASE("two lanes of one device evaluate at once, each timing its reference beside its "
          "candidate, and never time beside other work",
          "[lanes]") {
  auto root = std::string{KILN_TEST_TMP} + "/lanes/" + std::to_string(::getpid());
  auto base = lane_settings(root);
  kiln::evaluation_engine a{base};
  kiln::evaluation_engine b{second_lane(base)};
  kiln::verdict va;
  kiln::verdict vb;
  std::thread ta{[&] { va = a.evaluate(mlp_job("1_MLP#a"), 1); }};
  std::thread tb{[&] { vb = b.evaluate(mlp_job("1_MLP#b"), 2); }};
  ta.join();
  tb.join();
  INFO(va.reason << " | " << vb.reason);
  CHECK(va.status == kiln::verdict_status::correct);
  CHECK(vb.status == kiln::verdict_status::correct);
  // Each lane timed its reference in its own window, beside its own candidate.
  CHECK(a.references_timed() == 1);
  CHECK(b.references_timed() == 1);
  CHECK(va.paired);
  CHECK(vb.paired);
  // Exclusive: one window per evaluation, from the candidate's gate on; everything else shared.
  auto& lock = base.share->lock;
  CHECK(lock.exclusive_grants() == 2);
  CHECK(lock.shared_grants() >= 2);
  CHECK_FALSE(lock.exclusive_held());
  CHECK(lock.shared_holders() == 0);
  std::error_code ignored;
  fs::remove_all(root, ignored);
}

TEST_CASE("a lane that asks while another lane's health check runs waits for its outcome",
          "[lanes]") {
  auto root = std::string{KILN_TEST_TMP} + "/lanes-health/" + std::to_string(::getpid());
  fs::remove_all(root);
  fs::create_directories(root);
  // An interpreter that runs every job but the health check, which says it has started through
  // one FIFO, waits on another, then fails: the check is held open while the other lane asks.
  // The FIFOs lie in `<work_dir>/cache`, which a sandboxed runner may write.
  const auto fifos = root + "/work/cache";
  const auto started = fifos + "/started";
  const auto go = fifos + "/go";
  const auto python = root + "/python3";
  {
    std::ofstream w{python};
    w << "#!/bin/sh\n"
      << "[ \"$4\" = --serve ] || job=\"$4\"\n"
      << "[ \"$4\" = --serve ] && job=$(dd bs=65536 count=1 2>/dev/null)\n"
      << "if grep -q '\"mode\": \"health\"' \"$job\"; then\n"
      << "  echo started > " << started << "\n"
      << "  read -r line < " << go << "\n"
      << "  echo 'kiln test: the device is broken' >&2; exit 3\n"
      << "fi\n"
      << "exec " << kiln::find_python("") << " \"$1\" \"$2\" \"$3\" \"$job\"\n";
  }
  fs::permissions(python, fs::perms::owner_all);
  kiln::eval_settings base;
  base.python = python;
  base.work_dir = root + "/work";
  base.device = "cpu";
  base.cfg.pool_size = 0;
  base.share = std::make_shared<kiln::device_share>("");
  auto second = base;
  second.work_dir += "-lane1";
  kiln::evaluation_engine a{base};
  kiln::evaluation_engine b{second};
  fs::create_directories(fifos);
  REQUIRE(::mkfifo(started.c_str(), 0600) == 0);
  REQUIRE(::mkfifo(go.c_str(), 0600) == 0);
  {
    std::lock_guard<std::mutex> lock{base.share->health.mutex};
    base.share->health.suspect = true;
    base.share->health.suspect_reason = "a candidate runner ended by signal 11";
  }

  std::string from_a;
  std::thread ta{[&] { from_a = a.check_health(); }};
  {
    std::ifstream in{started}; // opens once the health runner writes: its check is under way
    std::string line;
    REQUIRE(std::getline(in, line));
  }
  std::string from_b;
  std::atomic<bool> b_done{false};
  std::thread tb{[&] {
    from_b = b.check_health();
    b_done = true;
  }};
  CHECK(until_waiting(base.share->lock, 1, &b_done));
  {
    std::ofstream out{go};
    out << "go\n";
  }
  ta.join();
  tb.join();
  CHECK(from_a.rfind("device cpu is unhealthy: health check after a candidate runner ended by "
                     "signal 11 failed",
                     0)
        == 0);
  CHECK(from_b == from_a); // not "" from a device whose check was still running
  CHECK_FALSE(b.healthy());
  std::error_code ignored;
  fs::remove_all(root, ignored);
}

TEST_CASE("a reference runs its trials beside other lanes' work and waits only to be timed",
          "[lanes]") {
  auto root = std::string{KILN_TEST_TMP} + "/lanes-ref-gate/" + std::to_string(::getpid());
  auto s = lane_settings(root);
  kiln::evaluation_engine engine{s};
  auto job = mlp_job("1_MLP#gate");

  auto& lock = s.share->lock;
  lock.lock_shared(); // another lane's untimed work
  kiln::verdict v;
  std::atomic<bool> done{false};
  std::thread lane{[&] {
    v = engine.evaluate(job, 7);
    done = true;
  }};
  CHECK(until_waiting(lock, 1, &done));
  // The lane now waits for the device whole, to time its reference: the reference's trials ran
  // beside the shared hold, their outputs are written.
  const int trials_written = files_named(s.work_dir, "out_0.pt");
  lock.unlock_shared();
  lane.join();
  CHECK(trials_written == 1);
  INFO(v.reason);
  CHECK(v.status == kiln::verdict_status::correct);
  CHECK(engine.references_timed() == 1);
  std::error_code ignored;
  fs::remove_all(root, ignored);
}

TEST_CASE("a gate reached after another lane's failed health check times nothing", "[lanes]") {
  auto root = std::string{KILN_TEST_TMP} + "/lanes-gate-health/" + std::to_string(::getpid());
  auto s = lane_settings(root);
  kiln::evaluation_engine engine{s};
  auto& lock = s.share->lock;
  lock.lock_shared(); // another lane's work, which ends with a failed health check
  kiln::verdict v;
  std::atomic<bool> done{false};
  std::thread lane{[&] {
    v = engine.evaluate(mlp_job("1_MLP#late"), 3);
    done = true;
  }};
  CHECK(until_waiting(lock, 1, &done)); // at the reference's gate
  {
    std::lock_guard<std::mutex> guard{s.share->health.mutex};
    s.share->health.healthy = false;
    s.share->health.problem = "health check after a test failed: kiln test";
  }
  lock.unlock_shared();
  lane.join();
  CHECK(v.status == kiln::verdict_status::runtime_error);
  CHECK_THAT(v.reason, Catch::StartsWith("device cpu is unhealthy: health check after a test "
                                         "failed: kiln test ("));
  CHECK(v.code == "device_unhealthy");
  CHECK(engine.references_timed() == 0);
  // Nothing cached from that device.
  std::error_code ec;
  const auto stored = fs::exists(s.cache_dir + "/reference")
                          ? std::distance(fs::directory_iterator{s.cache_dir + "/reference", ec},
                                          fs::directory_iterator{})
                          : 0;
  CHECK(stored == 0);
  std::error_code ignored;
  fs::remove_all(root, ignored);
}
