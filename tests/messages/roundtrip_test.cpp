// Every message type survives CAF's binary serializer unchanged: the precondition for crossing
// a network connection to a remote evaluator.

#include <catch2/catch.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>

#include "messages/actors.hpp"
#include "messages/error.hpp"
#include "messages/register.hpp"

using namespace kiln;

namespace {

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  fixture() {
    add_message_types(cfg);
    cfg.set("scheduler.max-threads", 1);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  template <class T> T roundtrip(T x) {
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    REQUIRE(!sink(x));
    T y;
    caf::binary_deserializer source{*sys, buf};
    REQUIRE(!source(y));
    return y;
  }
};

task_spec sample_task() {
  return {"1_MLP", "/tmp/1_MLP.py", "class Model:\n  pass\n\u00e9"};
}

verdict sample_verdict() {
  verdict v;
  v.status = verdict_status::incorrect;
  v.reason = "output 0 differs";
  v.stdout_tail = "out";
  v.stderr_tail = "err\n";
  v.max_abs_diff = {0.5, 1e-9};
  v.max_rel_diff = {0.25};
  v.candidate = {1.5, 1.4, 1.7, 1.55, 40};
  v.reference = {3.0, 2.9, 3.1, 3.0, 30};
  v.speedup = 2.0;
  v.wall_ms = 1234.5;
  v.device = "cuda:1";
  return v;
}

runner_facts sample_facts() {
  runner_facts f;
  f.device = "cuda:0";
  f.device_name = "NVIDIA H200";
  f.python = "/usr/bin/python3";
  f.python_version = "3.12";
  f.torch_version = "2.11.0";
  f.cuda = true;
  f.triton = true;
  f.compile = true;
  f.cpu_threads = 16;
  f.multiprocessors = 132;
  f.memory_bytes = 150'000'000'000;
  f.capability = "9.0";
  return f;
}

} // namespace

#define CHECK_ROUNDTRIP(value)                                                                     \
  do {                                                                                             \
    auto original = (value);                                                                       \
    auto copy = roundtrip(original);                                                               \
    CHECK(caf::deep_to_string(copy) == caf::deep_to_string(original));                             \
  } while (false)

TEST_CASE_METHOD(fixture, "every message type round-trips through the binary serializer") {
  CHECK_ROUNDTRIP(sample_task());
  llm_request req{"1_MLP", "optimizer", prompt_kind::fix, "sys", "prompt", 0.7, 1000, {"###"}, 42};
  CHECK_ROUNDTRIP(req);
  CHECK_ROUNDTRIP((llm_reply{"text", "main", "m", 10, 20, 5, 0.25, 12.5}));
  CHECK_ROUNDTRIP(sample_facts());
  CHECK_ROUNDTRIP((timing_stats{1, 0.5, 2, 1.1, 7}));
  CHECK_ROUNDTRIP(sample_verdict());
  CHECK_ROUNDTRIP((eval_job{sample_task(), "1_MLP#3", "class ModelNew: pass", 30}));
  agent_request ar;
  ar.task = sample_task();
  ar.kind = prompt_kind::improve;
  ar.idea = "fuse";
  ar.code = "code";
  ar.last = sample_verdict();
  ar.facts = sample_facts();
  ar.max_ideas = 7;
  ar.seed = 99;
  CHECK_ROUNDTRIP(ar);
  CHECK_ROUNDTRIP((agent_reply{{"a", "b"}, "code", "main", "raw", 1, 2, 0.5}));
  CHECK_ROUNDTRIP((query_grant{false, 3, 40, "1_MLP would pass usd_per_task", true}));
  CHECK_ROUNDTRIP((budget_event{"1_MLP", "optimizer", "refuse", 40, 40}));
  CHECK_ROUNDTRIP((llm_call_record{req, llm_reply{"t", "p", "m", 1, 2, 3, 4, 5}, "err"}));
  candidate_record cr;
  cr.task = "1_MLP";
  cr.seq = 4;
  cr.parent = 2;
  cr.role = "error_fixer";
  cr.phase = 1;
  cr.attempt = 2;
  cr.idea = "idea";
  cr.code = "code";
  cr.evaluated = true;
  cr.result = sample_verdict();
  CHECK_ROUNDTRIP(cr);
  CHECK_ROUNDTRIP((task_progress{"1_MLP", 5, 40, 4, 3, 1.5, 2}));
  task_result tr;
  tr.task = "1_MLP";
  tr.queries = 40;
  tr.evaluations = 44;
  tr.correct = 12;
  tr.found = true;
  tr.best_speedup = 1.4;
  tr.best_runtime_ms = 0.02;
  tr.reference_ms = 0.03;
  tr.best_code = "code";
  tr.best_seq = 17;
  tr.stop_reason = "budget";
  CHECK_ROUNDTRIP(tr);
  CHECK_ROUNDTRIP((llm_totals{80, 1000, 2000, 1.5}));
  CHECK_ROUNDTRIP((run_summary{"pike-b", true, llm_totals{1, 2, 3, 4}, {tr, tr}}));
}

TEST_CASE_METHOD(fixture, "enums keep their value across the wire") {
  for (auto s :
       {verdict_status::correct, verdict_status::incorrect, verdict_status::rejected,
        verdict_status::compile_error, verdict_status::runtime_error, verdict_status::timeout}) {
    verdict v;
    v.status = s;
    CHECK(roundtrip(v).status == s);
    verdict_status parsed;
    REQUIRE(from_string(to_string(s), parsed));
    CHECK(parsed == s);
  }
  for (auto k :
       {prompt_kind::brainstorm, prompt_kind::optimize, prompt_kind::improve, prompt_kind::fix}) {
    llm_request r;
    r.kind = k;
    CHECK(roundtrip(r).kind == k);
  }
  verdict_status ignored;
  CHECK_FALSE(from_string("fine", ignored));
}

TEST_CASE("kiln errors render their code and context") {
  auto err = make_error(ec::budget_exhausted, std::string{"1_MLP used 40 of 40 queries"});
  CHECK(is(err, ec::budget_exhausted));
  CHECK_FALSE(is(err, ec::stopped));
  CHECK(render(err) == "budget_exhausted: 1_MLP used 40 of 40 queries");
  CHECK(render(caf::error{}) == "none");
}
