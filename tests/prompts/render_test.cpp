// Rendering prompts: slots filled from an agent request, the built-in templates and the fixed
// markers that the rules provider reads back.

#include <catch2/catch.hpp>

#include <stdexcept>

#include "prompts/render.hpp"
#include "prompts/templates.hpp"

using namespace kiln;

namespace {

agent_request full_request(prompt_kind kind) {
  agent_request req;
  req.kind = kind;
  req.task.name = "9_Toy";
  req.task.path = "/tasks/9_Toy.py";
  req.task.source = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return x * 2\n";
  req.idea = "cuda_graph: capture the forward once and replay it";
  req.code = "class ModelNew(nn.Module):\n    pass\n";
  req.last.status = verdict_status::incorrect;
  req.last.reason = "output 0 differs";
  req.last.stdout_tail = "hello from stdout";
  req.last.stderr_tail = "Traceback: boom";
  req.last.max_abs_diff = {0.31, 2.0};
  req.last.max_rel_diff = {0.02, 0.5};
  req.facts.device = "cuda:0";
  req.facts.device_name = "NVIDIA H200";
  req.facts.torch_version = "2.11.0";
  req.facts.cuda = true;
  req.facts.triton = true;
  req.facts.compile = true;
  req.facts.cpu_threads = 16;
  req.facts.multiprocessors = 132;
  req.facts.memory_bytes = int64_t{141} * 1024 * 1024 * 1024;
  req.facts.capability = "9.0";
  req.facts.memory_bandwidth_gbs = 4915.2;
  req.facts.l2_bytes = int64_t{60} * 1024 * 1024;
  req.max_ideas = 7;
  req.current = {req.code, 0.5, 2.0};
  req.inspirations = {{"class ModelNew: pass  # inspiration one\n", 0.25, 4.0},
                      {"class ModelNew: pass  # a failed one\n", 0, 0}};
  return req;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

} // namespace

TEST_CASE("render_template fills every slot once, in a single pass") {
  auto out = render_template("a {{x}} b {{ y }} c {{x}}", {{"x", "1"}, {"y", "{{x}}"}});
  // The value of y contains slot syntax; it must arrive verbatim, not be expanded again.
  CHECK(out == "a 1 b {{x}} c 1");
}

TEST_CASE("render_template rejects a slot it has no value for") {
  try {
    render_template("hello {{nobody}}", {{"x", "1"}});
    FAIL("expected std::invalid_argument");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string{e.what()} == "template uses unknown slot 'nobody'");
  }
}

TEST_CASE("render_template leaves braces that are not slots alone") {
  // A C++ initialiser or a Python dict-in-f-string in a custom template is not a slot.
  auto out = render_template("int a{{1, 2}}; {{ }} {{x-y}} {{{x}}} {x}", {{"x", "v"}});
  CHECK(out == "int a{{1, 2}}; {{ }} {{x-y}} {v} {x}");
}

TEST_CASE("template_slots lists names in order of first use") {
  auto names = template_slots("{{b}} {{ a }} {{b}} {{c}} {{1x}} {{a}}");
  CHECK(names == std::vector<std::string>{"b", "a", "c"});
}

TEST_CASE("request_slots renders the verdict and the device facts") {
  auto slots = request_slots(full_request(prompt_kind::fix));
  CHECK(slots.at("status") == "incorrect");
  CHECK(slots.at("diffs")
        == "output 0: max abs diff 0.31, max rel diff 0.02\n"
           "output 1: max abs diff 2, max rel diff 0.5");
  CHECK(slots.at("device_facts")
        == "- device: cuda:0 (NVIDIA H200)\n- torch: 2.11.0\n- cuda: yes\n- triton: yes\n"
           "- torch.compile: yes\n- threads: 16\n- multiprocessors: 132\n- memory: 141.0 GiB\n"
           "- memory bandwidth (peak): 4915 GB/s\n- L2 cache: 60 MiB\n- capability: 9.0");
  CHECK(slots.at("max_ideas") == "7");
  CHECK(slots.at("task") == "9_Toy");
  CHECK(slots.at("example_candidate").find("class ModelNew") != std::string::npos);
}

TEST_CASE("request_slots on a CPU runner and an empty verdict") {
  agent_request req;
  req.facts.device = "cpu";
  req.facts.torch_version = "1.13.0";
  req.facts.cpu_threads = 2;
  auto slots = request_slots(req);
  CHECK(slots.at("device_facts")
        == "- device: cpu\n- torch: 1.13.0\n- cuda: no\n- triton: no\n- torch.compile: no\n"
           "- threads: 2");
  CHECK(slots.at("diffs") == "(none)");
  CHECK(slots.at("stderr_tail") == "(empty)");
}

TEST_CASE("every built-in template renders and carries the fixed markers") {
  for (auto kind : {prompt_kind::brainstorm, prompt_kind::optimize, prompt_kind::improve,
                    prompt_kind::fix, prompt_kind::fix_correctness, prompt_kind::crossover}) {
    INFO("kind " << to_string(kind));
    auto req = full_request(kind);
    auto text = render_request(req);
    CHECK_FALSE(has(text, "{{"));
    CHECK(has(text, "### Reference program\n```python\n" + req.task.source));
    CHECK(has(text, "### Device\n- device: cuda:0 (NVIDIA H200)\n- torch: 2.11.0\n- cuda: yes\n"
                    "- triton: yes\n- torch.compile: yes\n- threads: 16\n"));
    if (kind == prompt_kind::brainstorm) {
      CHECK(has(text, "at most 7"));
      continue;
    }
    CHECK(has(text, "class ModelNew"));
    CHECK(has(text, "load_inline"));
    CHECK(has(text, "```python"));
    // The worked example sits under its own heading, before the task's reference program, so
    // the first python block after `### Reference program` is always the task.
    auto example = text.find("### Example");
    REQUIRE(example != std::string::npos);
    CHECK(example < text.find("### Reference program"));
    CHECK(has(text, std::string{example_reference()}));
    if (kind == prompt_kind::optimize)
      CHECK(has(text, "### Idea\n" + req.idea + "\n"));
    if (kind == prompt_kind::improve || kind == prompt_kind::fix
        || kind == prompt_kind::fix_correctness)
      CHECK(has(text, "### Current program\n```python\n" + req.code));
    if (kind == prompt_kind::crossover) {
      CHECK(has(text, "### Current program\nMeasured: 0.5 ms per call, 2x the reference's speed\n"
                      "```python\n"
                          + req.code));
      CHECK(has(text, "#### Program 1: 0.25 ms per call, 4x the reference's speed\n```python\n"
                      "class ModelNew: pass  # inspiration one\n```"));
      CHECK(has(text, "#### Program 2: not measured"));
      // The rules provider reads the current program, not an inspiration, as the one to improve.
      CHECK(text.find("### Current program") < text.find("inspiration one"));
    }
    // PIKE's two fix prompts: a build error, crash or timeout is shown the tails of the
    // program's output; wrong outputs are shown the differences per output.
    if (kind == prompt_kind::fix) {
      CHECK(has(text, "- status: incorrect"));
      CHECK(has(text, "- timed out: no"));
      CHECK(has(text, "hello from stdout"));
      CHECK(has(text, "Traceback: boom"));
      CHECK_FALSE(has(text, "max abs diff"));
    }
    if (kind == prompt_kind::fix_correctness) {
      CHECK(has(text, "- status: incorrect"));
      CHECK(has(text, "output 0: max abs diff 0.31, max rel diff 0.02"));
      CHECK_FALSE(has(text, "hello from stdout"));
      CHECK_FALSE(has(text, "Traceback: boom"));
    }
  }
}

TEST_CASE("a failed verdict picks PIKE's fix prompt for it") {
  CHECK(fix_kind_for(verdict_status::incorrect) == prompt_kind::fix_correctness);
  for (auto s : {verdict_status::compile_error, verdict_status::runtime_error,
                 verdict_status::timeout, verdict_status::rejected})
    CHECK(fix_kind_for(s) == prompt_kind::fix);
  auto req = full_request(prompt_kind::fix);
  req.last.status = verdict_status::timeout;
  CHECK(has(render_request(req), "- timed out: yes"));
}

TEST_CASE("an override template is used instead of the built-in one") {
  auto req = full_request(prompt_kind::optimize);
  CHECK(render_request(req, "Do {{idea}} for {{task}}")
        == "Do cuda_graph: capture the forward once and replay it for 9_Toy");
  CHECK_THROWS_AS(render_request(req, "{{nope}}"), std::invalid_argument);
}

TEST_CASE("a default request renders with every built-in template") {
  // The agent validates custom templates by rendering an empty request; the built-ins must
  // pass the same check.
  for (auto kind :
       {prompt_kind::brainstorm, prompt_kind::optimize, prompt_kind::improve, prompt_kind::fix,
        prompt_kind::fix_correctness, prompt_kind::crossover, prompt_kind::review}) {
    agent_request req;
    req.kind = kind;
    CHECK_NOTHROW(render_request(req));
  }
}
