#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/eval.hpp"
#include "messages/llm.hpp"
#include "messages/task.hpp"

namespace kiln {

/// A program shown to the LLM as context, with what it measured (PIKE-O's top programs and
/// inspirations).
struct program_note {
  std::string code;
  double runtime_ms = 0; ///< 0 when it has none (it failed)
  double speedup = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, program_note& x) {
  return f(caf::meta::type_name("program_note"), x.code, x.runtime_ms, x.speedup);
}

/// What a strategy asks of an agent role. The role renders it into a prompt with its template,
/// sends it through its LLM profile, and parses the reply.
struct agent_request {
  task_spec task;
  prompt_kind kind = prompt_kind::optimize;
  std::string idea;       ///< for `optimize`: the idea to implement
  std::string code;       ///< for `improve` and `fix`: the candidate to start from
  verdict last;           ///< for `fix`: why the candidate failed
  runner_facts facts;     ///< what the evaluating runner has
  int32_t max_ideas = 10; ///< for `brainstorm`
  uint64_t seed = 0;
  /// For `crossover`: the current program's own measurements, and other programs to draw on.
  program_note current;
  std::vector<program_note> inspirations;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, agent_request& x) {
  return f(caf::meta::type_name("agent_request"), x.task, x.kind, x.idea, x.code, x.last, x.facts,
           x.max_ideas, x.seed, x.current, x.inspirations);
}

/// A parsed answer: ideas for a brainstorm, code otherwise.
struct agent_reply {
  std::vector<std::string> ideas;
  std::string code;         ///< empty when the reply held no usable program
  std::string profile;      ///< the LLM profile that answered
  std::string raw;          ///< the reply text as received
  int64_t input_tokens = 0; ///< usage of the LLM call behind this reply
  int64_t output_tokens = 0;
  double cost_usd = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, agent_reply& x) {
  return f(caf::meta::type_name("agent_reply"), x.ideas, x.code, x.profile, x.raw, x.input_tokens,
           x.output_tokens, x.cost_usd);
}

} // namespace kiln
