#pragma once

// The validated configuration of a run. `load_config` fills every field, taking unset keys
// from `defaults.hpp`; nothing downstream re-reads the TOML.

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/defaults.hpp"

namespace kiln {

struct run_config {
  std::vector<std::string> tasks; ///< task files or folders, resolved against the config's dir
  std::string out = defaults::out_dir;
  uint64_t seed = defaults::seed;
  int64_t parallel_tasks = defaults::parallel_tasks;
  std::string log_level = defaults::log_level;
};

struct budget_config {
  int64_t queries_per_task = defaults::queries_per_task;
  double usd_total = defaults::usd_total;
  double usd_per_task = defaults::usd_per_task;
  int64_t evaluations_per_task = 0; ///< 0 = no cap
  double wall_s_per_task = 0;       ///< 0 = no cap
  double wall_s_total = 0;          ///< 0 = no cap
};

struct evaluator_config {
  /// `auto`, `cpu`, or explicit devices such as `cuda:0`.
  std::vector<std::string> devices = {defaults::devices};
  std::string python = defaults::python;
  double timeout_s = defaults::timeout_s;
  int64_t trials = defaults::trials;
  double atol = defaults::atol;
  double rtol = defaults::rtol;
  int64_t cpu_threads = defaults::cpu_threads;
  int64_t warmup_calls = defaults::warmup_calls;
  int64_t min_samples = defaults::min_samples;
  int64_t max_samples = defaults::max_samples;
  double min_timing_s = defaults::min_timing_s;
  double max_timing_s = defaults::max_timing_s;
  double target_ci = defaults::target_ci;
  std::string timing_statistic = defaults::timing_statistic;
  int64_t timing_rounds = defaults::timing_rounds;
  int64_t borderline_trials = defaults::borderline_trials;
  std::string mode = defaults::mode;
  std::string cache_dir = defaults::cache_dir;
  int64_t compile_workers = defaults::compile_workers;
  int64_t gpu_lanes = defaults::gpu_lanes;
  double compile_timeout_s = defaults::compile_timeout_s;
  int64_t pool_size = defaults::pool_size;
  double memory_limit_gb = defaults::memory_limit_gb;
  std::string sandbox = defaults::sandbox;
  /// The account runners run as when kiln is root (docs/security.md); empty: `kiln-runner`,
  /// else an unused uid in 64000-64999.
  std::string runner_user;
  int64_t retime_rounds = defaults::retime_rounds;
  int64_t retime_top = defaults::retime_top;
  /// Seconds to wait for another kiln process to let go of a device (gpu/device_lock.hpp).
  double device_lock_wait_s = defaults::device_lock_wait_s;
  /// Freeze kiln's other children while a runner is timed (gpu/quiet_host.hpp).
  bool quiet_host = defaults::quiet_host;
  /// Cores of each GPU's timed runner (0 = no pinning).
  int64_t timer_cores = defaults::timer_cores;
};

struct llm_profile_config {
  std::string name;
  std::string provider; ///< rules | openai | anthropic | gemini | replay
  std::string base_url; ///< API root up to and including its version segment
  std::string model;
  std::string api_key_env;  ///< environment variable that holds the key
  std::string api_key_file; ///< or a file that holds it (owner-only permissions)
  std::string system_prompt;
  double temperature = defaults::temperature;
  int64_t max_tokens = defaults::max_tokens;
  std::vector<std::string> stop;
  std::string reasoning_effort;               ///< OpenAI-compatible: minimal | low | medium | high
  int64_t thinking_budget = 0;                ///< Anthropic and Gemini: reasoning tokens, 0 = off
  bool stream = true;                         ///< server-sent events
  double timeout_s = defaults::llm_timeout_s; ///< one attempt, whole reply
  double connect_timeout_s = defaults::llm_connect_timeout_s; ///< TCP and TLS handshake
  double idle_timeout_s = defaults::llm_idle_timeout_s;       ///< no byte for this long: retry
  int64_t max_concurrency = defaults::llm_max_concurrency;    ///< requests in flight
  double requests_per_minute = 0;                             ///< 0 = no limit
  double tokens_per_minute = 0; ///< prompt estimate + max_tokens per request; 0 = no limit
  int64_t max_retries = defaults::llm_max_retries;
  double retry_initial_s = defaults::llm_retry_initial_s; ///< first backoff, doubled each time
  double retry_max_s = defaults::llm_retry_max_s;
  double usd_per_mtok_input = 0;  ///< price per million input tokens
  double usd_per_mtok_output = 0; ///< per million output tokens (reasoning included)
  std::string replay_from;        ///< replay: the archive.sqlite whose answers are served
};

struct agent_config {
  std::string name;
  std::string llm; ///< the profile it queries (the first of `llms`)
  /// Every profile it may query, with a weight each: an ensemble, or a cheap model for most
  /// queries and a strong one for some. One profile, weight 1, unless the config lists more.
  std::vector<std::string> llms;
  std::vector<double> weights;
  std::string template_path; ///< empty: the built-in template of its prompt kinds
  /// Templates for single prompt kinds (`brainstorm`, `optimize`, `improve`, `fix`,
  /// `crossover`, `review`): they win over `template_path` for their kind.
  std::map<std::string, std::string> template_paths;
  /// How replies are read: "auto" (ideas from a brainstorm, a program otherwise), "code",
  /// "ideas", or "text" (neither: the raw reply only, for roles that comment).
  std::string parser = "auto";
  int64_t max_attempts = defaults::max_attempts;
};

/// The profiles of a role and their weights (`llm` alone, weight 1, when `llms` is empty).
inline std::vector<std::pair<std::string, double>> weighted_profiles(const agent_config& a) {
  std::vector<std::pair<std::string, double>> out;
  if (a.llms.empty()) {
    out.emplace_back(a.llm, 1.0);
    return out;
  }
  for (size_t i = 0; i < a.llms.size(); ++i)
    out.emplace_back(a.llms[i], i < a.weights.size() ? a.weights[i] : 1.0);
  return out;
}

struct strategy_config {
  std::string kind = defaults::strategy;
  int64_t max_ideas = defaults::max_ideas;
  int64_t phases = defaults::phases;
  int64_t parents = defaults::parents;
  int64_t parallel_candidates = defaults::parallel_candidates;
  int64_t stall_phases = 0; ///< end a task after this many phases without improvement; 0 = never
  // PIKE-O (kind = "pike-o"); defaults are the paper's PIKE-O.
  int64_t iterations = 300;
  int64_t islands = 3;
  int64_t population_size = 25;
  int64_t archive_size = 12;
  int64_t migration_interval = 50;
  double migration_rate = 0.1;
  double exploration_ratio = 0.2;
  double exploitation_ratio = 0.7;
  std::vector<std::string> feature_dimensions = {"complexity", "diversity"};
  int64_t feature_bins = 10;
  int64_t top_programs = 3;
  int64_t inspirations = 2;
  std::string template_kind = "crossover"; ///< `template`: "crossover" or "mutation"
  /// Role names the strategy uses.
  std::string brainstormer = "brainstormer";
  std::string optimizer = "optimizer";
  std::string error_fixer = "error_fixer";
  /// A role that checks each new program before it is evaluated; empty: none (PIKE-B).
  std::string reviewer;
};

struct config {
  std::string path; ///< the file it came from, empty for built-in defaults
  run_config run;
  budget_config budget;
  evaluator_config evaluator;
  std::map<std::string, llm_profile_config> llm;
  std::map<std::string, agent_config> agents;
  strategy_config strategy;
};

/// A configuration problem, already rendered as `file:line:column: what`.
struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Reads and validates a TOML file; throws `config_error` naming the place of the first problem.
config load_config(const std::string& path);

/// Parses TOML text; `origin` names it in errors.
config parse_config(const std::string& text, const std::string& origin);

} // namespace kiln
