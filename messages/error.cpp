#include "messages/error.hpp"

#include <caf/deep_to_string.hpp>
#include <caf/message.hpp>

#include "messages/eval.hpp"
#include "messages/llm.hpp"

namespace kiln {

const char* to_string(ec code) {
  switch (code) {
    case ec::none:
      return "none";
    case ec::budget_exhausted:
      return "budget_exhausted";
    case ec::bad_config:
      return "bad_config";
    case ec::unavailable:
      return "unavailable";
    case ec::provider_failed:
      return "provider_failed";
    case ec::stopped:
      return "stopped";
    case ec::eval_failed:
      return "eval_failed";
    case ec::io_error:
    case ec::device_unhealthy:
      return "device_unhealthy";
      return "io_error";
  }
  return "unknown";
}

std::string render(const caf::error& err) {
  if (!err)
    return "none";
  if (err.category() != error_category)
    return caf::to_string(err);
  std::string out = to_string(static_cast<ec>(err.code()));
  // The context is usually a few strings: print them plainly, not as CAF's quoted tuple.
  const auto& ctx = err.context();
  std::string plain;
  for (size_t i = 0; i < ctx.size(); ++i) {
    if (!ctx.match_element<std::string>(i))
      return out + ": " + caf::deep_to_string(ctx);
    plain += (i == 0 ? ": " : " ") + ctx.get_as<std::string>(i);
  }
  out += plain;
  return out;
}

bool is(const caf::error& err, ec code) {
  return err && err.category() == error_category && err.code() == static_cast<uint8_t>(code);
}

const char* to_string(prompt_kind k) {
  switch (k) {
    case prompt_kind::brainstorm:
      return "brainstorm";
    case prompt_kind::optimize:
      return "optimize";
    case prompt_kind::improve:
      return "improve";
    case prompt_kind::fix:
      return "fix";
    case prompt_kind::crossover:
      return "crossover";
    case prompt_kind::review:
      return "review";
    case prompt_kind::fix_correctness:
      return "fix_correctness";
  }
  return "unknown";
}

prompt_kind fix_kind_for(verdict_status status) {
  return status == verdict_status::incorrect ? prompt_kind::fix_correctness : prompt_kind::fix;
}

const char* to_string(verdict_status s) {
  switch (s) {
    case verdict_status::correct:
      return "correct";
    case verdict_status::incorrect:
      return "incorrect";
    case verdict_status::rejected:
      return "rejected";
    case verdict_status::compile_error:
      return "compile_error";
    case verdict_status::runtime_error:
      return "runtime_error";
    case verdict_status::timeout:
      return "timeout";
  }
  return "unknown";
}

bool from_string(const std::string& s, verdict_status& out) {
  for (auto v :
       {verdict_status::correct, verdict_status::incorrect, verdict_status::rejected,
        verdict_status::compile_error, verdict_status::runtime_error, verdict_status::timeout}) {
    if (s == to_string(v)) {
      out = v;
      return true;
    }
  }
  return false;
}

} // namespace kiln
