// Messages cross a real CAF io connection between two processes: a child publishes an
// evaluator and an agent over TCP on 127.0.0.1, the parent talks to them through typed handles.

#include <catch2/catch.hpp>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "messages/actors.hpp"
#include "messages/register.hpp"

using namespace kiln;

namespace {

evaluator_actor::behavior_type echo_evaluator() {
  return {
      [](eval_atom, const eval_job& job) {
        verdict v;
        v.status = verdict_status::correct;
        v.reason = job.candidate_id + ":" + job.task.source;
        v.max_abs_diff = {static_cast<double>(job.code.size())};
        v.candidate.median_ms = job.timeout_s;
        v.device = "remote";
        return v;
      },
      [](retime_atom, const retime_job& job) {
        retime_result r;
        r.device = "remote";
        r.reference.median_ms = job.rounds;
        r.candidates.resize(job.codes.size());
        r.speedups.assign(job.candidate_ids.size(), 1.5);
        return r;
      },
      [](facts_atom) {
        runner_facts f;
        f.device = "cuda:7";
        f.torch_version = "2.11.0";
        f.cuda = true;
        return f;
      },
  };
}

agent_actor::behavior_type echo_agent() {
  return {
      [](ask_atom, const agent_request& req) {
        agent_reply r;
        r.ideas = {req.idea, req.task.name};
        r.code = req.code + "#" + std::to_string(req.seed);
        r.profile = to_string(req.kind);
        return r;
      },
  };
}

void make_config(caf::actor_system_config& cfg) {
  add_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.load<caf::io::middleman>();
}

/// The child: publishes both actors, writes their ports to `out`, and lives until `in` closes.
[[noreturn]] void serve(int out, int in) {
  {
    caf::actor_system_config cfg;
    make_config(cfg);
    caf::actor_system sys{cfg};
    auto ev = sys.spawn(echo_evaluator);
    auto ag = sys.spawn(echo_agent);
    auto p1 = sys.middleman().publish(ev, 0, "127.0.0.1");
    auto p2 = sys.middleman().publish(ag, 0, "127.0.0.1");
    uint16_t ports[2] = {p1 ? *p1 : uint16_t{0}, p2 ? *p2 : uint16_t{0}};
    if (write(out, ports, sizeof ports) != sizeof ports)
      _exit(3);
    char c;
    while (read(in, &c, 1) > 0) {
    }
    caf::anon_send_exit(ev, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(ag, caf::exit_reason::user_shutdown);
    sys.middleman().unpublish(ev, ports[0]);
    sys.middleman().unpublish(ag, ports[1]);
  }
  _exit(0);
}

} // namespace

TEST_CASE("typed requests cross a CAF io connection between processes") {
  int up[2], down[2];
  REQUIRE(pipe(up) == 0);
  REQUIRE(pipe(down) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(up[0]);
    close(down[1]);
    serve(up[1], down[0]);
  }
  close(up[1]);
  close(down[0]);
  uint16_t ports[2] = {0, 0};
  REQUIRE(read(up[0], ports, sizeof ports) == sizeof ports);
  REQUIRE(ports[0] != 0);
  REQUIRE(ports[1] != 0);
  {
    caf::actor_system_config cfg;
    make_config(cfg);
    caf::actor_system sys{cfg};
    auto ev = sys.middleman().remote_actor<evaluator_actor>("127.0.0.1", ports[0]);
    REQUIRE(ev);
    auto ag = sys.middleman().remote_actor<agent_actor>("127.0.0.1", ports[1]);
    REQUIRE(ag);
    caf::scoped_actor self{sys};
    eval_job job{{"1_MLP", "/t/1_MLP.py", "src"}, "1_MLP#2", "class ModelNew: pass", 12.5};
    self->request(*ev, std::chrono::seconds(10), eval_atom::value, job)
        .receive(
            [](const verdict& v) {
              CHECK(v.status == verdict_status::correct);
              CHECK(v.reason == "1_MLP#2:src");
              CHECK(v.max_abs_diff == std::vector<double>{20});
              CHECK(v.candidate.median_ms == 12.5);
              CHECK(v.device == "remote");
            },
            [](caf::error& err) { FAIL(caf::to_string(err)); });
    retime_job rj{{"1_MLP", "/t/1_MLP.py", "src"}, {"1_MLP#2", "1_MLP#5"}, {"a", "b"}, 4};
    self->request(*ev, std::chrono::seconds(10), retime_atom::value, rj)
        .receive(
            [](const retime_result& r) {
              CHECK(r.device == "remote");
              CHECK(r.reference.median_ms == 4);
              CHECK(r.candidates.size() == 2);
              CHECK(r.speedups == std::vector<double>{1.5, 1.5});
            },
            [](caf::error& err) { FAIL(caf::to_string(err)); });
    self->request(*ev, std::chrono::seconds(10), facts_atom::value)
        .receive([](const runner_facts& f) { CHECK(f.device == "cuda:7"); },
                 [](caf::error& err) { FAIL(caf::to_string(err)); });
    agent_request req;
    req.task.name = "2_Conv";
    req.kind = prompt_kind::fix;
    req.idea = "fold";
    req.code = "x";
    req.seed = 5;
    self->request(*ag, std::chrono::seconds(10), ask_atom::value, req)
        .receive(
            [](const agent_reply& r) {
              CHECK(r.ideas == std::vector<std::string>{"fold", "2_Conv"});
              CHECK(r.code == "x#5");
              CHECK(r.profile == "fix");
            },
            [](caf::error& err) { FAIL(caf::to_string(err)); });
  }
  close(down[1]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
