// The dispatcher's stages: candidates that build extensions go through a compile worker first,
// a build failure never reaches a device, a compiler that dies does not lose its job, and an
// unhealthy device is retired while its job moves to another.

#include <catch2/catch.hpp>

#include "actors/dispatcher.hpp"
#include "fixture.hpp"
#include "messages/error.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr auto wait = std::chrono::seconds(30);

const char* extension_code = "from torch.utils.cpp_extension import load_inline\nmod = 1\n";
const char* plain_code = "import torch\nclass ModelNew: pass\n";

/// A compile worker double: fails code that contains `BROKEN`, otherwise reports a build of
/// 1234 ms; counts what it saw.
struct fake_compiler_state {
  int64_t jobs = 0;
};

caf::behavior fake_compiler(caf::stateful_actor<fake_compiler_state>* self) {
  return {
      [self](compile_atom, const eval_job& job) {
        ++self->state.jobs;
        compile_report r;
        r.wall_ms = 1234;
        r.builds = 1;
        if (job.code.find("BROKEN") != std::string::npos) {
          r.ok = false;
          r.failure.status = verdict_status::compile_error;
          r.failure.reason = "error: expected ';'";
        }
        return r;
      },
      [self](get_atom) { return self->state.jobs; },
  };
}

/// An evaluator whose device has failed its health check.
caf::behavior sick_evaluator() {
  return {
      [](eval_atom, const eval_job&) -> caf::result<verdict> {
        return make_error(ec::device_unhealthy, "cuda:1 is unhealthy: illegal memory access");
      },
      [](retime_atom, const retime_job&) -> caf::result<retime_result> {
        return make_error(ec::device_unhealthy, "cuda:1 is unhealthy");
      },
      [](facts_atom) { return runner_facts{}; },
  };
}

eval_job make_job(const std::string& id, const std::string& code) {
  eval_job job;
  job.task = bundled_task("1_MLP");
  job.candidate_id = id;
  job.code = code;
  return job;
}

int64_t jobs_of(caf::scoped_actor& self, const caf::actor& a) {
  int64_t n = -1;
  self->request(a, wait, get_atom::value)
      .receive([&](int64_t x) { n = x; }, [](caf::error& err) { FAIL(caf::to_string(err)); });
  return n;
}

} // namespace

TEST_CASE("extension builds go through a compiler, plain candidates straight to a device") {
  REQUIRE(builds_extensions(extension_code));
  REQUIRE_FALSE(builds_extensions(plain_code));
  actor_fixture f;
  caf::scoped_actor self{*f.sys};
  auto disp = f.sys->spawn(dispatcher, size_t{1});
  auto ev = f.sys->spawn(fake_evaluator, false, caf::actor{});
  auto comp = f.sys->spawn(fake_compiler);
  self->send(disp, put_atom::value, int32_t{0}, caf::actor_cast<evaluator_actor>(ev));
  self->send(disp, put_atom::value, caf::actor_cast<compiler_actor>(comp));

  self->request(disp, wait, eval_atom::value, make_job("1_MLP#1", extension_code))
      .receive(
          [](const verdict& v) {
            CHECK(v.status == verdict_status::correct);
            CHECK(v.compile_ms == 1234);
          },
          [](caf::error& err) { FAIL(caf::to_string(err)); });
  self->request(disp, wait, eval_atom::value, make_job("1_MLP#2", plain_code))
      .receive([](const verdict& v) { CHECK(v.compile_ms == 0); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  CHECK(jobs_of(self, comp) == 1);
  self->send_exit(disp, caf::exit_reason::user_shutdown);
  self->send_exit(ev, caf::exit_reason::user_shutdown);
  self->send_exit(comp, caf::exit_reason::user_shutdown);
}

TEST_CASE("a build failure is the verdict and never reaches a device") {
  actor_fixture f;
  caf::scoped_actor self{*f.sys};
  auto disp = f.sys->spawn(dispatcher, size_t{1});
  // Holding evaluator: a job that reached it would never be answered.
  auto ev = f.sys->spawn(fake_evaluator, true, caf::actor{});
  auto comp = f.sys->spawn(fake_compiler);
  self->send(disp, put_atom::value, int32_t{0}, caf::actor_cast<evaluator_actor>(ev));
  self->send(disp, put_atom::value, caf::actor_cast<compiler_actor>(comp));
  self->request(disp, wait, eval_atom::value,
                make_job("1_MLP#3", std::string{extension_code} + "# BROKEN\n"))
      .receive(
          [](const verdict& v) {
            CHECK(v.status == verdict_status::compile_error);
            CHECK(v.reason == "error: expected ';'");
            CHECK(v.compile_ms == 1234);
          },
          [](caf::error& err) { FAIL(caf::to_string(err)); });
  self->send_exit(disp, caf::exit_reason::user_shutdown);
  self->send_exit(ev, caf::exit_reason::user_shutdown);
  self->send_exit(comp, caf::exit_reason::user_shutdown);
}

TEST_CASE("a job whose compiler died is still evaluated") {
  actor_fixture f;
  caf::scoped_actor self{*f.sys};
  auto disp = f.sys->spawn(dispatcher, size_t{1});
  auto ev = f.sys->spawn(fake_evaluator, false, caf::actor{});
  auto comp = f.sys->spawn(fake_compiler);
  self->send_exit(comp, caf::exit_reason::kill);
  self->send(disp, put_atom::value, int32_t{0}, caf::actor_cast<evaluator_actor>(ev));
  self->send(disp, put_atom::value, caf::actor_cast<compiler_actor>(comp));
  self->request(disp, wait, eval_atom::value, make_job("1_MLP#4", extension_code))
      .receive([](const verdict& v) { CHECK(v.status == verdict_status::correct); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  self->send_exit(disp, caf::exit_reason::user_shutdown);
  self->send_exit(ev, caf::exit_reason::user_shutdown);
}

TEST_CASE("an unhealthy device is retired and its job moves to a healthy one") {
  actor_fixture f;
  caf::scoped_actor self{*f.sys};
  auto disp = f.sys->spawn(dispatcher, size_t{1});
  auto sick = f.sys->spawn(sick_evaluator);
  auto good = f.sys->spawn(fake_evaluator, false, caf::actor{});
  // The only device is sick: once it is retired, nothing can run the job.
  self->send(disp, put_atom::value, int32_t{0}, caf::actor_cast<evaluator_actor>(sick));
  self->request(disp, wait, eval_atom::value, make_job("1_MLP#5", plain_code))
      .receive([](const verdict&) { FAIL("a retired device's job has nowhere to go"); },
               [](caf::error& err) { CHECK(is(err, ec::unavailable)); });
  // With a healthy device beside it, the job lands there and the sick slot stays retired.
  auto disp2 = f.sys->spawn(dispatcher, size_t{2});
  self->send(disp2, put_atom::value, int32_t{0}, caf::actor_cast<evaluator_actor>(sick));
  self->send(disp2, put_atom::value, int32_t{1}, caf::actor_cast<evaluator_actor>(good));
  for (int i = 0; i < 3; ++i)
    self->request(disp2, wait, eval_atom::value,
                  make_job("1_MLP#" + std::to_string(6 + i), plain_code))
        .receive([](const verdict& v) { CHECK(v.status == verdict_status::correct); },
                 [](caf::error& err) { FAIL(caf::to_string(err)); });
  for (auto& a :
       {caf::actor_cast<caf::actor>(disp), caf::actor_cast<caf::actor>(disp2), sick, good})
    self->send_exit(a, caf::exit_reason::user_shutdown);
}

namespace {

/// Holds every job until `release`, then answers at once; remembers the order jobs came in.
struct order_state {
  std::vector<std::string> seen;
  bool hold = true;
  std::vector<std::pair<eval_job, caf::response_promise>> held;
};

caf::behavior order_evaluator(caf::stateful_actor<order_state>* self) {
  return {
      [self](eval_atom, const eval_job& job) -> caf::result<verdict> {
        self->state.seen.push_back(job.candidate_id);
        if (!self->state.hold)
          return fake_verdict(job);
        self->state.held.emplace_back(job, self->make_response_promise());
        return caf::delegated<verdict>{};
      },
      [](retime_atom, const retime_job&) { return retime_result{}; },
      [](facts_atom) { return runner_facts{}; },
      [self](release_atom) {
        self->state.hold = false;
        for (auto& [job, rp] : self->state.held)
          rp.deliver(fake_verdict(job));
        self->state.held.clear();
      },
      [self](get_atom) { return self->state.seen; },
  };
}

} // namespace

TEST_CASE("tasks take turns at the devices: one task's backlog does not hold another's job") {
  fair_queue<int> q;
  q.push_back("a", 1);
  q.push_back("a", 2);
  q.push_back("b", 10);
  q.push_back("a", 3);
  q.push_front("b", 9); // put back: goes next
  std::vector<int> order;
  while (!q.empty())
    order.push_back(q.pop());
  CHECK(order == std::vector<int>{9, 1, 10, 2, 3});

  actor_fixture f;
  caf::scoped_actor self{*f.sys};
  auto disp = f.sys->spawn(dispatcher, size_t{1});
  auto ev = f.sys->spawn(order_evaluator);
  self->send(disp, put_atom::value, int32_t{0}, caf::actor_cast<evaluator_actor>(ev));
  auto sync = [&] { // the dispatcher answers facts itself once it has them
    self->request(disp, wait, facts_atom::value)
        .receive([](const runner_facts&) {}, [](caf::error& err) { FAIL(caf::to_string(err)); });
  };
  sync();
  std::vector<eval_job> jobs;
  for (int i = 1; i <= 5; ++i)
    jobs.push_back(make_job("1_MLP#" + std::to_string(i), plain_code));
  auto other = make_job("2_Other#1", plain_code);
  other.task.name = "2_Other";
  jobs.push_back(other);
  for (auto& job : jobs)
    self->send(disp, eval_atom::value, job);
  sync(); // every job above is queued now: the first is held by the evaluator
  self->send(ev, release_atom::value);
  for (size_t i = 0; i < jobs.size(); ++i)
    self->receive([](const verdict&) {}, [](caf::error& err) { FAIL(caf::to_string(err)); });
  std::vector<std::string> seen;
  self->request(ev, wait, get_atom::value)
      .receive([&](std::vector<std::string>& s) { seen = std::move(s); },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  // First in, first out would put 2_Other's job last, behind all of 1_MLP's.
  CHECK(seen
        == std::vector<std::string>{"1_MLP#1", "1_MLP#2", "2_Other#1", "1_MLP#3", "1_MLP#4",
                                    "1_MLP#5"});
  self->send_exit(disp, caf::exit_reason::user_shutdown);
  self->send_exit(ev, caf::exit_reason::user_shutdown);
}
