#pragma once

// The LLM gateway of one profile. Every query of every role that uses the profile passes here,
// so this is where providers, accounting and the transcript live: `rules` and `replay` answer
// in the actor, the HTTP providers through a transport that owns its own thread.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <caf/fwd.hpp>
#include <caf/response_promise.hpp>

#include "actors/llm_replay.hpp"
#include "actors/llm_transport.hpp"
#include "config/config.hpp"
#include "messages/actors.hpp"

namespace kiln {

struct llm_gateway_state {
  static inline const char* name = "llm-gateway";
  llm_profile_config profile;
  archive_actor archive;
  std::string key;
  std::unique_ptr<llm::transport> http;
  std::unique_ptr<llm::replay_store> replay;
  struct pending {
    caf::typed_response_promise<llm_reply> promise;
    llm_request request;
  };
  std::map<uint64_t, pending> in_flight;
  uint64_t next_id = 1;
  int64_t calls = 0;
};

llm_gateway_actor::behavior_type
llm_gateway(llm_gateway_actor::stateful_pointer<llm_gateway_state> self, llm_profile_config profile,
            archive_actor archive);

/// Throws std::runtime_error when this build or machine cannot serve the profile (unknown
/// provider, missing key variable, unsafe key file, unreadable replay archive), so a run fails
/// before it starts instead of at its first query.
void check_provider(const llm_profile_config& profile);

/// The transport settings of a profile.
llm::transport_limits limits_of(const llm_profile_config& profile);

/// The wire query of `request` on `profile` (its defaults filled in).
llm::wire_query query_of(const llm_profile_config& profile, const llm_request& request,
                         const std::string& key);

/// Dollars for a reply's tokens at the profile's prices.
double cost_of(const llm_profile_config& profile, int64_t input_tokens, int64_t output_tokens);

} // namespace kiln
