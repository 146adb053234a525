#pragma once

namespace caf {
class actor_system_config;
}

namespace kiln {

/// Registers every kiln message type and the error category with a CAF configuration. Both
/// sides of a remote connection must call it, or CAF refuses the actor handle.
void add_message_types(caf::actor_system_config& cfg);

} // namespace kiln
