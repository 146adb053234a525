// The evaluation procedure (docs/evaluation.md explains every rule):
//
//   draw seeds ─> reference runner ─> stash its outputs in memory ─> candidate runner
//        ─> process outcomes ─> structure ─> mutation ─> libtorch comparison per trial
//        ─> timing sanity ─> correct (speedup = reference median / candidate median)
//
// Both runners are fresh processes of gpu/harness/kiln_harness.py, started one after the other
// (never two timed things at once), with a scrubbed environment. The parent trusts the
// runners' files only as far as it must and derives every judgement itself.

#include "gpu/evaluate.hpp"
#include "gpu/json_text.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <unistd.h>

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "gpu/compare.hpp"
#include "gpu/harness.hpp"
#include "gpu/process.hpp"
#include "gpu/timing.hpp"

namespace kiln {

namespace {

namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

/// How much of a runner's stdout/stderr a verdict carries.
constexpr size_t tail_bytes = 4000;
/// The facts runner only imports torch (and Triton); this is generous.
constexpr double facts_timeout_s = 300;

double ms_since(steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(steady::now() - t0).count();
}

// -- files ---------------------------------------------------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

void write_file(const std::string& path, std::string_view text) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

// -- runner protocol -----------------------------------------------------------------------------

/// One runner invocation: what job.json says.
struct runner_job {
  std::string mode; ///< facts | reference | candidate
  std::string task_path;
  std::string candidate_path;
  std::string dir;    ///< out_dir and cwd of the runner
  std::string device; ///< as the runner sees it (`cpu` or `cuda:0`)
  uint64_t weight_seed = 0;
  std::vector<uint64_t> seeds;
  bool time = false;
  int threads = 1;
  bool pike = false;
};

std::string job_json(const runner_job& j, const evaluator_config& cfg) {
  std::ostringstream o;
  o.precision(17);
  o << "{\"mode\": " << json_quote(j.mode) << ", \"task_path\": " << json_quote(j.task_path)
    << ", \"candidate_path\": " << json_quote(j.candidate_path)
    << ", \"out_dir\": " << json_quote(j.dir) << ", \"device\": " << json_quote(j.device)
    << ", \"weight_seed\": " << j.weight_seed << ", \"seeds\": [";
  for (size_t i = 0; i < j.seeds.size(); ++i)
    o << (i ? ", " : "") << j.seeds[i];
  o << "], \"time\": " << (j.time ? "true" : "false")
    << ", \"timing\": {\"warmup_calls\": " << cfg.warmup_calls
    << ", \"min_samples\": " << cfg.min_samples << ", \"max_samples\": " << cfg.max_samples
    << ", \"max_seconds\": " << cfg.max_timing_s << ", \"target_ci\": " << cfg.target_ci
    << "}, \"threads\": " << j.threads << ", \"pike_mode\": " << (j.pike ? "true" : "false")
    << "}\n";
  return o.str();
}

struct trial_record {
  uint64_t seed = 0;
  bool inputs_mutated = false;
};

/// How one runner process ended and what its result.json said.
struct runner_report {
  process_result proc;
  bool have_result = false;
  std::string result_problem; ///< why result.json is missing or unusable
  bool ok = false;
  std::string stage;
  std::string error;
  std::string structure;
  std::vector<trial_record> trials;
  std::vector<double> samples_ms;
  double timing_wall_ms = 0;
  double load_ms = 0;
  runner_facts facts;
  std::string stdout_path;
  std::string stderr_path;
};

std::string get_string(simdjson::dom::element e, const char* key) {
  std::string_view v;
  if (e[key].get(v))
    return {};
  return std::string{v};
}

double get_number(simdjson::dom::element e, const char* key) {
  double v = 0;
  if (e[key].get(v))
    return 0;
  return v;
}

bool get_bool(simdjson::dom::element e, const char* key) {
  bool v = false;
  if (e[key].get(v))
    return false;
  return v;
}

void parse_facts(simdjson::dom::element f, runner_facts& out) {
  out.python = get_string(f, "python");
  out.python_version = get_string(f, "python_version");
  out.torch_version = get_string(f, "torch_version");
  out.cuda = get_bool(f, "cuda");
  out.triton = get_bool(f, "triton");
  out.compile = get_bool(f, "compile");
  out.device_name = get_string(f, "device_name");
  out.cpu_threads = static_cast<int32_t>(get_number(f, "cpu_threads"));
  out.multiprocessors = static_cast<int32_t>(get_number(f, "multiprocessors"));
  out.memory_bytes = static_cast<int64_t>(get_number(f, "memory_bytes"));
  out.capability = get_string(f, "capability");
}

/// Reads result.json into `r`; on a missing or malformed file sets `result_problem`.
void parse_result(const std::string& path, runner_report& r) {
  if (!fs::exists(path)) {
    r.result_problem = "no result";
    return;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.load(path).get(doc)) {
    r.result_problem = std::string{"unreadable result.json ("} + simdjson::error_message(err) + ")";
    return;
  }
  bool ok = false;
  std::string_view stage;
  if (doc["ok"].get(ok) || doc["stage"].get(stage)) {
    r.result_problem = "result.json without ok/stage";
    return;
  }
  r.have_result = true;
  r.ok = ok;
  r.stage = std::string{stage};
  r.error = get_string(doc, "error");
  r.structure = get_string(doc, "structure");
  r.timing_wall_ms = get_number(doc, "timing_wall_ms");
  r.load_ms = get_number(doc, "load_ms");
  simdjson::dom::element facts;
  if (!doc["facts"].get(facts))
    parse_facts(facts, r.facts);
  simdjson::dom::array trials;
  if (!doc["trials"].get(trials)) {
    for (auto t : trials) {
      trial_record rec;
      uint64_t seed = 0;
      if (!t["seed"].get(seed))
        rec.seed = seed;
      rec.inputs_mutated = get_bool(t, "inputs_mutated");
      r.trials.push_back(rec);
    }
  }
  simdjson::dom::array samples;
  if (!doc["samples_ms"].get(samples)) {
    for (auto s : samples) {
      double v = 0;
      if (s.get(v)) {
        r.result_problem = "result.json with a non-numeric timing sample";
        r.have_result = false;
        return;
      }
      r.samples_ms.push_back(v);
    }
  }
}

/// The runners' environment: nothing inherited but CUDA_HOME, so a run does not depend on the
/// shell kiln was started from.
std::vector<std::string> runner_env(const std::string& python, const std::string& scratch,
                                    const std::string& work_dir, const std::string& visible,
                                    int threads) {
  // The interpreter's own folder first: a virtual environment keeps `ninja` (which
  // torch.utils.cpp_extension needs) next to its python.
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  auto py_dir = fs::path{python}.parent_path().string();
  if (!py_dir.empty() && py_dir != "/usr/bin" && py_dir != "/bin" && py_dir != "/usr/local/bin")
    path = py_dir + ":" + path;
  std::vector<std::string> env = {
      "PATH=" + path,
      "HOME=" + scratch,
      "TMPDIR=" + scratch + "/tmp",
      "LANG=C.UTF-8",
      "PYTHONDONTWRITEBYTECODE=1",
      "OMP_NUM_THREADS=" + std::to_string(threads),
      // OpenMP's default spin-waiting makes per-call CPU times 10-20x worse whenever anything
      // else runs on a small machine; passive waiting keeps them stable (measured on 2 cores).
      "OMP_WAIT_POLICY=PASSIVE",
      // glibc moves its mmap threshold as large blocks are freed, so the same code can run 4x
      // slower in one process than in another (measured: 7_RunningMean at 9.8 ms or 2.2 ms per
      // call, depending on history). Fixed thresholds make reference and candidate comparable.
      "MALLOC_MMAP_THRESHOLD_=33554432",
      "MALLOC_TRIM_THRESHOLD_=17179869184",
      "TORCH_EXTENSIONS_DIR=" + work_dir + "/cache/torch_extensions",
      "TRITON_CACHE_DIR=" + work_dir + "/cache/triton",
      "CUDA_VISIBLE_DEVICES=" + visible,
  };
  // Passed through when set: where CUDA lives, and the host's safety switches (shared GPU
  // servers turn NVLink multicast off, and every program there must keep it off).
  for (const char* name : {"CUDA_HOME", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                           "NVSHMEM_DISABLE_NVLS"})
    if (const char* value = std::getenv(name))
      env.push_back(std::string{name} + "=" + value);
  return env;
}

/// `python` as an absolute path: the runners get a scrubbed PATH, which must not change which
/// interpreter a bare name means.
std::string absolute_program(const std::string& program) {
  if (program.empty() || program.find('/') != std::string::npos)
    return program;
  auto found = find_on_path(program);
  if (!found.empty())
    return found.front();
  return program;
}

/// Why a runner failed, and the verdict kind that failure means; empty reason when it did not.
struct runner_failure {
  verdict_status status = verdict_status::runtime_error;
  std::string reason;
};

std::string signal_text(int sig) {
  const char* name = ::strsignal(sig);
  return "signal " + std::to_string(sig) + (name ? std::string{" ("} + name + ")" : "");
}

runner_failure judge_process(const runner_report& r, double timeout_s) {
  using vs = verdict_status;
  if (!r.proc.started)
    return {vs::runtime_error, "cannot start the runner: " + r.proc.error};
  if (r.proc.timed_out) {
    std::ostringstream o;
    o << "timed out after " << timeout_s << " s";
    if (r.have_result)
      o << " (stage " << r.stage << ")";
    return {vs::timeout, o.str()};
  }
  // A reported exception explains more than the crash that may have followed it.
  if (r.have_result && !r.ok) {
    auto status =
        (r.stage == "import" || r.stage == "build") ? vs::compile_error : vs::runtime_error;
    auto reason = r.error.empty() ? "failed at stage " + r.stage : r.error;
    return {status, reason};
  }
  if (r.proc.signal != 0)
    return {vs::runtime_error, "runner killed by " + signal_text(r.proc.signal)};
  if (!r.have_result)
    return {vs::runtime_error, "runner exited with code " + std::to_string(r.proc.exit_code)
                                   + " and " + r.result_problem};
  if (r.proc.exit_code != 0)
    return {vs::runtime_error, "runner exited with code " + std::to_string(r.proc.exit_code)};
  return {vs::correct, {}};
}

double sum_of(const std::vector<double>& xs) {
  return std::accumulate(xs.begin(), xs.end(), 0.0);
}

/// Stops the scratch folder from outliving an evaluation, whatever path leaves it.
struct scratch_guard {
  std::string dir;
  bool keep = false;
  ~scratch_guard() {
    if (keep || dir.empty())
      return;
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec)
      spdlog::warn("evaluator: cannot remove {}: {}", dir, ec.message());
  }
};

} // namespace

evaluation_engine::evaluation_engine(eval_settings settings) : settings_(std::move(settings)) {
  settings_.python = absolute_program(settings_.python);
  if (settings_.work_dir.empty())
    throw std::runtime_error("evaluator: empty work_dir");
  settings_.work_dir = fs::absolute(settings_.work_dir).lexically_normal().string();
  fs::create_directories(settings_.work_dir);
  fs::create_directories(settings_.work_dir + "/cache/torch_extensions");
  fs::create_directories(settings_.work_dir + "/cache/triton");
  harness_path_ = install_harness(settings_.work_dir);
}

namespace {

/// Everything one evaluation needs to start runners; built by evaluate().
struct runner_context {
  const eval_settings& settings;
  std::string harness_path;
  std::string scratch;
  std::string visible_devices;
  std::string runner_device;
  int threads = 1;
};

runner_report run_runner(const runner_context& ctx, const runner_job& job, double timeout_s) {
  runner_report r;
  fs::create_directories(job.dir);
  auto job_path = job.dir + "/job.json";
  write_file(job_path, job_json(job, ctx.settings.cfg));
  // The harness is re-checked before every start: an earlier candidate may have rewritten it.
  install_harness(ctx.settings.work_dir);
  process_options opts;
  opts.argv = {ctx.settings.python, "-I", "-B", ctx.harness_path, job_path};
  opts.env = runner_env(ctx.settings.python, ctx.scratch, ctx.settings.work_dir,
                        ctx.visible_devices, ctx.threads);
  opts.cwd = job.dir;
  r.stdout_path = job.dir + "/stdout.txt";
  r.stderr_path = job.dir + "/stderr.txt";
  opts.stdout_path = r.stdout_path;
  opts.stderr_path = r.stderr_path;
  opts.timeout_s = timeout_s;
  spdlog::debug("evaluator {}: {} runner in {}", ctx.settings.device, job.mode, job.dir);
  r.proc = run_process(opts);
  // After a timeout there is normally no result; one written before a hang at exit counts.
  if (r.proc.started)
    parse_result(job.dir + "/result.json", r);
  return r;
}

/// Maps `cpu` / `cuda:N` to CUDA_VISIBLE_DEVICES and the device name the runner uses.
bool map_device(const std::string& device, std::string& visible, std::string& runner_device) {
  if (device == "cpu") {
    visible = "";
    runner_device = "cpu";
    return true;
  }
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5
      && device.find_first_not_of("0123456789", 5) == std::string::npos) {
    visible = device.substr(5);
    runner_device = "cuda:0";
    return true;
  }
  return false;
}

int runner_threads(const evaluator_config& cfg) {
  if (cfg.cpu_threads > 0)
    return static_cast<int>(cfg.cpu_threads);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

/// A fresh `<work_dir>/e<counter>-<pid>`; skips names another engine already took.
std::string make_scratch(const std::string& work_dir, uint64_t& counter) {
  for (;;) {
    auto dir = work_dir + "/e" + std::to_string(counter++) + "-" + std::to_string(::getpid());
    if (fs::create_directory(dir))
      return dir;
  }
}

} // namespace

verdict evaluation_engine::evaluate(const eval_job& job, uint64_t seed) {
  auto t0 = steady::now();
  verdict v;
  v.device = settings_.device;
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  const auto& cfg = settings_.cfg;
  try {
    using vs = verdict_status;
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(cfg)};
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
      throw std::runtime_error("unknown device " + settings_.device);
    ctx.scratch = make_scratch(settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    fs::create_directories(ctx.scratch + "/tmp");

    // The task as it was read when the run started (task_spec::source), not as the file on
    // disk may be now.
    auto task_source = job.task.source.empty() ? read_file(job.task.path) : job.task.source;
    auto task_path = ctx.scratch + "/task.py";
    auto candidate_path = ctx.scratch + "/candidate.py";
    write_file(task_path, task_source);
    write_file(candidate_path, job.code);

    // Fresh inputs and weights per evaluation: a candidate cannot learn the inputs it will be
    // judged on. PIKE mode pins them to PIKE's constants instead.
    const bool pike = cfg.mode == "pike";
    uint64_t weight_seed = 1;
    std::vector<uint64_t> seeds;
    if (pike) {
      seeds = {0};
    } else {
      // 63 bits: a seed must also fit a signed int64 wherever torch or a task stores one.
      std::mt19937_64 rng{seed};
      weight_seed = rng() >> 1;
      for (int64_t i = 0; i < std::max<int64_t>(1, cfg.trials); ++i)
        seeds.push_back(rng() >> 1);
    }
    const double timeout_s = job.timeout_s > 0 ? job.timeout_s : cfg.timeout_s;
    const auto ref_key =
        std::to_string(std::hash<std::string>{}(task_source)) + "@" + settings_.device;
    const auto cached = reference_times_.find(ref_key);
    const bool time_reference = cached == reference_times_.end();

    runner_job ref_job;
    ref_job.mode = "reference";
    ref_job.task_path = task_path;
    ref_job.dir = ctx.scratch + "/ref";
    ref_job.device = ctx.runner_device;
    ref_job.weight_seed = weight_seed;
    ref_job.seeds = seeds;
    ref_job.time = time_reference;
    ref_job.threads = ctx.threads;
    ref_job.pike = pike;
    auto ref = run_runner(ctx, ref_job, timeout_s);

    auto fill_tails = [&v](const runner_report& r) {
      v.stdout_tail = tail_of_file(r.stdout_path, tail_bytes);
      v.stderr_tail = tail_of_file(r.stderr_path, tail_bytes);
    };
    auto finish = [&](vs status, std::string reason) {
      v.status = status;
      v.reason = std::move(reason);
      v.wall_ms = ms_since(t0);
      return v;
    };

    // A reference that fails is the task's problem, not the candidate's.
    auto ref_failure = judge_process(ref, timeout_s);
    if (ref_failure.reason.empty() && ref.trials.size() != seeds.size())
      ref_failure.reason = "reported " + std::to_string(ref.trials.size()) + " trials of "
                           + std::to_string(seeds.size());
    if (ref_failure.reason.empty() && time_reference && ref.samples_ms.empty())
      ref_failure.reason = "no timing samples";
    if (!ref_failure.reason.empty()) {
      fill_tails(ref);
      return finish(vs::runtime_error, "reference failed: " + ref_failure.reason);
    }
    timing_stats reference_stats = time_reference ? summarize(ref.samples_ms) : cached->second;
    if (time_reference)
      reference_times_[ref_key] = reference_stats;

    // The reference's outputs leave the disk while the candidate runs, so the candidate cannot
    // read them or overwrite them; they come back for the comparison.
    std::vector<std::string> ref_outputs;
    for (size_t k = 0; k < seeds.size(); ++k)
      ref_outputs.push_back(read_file(ref_job.dir + "/out_" + std::to_string(k) + ".pt"));
    fs::remove_all(ref_job.dir);

    runner_job cand_job = ref_job;
    cand_job.mode = "candidate";
    cand_job.candidate_path = candidate_path;
    cand_job.dir = ctx.scratch + "/cand";
    cand_job.time = true;
    auto cand = run_runner(ctx, cand_job, timeout_s);
    fill_tails(cand);

    if (auto f = judge_process(cand, timeout_s); !f.reason.empty())
      return finish(f.status, f.reason);
    if (cand.trials.size() != seeds.size())
      return finish(vs::rejected, "candidate runner reported " + std::to_string(cand.trials.size())
                                      + " trials of " + std::to_string(seeds.size()));
    for (size_t k = 0; k < seeds.size(); ++k)
      if (cand.trials[k].seed != seeds[k])
        return finish(vs::rejected, "candidate runner used other input seeds");
    if (cand.structure != ref.structure)
      return finish(vs::rejected,
                    "output structure " + cand.structure + ", expected " + ref.structure);
    for (const auto& t : cand.trials)
      if (t.inputs_mutated)
        return finish(vs::rejected, "candidate mutated its inputs");

    // The comparison reads files in a folder made after the candidate is gone; file names are
    // the parent's, never taken from the runner's report.
    auto cmp_dir = ctx.scratch + "/cmp";
    fs::create_directories(cmp_dir);
    output_comparison cmp;
    for (size_t k = 0; k < seeds.size(); ++k) {
      auto ref_file = cmp_dir + "/ref_" + std::to_string(k) + ".pt";
      write_file(ref_file, ref_outputs[k]);
      auto cand_file = cand_job.dir + "/out_" + std::to_string(k) + ".pt";
      output_comparison trial;
      try {
        trial = compare_outputs(ref_file, cand_file, {cfg.atol, cfg.rtol});
      } catch (const std::exception& e) {
        return finish(vs::runtime_error, std::string{"cannot compare outputs: "} + e.what());
      }
      if (k == 0)
        cmp = trial;
      else
        merge_comparison(cmp, trial);
    }
    v.max_abs_diff = cmp.max_abs_diff;
    v.max_rel_diff = cmp.max_rel_diff;
    if (!cmp.ok)
      return finish(cmp.status, cmp.reason);

    // Timing sanity: samples must be real durations, and a process cannot have spent more
    // time in calls than it lived (a patched clock or event would show up here).
    if (cand.samples_ms.empty())
      return finish(vs::rejected, "candidate runner reported no timing samples");
    for (double s : cand.samples_ms)
      if (!std::isfinite(s) || s <= 0)
        return finish(vs::rejected, "candidate runner reported an invalid timing sample");
    const double in_process = sum_of(cand.samples_ms);
    if (in_process > cand.proc.wall_ms
        || (cand.timing_wall_ms > 0 && in_process > cand.timing_wall_ms * 1.01 + 1.0))
      return finish(vs::rejected, "in-process timings exceed the wall clock");

    v.candidate = summarize(cand.samples_ms);
    v.reference = reference_stats;
    // PIKE reports do_bench's mean; kiln the median, which one slow call cannot move.
    const double ref_t = pike ? v.reference.mean_ms : v.reference.median_ms;
    const double cand_t = pike ? v.candidate.mean_ms : v.candidate.median_ms;
    v.speedup = cand_t > 0 ? ref_t / cand_t : 0;
    std::ostringstream why;
    why.precision(3);
    why << "correct on " << seeds.size() << " trials, " << v.candidate.median_ms << " ms vs "
        << v.reference.median_ms << " ms";
    return finish(vs::correct, why.str());
  } catch (const std::exception& e) {
    v.status = verdict_status::runtime_error;
    v.reason = std::string{"evaluator: "} + e.what();
  } catch (...) {
    v.status = verdict_status::runtime_error;
    v.reason = "evaluator: unknown exception";
  }
  v.wall_ms = ms_since(t0);
  spdlog::error("evaluator {}: {}: {}", settings_.device, job.candidate_id, v.reason);
  return v;
}

runner_facts evaluation_engine::facts() {
  if (have_facts_)
    return facts_;
  runner_facts out;
  out.device = settings_.device;
  out.python = settings_.python;
  scratch_guard guard;
  guard.keep = settings_.keep_scratch;
  try {
    runner_context ctx{settings_, harness_path_, {}, {}, {}, runner_threads(settings_.cfg)};
    if (!map_device(settings_.device, ctx.visible_devices, ctx.runner_device))
      throw std::runtime_error("unknown device " + settings_.device);
    ctx.scratch = make_scratch(settings_.work_dir, counter_);
    guard.dir = ctx.scratch;
    fs::create_directories(ctx.scratch + "/tmp");
    runner_job job;
    job.mode = "facts";
    job.dir = ctx.scratch + "/facts";
    job.device = ctx.runner_device;
    job.threads = ctx.threads;
    auto r = run_runner(ctx, job, facts_timeout_s);
    if (auto f = judge_process(r, facts_timeout_s); !f.reason.empty()) {
      // Not cached: the next call tries again (the interpreter may have been fixed).
      spdlog::error("evaluator {}: the runner cannot report its facts: {}; stderr: {}",
                    settings_.device, f.reason, tail_of_file(r.stderr_path, 500));
      return out;
    }
    out = r.facts;
    out.device = settings_.device;
    if (out.python.empty())
      out.python = settings_.python;
    facts_ = out;
    have_facts_ = true;
    spdlog::info("evaluator {}: {} python {} torch {} cuda {} triton {} threads {}",
                 settings_.device, out.device_name, out.python_version, out.torch_version, out.cuda,
                 out.triton, out.cpu_threads);
  } catch (const std::exception& e) {
    spdlog::error("evaluator {}: facts: {}", settings_.device, e.what());
  }
  return out;
}

} // namespace kiln
