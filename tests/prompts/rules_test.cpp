// The offline `rules` provider: it answers the rendered prompts like a model would, offers only
// what the device and the task allow, and its candidates are real programs that match the
// reference (checked by running them with /usr/bin/python3).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "prompts/extract.hpp"
#include "prompts/render.hpp"
#include "prompts/rules.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// Stand-ins, used only when the bundled task folder is missing from the checkout.
const char* toy_conv_task = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 3, 16, 16)]


def get_init_inputs():
    return [8]
)";

const char* toy_linear_task = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        y = torch.tanh(self.fc(x))
        return y, y.amax(dim=1)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32]
)";

// Always part of the real check: hazards for the rewrites that edit the graph (inplace_elementwise
// above all): F.relu with its flag, an intermediate read twice, a view, a parameter and an input
// under elementwise ops, broadcasting into a smaller tensor, an integer result promoted to float,
// and a tuple output.
const char* edge_task = R"(import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.act = nn.ReLU()

    def forward(self, x, idx):
        y = self.fc(x)
        r = F.relu(y, inplace=False)
        w = r.view(-1)
        s = r * 2.0
        b = torch.tanh(self.fc.bias)
        c = b + s
        d = torch.sigmoid(x)
        e = (c * 0.5).clamp(-1.0, 1.0)
        q = torch.mul(idx, 3)
        f = q * 0.25
        m = torch.exp(-e) + w.view_as(e) + self.act(e - 0.1)
        return m, d, f


def get_inputs():
    return [torch.randn(16, 32), torch.randint(0, 5, (16, 32))]


def get_init_inputs():
    return [32]
)";

struct task_file {
  std::string name;
  std::string path;
  std::string source;
};

std::string read_file(const fs::path& p) {
  std::ifstream in{p};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path tmp_dir(const std::string& name) {
  auto dir = fs::path{KILN_TEST_TMP} / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// The bundled CPU tasks, or two toy tasks written to the scratch folder when they are absent.
std::vector<task_file> tasks() {
  std::vector<task_file> out;
  auto dir = fs::path{KILN_SOURCE_DIR} / "tests" / "tasks" / "cpu";
  if (fs::is_directory(dir))
    for (auto& e : fs::directory_iterator{dir})
      if (e.path().extension() == ".py")
        out.push_back({e.path().stem().string(), e.path().string(), read_file(e.path())});
  if (out.empty()) {
    auto toy = tmp_dir("rules-toy-tasks");
    for (auto [name, src] : {std::pair{"1_ToyConvBn", toy_conv_task},
                             std::pair{"2_ToyLinearTuple", toy_linear_task}}) {
      auto p = toy / (std::string{name} + ".py");
      std::ofstream{p} << src;
      out.push_back({name, p.string(), src});
    }
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return out;
}

runner_facts cpu_facts() {
  runner_facts f;
  f.device = "cpu";
  f.device_name = "test CPU";
  f.torch_version = "1.13.0";
  f.cpu_threads = 2;
  return f;
}

runner_facts cuda_facts() {
  runner_facts f;
  f.device = "cuda:0";
  f.device_name = "NVIDIA H200";
  f.torch_version = "2.11.0";
  f.cuda = true;
  f.triton = true;
  f.compile = true;
  f.cpu_threads = 16;
  f.multiprocessors = 132;
  f.capability = "9.0";
  return f;
}

agent_request request(const task_file& t, prompt_kind kind, const runner_facts& facts) {
  agent_request req;
  req.task = {t.name, t.path, t.source};
  req.kind = kind;
  req.facts = facts;
  return req;
}

std::string ask(const agent_request& req) {
  llm_request q;
  q.task = req.task.name;
  q.kind = req.kind;
  q.seed = req.seed;
  q.prompt = render_request(req);
  return rules_answer(q);
}

std::vector<std::string> brainstorm(const task_file& t, const runner_facts& facts,
                                    int max_ideas = 10, uint64_t seed = 0) {
  auto req = request(t, prompt_kind::brainstorm, facts);
  req.max_ideas = max_ideas;
  req.seed = seed;
  return extract_ideas(ask(req), static_cast<size_t>(max_ideas));
}

std::string idea_name(const std::string& idea) {
  return idea.substr(0, idea.find(':'));
}

std::string marker(const std::string& code) {
  auto at = code.find("# kiln-rules: ");
  if (at == std::string::npos)
    return {};
  at += 14;
  return code.substr(at, code.find('\n', at) - at);
}

std::string optimize(const task_file& t, const runner_facts& facts, const std::string& idea) {
  auto req = request(t, prompt_kind::optimize, facts);
  req.idea = idea;
  auto code = extract_code(ask(req));
  REQUIRE(code);
  return *code;
}

std::string follow_up(const task_file& t, const runner_facts& facts, prompt_kind kind,
                      const std::string& code, uint64_t seed) {
  auto req = request(t, kind, facts);
  req.code = code;
  req.seed = seed;
  if (kind == prompt_kind::fix) {
    req.last.status = verdict_status::runtime_error;
    req.last.reason = "exception in forward";
  }
  auto out = extract_code(ask(req));
  REQUIRE(out);
  return *out;
}

bool offered(const std::vector<std::string>& ideas, const std::string& name) {
  return std::any_of(ideas.begin(), ideas.end(), [&](auto& i) { return idea_name(i) == name; });
}

std::string run(const std::string& cmd, int& status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    status = -1;
    return out;
  }
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  status = pclose(p);
  return out;
}

/// The set of rewrites in a marker, as a canonical label: `b+a` and `a+b` are one program.
std::string canonical(const std::string& m) {
  std::vector<std::string> names;
  std::stringstream ss{m};
  std::string n;
  while (std::getline(ss, n, '+'))
    names.push_back(n);
  std::sort(names.begin(), names.end());
  std::string out;
  for (auto& x : names)
    out += (out.empty() ? "" : "+") + x;
  return out;
}

/// Every candidate the rules would produce for a task on a device: each idea optimized, improved
/// once with several seeds, and improved with two seeds until nothing is left to add, the
/// longest then fixed once. One program per set of rewrites (the order they were added in does
/// not change the program).
std::map<std::string, std::string> candidates(const task_file& t, const runner_facts& facts) {
  std::map<std::string, std::string> by_marker;
  auto add = [&](const std::string& code) { by_marker[canonical(marker(code))] = code; };
  auto ideas = brainstorm(t, facts);
  for (auto& idea : ideas) {
    auto code = optimize(t, facts, idea);
    add(code);
    // One step with several seeds reaches each of the three pairs improve chooses among.
    for (uint64_t seed = 2; seed < 8; ++seed)
      add(follow_up(t, facts, prompt_kind::improve, code, seed));
    for (uint64_t seed : {0, 1}) {
      auto current = code;
      for (int step = 0; step < 6; ++step) {
        auto next = follow_up(t, facts, prompt_kind::improve, current, seed);
        if (marker(next) == marker(current))
          break;
        add(next);
        current = next;
      }
      add(follow_up(t, facts, prompt_kind::fix, current, seed));
    }
  }
  return by_marker;
}

/// Writes candidates and a manifest for rules_check.py; returns the manifest's path.
std::string write_manifest(const fs::path& dir, const runner_facts& facts,
                           size_t* count = nullptr) {
  auto all = tasks();
  auto edge_path = dir / "9_Edges.py";
  std::ofstream{edge_path} << edge_task;
  all.push_back({"9_Edges", edge_path.string(), edge_task});
  // Paths relative to the checkout and to the manifest, so the folder can be carried to
  // another machine and checked there.
  std::ofstream manifest{dir / "manifest.txt"};
  std::string root = std::string{KILN_SOURCE_DIR} + "/";
  size_t n = 0;
  for (auto& t : all) {
    // Tasks of the checkout by their path in it; others (the edge task) beside the manifest.
    auto task_path = t.path.rfind(root, 0) == 0 ? t.path.substr(root.size()) : t.path;
    if (t.path.rfind(dir.string(), 0) == 0)
      task_path = "@/" + fs::path{t.path}.filename().string();
    for (auto& [label, code] : candidates(t, facts)) {
      auto name = t.name + "__" + label + ".py";
      std::ofstream{dir / name} << code;
      manifest << task_path << ' ' << name << '\n';
      ++n;
    }
  }
  if (count)
    *count = n;
  return (dir / "manifest.txt").string();
}

const std::set<std::string> gpu_only = {"cuda_graph",
                                        "tf32",
                                        "half_autocast",
                                        "torch_compile",
                                        "torch_compile_reduce_overhead",
                                        "torch_compile_max_autotune"};

} // namespace

TEST_CASE("rules: brainstorm on a CPU with torch 1.13 offers only what can run there") {
  auto names = rules_rewrite_names();
  for (auto& t : tasks()) {
    INFO("task " << t.name);
    auto ideas = brainstorm(t, cpu_facts());
    REQUIRE_FALSE(ideas.empty());
    for (auto& idea : ideas) {
      auto name = idea_name(idea);
      CHECK(std::find(names.begin(), names.end(), name) != names.end());
      CHECK(gpu_only.count(name) == 0);
      CHECK(idea.size() > name.size() + 10); // a name and a sentence
    }
    bool conv_bn = t.source.find("BatchNorm2d") != std::string::npos;
    if (conv_bn) {
      // Folding is offered among the first three (jit_freeze's optimize_for_inference, which
      // also folds, measured a little faster on CPUs).
      std::vector<std::string> top;
      for (size_t i = 0; i < std::min<size_t>(3, ideas.size()); ++i)
        top.push_back(idea_name(ideas[i]));
      CHECK(std::find(top.begin(), top.end(), "conv_bn_fold") != top.end());
    } else {
      CHECK_FALSE(offered(ideas, "conv_bn_fold"));
      CHECK_FALSE(offered(ideas, "channels_last"));
    }
    if (t.name.find("RunningMean") != std::string::npos) {
      // fx tracing replays its in-place buffer update wrongly: nothing fx-based is offered.
      CHECK_FALSE(offered(ideas, "mkldnn"));
    }
  }
}

TEST_CASE("rules: brainstorm on a CUDA device with torch.compile offers GPU rewrites") {
  for (auto& t : tasks()) {
    INFO("task " << t.name);
    auto ideas = brainstorm(t, cuda_facts());
    CHECK(offered(ideas, "cuda_graph"));
    CHECK(offered(ideas, "torch_compile"));
    CHECK(offered(ideas, "torch_compile_reduce_overhead"));
    CHECK_FALSE(offered(ideas, "cpu_fuser"));
    CHECK_FALSE(offered(ideas, "mkldnn"));
  }
}

TEST_CASE("rules: brainstorm respects the number of ideas asked for and is deterministic") {
  auto t = tasks().front();
  CHECK(brainstorm(t, cuda_facts(), 2).size() == 2);
  CHECK(brainstorm(t, cuda_facts(), 10, 5) == brainstorm(t, cuda_facts(), 10, 5));
}

TEST_CASE("rules: every offered idea becomes a complete candidate") {
  for (auto facts : {cpu_facts(), cuda_facts()}) {
    for (auto& t : tasks()) {
      for (auto& idea : brainstorm(t, facts)) {
        INFO("task " << t.name << ", idea " << idea);
        auto code = optimize(t, facts, idea);
        CHECK(marker(code) == idea_name(idea));
        CHECK(code.find("class ModelNew(nn.Module):") != std::string::npos);
        // The reference stays intact inside the candidate, so Model and get_inputs remain.
        CHECK(code.find(t.source.substr(0, t.source.find_last_not_of("\n ") + 1))
              != std::string::npos);
        CHECK(code.find("torch.jit.trace") == std::string::npos);
      }
    }
  }
}

TEST_CASE("rules: an unknown idea gets the most promising rewrite") {
  auto t = tasks().front();
  auto code = optimize(t, cpu_facts(), "write a hand-tuned AVX-512 kernel");
  CHECK(marker(code) == idea_name(brainstorm(t, cpu_facts()).front()));
  // A rewrite the device cannot run is replaced the same way.
  CHECK(marker(optimize(t, cpu_facts(), "cuda_graph: replay")) != "cuda_graph");
}

TEST_CASE("rules: improve adds one compatible rewrite at a time, then stops") {
  for (auto& t : tasks()) {
    INFO("task " << t.name);
    auto code = optimize(t, cuda_facts(), "inference_mode");
    std::string previous = marker(code);
    for (int step = 0; step < 12; ++step) {
      auto next = follow_up(t, cuda_facts(), prompt_kind::improve, code, 3);
      auto m = marker(next);
      if (m == previous) {
        CHECK(next == code); // nothing left to add: the current program comes back unchanged
        break;
      }
      CHECK(m.substr(0, previous.size() + 1) == previous + "+");
      // Conflicting rewrites never meet in one program.
      CHECK_FALSE((m.find("cuda_graph") != std::string::npos
                   && m.find("torch_compile_") != std::string::npos));
      CHECK_FALSE((m.find("jit_freeze") != std::string::npos
                   && m.find("torch_compile") != std::string::npos));
      previous = m;
      code = next;
    }
  }
}

TEST_CASE("rules: fix drops the newest rewrite, down to plain inference_mode") {
  auto t = tasks().front();
  auto code = optimize(t, cuda_facts(), "tf32");
  code = follow_up(t, cuda_facts(), prompt_kind::improve, code, 0);
  auto two = marker(code);
  REQUIRE(two.find('+') != std::string::npos);
  auto fixed = follow_up(t, cuda_facts(), prompt_kind::fix, code, 0);
  CHECK(marker(fixed) == "tf32");
  CHECK(marker(follow_up(t, cuda_facts(), prompt_kind::fix, fixed, 0)) == "inference_mode");
  // A foreign program (no marker) falls back to the safe candidate too.
  auto foreign = "class ModelNew(nn.Module):\n    pass\n";
  CHECK(marker(follow_up(t, cpu_facts(), prompt_kind::fix, foreign, 0)) == "inference_mode");
}

TEST_CASE("rules: a prompt without a reference program gets prose, not code") {
  llm_request q;
  q.kind = prompt_kind::optimize;
  q.prompt = "### Idea\ncuda_graph\n";
  auto answer = rules_answer(q);
  CHECK_FALSE(answer.empty());
  CHECK_FALSE(extract_code(answer));
  q.kind = prompt_kind::brainstorm;
  CHECK(extract_ideas(rules_answer(q), 10).empty());
}

TEST_CASE("rules: candidates import and match the reference on two input seeds", "[python]") {
  // The real check: every candidate the rules can produce for the bundled CPU tasks (each idea,
  // the improve chains from it and a fix) runs in a fresh /usr/bin/python3 against its task.
  int status = 0;
  run("/usr/bin/python3 -c 'import torch' 2>/dev/null", status);
  if (status != 0) {
    WARN("/usr/bin/python3 cannot import torch; skipping the real check");
    return;
  }
  auto dir = tmp_dir("rules-check");
  size_t count = 0;
  auto manifest = write_manifest(dir, cpu_facts(), &count);
  auto script = std::string{KILN_SOURCE_DIR} + "/tests/prompts/rules_check.py";
  auto out = run("/usr/bin/python3 " + script + " " + manifest + " 2>&1", status);
  INFO(out);
  CHECK(count > 0);
  CHECK(status == 0);
  CHECK(out.find("FAIL") == std::string::npos);
}

TEST_CASE("rules: write the CUDA candidates for a device check", "[.cuda-dump]") {
  // Not run by default: writes what the rules would propose on an H200 with torch 2.x, for
  // `rules_check.py --device cuda` on a GPU machine.
  auto dir = tmp_dir("rules-cuda");
  size_t count = 0;
  write_manifest(dir, cuda_facts(), &count);
  CHECK(count > 0);
}
