#pragma once

// One runner process of the harness: what it is asked (job.json), how it is started (scrubbed
// environment, own process group, timeout), and what it reported (result.json). The evaluation
// procedure (evaluate.cpp) builds its judgements on these.

#include <chrono>
#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "config/rules.hpp"
#include "gpu/build_cache.hpp"
#include "gpu/evaluate.hpp"
#include "gpu/process.hpp"
#include "gpu/runner_pool.hpp"
#include "gpu/sandbox.hpp"
#include "gpu/timing.hpp"
#include "messages/eval.hpp"

namespace kiln {

using steady = std::chrono::steady_clock;

constexpr size_t tail_bytes = rules::tail_bytes;
constexpr double facts_timeout_s = rules::facts_timeout_s;

double ms_since(steady::time_point t0);
std::string read_file(const std::string& path);
void write_file(const std::string& path, std::string_view text);

/// One runner invocation: what job.json says.
struct runner_job {
  std::string mode; ///< facts | reference | candidate | health | ...
  std::string task_path;
  std::string candidate_path;
  /// out_dir and cwd of the runner when it starts cold (no pool in the context); a pooled
  /// runner works in its own folder instead: read runner_report::dir.
  std::string dir;
  std::string device; ///< as the runner sees it (`cpu` or `cuda:0`)
  uint64_t weight_seed = 0;
  std::vector<uint64_t> seeds;
  bool time = false;
  int threads = 1;
  bool pike = false;
  /// torch.compile mode applied right after construction (`default`, `max-autotune`); empty:
  /// eager. Only `kiln baseline` sets it.
  std::string compile_mode;
  /// do_bench budgets of pike mode; 0 means PIKE's 5000 / 1000 ms (tests make them small).
  double pike_rep_ms = 0;
  double pike_warmup_ms = 0;
  /// Rotating input sets; 0 lets the harness choose (enough to exceed the L2, at least 2).
  int buffer_sets = 0;
  /// The shared build cache, which the runner reads; empty takes the settings' (run_runner),
  /// still empty: none.
  std::string cache_dir;
  /// Where the runner stages its builds for kiln to publish into the cache once it has ended
  /// (gpu/build_cache.hpp); set by run_runner: `stage/` of the runner's own folder.
  std::string stage_dir;
  /// TORCH_CUDA_ARCH_LIST for extension builds (e.g. `9.0`); empty: the device's capability.
  std::string arch_list;
  /// Compile mode only: build this requested precompiled header instead of importing.
  std::string pch_key; /// After the trials (reference) or after timing (candidate), one more call
                       /// on the inputs
  /// of `recheck_seed`, written into the timed input tensors in place: catches results cached
  /// across calls (docs/evaluation.md).
  bool recheck = false;
  uint64_t recheck_seed = 0;
  /// Echoed in result.json: a result.json without it was not written by this runner's harness.
  std::string nonce;
  /// Where get_inputs makes the inputs: "" lets the runner choose (the device where torch can,
  /// else the CPU) and report it; "device" or "cpu" is binding. The candidate is told what the
  /// reference chose, so both see the same values.
  std::string inputs_on;
  /// Candidate or reference mode (evaluations and re-timings) with a pooled runner: after the
  /// trials, ask the parent (through `gate` of run_runner) whether to go on timing; a candidate
  /// whose outputs are wrong is not timed, nor a reference that another lane timed meanwhile.
  bool gate = false;
  /// Candidate mode: fill freed memory with NaN before each call, so that an output read from
  /// memory nobody wrote shows. Off only for the diagnosis of a NaN verdict (evaluate.cpp).
  bool poison = true;
};

/// One load_inline / load call of a runner (result.json `builds`, gpu/harness/kiln_build.py).
struct build_record {
  std::string kind; ///< load_inline | load
  std::string name;
  std::string key; ///< content address in the cache
  bool hit = false;
  double seconds = 0;
  bool pch = false;       ///< compiled with the precompiled header
  std::string pch_key;    ///< the header this flag set uses (or asks for)
  std::string error;      ///< the build's exception text (with the compiler's log)
  std::string error_line; ///< the first line of it that names an error
};

struct trial_record {
  uint64_t seed = 0;
  bool inputs_mutated = false;
  std::vector<int32_t> aliases; ///< outputs that share storage with an input
};

struct scratch_guard;

/// How one runner process ended and what its result.json said.
struct runner_report {
  /// Where the runner worked: result.json, out_<k>.pt, stdout.txt, stderr.txt. A pooled
  /// runner's folder is removed when the last copy of the report goes (unless keep_scratch).
  std::string dir;
  std::shared_ptr<scratch_guard> dir_guard;
  process_result proc;
  bool have_result = false;
  std::string result_problem; ///< why result.json is missing or unusable
  bool ok = false;
  std::string stage;
  std::string error;
  std::string structure;
  std::vector<trial_record> trials;
  std::vector<double> samples_ms;
  std::vector<timing_block> blocks;
  double timing_wall_ms = 0;
  double load_ms = 0;
  /// The harness's own account of its time, e.g. `device_init 812 ms, inputs 1203 ms, ...`
  /// (result.json `phases_ms`), for debug logs.
  std::string phases;
  /// What the timing loop chose (result.json `timing_info`): input sets it rotated, and in pike
  /// mode do_bench's estimate and call counts.
  int32_t buffer_sets = 0;
  double pike_estimate_ms = 0;
  int64_t pike_n_warmup = 0;
  int64_t pike_n_repeat = 0;
  /// The runner's own medians of its per-call loop (GPU): before the start event, from it to
  /// the end event's synchronize, and after; and how many cores it may run on. Reported by the
  /// process the candidate shares: for logs beside the outside clock, never for a verdict.
  double loop_prepare_ms = 0;
  double loop_sample_ms = 0;
  double loop_after_ms = 0;
  int32_t loop_cores = 0;
  runner_facts facts;
  /// What the facts depend on (result.json `facts.stamps`, facts mode only): files and folders
  /// with their stats, taken before torch was imported (gpu/facts_cache.hpp).
  std::vector<std::pair<std::string, std::string>> facts_stamps;
  /// The interpreter the facts runner ran, symbolic links resolved (`facts.executable`).
  std::string facts_executable;
  std::vector<build_record> builds;
  /// Integrity rules the harness saw broken while the candidate ran (result.json
  /// `violations`): outputs that are not plain tensors, replaced functions, live threads.
  std::vector<std::string> violations;
  bool have_recheck = false;
  trial_record recheck;  ///< the post-timing call (runner_job::recheck)
  bool stateful = false; ///< the model's parameters or buffers changed during the trials
  std::string inputs_on; ///< where the runner made its inputs: "device" or "cpu"
  /// "Model" when the candidate defined no ModelNew and its Model was judged; else empty.
  std::string model_class;
  bool gate_stopped = false; ///< told at the gate not to time (its outputs were wrong)
  /// The parent answered `time` at the gate. Timing samples from a gated job without it were
  /// taken by a runner that got past its gate.
  bool gate_go = false;
  /// The parent's stamps of the timing loop (gated pooled runners in kiln mode).
  outside_clock stamps;
  std::string nonce; ///< as result.json reports it
  /// What kiln published into the build cache from the runner's staging folder.
  staging_report staged;
  std::string stdout_path;
  std::string stderr_path;
};

/// Why a runner failed, and the verdict kind that failure means; empty reason when it did not.
struct runner_failure {
  verdict_status status = verdict_status::runtime_error;
  std::string reason;
  std::string code; ///< the verdict code (docs/evaluation.md), set with the reason
};

/// Stops the scratch folder from outliving an evaluation, whatever path leaves it.
struct scratch_guard {
  std::string dir;
  bool keep = false;
  ~scratch_guard();
};

class runner_pool;

/// Everything one evaluation needs to start runners; built by evaluate().
struct runner_context {
  const eval_settings& settings;
  std::string harness_path;
  std::string scratch;
  std::string visible_devices;
  std::string runner_device;
  int threads = 1;
  /// Where runners come from; null starts one cold in runner_job::dir.
  runner_pool* pool = nullptr;
  /// Told when a runner ends badly; null: nobody keeps track.
  device_health* health = nullptr;
  /// Called with the runner's pid (its process group) once it runs: a pooled one when it is
  /// taken, a cold one right after its start. Timing paths open a quiet_window with it
  /// (gpu/quiet_host.hpp); empty: nobody asks.
  std::function<void(pid_t)> on_start = nullptr;
};

/// job.json for `j`, with the timing settings of `cfg`.
std::string job_json(const runner_job& j, const evaluator_config& cfg);

/// Reads result.json into `r`; on a missing or malformed file sets `result_problem`.
void parse_result(const std::string& path, runner_report& r);

/// The runners' environment: nothing inherited but the few variables named in runner.cpp.
/// `home` is the runner's own folder, `tmp` its TMPDIR (`/tmp` where that is private to it).
std::vector<std::string> runner_env(const std::string& python, const std::string& home,
                                    const std::string& tmp, const std::string& visible,
                                    int threads);

/// `program` as an absolute path (looked up on PATH when it is a bare name).
std::string absolute_program(const std::string& program);

/// The verdict a runner's ending means; an empty reason when it ended well.
runner_failure judge_process(const runner_report& r, double timeout_s);

/// What a gated runner said on its control socket: `trials` once its trial outputs are
/// written, `block` after each block of a paired timing.
struct gate_call {
  std::string dir; ///< the runner's folder
  std::string message;
  pid_t pid = 0; ///< the runner (its process group has the same id)
};
/// The answer to a gate_call: `time` (all the timing now), `block` (one block, then ask
/// again), `done` (no more blocks) or `stop` (no timing).
using gate_fn = std::function<std::string(const gate_call&)>;

/// Starts one runner for `job` (from `ctx.pool` when set), waits for it (at most `timeout_s`
/// from the hand-over) and reads its report. Runners are sandboxed (runner_sandbox).
/// `gate`, for a job with `gate` set, is called with the runner's folder once its trial outputs
/// are written; true lets it go on to timing. Without a pool there is no gate: the job runs
/// through.
runner_report run_runner(const runner_context& ctx, const runner_job& job, double timeout_s,
                         const std::function<bool(const std::string& dir)>& gate = {});
/// The same with the whole gate protocol (paired timing, docs/evaluation.md).
runner_report run_runner(const runner_context& ctx, const runner_job& job, double timeout_s,
                         const gate_fn& gate);

/// A pooled runner that runs on a thread of its own while the caller goes on: taken from the
/// pool and handed its job in the constructor (the calling thread, which owns the pool), waited
/// for on the thread, and its report read by `finish()` (the calling thread again). The
/// reference of a paired timing waits at its gate this way while the candidate runs.
class async_runner {
public:
  /// `ended` is called on the runner's thread once its process has ended.
  async_runner(const runner_context& ctx, const runner_job& job, double timeout_s, gate_fn gate,
               std::function<void()> ended = {});
  /// Waits for the runner (if finish() was not called) so that no thread outlives it.
  ~async_runner();
  async_runner(const async_runner&) = delete;
  async_runner& operator=(const async_runner&) = delete;
  pid_t pid() const { return pid_; }
  /// Waits for the runner to end and returns its report; once.
  runner_report finish();

private:
  const runner_context& ctx_;
  runner_job job_;
  runner_report report_;
  pid_t pid_ = 0;
  std::thread thread_;
  bool finished_ = false;
};

/// Why a runner's ending makes the device suspect (a crash by signal, a timeout, CUDA error
/// text in its error or stderr on a CUDA device); empty when it does not.
std::string runner_suspicion(const runner_report& r, bool cuda);

/// The isolation of this engine's runners: `[evaluator] sandbox`, `<work_dir>/cache` writable
/// (never the shared build cache), and for the CPU an address-space limit (`memory_limit_gb`,
/// 0 = three quarters of physical memory). Each runner adds its own folder and private /tmp.
sandbox_policy runner_sandbox(const eval_settings& settings);

/// How the engine's pool starts runners for `settings.device`.
runner_launch runner_pool_launch(const eval_settings& settings, const std::string& harness_path);

/// Maps `cpu` / `cuda:N` to the runner's CUDA_VISIBLE_DEVICES (empty for the CPU; the GPU's
/// UUID for `cuda:N`, gpu/devices.hpp) and the device name the runner uses (`cpu`, `cuda:0`).
/// False for an id that is not a device of this host.
bool map_device(const std::string& device, std::string& visible, std::string& runner_device);

/// Torch threads of a runner.
int runner_threads(const evaluator_config& cfg);

/// A fresh `<work_dir>/e<counter>-<pid>`; skips names another engine already took.
std::string make_scratch(const std::string& work_dir, uint64_t& counter);

} // namespace kiln
