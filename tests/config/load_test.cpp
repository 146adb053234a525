// The TOML loader as a user meets it: real files on disk, loaded through `load_config`, and the
// exact messages a user reads when a file is wrong.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.hpp"
#include "config/defaults.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

fs::path tmp_dir() {
  auto dir = fs::path{KILN_TEST_TMP} / "config";
  fs::create_directories(dir);
  return dir;
}

/// Writes `text` to `name` under the test folder and returns its path.
std::string write(const std::string& name, const std::string& text) {
  auto path = tmp_dir() / name;
  fs::create_directories(path.parent_path());
  std::ofstream{path} << text;
  return path.string();
}

/// The message of the config_error that loading `path` raises.
std::string error_of(const std::string& path) {
  try {
    load_config(path);
  } catch (const config_error& e) {
    return e.what();
  }
  FAIL("loaded " << path << " without an error");
  return {};
}

std::string normal(const fs::path& p) {
  return fs::absolute(p).lexically_normal().string();
}

const std::string source_dir = KILN_SOURCE_DIR;

} // namespace

TEST_CASE("quickstart.toml runs the bundled CPU tasks offline") {
  auto path = source_dir + "/config/quickstart.toml";
  auto cfg = load_config(path);
  CHECK(cfg.path == path);
  REQUIRE(cfg.run.tasks.size() == 1);
  CHECK(cfg.run.tasks[0] == normal(source_dir + "/tests/tasks/cpu"));
  CHECK(fs::is_directory(cfg.run.tasks[0]));
  CHECK(cfg.run.out == normal(source_dir + "/runs/quickstart"));
  CHECK(cfg.run.seed == 1);
  CHECK(cfg.run.parallel_tasks == 2);
  CHECK(cfg.budget.queries_per_task == 12);
  CHECK(cfg.evaluator.devices == std::vector<std::string>{"cpu"});
  CHECK(cfg.evaluator.trials == 3);
  CHECK(cfg.evaluator.max_timing_s == 1.0);
  CHECK(cfg.evaluator.atol == defaults::atol); // unset keys keep their defaults
  REQUIRE(cfg.llm.size() == 1);
  CHECK(cfg.llm.at("rules").provider == "rules");
  CHECK(cfg.llm.at("rules").name == "rules");
  REQUIRE(cfg.agents.size() == 3);
  for (auto& [name, agent] : cfg.agents) {
    CHECK(agent.name == name);
    CHECK(agent.llm == "rules");
  }
  CHECK(cfg.agents.at("error_fixer").max_attempts == 2);
  CHECK(cfg.agents.at("optimizer").max_attempts == defaults::max_attempts);
  CHECK(cfg.strategy.kind == "pike-b");
  CHECK(cfg.strategy.max_ideas == 6);
  CHECK(cfg.strategy.phases == 3);
  CHECK(cfg.strategy.parents == 2);
  CHECK(cfg.strategy.parallel_candidates == 4);
}

TEST_CASE("reference.toml loads and documents exactly the defaults") {
  auto cfg = load_config(source_dir + "/config/reference.toml");
  // Its only departures from the defaults are the paths that make it runnable from the repo.
  CHECK(cfg.run.tasks == std::vector<std::string>{normal(source_dir + "/tests/tasks/cpu")});
  CHECK(cfg.run.out == normal(source_dir + "/runs/reference"));

  const config d;
  CHECK(cfg.run.seed == d.run.seed);
  CHECK(cfg.run.parallel_tasks == d.run.parallel_tasks);
  CHECK(cfg.run.log_level == d.run.log_level);
  CHECK(cfg.budget.queries_per_task == d.budget.queries_per_task);
  CHECK(cfg.budget.usd_total == d.budget.usd_total);
  CHECK(cfg.budget.usd_per_task == d.budget.usd_per_task);
  auto& e = cfg.evaluator;
  auto& de = d.evaluator;
  CHECK(e.devices == de.devices);
  CHECK(e.python == de.python);
  CHECK(e.timeout_s == de.timeout_s);
  CHECK(e.trials == de.trials);
  CHECK(e.atol == de.atol);
  CHECK(e.rtol == de.rtol);
  CHECK(e.cpu_threads == de.cpu_threads);
  CHECK(e.warmup_calls == de.warmup_calls);
  CHECK(e.min_samples == de.min_samples);
  CHECK(e.max_samples == de.max_samples);
  CHECK(e.max_timing_s == de.max_timing_s);
  CHECK(e.target_ci == de.target_ci);
  CHECK(e.mode == de.mode);
  CHECK(e.device_lock_wait_s == de.device_lock_wait_s);
  CHECK(e.quiet_host == de.quiet_host);
  CHECK(e.timer_cores == de.timer_cores);

  REQUIRE(cfg.llm.size() == 1);
  const llm_profile_config dp;
  auto& p = cfg.llm.at("main");
  CHECK(p.provider == "rules");
  CHECK(p.system_prompt == dp.system_prompt);
  CHECK(p.temperature == dp.temperature);
  CHECK(p.max_tokens == dp.max_tokens);
  CHECK(p.timeout_s == dp.timeout_s);

  const agent_config da;
  REQUIRE(cfg.agents.size() == 3);
  for (auto& [name, agent] : cfg.agents) {
    CHECK(agent.llm == "main");
    CHECK(agent.template_path == da.template_path);
    CHECK(agent.max_attempts == da.max_attempts);
  }

  auto& s = cfg.strategy;
  auto& ds = d.strategy;
  CHECK(s.kind == ds.kind);
  CHECK(s.max_ideas == ds.max_ideas);
  CHECK(s.phases == ds.phases);
  CHECK(s.parents == ds.parents);
  CHECK(s.parallel_candidates == ds.parallel_candidates);
  CHECK(s.brainstormer == ds.brainstormer);
  CHECK(s.optimizer == ds.optimizer);
  CHECK(s.error_fixer == ds.error_fixer);
}

TEST_CASE("reference.toml's commented HTTP profile is valid once uncommented") {
  std::ifstream in{source_dir + "/config/reference.toml"};
  std::string text, line;
  bool in_example = false;
  while (std::getline(in, line)) {
    if (line == "# [llm.remote]")
      in_example = true;
    else if (line.rfind("# ", 0) != 0)
      in_example = false;
    text += (in_example ? line.substr(2) : line) + "\n";
  }
  auto path = write("reference-http.toml", text);
  auto cfg = load_config(path);
  REQUIRE(cfg.llm.count("remote") == 1);
  auto& p = cfg.llm.at("remote");
  CHECK(p.provider == "openai");
  CHECK(p.base_url == "http://127.0.0.1:8080/v1");
  CHECK(p.api_key_env == "KILN_KEY");
}

TEST_CASE("an empty file gets every default and an offline rules profile") {
  auto cfg = load_config(write("empty.toml", ""));
  CHECK(cfg.run.tasks.empty());
  CHECK(cfg.run.out == defaults::out_dir); // unset: stays relative to where kiln runs
  CHECK(cfg.budget.queries_per_task == defaults::queries_per_task);
  CHECK(cfg.evaluator.devices == std::vector<std::string>{defaults::devices});
  REQUIRE(cfg.llm.size() == 1);
  CHECK(cfg.llm.at("main").provider == "rules");
  REQUIRE(cfg.agents.size() == 3);
  for (auto role : {"brainstormer", "optimizer", "error_fixer"}) {
    REQUIRE(cfg.agents.count(role) == 1);
    CHECK(cfg.agents.at(role).llm == "main");
    CHECK(cfg.agents.at(role).max_attempts == defaults::max_attempts);
  }
}

TEST_CASE("a single declared profile serves the roles when no agents are written") {
  auto cfg = load_config(write("one-profile.toml", "[llm.local]\n"
                                                   "provider = \"openai\"\n"
                                                   "base_url = \"http://127.0.0.1:8000/v1\"\n"
                                                   "model = \"qwen\"\n"));
  CHECK(cfg.llm.size() == 1);
  REQUIRE(cfg.agents.size() == 3);
  CHECK(cfg.agents.at("optimizer").llm == "local");
}

TEST_CASE("a syntax error names file, line and column") {
  auto path = write("syntax.toml", "[run]\nseed = 1\nout = \"unterminated\n");
  auto what = error_of(path);
  INFO(what);
  // The column is where toml++ gave up: the line break inside the string.
  CHECK(what.rfind(path + ":3:20: ", 0) == 0);
  // `file:line:column: description`, the description being toml++'s own.
  auto rest = what.substr(path.size() + 3);
  auto colon = rest.find(": ");
  REQUIRE(colon != std::string::npos);
  CHECK(std::stoi(rest.substr(0, colon)) > 0);
  CHECK(rest.size() > colon + 2);
}

TEST_CASE("a key defined twice is a syntax error at the second one") {
  auto path = write("twice.toml", "[run]\nseed = 1\nseed = 2\n");
  CHECK(error_of(path).rfind(path + ":3:", 0) == 0);
}

TEST_CASE("an unknown key is named with its table and place") {
  auto path = write("unknown-key.toml", "[evaluator]\ntrials = 3\nfoo = 1\n");
  CHECK(error_of(path) == path + ":3:1: unknown key 'foo' in [evaluator]");

  path = write("typo.toml", "[evaluator]\n  atoll = 0.1\n");
  CHECK(error_of(path) == path + ":2:3: unknown key 'atoll' in [evaluator] (did you mean 'atol'?)");

  path = write("unknown-llm-key.toml", "[llm.main]\nprovider = \"rules\"\nmodle = \"x\"\n");
  CHECK(error_of(path) == path + ":3:1: unknown key 'modle' in [llm.main] (did you mean 'model'?)");
}

TEST_CASE("an unknown table is named with its place") {
  auto path = write("unknown-table.toml", "[run]\nseed = 2\n\n[evalutor]\ntrials = 3\n");
  CHECK(error_of(path) == path + ":4:2: unknown table [evalutor] (did you mean [evaluator]?)");

  path = write("top-level.toml", "seed = 2\n");
  CHECK(error_of(path) == path + ":1:1: unknown key 'seed' outside any table");

  path = write("not-a-table.toml", "budget = 3\n");
  CHECK(error_of(path) == path + ":1:1: [budget] must be a table, not an integer");
}

TEST_CASE("a value of the wrong type is named with its table and place") {
  auto path = write("type.toml", "[budget]\nqueries_per_task = \"40\"\n");
  CHECK(error_of(path)
        == path + ":2:20: [budget] queries_per_task must be an integer, not a string");

  path = write("float-for-int.toml", "[evaluator]\ntrials = 3.0\n");
  CHECK(error_of(path) == path + ":2:10: [evaluator] trials must be an integer, not a float");

  path = write("string-for-float.toml", "[evaluator]\natol = \"small\"\n");
  CHECK(error_of(path) == path + ":2:8: [evaluator] atol must be a number, not a string");

  path = write("tasks-type.toml", "[run]\ntasks = [\"a\", 3]\n");
  CHECK(error_of(path) == path + ":2:15: [run] tasks must hold strings, not an integer");
}

TEST_CASE("integers are accepted where a number is expected") {
  auto cfg = load_config(write("int-for-float.toml", "[budget]\nusd_total = 12\n"
                                                     "[evaluator]\natol = 0\ntimeout_s = 60\n"));
  CHECK(cfg.budget.usd_total == 12.0);
  CHECK(cfg.evaluator.atol == 0.0);
  CHECK(cfg.evaluator.timeout_s == 60.0);
}

TEST_CASE("a value out of range names its bounds") {
  auto path = write("range-budget.toml", "[budget]\nqueries_per_task = 0\n");
  CHECK(error_of(path) == path + ":2:20: [budget] queries_per_task must be >= 1");

  path = write("range-atol.toml", "[evaluator]\natol = -0.5\n");
  CHECK(error_of(path) == path + ":2:8: [evaluator] atol must be >= 0");

  path = write("range-trials.toml", "[evaluator]\ntrials = 101\n");
  CHECK(error_of(path) == path + ":2:10: [evaluator] trials must be between 1 and 100");

  path = write("range-timeout.toml", "[evaluator]\ntimeout_s = 0\n");
  CHECK(error_of(path) == path + ":2:13: [evaluator] timeout_s must be > 0 and <= 86400");

  path = write("range-nan.toml", "[llm.main]\nprovider = \"rules\"\ntemperature = nan\n");
  CHECK(error_of(path) == path + ":3:15: [llm.main] temperature must be a finite number");

  path = write("range-seed.toml", "[run]\nseed = -1\n");
  CHECK(error_of(path) == path + ":2:8: [run] seed must be >= 0");
}

TEST_CASE("quiet_host is true or false, on by default") {
  CHECK(load_config(write("quiet-none.toml", "")).evaluator.quiet_host == defaults::quiet_host);
  CHECK(defaults::quiet_host);
  CHECK_FALSE(load_config(write("quiet-off.toml", "[evaluator]\nquiet_host = false\n"))
                  .evaluator.quiet_host);
  CHECK(
      load_config(write("quiet-on.toml", "[evaluator]\nquiet_host = true\n")).evaluator.quiet_host);
  auto path = write("quiet-str.toml", "[evaluator]\nquiet_host = \"yes\"\n");
  CHECK(error_of(path)
        == path + ":2:14: [evaluator] quiet_host must be true or false, not a string");
  path = write("quiet-int.toml", "[evaluator]\nquiet_host = 1\n");
  CHECK(error_of(path)
        == path + ":2:14: [evaluator] quiet_host must be true or false, not an integer");
}

TEST_CASE("timer_cores is an integer from 0 (no pinning) to 64") {
  CHECK(load_config(write("timer-none.toml", "")).evaluator.timer_cores == defaults::timer_cores);
  CHECK(load_config(write("timer-0.toml", "[evaluator]\ntimer_cores = 0\n")).evaluator.timer_cores
        == 0);
  CHECK(load_config(write("timer-4.toml", "[evaluator]\ntimer_cores = 4\n")).evaluator.timer_cores
        == 4);
  auto path = write("timer-neg.toml", "[evaluator]\ntimer_cores = -1\n");
  CHECK(error_of(path) == path + ":2:15: [evaluator] timer_cores must be between 0 and 64");
  path = write("timer-big.toml", "[evaluator]\ntimer_cores = 65\n");
  CHECK(error_of(path) == path + ":2:15: [evaluator] timer_cores must be between 0 and 64");
  path = write("timer-float.toml", "[evaluator]\ntimer_cores = 1.5\n");
  CHECK(error_of(path) == path + ":2:15: [evaluator] timer_cores must be an integer, not a float");
}

TEST_CASE("device_lock_wait_s is seconds from 0 (do not wait) to a week, with its place") {
  CHECK(load_config(write("lock-wait.toml", "[evaluator]\ndevice_lock_wait_s = 0\n"))
            .evaluator.device_lock_wait_s
        == 0.0);
  CHECK(load_config(write("lock-wait-int.toml", "[evaluator]\ndevice_lock_wait_s = 30\n"))
            .evaluator.device_lock_wait_s
        == 30.0);
  CHECK(load_config(write("lock-wait-none.toml", "")).evaluator.device_lock_wait_s
        == defaults::device_lock_wait_s);
  auto path = write("lock-wait-neg.toml", "[evaluator]\ndevice_lock_wait_s = -1\n");
  CHECK(error_of(path)
        == path + ":2:22: [evaluator] device_lock_wait_s must be between 0 and 604800");
  path = write("lock-wait-inf.toml", "[evaluator]\ndevice_lock_wait_s = inf\n");
  CHECK(error_of(path) == path + ":2:22: [evaluator] device_lock_wait_s must be a finite number");
  path = write("lock-wait-str.toml", "[evaluator]\ndevice_lock_wait_s = \"10 s\"\n");
  CHECK(error_of(path)
        == path + ":2:22: [evaluator] device_lock_wait_s must be a number, not a string");
}

TEST_CASE("a word outside its set lists the allowed ones") {
  auto path = write("choice.toml", "[run]\nlog_level = \"verbose\"\n");
  CHECK(error_of(path)
        == path
               + ":2:13: [run] log_level must be trace, debug, info, warn or error, not 'verbose'");

  path = write("choice-kind.toml", "[strategy]\nkind = \"pike-x\"\n");
  CHECK(error_of(path) == path + ":2:8: [strategy] kind must be pike-b or pike-o, not 'pike-x'");
}

TEST_CASE("the problem earliest in the file is the one reported") {
  // [budget] is checked before [strategy]; the user still hears about line 2 first.
  auto path = write("earliest.toml", "[strategy]\nphases = 0\n[budget]\nqueries_per_task = 0\n");
  CHECK(error_of(path) == path + ":2:10: [strategy] phases must be between 1 and 10000");
}

TEST_CASE("timing sample bounds must be ordered") {
  auto path = write("samples.toml", "[evaluator]\nmin_samples = 50\nmax_samples = 20\n");
  CHECK(error_of(path) == path + ":3:1: [evaluator] min_samples (50) must be <= max_samples (20)");
}

TEST_CASE("devices are auto, cpu, or a list of cpu and cuda:N") {
  CHECK(load_config(write("dev1.toml", "[evaluator]\ndevices = \"cuda:1\"\n")).evaluator.devices
        == std::vector<std::string>{"cuda:1"});
  CHECK(load_config(write("dev2.toml", "[evaluator]\ndevices = [\"cuda:0\", \"cuda:3\"]\n"))
            .evaluator.devices
        == std::vector<std::string>{"cuda:0", "cuda:3"});

  auto path = write("dev-bad.toml", "[evaluator]\ndevices = [\"cuda:0\", \"gpu1\"]\n");
  CHECK(error_of(path)
        == path + ":2:22: [evaluator] devices holds 'gpu1', which is not \"cpu\" or \"cuda:N\"");

  path = write("dev-twice.toml", "[evaluator]\ndevices = [\"cuda:0\", \"cuda:0\"]\n");
  CHECK(error_of(path) == path + ":2:22: [evaluator] devices lists 'cuda:0' twice");

  path = write("dev-empty.toml", "[evaluator]\ndevices = []\n");
  CHECK(error_of(path) == path + ":2:11: [evaluator] devices must list at least one device");
}

TEST_CASE("an agent must name a declared llm profile") {
  auto path = write("agent-llm.toml", "[llm.main]\nprovider = \"rules\"\n"
                                      "[agents.brainstormer]\nllm = \"main\"\n"
                                      "[agents.optimizer]\nllm = \"big\"\n"
                                      "[agents.error_fixer]\nllm = \"main\"\n");
  CHECK(error_of(path)
        == path + ":6:1: [agents.optimizer] llm 'big' is not a declared [llm.*] profile");

  path = write("agent-no-llm.toml", "[llm.main]\nprovider = \"rules\"\n[agents.optimizer]\n");
  CHECK(error_of(path)
        == path + ":3:1: [agents.optimizer] llm is required (the [llm.*] profile it queries)");
}

TEST_CASE("every strategy role must be a declared agent") {
  auto path = write("missing-role.toml", "[llm.main]\nprovider = \"rules\"\n"
                                         "[agents.brainstormer]\nllm = \"main\"\n"
                                         "[agents.optimizer]\nllm = \"main\"\n");
  CHECK(
      error_of(path)
      == path
             + ":3:1: [strategy] error_fixer role 'error_fixer' has no [agents.error_fixer] table");

  // A role the strategy renames is blamed on the strategy's key.
  path = write("renamed-role.toml", "[llm.main]\nprovider = \"rules\"\n"
                                    "[agents.brainstormer]\nllm = \"main\"\n"
                                    "[agents.optimizer]\nllm = \"main\"\n"
                                    "[agents.fixer]\nllm = \"main\"\n"
                                    "[strategy]\nerror_fixer = \"fixr\"\n");
  CHECK(error_of(path)
        == path + ":10:1: [strategy] error_fixer role 'fixr' has no [agents.fixr] table");
}

TEST_CASE("several profiles without agents leave the roles unassigned") {
  auto path = write("two-profiles.toml", "[llm.a]\nprovider = \"rules\"\n"
                                         "[llm.b]\nprovider = \"rules\"\n");
  CHECK(error_of(path)
        == path
               + ":1:1: [strategy] brainstormer role 'brainstormer' has no [agents.brainstormer] "
                 "table (with several [llm.*] profiles, declare the agents and the llm each one "
                 "uses)");
}

TEST_CASE("HTTP providers need a model and a URL, and keys stay out of messages") {
  auto path = write("no-url.toml", "[llm.main]\nprovider = \"openai\"\nmodel = \"m\"\n");
  CHECK(error_of(path)
        == path + ":2:1: [llm.main] provider 'openai' needs base_url (http:// or https://)");

  path = write("no-model.toml", "[llm.main]\nprovider = \"anthropic\"\n"
                                "base_url = \"https://api.anthropic.com\"\n");
  CHECK(error_of(path) == path + ":2:1: [llm.main] provider 'anthropic' needs model");

  path = write("bad-url.toml", "[llm.main]\nprovider = \"openai\"\nmodel = \"m\"\n"
                               "base_url = \"127.0.0.1:8080\"\n");
  CHECK(error_of(path) == path + ":4:12: [llm.main] base_url must start with http:// or https://");

  path = write("no-provider.toml", "[llm.main]\nmodel = \"m\"\n");
  CHECK(error_of(path)
        == path
               + ":1:1: [llm.main] provider is required (rules, openai, anthropic, gemini or "
                 "replay)");

  path = write("key-in-env.toml", "[llm.main]\nprovider = \"openai\"\nmodel = \"m\"\n"
                                  "base_url = \"https://api.openai.com/v1\"\n"
                                  "api_key_env = \"sk-secret123\"\n");
  auto what = error_of(path);
  CHECK(what.rfind(path + ":5:15: [llm.main] api_key_env must name an environment variable", 0)
        == 0);
  CHECK(what.find("sk-secret123") == std::string::npos);
}

TEST_CASE("relative paths are resolved against the config's directory") {
  auto dir = tmp_dir() / "paths" / "conf";
  auto path =
      write("paths/conf/kiln.toml", "[run]\n"
                                    "tasks = [\"tasks\", \"/abs/tasks\", \"../more/x.py\"]\n"
                                    "out = \"../out\"\n"
                                    "[evaluator]\n"
                                    "python = \"venv/bin/python\"\n"
                                    "[llm.main]\nprovider = \"rules\"\n"
                                    "[agents.brainstormer]\nllm = \"main\"\n"
                                    "template = \"prompts/brainstorm.txt\"\n"
                                    "[agents.optimizer]\nllm = \"main\"\n"
                                    "[agents.error_fixer]\nllm = \"main\"\n");
  auto cfg = load_config(path);
  CHECK(cfg.run.tasks
        == std::vector<std::string>{normal(dir / "tasks"), "/abs/tasks",
                                    normal(tmp_dir() / "paths" / "more" / "x.py")});
  CHECK(cfg.run.out == normal(tmp_dir() / "paths" / "out"));
  CHECK(cfg.evaluator.python == normal(dir / "venv" / "bin" / "python"));
  CHECK(cfg.agents.at("brainstormer").template_path == normal(dir / "prompts" / "brainstorm.txt"));
  CHECK(cfg.agents.at("optimizer").template_path.empty()); // built-in template

  // A bare interpreter name is looked up on PATH, so it is left alone; a single task string too.
  cfg = load_config(write("paths/conf/bare.toml", "[run]\ntasks = \"one\"\n"
                                                  "[evaluator]\npython = \"python3\"\n"));
  CHECK(cfg.evaluator.python == "python3");
  CHECK(cfg.run.tasks == std::vector<std::string>{normal(dir / "one")});
}

TEST_CASE("text that is not a file resolves paths against the current directory") {
  auto cfg = parse_config("[run]\ntasks = [\"t\"]\n", "<inline>");
  CHECK(cfg.path.empty());
  CHECK(cfg.run.tasks == std::vector<std::string>{normal(fs::current_path() / "t")});
  try {
    parse_config("[run]\nfoo = 1\n", "<inline>");
    FAIL("no error");
  } catch (const config_error& e) {
    CHECK(std::string{e.what()} == "<inline>:2:1: unknown key 'foo' in [run]");
  }
}

TEST_CASE("a file that cannot be read says why") {
  auto missing = (tmp_dir() / "does-not-exist.toml").string();
  CHECK(error_of(missing) == "cannot read config " + missing + ": No such file or directory");
  auto dir = tmp_dir().string();
  CHECK(error_of(dir) == "config " + dir + " is a directory, not a regular file");
}

TEST_CASE("an HTTP profile takes every transport, reasoning and price key") {
  auto cfg = load_config(write("llm-full.toml", R"(
[llm.main]
provider = "anthropic"
base_url = "https://api.example.test/v1"
model = "m"
api_key_file = "secrets/key"
max_tokens = 8000
stop = ["</code>", "END"]
thinking_budget = 4000
stream = false
connect_timeout_s = 5
idle_timeout_s = 30
max_concurrency = 16
requests_per_minute = 50
tokens_per_minute = 400000
max_retries = 3
retry_initial_s = 0.5
retry_max_s = 20
usd_per_mtok_input = 3
usd_per_mtok_output = 15
)"));
  auto& p = cfg.llm.at("main");
  CHECK(p.api_key_file == normal(tmp_dir() / "secrets/key"));
  CHECK(p.stop == std::vector<std::string>{"</code>", "END"});
  CHECK(p.thinking_budget == 4000);
  CHECK_FALSE(p.stream);
  CHECK(p.connect_timeout_s == 5);
  CHECK(p.idle_timeout_s == 30);
  CHECK(p.max_concurrency == 16);
  CHECK(p.requests_per_minute == 50);
  CHECK(p.tokens_per_minute == 400000);
  CHECK(p.max_retries == 3);
  CHECK(p.retry_initial_s == 0.5);
  CHECK(p.retry_max_s == 20);
  CHECK(p.usd_per_mtok_input == 3);
  CHECK(p.usd_per_mtok_output == 15);
}

TEST_CASE("bad LLM profile values are refused with their place") {
  auto head =
      std::string{"[llm.main]\nprovider = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\n"};
  CHECK_THAT(error_of(write("llm-effort.toml", head + "reasoning_effort = \"extreme\"\n")),
             Catch::Contains("llm-effort.toml:5:") && Catch::Contains("reasoning_effort"));
  CHECK_THAT(error_of(write("llm-stop.toml", head + "stop = \"END\"\n")),
             Catch::Contains("stop must be an array of strings"));
  CHECK_THAT(error_of(write("llm-both.toml", head + "api_key_env = \"K\"\napi_key_file = \"k\"\n")),
             Catch::Contains("keep one of them"));
  CHECK_THAT(error_of(write("llm-conc.toml", head + "max_concurrency = 0\n")),
             Catch::Contains("max_concurrency"));
  CHECK_THAT(error_of(write("llm-replay.toml", "[llm.main]\nprovider = \"replay\"\n")),
             Catch::Contains("needs replay_from"));
  CHECK_THAT(error_of(write("llm-think.toml", "[llm.main]\nprovider = \"anthropic\"\nbase_url = "
                                              "\"http://h/v1\"\nmodel = \"m\"\nmax_tokens = 1000\n"
                                              "thinking_budget = 1000\n")),
             Catch::Contains("thinking_budget must be below max_tokens"));
}

TEST_CASE("the strategy presets load with the paper's settings") {
  auto b = load_config(source_dir + "/config/pike-b.toml");
  CHECK(b.strategy.kind == "pike-b");
  CHECK(b.budget.queries_per_task == 300);
  CHECK(b.strategy.max_ideas == 10);
  CHECK(b.strategy.parents == 4);
  CHECK(b.agents.at("error_fixer").max_attempts == 5);
  auto o = load_config(source_dir + "/config/pike-o.toml");
  CHECK(o.strategy.kind == "pike-o");
  CHECK(o.strategy.islands == 3);
  CHECK(o.strategy.archive_size == 12);
  CHECK(o.strategy.template_kind == "crossover");
  CHECK(o.strategy.parallel_candidates == 20);
  auto best = load_config(source_dir + "/config/pike-o-best.toml");
  CHECK(best.strategy.islands == 1);
  CHECK(best.strategy.archive_size == 4);
  CHECK(best.strategy.exploitation_ratio == 1.0);
  CHECK(best.strategy.exploration_ratio == 0.0);
  CHECK(best.strategy.template_kind == "mutation");
  CHECK(best.strategy.parallel_candidates == 1);
}

TEST_CASE("bad PIKE-O settings are refused with their place") {
  CHECK_THAT(
      error_of(write("po-ratio.toml", "[strategy]\nkind = \"pike-o\"\nexploration_ratio = 0.5\n"
                                      "exploitation_ratio = 0.6\n")),
      Catch::Contains("po-ratio.toml:4:") && Catch::Contains("at most 1"));
  CHECK_THAT(error_of(write("po-feature.toml", "[strategy]\nfeature_dimensions = [\"speed\"]\n")),
             Catch::Contains("known dimensions"));
  CHECK_THAT(error_of(write("po-template.toml", "[strategy]\ntemplate = \"diff\"\n")),
             Catch::Contains("template"));
}

TEST_CASE("a role may draw on several profiles with weights") {
  auto cfg = load_config(write("ensemble.toml", R"(
[llm.cheap]
provider = "rules"
[llm.strong]
provider = "rules"
[agents.brainstormer]
llm = "strong"
[agents.optimizer]
llm = ["cheap", "strong"]
weights = [0.8, 0.2]
[agents.error_fixer]
llm = ["cheap", "strong"]
)"));
  auto& o = cfg.agents.at("optimizer");
  CHECK(o.llm == "cheap");
  CHECK(o.llms == std::vector<std::string>{"cheap", "strong"});
  CHECK(o.weights == std::vector<double>{0.8, 0.2});
  CHECK(cfg.agents.at("error_fixer").weights == std::vector<double>{1.0, 1.0});
  CHECK(cfg.agents.at("brainstormer").llms == std::vector<std::string>{"strong"});
  auto head = std::string{"[llm.a]\nprovider = \"rules\"\n[llm.b]\nprovider = \"rules\"\n"
                          "[agents.brainstormer]\nllm = \"a\"\n[agents.error_fixer]\nllm = \"a\"\n"
                          "[agents.optimizer]\n"};
  CHECK_THAT(error_of(write("ens-count.toml", head + "llm = [\"a\", \"b\"]\nweights = [1]\n")),
             Catch::Contains("has 1 entries for 2 llm profiles"));
  CHECK_THAT(error_of(write("ens-neg.toml", head + "llm = [\"a\", \"b\"]\nweights = [1, -2]\n")),
             Catch::Contains("positive numbers"));
  CHECK_THAT(error_of(write("ens-unknown.toml", head + "llm = [\"a\", \"zz\"]\n")),
             Catch::Contains("llm 'zz' is not a declared [llm.*] profile"));
}

TEST_CASE("templates may be given per prompt kind") {
  auto cfg = load_config(write("kind-templates.toml", R"(
[agents.optimizer]
llm = "main"
templates = { improve = "t/improve.txt", crossover = "t/cross.txt" }
[agents.brainstormer]
llm = "main"
[agents.error_fixer]
llm = "main"
[llm.main]
provider = "rules"
)"));
  auto& t = cfg.agents.at("optimizer").template_paths;
  CHECK(t.at("improve") == normal(tmp_dir() / "t/improve.txt"));
  CHECK(t.at("crossover") == normal(tmp_dir() / "t/cross.txt"));
  CHECK_THAT(error_of(write("parser-bad.toml", "[agents.optimizer]\nllm = \"main\"\n"
                                               "parser = \"json\"\n")),
             Catch::Contains("parser must be"));
  CHECK_THAT(error_of(write("kind-bad.toml", "[agents.optimizer]\nllm = \"main\"\n"
                                             "templates = { mutate = \"x\" }\n")),
             Catch::Contains("'mutate', which is not a prompt kind"));
}

} // namespace kiln
