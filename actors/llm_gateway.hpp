#pragma once

// The LLM gateway of one profile. Every query of every role that uses the profile passes here,
// so this is where providers, accounting and the transcript live. This version speaks the
// offline `rules` provider; the HTTP providers plug in behind the same handler.

#include <caf/fwd.hpp>

#include "config/config.hpp"
#include "messages/actors.hpp"

namespace kiln {

struct llm_gateway_state {
  static inline const char* name = "llm-gateway";
  llm_profile_config profile;
  archive_actor archive;
  int64_t calls = 0;
};

llm_gateway_actor::behavior_type
llm_gateway(llm_gateway_actor::stateful_pointer<llm_gateway_state> self, llm_profile_config profile,
            archive_actor archive);

/// Throws std::runtime_error when this build cannot serve the profile, so a run fails before
/// it starts instead of at its first query.
void check_provider(const llm_profile_config& profile);

} // namespace kiln
