// The runner protocol: job.json in, result.json and output files out (docs/evaluation.md).
// Everything here starts, watches and reads one runner process; judging is evaluate.cpp's.

#include "gpu/runner.hpp"
#include "gpu/json_text.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "gpu/devices.hpp"
#include "gpu/harness.hpp"

namespace kiln {

namespace fs = std::filesystem;

scratch_guard::~scratch_guard() {
  if (keep || dir.empty())
    return;
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec)
    spdlog::warn("evaluator: cannot remove {}: {}", dir, ec.message());
}

double ms_since(steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(steady::now() - t0).count();
}

// -- files ---------------------------------------------------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    throw std::runtime_error("cannot read " + path);
  // Sized first and read in one go: outputs files are hundreds of megabytes, and an
  // istreambuf_iterator copies them one character at a time.
  in.seekg(0, std::ios::end);
  auto size = static_cast<std::streamoff>(in.tellg());
  in.seekg(0, std::ios::beg);
  std::string out(static_cast<size_t>(std::max<std::streamoff>(size, 0)), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  if (in.gcount() != static_cast<std::streamsize>(out.size()))
    throw std::runtime_error("cannot read " + path + ": short read");
  return out;
}

void write_file(const std::string& path, std::string_view text) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

// -- runner protocol -----------------------------------------------------------------------------

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
    << ", \"min_seconds\": " << cfg.min_timing_s << ", \"max_seconds\": " << cfg.max_timing_s
    << ", \"target_ci\": " << cfg.target_ci << ", \"buffer_sets\": " << j.buffer_sets
    << ", \"blocks\": " << cfg.timing_rounds << ", \"pike_rep_ms\": " << j.pike_rep_ms
    << ", \"pike_warmup_ms\": " << j.pike_warmup_ms << "}, \"threads\": " << j.threads
    << ", \"pike_mode\": " << (j.pike ? "true" : "false")
    << ", \"compile_mode\": " << json_quote(j.compile_mode)
    << ", \"cache_dir\": " << json_quote(j.cache_dir)
    << ", \"stage_dir\": " << json_quote(j.stage_dir)
    << ", \"arch_list\": " << json_quote(j.arch_list) << ", \"pch_key\": " << json_quote(j.pch_key)
    << ", \"recheck_seed\": " << (j.recheck ? std::to_string(j.recheck_seed) : std::string{"null"})
    << ", \"inputs_on\": " << json_quote(j.inputs_on)
    << ", \"gate\": " << (j.gate ? "true" : "false") << ", \"nonce\": " << json_quote(j.nonce)
    << ", \"poison\": " << (j.poison ? "true" : "false") << "}\n";
  return o.str();
}

namespace {

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

/// The strings of the array `key` (others skipped); empty when there is none.
std::vector<std::string> get_strings(simdjson::dom::element e, const char* key) {
  std::vector<std::string> out;
  simdjson::dom::array items;
  if (!e[key].get(items))
    for (auto item : items) {
      std::string_view text;
      if (!item.get(text))
        out.emplace_back(text);
    }
  return out;
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
  out.memory_bandwidth_gbs = get_number(f, "memory_bandwidth_gbs");
  out.l2_bytes = static_cast<int64_t>(get_number(f, "l2_bytes"));
}

} // namespace

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
  simdjson::dom::object phases;
  if (!doc["phases_ms"].get(phases))
    for (auto [name, value] : phases) {
      double ms = 0;
      if (!value.get(ms))
        r.phases += (r.phases.empty() ? "" : ", ") + std::string{name} + " "
                    + std::to_string(static_cast<long>(ms)) + " ms";
    }
  simdjson::dom::element facts;
  if (!doc["facts"].get(facts)) {
    parse_facts(facts, r.facts);
    r.facts_executable = get_string(facts, "executable");
    simdjson::dom::array stamps;
    if (!facts["stamps"].get(stamps))
      for (auto pair : stamps) {
        std::string_view path;
        std::string_view stamp;
        if (!pair.at(0).get(path) && !pair.at(1).get(stamp))
          r.facts_stamps.emplace_back(std::string{path}, std::string{stamp});
      }
  }
  simdjson::dom::element info;
  if (!doc["timing_info"].get(info)) {
    r.buffer_sets = static_cast<int32_t>(get_number(info, "buffer_sets"));
    r.pike_estimate_ms = get_number(info, "pike_estimate_ms");
    r.pike_n_warmup = static_cast<int64_t>(get_number(info, "pike_n_warmup"));
    r.pike_n_repeat = static_cast<int64_t>(get_number(info, "pike_n_repeat"));
    r.loop_prepare_ms = get_number(info, "loop_prepare_ms");
    r.loop_sample_ms = get_number(info, "loop_sample_ms");
    r.loop_after_ms = get_number(info, "loop_after_ms");
    r.loop_cores = static_cast<int32_t>(get_number(info, "cores"));
  }
  simdjson::dom::array builds;
  if (!doc["builds"].get(builds)) {
    for (auto b : builds) {
      build_record rec;
      rec.kind = get_string(b, "kind");
      rec.name = get_string(b, "name");
      rec.key = get_string(b, "key");
      rec.hit = get_bool(b, "hit");
      rec.seconds = get_number(b, "seconds");
      rec.pch = get_bool(b, "pch");
      rec.pch_key = get_string(b, "pch_key");
      rec.error = get_string(b, "error");
      rec.error_line = get_string(b, "error_line");
      r.builds.push_back(std::move(rec));
    }
  }
  auto read_trial = [](simdjson::dom::element t) {
    trial_record rec;
    uint64_t seed = 0;
    if (!t["seed"].get(seed))
      rec.seed = seed;
    rec.inputs_mutated = get_bool(t, "inputs_mutated");
    simdjson::dom::array aliases;
    if (!t["aliases"].get(aliases))
      for (auto a : aliases) {
        int64_t i = 0;
        if (!a.get(i))
          rec.aliases.push_back(static_cast<int32_t>(i));
      }
    return rec;
  };
  simdjson::dom::array trials;
  if (!doc["trials"].get(trials)) {
    for (auto t : trials)
      r.trials.push_back(read_trial(t));
  }
  simdjson::dom::element recheck;
  if (!doc["recheck"].get(recheck) && recheck.is_object()) {
    r.have_recheck = true;
    r.recheck = read_trial(recheck);
  }
  r.violations = get_strings(doc, "violations");
  r.stateful = get_bool(doc, "stateful");
  r.inputs_on = get_string(doc, "inputs_on");
  r.model_class = get_string(doc, "model_class");
  r.gate_stopped = get_string(doc, "gate") == "stopped";
  r.nonce = get_string(doc, "nonce");
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
  // The blocks must account for the samples exactly: they say which samples each block took.
  simdjson::dom::array blocks;
  if (!doc["blocks"].get(blocks)) {
    size_t counted = 0;
    for (auto b : blocks) {
      timing_block tb;
      int64_t n = 0;
      double flush = 0;
      simdjson::dom::array batches;
      if (b["n"].get(n) || n < 0 || b["flush_ms"].get(flush) || b["batches"].get(batches)) {
        r.result_problem = "result.json with a malformed timing block";
        r.have_result = false;
        return;
      }
      tb.n = static_cast<int32_t>(n);
      tb.flush_ms = flush;
      counted += static_cast<size_t>(n);
      for (auto pair : batches) {
        simdjson::dom::array two;
        double ms = 0;
        int64_t calls = 0;
        if (pair.get(two) || two.size() != 2 || two.at(0).get(ms) || two.at(1).get(calls)
            || calls < 1) {
          r.result_problem = "result.json with a malformed steady-state batch";
          r.have_result = false;
          return;
        }
        tb.batches.emplace_back(ms, static_cast<int32_t>(calls));
      }
      r.blocks.push_back(std::move(tb));
    }
    if (!r.blocks.empty() && counted != r.samples_ms.size()) {
      r.result_problem = "result.json whose timing blocks do not add up to its samples";
      r.have_result = false;
      return;
    }
  }
}

/// The runners' environment: nothing inherited but CUDA_HOME, so a run does not depend on the
/// shell kiln was started from.
std::vector<std::string> runner_env(const std::string& python, const std::string& home,
                                    const std::string& tmp, const std::string& visible,
                                    int threads) {
  // The interpreter's own folder first: a virtual environment keeps `ninja` (which
  // torch.utils.cpp_extension needs) next to its python.
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  auto py_dir = fs::path{python}.parent_path().string();
  if (!py_dir.empty() && py_dir != "/usr/bin" && py_dir != "/bin" && py_dir != "/usr/local/bin")
    path = py_dir + ":" + path;
  std::vector<std::string> env = {
      "PATH=" + path,
      "HOME=" + home,
      // getpass.getuser() reads these before it asks the password database, which has no
      // entry for a runner's spare uid (torch.compile names its lock folder after the user).
      "USER=kiln-runner",
      "LOGNAME=kiln-runner",
      "TMPDIR=" + tmp,
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
      // The runner's own, like everything it writes: torch, Triton and Inductor build there
      // unless kiln_build.py points them at the shared cache (read) and its staging (write).
      "TORCH_EXTENSIONS_DIR=" + tmp + "/torch_extensions",
      "TRITON_CACHE_DIR=" + tmp + "/triton",
      "TORCHINDUCTOR_CACHE_DIR=" + tmp + "/torchinductor",
      "CUDA_VISIBLE_DEVICES=" + visible,
  };
  // Passed through when set: where CUDA and the driver's libraries live (container hosts keep
  // libcuda outside the loader's default paths), and the host's safety switches (shared GPU
  // servers turn NVLink multicast off, and every program there must keep it off).
  for (const char* name : {"CUDA_HOME", "LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE",
                           "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"})
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

namespace {

std::string signal_text(int sig) {
  const char* name = ::strsignal(sig);
  return "signal " + std::to_string(sig) + (name ? std::string{" ("} + name + ")" : "");
}

} // namespace

namespace {

/// What CUDA's errors say: a reported exception with one of these is a `cuda_error`, and any
/// ending with one makes the device suspect.
constexpr std::initializer_list<const char*> cuda_error_signs = {
    "illegal memory access",      "illegal instruction", "misaligned address",
    "unspecified launch failure", "device-side assert",  "CUDA error",
    "uncorrectable ECC",          "CUDA driver error"};

bool has(const std::string& text, std::initializer_list<const char*> signs) {
  return std::any_of(signs.begin(), signs.end(),
                     [&](const char* sign) { return text.find(sign) != std::string::npos; });
}

/// An exception the harness reported, as a verdict: the stage says compile or run, the text
/// says which kind, and the sentence says what usually causes it.
runner_failure reported_exception(const runner_report& r) {
  using vs = verdict_status;
  const std::string error = r.error.empty() ? "failed at stage " + r.stage : r.error;
  if (r.stage == "import" || r.stage == "build") {
    if (error.find("defines neither class ModelNew nor class Model") != std::string::npos)
      return {vs::compile_error,
              "the candidate defines neither class ModelNew nor class Model: kiln builds one of "
              "them with the task's get_init_inputs()",
              "no_model_class"};
    if (has(error, {"SyntaxError", "IndentationError", "TabError"}))
      return {vs::compile_error, "the candidate is not valid Python: " + error, "syntax_error"};
    for (const auto& b : r.builds)
      if (!b.error.empty())
        return {vs::compile_error,
                "extension '" + b.name
                    + "' failed to build: " + (b.error_line.empty() ? error : b.error_line),
                "build_failed"};
    if (r.stage == "import")
      return {vs::compile_error, "importing the candidate raised " + error, "import_error"};
    return {vs::compile_error,
            "building the model (its __init__ with the task's get_init_inputs()) raised " + error,
            "init_error"};
  }
  if (has(error, {"out of memory", "OutOfMemoryError", "MemoryError"}))
    return {vs::runtime_error, "the candidate ran out of memory at stage " + r.stage + ": " + error,
            "out_of_memory"};
  if (has(error, cuda_error_signs))
    return {vs::runtime_error,
            "a CUDA error at stage " + r.stage + ": " + error
                + " (a kernel indexing out of bounds or a bad launch; rerun with "
                  "CUDA_LAUNCH_BLOCKING=1 to find it)",
            "cuda_error"};
  return {vs::runtime_error, "the candidate raised at stage " + r.stage + ": " + error,
          "exception"};
}

} // namespace

runner_failure judge_process(const runner_report& r, double timeout_s) {
  using vs = verdict_status;
  if (!r.proc.started)
    return {vs::runtime_error,
            "kiln could not start the runner: " + r.proc.error
                + " (a problem of this machine "
                  "or kiln's setup, not of the candidate)",
            "runner_start"};
  if (r.proc.timed_out) {
    std::ostringstream o;
    o << "timed out after " << timeout_s << " s";
    if (r.have_result)
      o << " (stage " << r.stage << ")";
    o << ": an endless loop, a deadlock, or work far slower than the reference";
    return {vs::timeout, o.str(), "timeout"};
  }
  // A reported exception explains more than the crash that may have followed it.
  if (r.have_result && !r.ok)
    return reported_exception(r);
  if (r.proc.signal != 0) {
    std::string why = "runner killed by " + signal_text(r.proc.signal);
    why += r.proc.signal == SIGKILL
               ? ": often the kernel's out-of-memory killer"
               : ": a crash in native code (an extension or kernel that reads or writes out of "
                 "bounds)";
    return {vs::runtime_error, why, "crash"};
  }
  if (!r.have_result)
    return {vs::runtime_error,
            "runner exited with code " + std::to_string(r.proc.exit_code) + " and "
                + r.result_problem
                + ": the candidate ended the process (os._exit, sys.exit in "
                  "a thread) or broke the harness",
            "no_result"};
  if (r.proc.exit_code != 0)
    return {vs::runtime_error, "runner exited with code " + std::to_string(r.proc.exit_code),
            "exit_status"};
  return {vs::correct, {}, {}};
}

namespace {

/// The job as the runner gets it: the shared build cache filled in (prepared once).
runner_job shared_job(const runner_context& ctx, const runner_job& job) {
  // The harness is re-checked before every start: an earlier candidate may have rewritten it
  // (without Landlock nothing stops it).
  install_harness(ctx.settings.work_dir);
  // Every runner reads the build cache, so a candidate compiled ahead only loads; what it
  // builds itself it stages in its own folder, and kiln publishes that once it has ended.
  auto shared = job;
  if (shared.cache_dir.empty())
    shared.cache_dir = ctx.settings.cache_dir;
  if (!shared.cache_dir.empty())
    prepare_cache_dir_once(shared.cache_dir);
  return shared;
}

/// A runner from the pool with its job.json written into its folder; null (with r.proc.error)
/// when none can be had. Calls only from the thread that owns the pool.
std::unique_ptr<runner_process> hand_over(const runner_context& ctx, runner_job& shared,
                                          runner_report& r, std::string& job_path) {
  std::string error;
  auto runner = ctx.pool->take(error);
  if (!runner) {
    r.proc.error = error;
    return nullptr;
  }
  // The runner was started before the job existed, so the job's files live in its folder.
  r.dir = runner->dir();
  runner->keep_dir();
  auto guard = std::make_shared<scratch_guard>();
  guard->dir = r.dir;
  guard->keep = ctx.settings.keep_scratch;
  r.dir_guard = std::move(guard);
  shared.dir = r.dir;
  shared.stage_dir = r.dir + "/stage";
  job_path = r.dir + "/job.json";
  write_file(job_path, job_json(shared, ctx.settings.cfg));
  r.stdout_path = runner->stdout_path();
  r.stderr_path = runner->stderr_path();
  spdlog::debug("evaluator {}: {} runner {} ({}) in {}", ctx.settings.device, shared.mode,
                runner->pid(), runner->warm() ? "warm" : "cold", r.dir);
  if (ctx.on_start)
    ctx.on_start(runner->pid());
  return runner;
}

/// The gate of runner_process::run for `gate`; empty when the job has none.
std::function<std::string(const std::string&)> asker(const runner_job& shared, runner_report& r,
                                                     const gate_fn& gate, pid_t pid) {
  if (!shared.gate || !gate)
    return {};
  return [&gate, &r, &shared, pid](const std::string& message) {
    // The runner let go of its build locks before it asked: what it built is published
    // before the gate may wait for the device, so another lane's runner that waited for
    // one of those locks (holding the device shared) loads it and goes on.
    if (message == "trials" && !shared.cache_dir.empty())
      publish_staged(shared.stage_dir, shared.cache_dir, r.staged);
    auto answer = gate(gate_call{r.dir, message, pid});
    r.gate_go = r.gate_go || answer == "time" || answer == "block";
    return answer;
  };
}

/// After the runner ended: its builds published, its result read, the device told.
void after_run(const runner_context& ctx, const runner_job& shared, runner_report& r) {
  // The runner and everything it started have ended (its PID namespace is gone): nothing can
  // change its staged builds while kiln checks and copies them.
  if (r.proc.started && !shared.cache_dir.empty())
    publish_staged(shared.stage_dir, shared.cache_dir, r.staged);
  // After a timeout there is normally no result; one written before a hang at exit counts.
  if (r.proc.started)
    parse_result(r.dir + "/result.json", r);
  if (ctx.health != nullptr && shared.mode != "health") {
    if (auto why = runner_suspicion(r, ctx.settings.device != "cpu"); !why.empty()) {
      std::lock_guard<std::mutex> lock{ctx.health->mutex};
      ctx.health->suspect = true;
      ctx.health->suspect_reason = "a " + shared.mode + " runner " + why;
    }
  }
}

} // namespace

runner_report run_runner(const runner_context& ctx, const runner_job& job, double timeout_s,
                         const std::function<bool(const std::string& dir)>& gate) {
  gate_fn answer;
  if (gate)
    answer = [&gate](const gate_call& c) {
      if (c.message != "trials")
        return std::string{"done"};
      return std::string{gate(c.dir) ? "time" : "stop"};
    };
  return run_runner(ctx, job, timeout_s, answer);
}

runner_report run_runner(const runner_context& ctx, const runner_job& job, double timeout_s,
                         const gate_fn& gate) {
  runner_report r;
  auto shared = shared_job(ctx, job);
  if (ctx.pool != nullptr) {
    std::string job_path;
    auto runner = hand_over(ctx, shared, r, job_path);
    if (!runner)
      return r;
    r.proc = runner->run(job_path, timeout_s, 2, asker(shared, r, gate, runner->pid()), &r.stamps);
  } else {
    r.dir = job.dir;
    // The job's folder is the runner's own (HOME, its tmp/ as /tmp, its staging): the rest of
    // the evaluation's scratch (task.py, candidate.py) stays out of its reach.
    fs::create_directories(job.dir + "/tmp");
    shared.stage_dir = job.dir + "/stage";
    auto job_path = job.dir + "/job.json";
    shared.gate = false; // a cold runner has no control socket to ask through
    write_file(job_path, job_json(shared, ctx.settings.cfg));
    auto policy = runner_sandbox(ctx.settings);
    policy.writable_dirs.push_back(job.dir);
    policy.private_tmp = job.dir + "/tmp";
    process_options opts;
    opts.argv = {ctx.settings.python, "-I", "-B", ctx.harness_path, job_path};
    opts.env = runner_env(ctx.settings.python, job.dir,
                          tmp_is_private(policy) ? "/tmp" : policy.private_tmp, ctx.visible_devices,
                          ctx.threads);
    opts.cwd = job.dir;
    r.stdout_path = job.dir + "/stdout.txt";
    r.stderr_path = job.dir + "/stderr.txt";
    opts.stdout_path = r.stdout_path;
    opts.stderr_path = r.stderr_path;
    opts.timeout_s = timeout_s;
    opts.nice = ctx.settings.nice;
    opts.sandbox = &policy;
    opts.role = job.mode == "compile" ? process_role::compile : process_role::runner;
    spdlog::debug("evaluator {}: {} runner in {}", ctx.settings.device, job.mode, job.dir);
    if (!ctx.on_start) {
      r.proc = run_process(opts);
    } else {
      // run_process, with the pid told in between.
      const auto start = steady::now();
      child_process child = start_process(opts);
      if (!child.running()) {
        r.proc.error = child.error();
      } else {
        ctx.on_start(child.pid());
        const double left =
            timeout_s > 0 ? std::max(1e-3, timeout_s - ms_since(start) / 1000) : 0.0;
        r.proc = child.wait(left, opts.kill_grace_s);
      }
      r.proc.wall_ms = ms_since(start);
    }
  }
  after_run(ctx, shared, r);
  return r;
}

async_runner::async_runner(const runner_context& ctx, const runner_job& job, double timeout_s,
                           gate_fn gate, std::function<void()> ended)
    : ctx_(ctx), job_(shared_job(ctx, job)) {
  if (ctx.pool == nullptr) {
    report_.proc.error = "a runner on its own thread needs the pool (a control socket)";
    finished_ = true;
    if (ended)
      ended();
    return;
  }
  std::string job_path;
  auto runner = hand_over(ctx, job_, report_, job_path);
  if (!runner) {
    finished_ = true;
    if (ended)
      ended();
    return;
  }
  pid_ = runner->pid();
  // The thread owns the gate: the runner's process outlives neither.
  thread_ = std::thread{[this, timeout_s, job_path, gate = std::move(gate),
                         ended = std::move(ended), runner = std::move(runner)]() mutable {
    report_.proc =
        runner->run(job_path, timeout_s, 2, asker(job_, report_, gate, pid_), &report_.stamps);
    runner.reset();
    if (ended)
      ended();
  }};
}

async_runner::~async_runner() {
  if (thread_.joinable())
    thread_.join();
}

runner_report async_runner::finish() {
  if (thread_.joinable())
    thread_.join();
  if (!finished_) {
    finished_ = true;
    after_run(ctx_, job_, report_);
  }
  return report_;
}

std::string runner_suspicion(const runner_report& r, bool cuda) {
  if (!r.proc.started)
    return {};
  if (r.proc.timed_out)
    return "timed out";
  if (r.proc.signal != 0)
    return "was killed by " + signal_text(r.proc.signal);
  if (!cuda)
    return {};
  // A sticky error poisons the CUDA context of the process that hit it; whether the device
  // itself survived only a fresh process can tell.
  auto text = r.error + "\n" + tail_of_file(r.stderr_path, tail_bytes);
  for (const char* sign : cuda_error_signs)
    if (text.find(sign) != std::string::npos)
      return std::string{"reported a CUDA error ("} + sign + ")";
  return {};
}

sandbox_policy runner_sandbox(const eval_settings& settings) {
  sandbox_policy p;
  p.mode = parse_sandbox_mode(settings.cfg.sandbox);
  p.user = settings.cfg.runner_user;
  // A folder the engine's runners share and kiln reads nothing from (tests hand files to their
  // stand-in interpreters through it); made here because a sandboxed runner could not create
  // it in the read-only work_dir. The shared build cache is not writable at all: runners stage
  // their builds in their own folders and kiln publishes them (gpu/build_cache.hpp).
  std::error_code ec;
  const auto shared_dir = settings.work_dir + "/cache";
  fs::create_directories(shared_dir, ec);
  const auto cache_rel = fs::path{settings.cache_dir}.lexically_normal().lexically_relative(
      fs::path{shared_dir}.lexically_normal());
  if (!settings.cache_dir.empty() && !cache_rel.empty() && cache_rel.native().rfind("..", 0) != 0)
    spdlog::error("evaluator {}: the build cache {} lies in the runners' shared folder {}, which "
                  "stays read-only to them",
                  settings.device, settings.cache_dir, shared_dir);
  else
    p.writable_dirs.push_back(shared_dir);
  // Under a private /tmp the runner must still find these by their names (`kiln eval` works
  // in /tmp/kiln-eval-<pid>; a virtual environment may live there; CUDA's MPS clients talk to
  // their daemon through /tmp/nvidia-mps).
  // Only a folder that exists when the runner starts is bound back: a build cache beneath /tmp
  // made after that would be hidden from the runner (no hits), and a candidate writing to its
  // path would only write into its own /tmp, which looks to it like a writable cache.
  if (!settings.cache_dir.empty())
    fs::create_directories(settings.cache_dir, ec);
  p.keep_in_tmp = {settings.work_dir, settings.cache_dir, "/tmp/nvidia-mps"};
  // More folders beneath /tmp that runners must still read, named by whoever starts kiln:
  // `KILN_TMP_KEEP=/tmp/a:/tmp/b` (the test suite names its checkout when that lies in /tmp,
  // since its fixtures hand runners files from the source tree). Read-only, like the rest.
  if (const char* extra = std::getenv("KILN_TMP_KEEP"); extra != nullptr) {
    std::string list = extra;
    for (size_t at = 0; at <= list.size();) {
      const size_t colon = std::min(list.find(':', at), list.size());
      if (colon > at)
        p.keep_in_tmp.push_back(list.substr(at, colon - at));
      at = colon + 1;
    }
  }
  if (!settings.python.empty()) {
    p.keep_in_tmp.push_back(fs::path{settings.python}.parent_path().parent_path().string());
    auto real = fs::weakly_canonical(settings.python, ec);
    if (!ec)
      p.keep_in_tmp.push_back(real.parent_path().parent_path().string());
  }
  if (settings.device == "cpu") {
    double gb = settings.cfg.memory_limit_gb;
    if (gb > 0) {
      p.memory_limit_bytes = static_cast<long>(gb * 1024 * 1024 * 1024);
    } else {
      long pages = ::sysconf(_SC_PHYS_PAGES);
      long page = ::sysconf(_SC_PAGE_SIZE);
      if (pages > 0 && page > 0)
        p.memory_limit_bytes = pages / 4 * 3 * page;
    }
  }
  return p;
}

runner_launch runner_pool_launch(const eval_settings& settings, const std::string& harness_path) {
  runner_launch l;
  l.device = settings.device;
  l.python = settings.python;
  l.harness_path = harness_path;
  l.runners_dir = settings.work_dir;
  std::string visible;
  std::string runner_device;
  map_device(settings.device, visible, runner_device);
  l.env = [python = settings.python, visible,
           threads = runner_threads(settings.cfg)](const std::string& dir, const std::string& tmp) {
    return runner_env(python, dir, tmp, visible, threads);
  };
  l.sandbox = runner_sandbox(settings);
  // A torch import takes a core for about a second: on the CPU device that would disturb the
  // timed job next to it, so the pool refills between evaluations and waits for quiet; a GPU's
  // timings barely notice, so its pool refills at once.
  const bool cpu = settings.device == "cpu";
  l.refill_on_take = !cpu;
  l.quiet_before_jobs = cpu;
  return l;
}

/// Maps `cpu` / `cuda:N` to CUDA_VISIBLE_DEVICES and the device name the runner uses.
bool map_device(const std::string& device, std::string& visible, std::string& runner_device) {
  if (device == "cpu") {
    visible = "";
    runner_device = "cpu";
    return true;
  }
  if (device.rfind("cuda:", 0) != 0 || device.size() <= 5
      || device.find_first_not_of("0123456789", 5) != std::string::npos)
    return false;
  // kiln's cuda:N is the N-th GPU of kiln's own mask; the runner is given that one GPU by its
  // UUID (else kiln's own entry for it), so it sees exactly that device as its cuda:0. A fake
  // GPU of the test hook hands its runners the fake UUID (no GPU visible) and the CPU.
  auto d = find_device(device);
  if (!d)
    return false;
  visible = d->runner_visible;
  runner_device = d->test_fake ? "cpu" : "cuda:0";
  return true;
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

} // namespace kiln
