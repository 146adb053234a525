#pragma once

// One generic LLM agent, parameterised by its role's config: the brainstormer, the optimizer
// and the error fixer are all this actor with another template, profile and parser. The parser
// follows from the prompt kind: a brainstorm yields ideas, every other kind a program.

#include <string>

#include "config/config.hpp"
#include "messages/actors.hpp"

namespace kiln {

struct agent_state {
  static inline const char* name = "agent";
  agent_config role;
  /// The role's own template, read at spawn; empty means the built-in one of each kind.
  std::string template_text;
  llm_gateway_actor llm;
};

agent_actor::behavior_type agent(agent_actor::stateful_pointer<agent_state> self, agent_config role,
                                 std::string template_text, llm_gateway_actor llm);

/// Reads a role's template file (if it names one) and checks its slots, so that a bad
/// template fails the run at start. Throws std::runtime_error naming the role and file.
std::string load_role_template(const agent_config& role);

} // namespace kiln
