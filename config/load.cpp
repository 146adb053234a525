#include "config/config.hpp"
#include "config/input_file.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <toml++/toml.h>

// The loader works in two phases. Phase one walks every table and checks each key on its own
// (known name, type, range); phase two checks how keys relate (agents name declared profiles, the
// strategy's roles exist, HTTP providers have a URL). Problems of a phase are collected and the one
// earliest in the file is thrown, so a user fixes a config top to bottom, and a relation is never
// judged on a value that already failed phase one.

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The profile the strategy's roles run on when a file declares no [llm.*] and no [agents.*] at
// all, so that a minimal file runs offline.
constexpr const char* default_profile = defaults::llm_profile;
constexpr const char* default_provider = defaults::llm_provider;

/// A closed set of words: the keys of a table or the values of a key.
using names = std::vector<std::string_view>;

const names log_levels = {"trace", "debug", "info", "warn", "error"};
const names eval_modes = {"kiln", "pike"};
const names timing_statistics = {"steady", "per_call"};
const names sandbox_modes = {"auto", "required", "off"};
const names providers = {"rules", "openai", "anthropic", "gemini", "replay"};
const names strategies = {"pike-b", "pike-o"};

/// What `[table] key` accepts; integers are checked in double, exact far beyond these bounds.
struct bounds {
  double lo;
  bool lo_open = false; ///< true: `> lo` instead of `>= lo`
  std::optional<double> hi = std::nullopt;
};

bounds at_least(double lo) {
  return {lo};
}
bounds above(double lo, std::optional<double> hi = std::nullopt) {
  return {lo, true, hi};
}
bounds between(double lo, double hi) {
  return {lo, false, hi};
}

std::string number_text(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string describe(const bounds& b) {
  if (!b.lo_open && b.hi)
    return "between " + number_text(b.lo) + " and " + number_text(*b.hi);
  std::string s = (b.lo_open ? "> " : ">= ") + number_text(b.lo);
  if (b.hi)
    s += " and <= " + number_text(*b.hi);
  return s;
}

bool within(double v, const bounds& b) {
  bool lo_ok = b.lo_open ? v > b.lo : v >= b.lo;
  return lo_ok && (!b.hi || v <= *b.hi);
}

const char* a_type(toml::node_type t) {
  switch (t) {
    case toml::node_type::none:
      return "nothing";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
  }
  return "a value";
}

std::string one_of(const names& words) {
  std::string s;
  for (auto it = words.begin(); it != words.end(); ++it) {
    if (it != words.begin())
      s += std::next(it) == words.end() ? " or " : ", ";
    s += *it;
  }
  return s;
}

bool contains(const names& words, std::string_view s) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

// Edit distance, only to suggest the key a typo meant.
size_t distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string_view> closest(std::string_view key, const names& known) {
  std::optional<std::string_view> best;
  size_t best_d = 3; // more than two edits away is a different word, not a typo
  for (auto k : known) {
    auto d = distance(key, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

// Profile and agent names end up in actor names, logs and the archive: keep them plain.
bool plain_name(std::string_view s) {
  if (s.empty())
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

bool env_var_name(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool device_name(std::string_view s) {
  if (s == "cpu")
    return true;
  constexpr std::string_view cuda = "cuda:";
  if (s.substr(0, cuda.size()) != cuda)
    return false;
  auto index = s.substr(cuda.size());
  return !index.empty() && index.size() <= 4 && std::all_of(index.begin(), index.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

/// One document being read: where it came from, the directory its relative paths start from,
/// and the problems found so far.
class reader {
public:
  reader(std::string origin, fs::path base) : origin_{std::move(origin)}, base_{std::move(base)} {}

  void problem(const toml::source_region& where, std::string what) {
    problems_.push_back({where.begin, std::move(what)});
  }

  /// Ends a phase: throws the problem earliest in the file, if there is one.
  void check() {
    if (problems_.empty())
      return;
    // Problems without a place (line 0) come last: they concern the file as a whole.
    auto key = [](const toml::source_position& p) {
      return std::make_pair(p.line == 0 ? std::numeric_limits<uint32_t>::max() : p.line, p.column);
    };
    auto first =
        std::min_element(problems_.begin(), problems_.end(),
                         [&](const auto& a, const auto& b) { return key(a.first) < key(b.first); });
    throw config_error(render(first->first, first->second));
  }

  std::string render(const toml::source_position& at, const std::string& what) const {
    if (at.line == 0)
      return origin_ + ": " + what;
    return origin_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " + what;
  }

  /// A path from the file, made absolute against the config's directory; absolute ones stay.
  std::string resolve(const std::string& p) const {
    fs::path path{p};
    if (path.is_absolute())
      return p;
    return (base_ / path).lexically_normal().string();
  }

private:
  std::string origin_;
  fs::path base_;
  std::vector<std::pair<toml::source_position, std::string>> problems_;
};

/// One TOML table of the config, such as `[evaluator]` or `[llm.main]`. Construction reports
/// unknown keys; the typed readers store a value only when it passes.
class section {
public:
  section(reader& r, const toml::table& t, std::string name, const names& keys)
      : r_{r}, t_{t}, name_{"[" + std::move(name) + "]"} {
    for (auto&& [k, v] : t) {
      if (contains(keys, k.str()))
        continue;
      std::string what = "unknown key '" + std::string{k.str()} + "' in " + name_;
      if (auto near = closest(k.str(), keys))
        what += " (did you mean '" + std::string{*near} + "'?)";
      r_.problem(k.source(), std::move(what));
    }
  }

  const std::string& name() const { return name_; }

  bool has(std::string_view key) const { return t_.get(key) != nullptr; }

  /// Returns whether the key was present and stored.
  bool integer(std::string_view key, int64_t& out, const bounds& b) {
    auto* n = t_.get(key);
    if (!n)
      return false;
    auto* v = n->as_integer();
    if (!v) {
      wrong_type(key, *n, "an integer");
      return false;
    }
    if (!within(static_cast<double>(v->get()), b)) {
      bad(key, *n, "must be " + describe(b));
      return false;
    }
    out = v->get();
    return true;
  }

  /// TOML integers are signed; `b` must keep the value >= 0.
  void integer(std::string_view key, uint64_t& out, const bounds& b) {
    int64_t v = 0;
    if (integer(key, v, b))
      out = static_cast<uint64_t>(v);
  }

  /// A float; an integer is accepted too (`usd_total = 0`).
  void number(std::string_view key, double& out, const bounds& b) {
    auto* n = t_.get(key);
    if (!n)
      return;
    double v = 0;
    if (auto* f = n->as_floating_point())
      v = f->get();
    else if (auto* i = n->as_integer())
      v = static_cast<double>(i->get());
    else
      return wrong_type(key, *n, "a number");
    if (!std::isfinite(v))
      return bad(key, *n, "must be a finite number");
    if (!within(v, b))
      return bad(key, *n, "must be " + describe(b));
    out = v;
  }

  /// Returns whether the key was present and a string.
  bool string(std::string_view key, std::string& out, bool may_be_empty = true) {
    auto* n = t_.get(key);
    if (!n)
      return false;
    auto* s = n->as_string();
    if (!s) {
      wrong_type(key, *n, "a string");
      return false;
    }
    if (!may_be_empty && s->get().empty()) {
      bad(key, *n, "must not be empty");
      return false;
    }
    out = s->get();
    return true;
  }

  void choice(std::string_view key, std::string& out, const names& allowed) {
    std::string v;
    if (!string(key, v))
      return;
    if (!contains(allowed, v))
      return bad(key, *t_.get(key), "must be " + one_of(allowed) + ", not '" + v + "'");
    out = std::move(v);
  }

  /// A path that, when set, is resolved against the config's directory.
  void path(std::string_view key, std::string& out, bool may_be_empty) {
    std::string v;
    if (string(key, v, may_be_empty))
      out = v.empty() ? v : r_.resolve(v);
  }

  void wrong_type(std::string_view key, const toml::node& n, const char* expected) {
    bad(key, n, std::string{"must be "} + expected + ", not " + a_type(n.type()));
  }

  void bad(std::string_view key, const toml::node& n, const std::string& what) {
    r_.problem(n.source(), name_ + " " + std::string{key} + " " + what);
  }

private:
  reader& r_;
  const toml::table& t_;
  std::string name_;
};

// --- phase one: each table on its own --------------------------------------------------------

void read_run(reader& r, const toml::table& t, run_config& run) {
  section s{r, t, "run", {"tasks", "out", "seed", "parallel_tasks", "log_level"}};
  if (auto* n = t.get("tasks")) {
    // One folder is the common case, so a bare string is accepted as a list of one.
    if (auto* one = n->as_string()) {
      if (one->get().empty())
        s.bad("tasks", *n, "must not be empty");
      else
        run.tasks = {r.resolve(one->get())};
    } else if (auto* list = n->as_array()) {
      run.tasks.clear();
      for (auto&& e : *list) {
        auto* str = e.as_string();
        if (!str)
          s.bad("tasks", e, std::string{"must hold strings, not "} + a_type(e.type()));
        else if (str->get().empty())
          s.bad("tasks", e, "must not hold an empty path");
        else
          run.tasks.push_back(r.resolve(str->get()));
      }
    } else {
      s.wrong_type("tasks", *n, "an array of strings or a string");
    }
  }
  s.path("out", run.out, false);
  s.integer("seed", run.seed, at_least(0));
  s.integer("parallel_tasks", run.parallel_tasks, between(1, 1024));
  s.choice("log_level", run.log_level, log_levels);
}

void read_budget(reader& r, const toml::table& t, budget_config& budget) {
  section s{r,
            t,
            "budget",
            {"queries_per_task", "usd_total", "usd_per_task", "evaluations_per_task",
             "wall_s_per_task", "wall_s_total"}};
  s.integer("queries_per_task", budget.queries_per_task, at_least(1));
  s.number("usd_total", budget.usd_total, at_least(0));
  s.number("usd_per_task", budget.usd_per_task, at_least(0));
  s.integer("evaluations_per_task", budget.evaluations_per_task, at_least(0));
  s.number("wall_s_per_task", budget.wall_s_per_task, at_least(0));
  s.number("wall_s_total", budget.wall_s_total, at_least(0));
}

void read_devices(section& s, const toml::node& n, std::vector<std::string>& out) {
  if (auto* one = n.as_string()) {
    auto v = one->get();
    if (v != "auto" && !device_name(v))
      return s.bad("devices", n,
                   "must be \"auto\", \"cpu\", \"cuda:N\" or an array of them, not '" + v + "'");
    out = {v};
    return;
  }
  auto* list = n.as_array();
  if (!list)
    return s.wrong_type("devices", n, "a string or an array of strings");
  if (list->empty())
    return s.bad("devices", n, "must list at least one device");
  std::vector<std::string> devices;
  for (auto&& e : *list) {
    auto* str = e.as_string();
    if (!str)
      return s.bad("devices", e, std::string{"must hold strings, not "} + a_type(e.type()));
    if (!device_name(str->get()))
      return s.bad("devices", e, "holds '" + str->get() + "', which is not \"cpu\" or \"cuda:N\"");
    if (std::find(devices.begin(), devices.end(), str->get()) != devices.end())
      return s.bad("devices", e, "lists '" + str->get() + "' twice");
    devices.push_back(str->get());
  }
  out = std::move(devices);
}

void read_evaluator(reader& r, const toml::table& t, evaluator_config& ev) {
  section s{r,
            t,
            "evaluator",
            {"devices",
             "python",
             "timeout_s",
             "trials",
             "atol",
             "rtol",
             "cpu_threads",
             "warmup_calls",
             "min_samples",
             "max_samples",
             "min_timing_s",
             "max_timing_s",
             "target_ci",
             "timing_statistic",
             "timing_rounds",
             "mode",
             "cache_dir",
             "compile_workers",
             "gpu_lanes",
             "compile_timeout_s",
             "pool_size",
             "memory_limit_gb",
             "sandbox",
             "runner_user",
             "retime_rounds",
             "retime_top",
             "borderline_trials",
             "device_lock_wait_s",
             "quiet_host",
             "timer_cores"}};
  if (auto* n = t.get("devices"))
    read_devices(s, *n, ev.devices);
  // A bare name such as `python3` is looked up on PATH; only a path is tied to the config's dir.
  std::string python;
  if (s.string("python", python))
    ev.python = python.find('/') == std::string::npos ? python : r.resolve(python);
  s.number("timeout_s", ev.timeout_s, above(0, 86400));
  s.integer("trials", ev.trials, between(1, 100));
  s.number("atol", ev.atol, at_least(0));
  s.number("rtol", ev.rtol, at_least(0));
  s.integer("cpu_threads", ev.cpu_threads, between(0, 1024));
  s.integer("warmup_calls", ev.warmup_calls, between(0, 10000));
  s.integer("min_samples", ev.min_samples, between(1, 100000));
  s.integer("max_samples", ev.max_samples, between(1, 100000));
  s.number("min_timing_s", ev.min_timing_s, between(0, 3600));
  s.number("max_timing_s", ev.max_timing_s, above(0, 3600));
  s.number("target_ci", ev.target_ci, above(0, 1));
  s.choice("timing_statistic", ev.timing_statistic, timing_statistics);
  s.integer("timing_rounds", ev.timing_rounds, between(1, 100));
  s.choice("mode", ev.mode, eval_modes);
  std::string cache_dir;
  if (s.string("cache_dir", cache_dir))
    ev.cache_dir = cache_dir.empty() ? cache_dir : r.resolve(cache_dir);
  s.integer("compile_workers", ev.compile_workers, between(0, 1024));
  s.integer("gpu_lanes", ev.gpu_lanes, between(1, 8));
  s.number("compile_timeout_s", ev.compile_timeout_s, above(0, 86400));
  s.integer("pool_size", ev.pool_size, between(0, 64));
  s.number("memory_limit_gb", ev.memory_limit_gb, at_least(0));
  s.choice("sandbox", ev.sandbox, sandbox_modes);
  s.string("runner_user", ev.runner_user);
  s.integer("retime_rounds", ev.retime_rounds, between(0, 100));
  s.integer("retime_top", ev.retime_top, between(1, 100));
  s.integer("borderline_trials", ev.borderline_trials, between(0, 100));
  s.number("device_lock_wait_s", ev.device_lock_wait_s, between(0, 604800));
  if (auto* n = t.get("quiet_host")) {
    if (auto* b = n->as_boolean())
      ev.quiet_host = b->get();
    else
      s.wrong_type("quiet_host", *n, "true or false");
  }
  s.integer("timer_cores", ev.timer_cores, between(0, 64));
}

/// Calls `f(name, table)` for each `[<kind>.<name>]`; reports what is not a table or not a
/// plain name.
template <class F> void each_named(reader& r, const toml::table& t, const std::string& kind, F f) {
  for (auto&& [k, v] : t) {
    std::string name{k.str()};
    auto* sub = v.as_table();
    if (!sub) {
      r.problem(k.source(), "[" + kind + "." + name + "] must be a table, not " + a_type(v.type())
                                + " (write [" + kind + ".<name>] and its keys)");
      continue;
    }
    if (!plain_name(name)) {
      r.problem(k.source(),
                "[" + kind + "] name '" + name + "' must use only letters, digits, '_' and '-'");
      continue;
    }
    f(name, *sub);
  }
}

void read_strings(section& s, const toml::table& t, std::string_view key,
                  std::vector<std::string>& out) {
  auto* n = t.get(key);
  if (!n)
    return;
  auto* list = n->as_array();
  if (!list)
    return s.wrong_type(key, *n, "an array of strings");
  std::vector<std::string> values;
  for (auto&& e : *list) {
    auto* str = e.as_string();
    if (!str)
      return s.bad(key, e, std::string{"must hold strings, not "} + a_type(e.type()));
    if (str->get().empty())
      return s.bad(key, e, "must not hold an empty string");
    values.push_back(str->get());
  }
  out = std::move(values);
}

const names reasoning_efforts = {"minimal", "low", "medium", "high"};

void read_llm(reader& r, const toml::table& t, std::map<std::string, llm_profile_config>& out) {
  each_named(r, t, "llm", [&](const std::string& name, const toml::table& sub) {
    section s{r,
              sub,
              "llm." + name,
              {"provider",
               "base_url",
               "model",
               "api_key_env",
               "api_key_file",
               "system_prompt",
               "temperature",
               "max_tokens",
               "stop",
               "reasoning_effort",
               "thinking_budget",
               "stream",
               "timeout_s",
               "connect_timeout_s",
               "idle_timeout_s",
               "max_concurrency",
               "requests_per_minute",
               "tokens_per_minute",
               "max_retries",
               "retry_initial_s",
               "retry_max_s",
               "usd_per_mtok_input",
               "usd_per_mtok_output",
               "replay_from"}};
    llm_profile_config p;
    p.name = name;
    if (!s.has("provider"))
      r.problem(sub.source(), s.name() + " provider is required (" + one_of(providers) + ")");
    s.choice("provider", p.provider, providers);
    if (s.string("base_url", p.base_url) && !p.base_url.empty()
        && p.base_url.rfind("http://", 0) != 0 && p.base_url.rfind("https://", 0) != 0)
      s.bad("base_url", *sub.get("base_url"), "must start with http:// or https://");
    s.string("model", p.model);
    // Never echo this value: a user who mistook it for the key itself would leak the secret.
    if (s.string("api_key_env", p.api_key_env) && !p.api_key_env.empty()
        && !env_var_name(p.api_key_env))
      s.bad("api_key_env", *sub.get("api_key_env"),
            "must name an environment variable (letters, digits and '_', such as "
            "OPENAI_API_KEY), not hold the key itself");
    s.path("api_key_file", p.api_key_file, false);
    if (!p.api_key_env.empty() && !p.api_key_file.empty())
      s.bad("api_key_file", *sub.get("api_key_file"),
            "and api_key_env are both set; keep one of them");
    s.string("system_prompt", p.system_prompt);
    s.number("temperature", p.temperature, between(0, 2));
    s.integer("max_tokens", p.max_tokens, between(1, 10000000));
    read_strings(s, sub, "stop", p.stop);
    s.choice("reasoning_effort", p.reasoning_effort, reasoning_efforts);
    s.integer("thinking_budget", p.thinking_budget, between(0, 10000000));
    if (auto* n = sub.get("stream")) {
      if (auto* b = n->as_boolean())
        p.stream = b->get();
      else
        s.wrong_type("stream", *n, "true or false");
    }
    s.number("timeout_s", p.timeout_s, above(0, 86400));
    s.number("connect_timeout_s", p.connect_timeout_s, above(0, 3600));
    s.number("idle_timeout_s", p.idle_timeout_s, above(0, 86400));
    s.integer("max_concurrency", p.max_concurrency, between(1, 4096));
    s.number("requests_per_minute", p.requests_per_minute, at_least(0));
    s.number("tokens_per_minute", p.tokens_per_minute, at_least(0));
    s.integer("max_retries", p.max_retries, between(0, 100));
    s.number("retry_initial_s", p.retry_initial_s, above(0, 3600));
    s.number("retry_max_s", p.retry_max_s, above(0, 86400));
    s.number("usd_per_mtok_input", p.usd_per_mtok_input, at_least(0));
    s.number("usd_per_mtok_output", p.usd_per_mtok_output, at_least(0));
    s.path("replay_from", p.replay_from, false);
    out[name] = std::move(p);
  });
}

void read_agents(reader& r, const toml::table& t, std::map<std::string, agent_config>& out) {
  each_named(r, t, "agents", [&](const std::string& name, const toml::table& sub) {
    section s{r,
              sub,
              "agents." + name,
              {"llm", "weights", "template", "templates", "parser", "max_attempts"}};
    agent_config a;
    a.name = name;
    if (!s.has("llm"))
      r.problem(sub.source(), s.name() + " llm is required (the [llm.*] profile it queries)");
    else if (sub.get("llm")->is_array())
      read_strings(s, sub, "llm", a.llms);
    else if (s.string("llm", a.llm, false))
      a.llms = {a.llm};
    if (!a.llms.empty())
      a.llm = a.llms.front();
    if (auto* w = sub.get("weights")) {
      auto* list = w->as_array();
      if (!list) {
        s.wrong_type("weights", *w, "an array of numbers");
      } else {
        for (auto&& e : *list) {
          double v = e.is_integer()          ? static_cast<double>(e.as_integer()->get())
                     : e.is_floating_point() ? e.as_floating_point()->get()
                                             : -1;
          if (!(v > 0) || !std::isfinite(v)) {
            s.bad("weights", e, "must hold positive numbers");
            a.weights.clear();
            break;
          }
          a.weights.push_back(v);
        }
        if (!a.weights.empty() && a.weights.size() != a.llms.size())
          s.bad("weights", *w,
                "has " + std::to_string(a.weights.size()) + " entries for "
                    + std::to_string(a.llms.size()) + " llm profiles");
      }
    }
    if (a.weights.size() != a.llms.size())
      a.weights.assign(a.llms.size(), 1.0);
    s.path("template", a.template_path, true);
    if (auto* n = sub.get("templates")) {
      static const names kinds = {"brainstorm", "optimize", "improve",        "fix",
                                  "crossover",  "review",   "fix_correctness"};
      if (auto* table = n->as_table()) {
        for (auto&& [k, v] : *table) {
          std::string kind{k.str()};
          if (!contains(kinds, kind)) {
            r.problem(k.source(), s.name() + " templates has '" + kind
                                      + "', which is not a prompt kind (" + one_of(kinds) + ")");
            continue;
          }
          auto* path = v.as_string();
          if (!path || path->get().empty()) {
            r.problem(v.source(), s.name() + " templates." + kind + " must be a file path");
            continue;
          }
          a.template_paths[kind] = r.resolve(path->get());
        }
      } else {
        s.wrong_type("templates", *n, "a table of prompt kind = path");
      }
    }
    s.integer("max_attempts", a.max_attempts, between(1, 100));
    s.choice("parser", a.parser, names{"auto", "code", "ideas", "text"});
    out[name] = std::move(a);
  });
}

void read_strategy(reader& r, const toml::table& t, strategy_config& st) {
  section s{r,
            t,
            "strategy",
            {"kind",
             "max_ideas",
             "phases",
             "parents",
             "parallel_candidates",
             "stall_phases",
             "brainstormer",
             "optimizer",
             "error_fixer",
             "iterations",
             "islands",
             "population_size",
             "archive_size",
             "migration_interval",
             "migration_rate",
             "exploration_ratio",
             "exploitation_ratio",
             "feature_dimensions",
             "feature_bins",
             "top_programs",
             "inspirations",
             "template",
             "reviewer"}};
  s.choice("kind", st.kind, strategies);
  s.integer("max_ideas", st.max_ideas, between(1, 1000));
  s.integer("phases", st.phases, between(1, 10000));
  s.integer("parents", st.parents, between(1, 1000));
  s.integer("parallel_candidates", st.parallel_candidates, between(1, 1024));
  s.integer("stall_phases", st.stall_phases, between(0, 10000));
  s.integer("iterations", st.iterations, between(1, 1000000));
  s.integer("islands", st.islands, between(1, 1000));
  s.integer("population_size", st.population_size, between(1, 100000));
  s.integer("archive_size", st.archive_size, between(1, 100000));
  s.integer("migration_interval", st.migration_interval, between(1, 1000000));
  s.number("migration_rate", st.migration_rate, between(0, 1));
  s.number("exploration_ratio", st.exploration_ratio, between(0, 1));
  s.number("exploitation_ratio", st.exploitation_ratio, between(0, 1));
  if (st.exploration_ratio + st.exploitation_ratio > 1 + 1e-9)
    s.bad("exploitation_ratio",
          *t.get(t.contains("exploitation_ratio") ? "exploitation_ratio" : "exploration_ratio"),
          "plus exploration_ratio must be at most 1 (the rest is random sampling)");
  read_strings(s, t, "feature_dimensions", st.feature_dimensions);
  for (auto& d : st.feature_dimensions)
    if (d != "complexity" && d != "diversity")
      s.bad("feature_dimensions", *t.get("feature_dimensions"),
            "holds '" + d + "'; known dimensions are \"complexity\" and \"diversity\"");
  s.integer("feature_bins", st.feature_bins, between(1, 1000));
  s.integer("top_programs", st.top_programs, between(0, 100));
  s.integer("inspirations", st.inspirations, between(0, 100));
  s.choice("template", st.template_kind, names{"crossover", "mutation"});
  s.string("brainstormer", st.brainstormer, false);
  s.string("optimizer", st.optimizer, false);
  s.string("error_fixer", st.error_fixer, false);
  s.string("reviewer", st.reviewer, true);
}

// --- phase two: how the tables relate --------------------------------------------------------

/// Where `key` of `table` was written; an empty region when it was not.
toml::source_region key_place(const toml::table* table, std::string_view key) {
  if (table)
    for (auto&& [k, v] : *table)
      if (k.str() == key)
        return k.source();
  return {};
}

void check_relations(reader& r, const toml::table& doc, config& cfg) {
  auto* ev_doc = doc.get_as<toml::table>("evaluator");
  if (cfg.evaluator.min_samples > cfg.evaluator.max_samples) {
    auto where = key_place(ev_doc, "max_samples");
    if (!where.begin)
      where = key_place(ev_doc, "min_samples");
    r.problem(where, "[evaluator] min_samples (" + std::to_string(cfg.evaluator.min_samples)
                         + ") must be <= max_samples (" + std::to_string(cfg.evaluator.max_samples)
                         + ")");
  }

  auto* llm_doc = doc.get_as<toml::table>("llm");
  for (auto& [name, p] : cfg.llm) {
    auto where = key_place(llm_doc ? llm_doc->get_as<toml::table>(name) : nullptr, "provider");
    std::string what = "[llm." + name + "] provider '" + p.provider + "'";
    if (p.provider != "rules" && p.provider != "replay" && p.model.empty())
      r.problem(where, what + " needs model");
    if (p.provider == "replay" && p.replay_from.empty())
      r.problem(where, what + " needs replay_from (the archive.sqlite of the run to replay)");
    if (p.thinking_budget > 0 && p.thinking_budget >= p.max_tokens && p.provider == "anthropic")
      r.problem(
          key_place(llm_doc ? llm_doc->get_as<toml::table>(name) : nullptr, "thinking_budget"),
          "[llm." + name
              + "] thinking_budget must be below max_tokens (Anthropic counts "
                "thinking inside max_tokens)");
    bool http = p.provider == "openai" || p.provider == "anthropic" || p.provider == "gemini";
    if (http && p.base_url.empty())
      r.problem(where, what + " needs base_url (http:// or https://)");
  }

  auto* agents_doc = doc.get_as<toml::table>("agents");
  for (auto& [name, a] : cfg.agents) {
    for (auto& profile : a.llms) {
      if (cfg.llm.count(profile))
        continue;
      auto where = key_place(agents_doc ? agents_doc->get_as<toml::table>(name) : nullptr, "llm");
      r.problem(where,
                "[agents." + name + "] llm '" + profile + "' is not a declared [llm.*] profile");
    }
  }

  auto* strategy_doc = doc.get_as<toml::table>("strategy");
  const std::pair<const char*, const std::string*> roles[] = {
      {"brainstormer", &cfg.strategy.brainstormer},
      {"optimizer", &cfg.strategy.optimizer},
      {"error_fixer", &cfg.strategy.error_fixer},
  };
  if (!cfg.strategy.reviewer.empty() && !cfg.agents.count(cfg.strategy.reviewer))
    r.problem(key_place(strategy_doc, "reviewer"), "[strategy] reviewer role '"
                                                       + cfg.strategy.reviewer + "' has no [agents."
                                                       + cfg.strategy.reviewer + "] table");
  for (auto& [role, agent] : roles) {
    if (cfg.agents.count(*agent))
      continue;
    // Point at the role's key when the strategy names it, else at the agents the user wrote, or
    // at the profiles that left the roles unassigned.
    auto where = key_place(strategy_doc, role);
    std::string what = "[strategy] " + std::string{role} + " role '" + *agent + "' has no [agents."
                       + *agent + "] table";
    if (!where.begin && agents_doc) {
      where = agents_doc->source();
    } else if (!where.begin && llm_doc) {
      where = llm_doc->source();
      what += " (with several [llm.*] profiles, declare the agents and the llm each one uses)";
    }
    r.problem(where, std::move(what));
  }
}

/// Where relative paths of a document start: the file's directory, or the current one when
/// the origin is not a file (text built in memory).
fs::path base_dir(const std::string& origin) {
  std::error_code ec;
  if (!origin.empty() && fs::is_regular_file(origin, ec))
    return fs::absolute(origin, ec).lexically_normal().parent_path();
  return fs::current_path();
}

} // namespace

config parse_config(const std::string& text, const std::string& origin) {
  reader r{origin, base_dir(origin)};
  toml::table doc;
  try {
    doc = toml::parse(std::string_view{text}, std::string_view{origin});
  } catch (const toml::parse_error& e) {
    throw config_error(r.render(e.source().begin, std::string{e.description()}));
  }

  config cfg;
  const names tables = {"run", "budget", "evaluator", "llm", "agents", "strategy"};
  for (auto&& [k, v] : doc) {
    auto key = k.str();
    auto* t = v.as_table();
    if (!contains(tables, key)) {
      std::string what = t ? "unknown table [" + std::string{key} + "]"
                           : "unknown key '" + std::string{key} + "' outside any table";
      if (auto near = closest(key, tables))
        what += " (did you mean [" + std::string{*near} + "]?)";
      r.problem(k.source(), std::move(what));
      continue;
    }
    if (!t) {
      r.problem(k.source(), "[" + std::string{key} + "] must be a table, not " + a_type(v.type()));
      continue;
    }
    if (key == "run")
      read_run(r, *t, cfg.run);
    else if (key == "budget")
      read_budget(r, *t, cfg.budget);
    else if (key == "evaluator")
      read_evaluator(r, *t, cfg.evaluator);
    else if (key == "llm")
      read_llm(r, *t, cfg.llm);
    else if (key == "agents")
      read_agents(r, *t, cfg.agents);
    else
      read_strategy(r, *t, cfg.strategy);
  }
  r.check();

  // With no agents written, the strategy's roles run on the only profile there is: the offline
  // rules profile when none is declared either, so that a minimal file works without a network.
  if (cfg.agents.empty() && cfg.llm.size() <= 1) {
    if (cfg.llm.empty()) {
      llm_profile_config p;
      p.name = default_profile;
      p.provider = default_provider;
      cfg.llm[p.name] = p;
    }
    for (auto* role :
         {&cfg.strategy.brainstormer, &cfg.strategy.optimizer, &cfg.strategy.error_fixer}) {
      agent_config a;
      a.name = *role;
      a.llm = cfg.llm.begin()->first;
      a.llms = {a.llm};
      a.weights = {1.0};
      cfg.agents.emplace(a.name, a);
    }
  }

  check_relations(r, doc, cfg);
  r.check();
  return cfg;
}

config load_config(const std::string& path) {
  std::string text;
  try {
    text = read_input_file(path, "config", max_config_bytes);
  } catch (const input_error& e) {
    throw config_error(e.what());
  }
  auto cfg = parse_config(text, path);
  cfg.path = path;
  return cfg;
}

} // namespace kiln
