// Judgements that take more than one look (gpu/judge.hpp). The codes are the table of
// docs/evaluation.md ("Verdict codes"); a test checks that the two agree.

#include "gpu/judge.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <spdlog/spdlog.h>

namespace kiln {

namespace {

namespace fs = std::filesystem;
using vs = verdict_status;

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

} // namespace

const std::vector<std::string>& verdict_codes() {
  static const std::vector<std::string> codes{
      "ok",
      "tolerance",
      "exact_mismatch",
      "nan_output",
      "uninitialized_memory",
      "inf_output",
      "constant_output",
      "low_signal",
      "shape",
      "dtype",
      "output_count",
      "structure",
      "not_dense",
      "uncomparable",
      "bad_outputs",
      "unreadable_outputs",
      "mutated_inputs",
      "output_aliases_input",
      "cached_result",
      "recheck_skipped",
      "forged_result",
      "replaced_function",
      "thread_left_running",
      "lazy_output",
      "no_storage",
      "bad_output_type",
      "harness_violation",
      "timed_without_go",
      "trial_mismatch",
      "timing_invalid",
      "scan_patch",
      "scan_introspection",
      "scan_harness",
      "scan_background",
      "scan_network",
      "scan_dynamic_code",
      "no_model_class",
      "syntax_error",
      "build_failed",
      "import_error",
      "init_error",
      "compile_stage_failed",
      "timeout",
      "exception",
      "out_of_memory",
      "cuda_error",
      "crash",
      "no_result",
      "exit_status",
      "runner_start",
      "reference_failed",
      "device_unhealthy",
      "evaluator_error",
      "no_program",
  };
  return codes;
}

size_t outputs_cap(const file_bytes& reference) {
  return 2 * reference.bytes().size() + (size_t{1} << 20);
}

std::string fresh_nonce() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

std::string trial_name(size_t k, size_t count, uint64_t seed) {
  return "trial " + std::to_string(k + 1) + " of " + std::to_string(count) + " (input seed "
         + std::to_string(seed) + ")";
}

trial_comparisons compare_trial_files(const std::vector<file_bytes>& reference,
                                      const std::string& dir, const std::vector<uint64_t>& seeds,
                                      tolerance tol) {
  trial_comparisons out;
  bool only_borderline = true;
  for (size_t k = 0; k < seeds.size() && k < reference.size(); ++k) {
    auto trial = compare_output_files(
        reference[k],
        file_bytes::open(dir + "/out_" + std::to_string(k) + ".pt", outputs_cap(reference[k])),
        tol);
    if (!trial.ok) {
      only_borderline = only_borderline && trial.borderline();
      if (out.failed_trial < 0) {
        out.failed_trial = static_cast<int>(k);
        out.reason = trial_name(k, seeds.size(), seeds[k]) + ": " + trial.reason;
      }
    }
    if (k == 0)
      out.all = trial;
    else
      merge_comparison(out.all, trial);
  }
  out.borderline_only = out.failed_trial >= 0 && only_borderline;
  return out;
}

std::string scan_code(const std::string& rule) {
  if (starts_with(rule, "patches"))
    return "scan_patch";
  if (starts_with(rule, "starts background work") || starts_with(rule, "reaches a forbidden"))
    return "scan_background";
  if (starts_with(rule, "uses the network"))
    return "scan_network";
  if (starts_with(rule, "loads code"))
    return "scan_dynamic_code";
  if (starts_with(rule, "reads the harness with") || starts_with(rule, "reads the harness's files")
      || starts_with(rule, "reads process internals"))
    return "scan_harness";
  // Frames, hooks, the module table, the collector, names built at run time.
  return "scan_introspection";
}

std::string scan_cause(const std::string& code) {
  if (code == "scan_patch")
    return "kiln's harness and timing call into that module after the candidate is imported, "
           "so its attributes may not be rebound (torch.backends.* and the torch._dynamo, "
           "_inductor and _functorch configs may be set)";
  if (code == "scan_background")
    return "work that goes on after forward returns escapes the timed window";
  if (code == "scan_network")
    return "runners have no network, and a candidate may not fetch its answers";
  if (code == "scan_dynamic_code")
    return "code built at run time is code the scan cannot read";
  if (code == "scan_harness")
    return "the harness's files and the process's internals are off limits to a candidate";
  return "reading the interpreter's frames, hooks, module table or garbage collector reaches "
         "the harness's own state";
}

std::pair<std::string, std::string> violation_code(const std::string& violation) {
  if (starts_with(violation, "replaced"))
    return {"replaced_function",
            ": kiln's timing and checks call it, so a candidate may not rebind it at run time"};
  if (contains(violation, "left a thread running"))
    return {"thread_left_running", ""};
  if (contains(violation, "not a plain torch.Tensor"))
    return {"lazy_output", ""};
  if (contains(violation, "no real storage"))
    return {"no_storage",
            ": an output without memory of its own holds no computed values to compare"};
  if (contains(violation, "forward returned"))
    return {"bad_output_type", ": forward must return tensors, or tuples and lists of them"};
  return {"harness_violation", ""};
}

std::string timing_problem(const runner_report& r) {
  if (r.samples_ms.empty())
    return "reported no timing samples";
  double in_process = 0;
  for (double s : r.samples_ms) {
    if (!std::isfinite(s) || s <= 0)
      return "reported an invalid timing sample";
    in_process += s;
  }
  for (const auto& b : r.blocks)
    for (const auto& [ms, calls] : b.batches) {
      if (!std::isfinite(ms) || ms <= 0)
        return "reported an invalid steady-state batch";
      in_process += ms;
    }
  if (in_process > r.proc.wall_ms
      || (r.timing_wall_ms > 0 && in_process > r.timing_wall_ms * 1.01 + 1.0))
    return "in-process timings exceed the wall clock: the candidate changed a clock or the "
           "timing's own records";
  return {};
}

runner_failure judge_runs(const runner_report& cand, const runner_report& ref,
                          const std::vector<uint64_t>& seeds) {
  if (cand.trials.size() != seeds.size())
    return {vs::rejected,
            "candidate runner reported " + std::to_string(cand.trials.size()) + " trials of "
                + std::to_string(seeds.size()) + ": the candidate changed the harness's run",
            "trial_mismatch"};
  for (size_t k = 0; k < seeds.size(); ++k)
    if (cand.trials[k].seed != seeds[k])
      return {vs::rejected,
              "candidate runner used other input seeds than kiln asked: the candidate changed "
              "the harness's run",
              "trial_mismatch"};
  if (cand.structure != ref.structure)
    return {vs::rejected,
            "forward returned " + cand.structure + " where the reference returns " + ref.structure
                + " (tensor, tuple:N, list:N, nested as tuple:2[tensor,list:2]): the same "
                  "structure is part of the task's contract",
            "structure"};
  for (size_t k = 0; k < cand.trials.size(); ++k)
    if (cand.trials[k].inputs_mutated)
      return {vs::rejected,
              "candidate mutated its inputs on " + trial_name(k, seeds.size(), seeds[k])
                  + mutation_cause(),
              "mutated_inputs"};
  return {vs::correct, {}, {}};
}

int32_t new_alias(const trial_record& cand, const trial_record& ref) {
  for (int32_t i : cand.aliases)
    if (std::find(ref.aliases.begin(), ref.aliases.end(), i) == ref.aliases.end())
      return i;
  return -1;
}

std::string alias_text(int32_t output, const std::string& where) {
  return "candidate output " + std::to_string(output) + " shares storage with an input" + where
         + " where the reference's does not: it hands back memory it was given instead of "
           "writing its own (an in-place op on an input, or returning a view of one)";
}

std::string mutation_cause() {
  return ": an input tensor changed during forward (an in-place op such as x.relu_() or "
         "x.add_(), or out= into an input); the task's inputs must stay as they were";
}

std::pair<std::string, std::string> diagnose_nan(const runner_context& ctx, runner_job job,
                                                 const std::vector<file_bytes>& reference,
                                                 const trial_comparisons& seen, double timeout_s,
                                                 const std::string& device) {
  const std::string& base = seen.reason;
  std::string why;
  try {
    job.poison = false;
    job.time = false;
    job.gate = false;
    job.recheck = false;
    job.nonce = fresh_nonce();
    job.dir = ctx.scratch + "/cand-nofill";
    auto r = run_runner(ctx, job, timeout_s);
    if (auto f = judge_process(r, timeout_s); !f.reason.empty())
      why = f.reason;
    else if (r.nonce != job.nonce || !r.violations.empty() || r.trials.size() != job.seeds.size())
      why = "the runner's report is not usable";
    if (why.empty()) {
      const auto& cfg = ctx.settings.cfg;
      auto again = compare_trial_files(reference, r.dir, job.seeds, {cfg.atol, cfg.rtol});
      spdlog::debug("evaluator {}: NaN diagnosis without the fill: {}", device,
                    again.all.ok ? "correct" : again.reason);
      if (again.all.code != "nan_output")
        return {"uninitialized_memory",
                base
                    + ", but only while kiln fills freed memory with NaN before each call; "
                      "without that fill it has no NaN ("
                    + (again.all.ok ? std::string{"and matches the reference"}
                                    : "its values are " + again.all.code)
                    + "), so the candidate returns memory it never wrote (a torch.empty or "
                      "output buffer not fully written, a kernel grid that misses elements)"};
      return {"nan_output",
              base
                  + ", also without kiln's NaN fill of freed memory: the candidate computes "
                    "NaN itself (an overflow in reduced precision, 0/0, log or sqrt of a "
                    "negative, an accumulator never initialised)"};
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  return {"nan_output", base
                            + "; kiln fills freed memory with NaN before each call, so NaN in "
                              "the output usually means the candidate returns memory it never "
                              "wrote (torch.empty not fully written); the run without the fill "
                              "that would tell could not be judged: "
                            + why};
}

more_seeds check_more_seeds(const runner_context& ctx, runner_job ref_job, runner_job cand_job,
                            const std::vector<uint64_t>& seeds, double timeout_s, tolerance tol) {
  more_seeds out;
  auto fail = [&](vs status, std::string code, std::string reason) {
    out.failure = {status, std::move(reason), std::move(code)};
    return out;
  };
  for (auto* j : {&ref_job, &cand_job}) {
    j->seeds = seeds;
    j->time = false;
    j->gate = false;
    j->recheck = false;
    j->nonce = fresh_nonce();
  }
  ref_job.dir = ctx.scratch + "/ref-more";
  cand_job.dir = ctx.scratch + "/cand-more";
  auto ref = run_runner(ctx, ref_job, timeout_s);
  auto ref_failure = judge_process(ref, timeout_s);
  if (ref_failure.reason.empty()
      && (ref.trials.size() != seeds.size() || ref.nonce != ref_job.nonce))
    ref_failure.reason = "its report is not usable";
  if (!ref_failure.reason.empty())
    return fail(vs::runtime_error, "reference_failed",
                "the reference failed on them: " + ref_failure.reason
                    + " (a problem of the task, not of the candidate)");
  // Out of the candidate's reach before it starts, as in the evaluation.
  std::vector<file_bytes> expected;
  for (size_t k = 0; k < seeds.size(); ++k)
    expected.push_back(file_bytes::open(ref.dir + "/out_" + std::to_string(k) + ".pt"));
  std::error_code ignored;
  fs::remove_all(ref.dir, ignored);

  cand_job.inputs_on = ref.inputs_on;
  auto cand = run_runner(ctx, cand_job, timeout_s);
  if (cand.have_result && cand.nonce != cand_job.nonce)
    return fail(vs::rejected, "forged_result",
                "result.json was not written by the harness (wrong nonce)");
  if (cand.have_result && !cand.violations.empty()) {
    auto [code, cause] = violation_code(cand.violations.front());
    return fail(vs::rejected, code, "candidate " + cand.violations.front() + cause);
  }
  if (auto f = judge_process(cand, timeout_s); !f.reason.empty())
    return fail(f.status, f.code, f.reason);
  if (auto f = judge_runs(cand, ref, seeds); !f.reason.empty())
    return fail(f.status, f.code, f.reason);
  for (size_t k = 0; k < seeds.size(); ++k) {
    if (int32_t i = new_alias(cand.trials[k], ref.trials[k]); i >= 0)
      return fail(vs::rejected, "output_aliases_input", alias_text(i, ""));
    auto c = compare_output_files(
        expected[k],
        file_bytes::open(cand.dir + "/out_" + std::to_string(k) + ".pt", outputs_cap(expected[k])),
        tol);
    if (c.ok)
      continue;
    if (!c.borderline())
      return fail(c.status, c.code,
                  "the candidate is wrong beyond rounding noise on "
                      + trial_name(k, seeds.size(), seeds[k]) + ": " + c.reason);
    ++out.borderline;
  }
  return out;
}

} // namespace kiln
