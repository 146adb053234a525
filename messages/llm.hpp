#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/eval.hpp"

namespace kiln {

/// What kind of prompt a query carries. Real LLMs read only the prompt; the offline `rules`
/// provider also uses the kind to decide what to answer.
enum class prompt_kind : uint8_t {
  brainstorm,      ///< a list of ideas for the task
  optimize,        ///< a first program that implements one idea
  improve,         ///< a faster version of one correct program (PIKE-B's and PIKE-O's mutation)
  fix,             ///< a repaired version of a program that failed to build, crashed or timed out
  crossover,       ///< a faster program that draws on the best programs so far (PIKE-O)
  review,          ///< a check of a new program before it is evaluated (a reviewer role)
  fix_correctness, ///< a repaired version of a program that ran but gave wrong outputs
};

/// The fix prompt for a failed verdict: PIKE asks outputs that are wrong (`incorrect`) to be
/// fixed with the per-output differences, everything else with the tails of stdout and stderr.
prompt_kind fix_kind_for(verdict_status status);

const char* to_string(prompt_kind k);

/// One query to an LLM profile: the final interface of the gateway, whatever the provider.
struct llm_request {
  std::string task; ///< the task the query is for (for accounting and the transcript)
  std::string role; ///< the agent role that asks, e.g. `optimizer`
  prompt_kind kind = prompt_kind::optimize;
  std::string system;      ///< system prompt; empty means the profile's own
  std::string prompt;      ///< the rendered user prompt
  double temperature = -1; ///< negative means the profile's default
  int32_t max_tokens = 0;  ///< 0 means the profile's default
  std::vector<std::string> stop;
  uint64_t seed = 0; ///< sampling seed where the provider takes one (rules always does)
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, llm_request& x) {
  return f(caf::meta::type_name("llm_request"), x.task, x.role, x.kind, x.system, x.prompt,
           x.temperature, x.max_tokens, x.stop, x.seed);
}

/// The answer of a provider, with the token usage it reported.
struct llm_reply {
  std::string text;
  std::string profile; ///< the profile that answered
  std::string model;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t reasoning_tokens = 0;
  double cost_usd = 0;
  double latency_ms = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, llm_reply& x) {
  return f(caf::meta::type_name("llm_reply"), x.text, x.profile, x.model, x.input_tokens,
           x.output_tokens, x.reasoning_tokens, x.cost_usd, x.latency_ms);
}

} // namespace kiln
