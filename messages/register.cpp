#include "messages/register.hpp"

#include <caf/actor_system_config.hpp>

#include "messages/actors.hpp"
#include "messages/error.hpp"

namespace kiln {

void add_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<task_spec>("kiln::task_spec");
  cfg.add_message_type<llm_request>("kiln::llm_request");
  cfg.add_message_type<llm_reply>("kiln::llm_reply");
  cfg.add_message_type<runner_facts>("kiln::runner_facts");
  cfg.add_message_type<timing_stats>("kiln::timing_stats");
  cfg.add_message_type<verdict>("kiln::verdict");
  cfg.add_message_type<eval_job>("kiln::eval_job");
  cfg.add_message_type<compile_report>("kiln::compile_report");
  cfg.add_message_type<retime_job>("kiln::retime_job");
  cfg.add_message_type<retime_result>("kiln::retime_result");
  cfg.add_message_type<agent_request>("kiln::agent_request");
  cfg.add_message_type<agent_reply>("kiln::agent_reply");
  cfg.add_message_type<query_grant>("kiln::query_grant");
  cfg.add_message_type<budget_event>("kiln::budget_event");
  cfg.add_message_type<llm_call_record>("kiln::llm_call_record");
  cfg.add_message_type<candidate_record>("kiln::candidate_record");
  cfg.add_message_type<task_progress>("kiln::task_progress");
  cfg.add_message_type<task_result>("kiln::task_result");
  cfg.add_message_type<llm_totals>("kiln::llm_totals");
  cfg.add_message_type<run_summary>("kiln::run_summary");
  cfg.add_message_type<archive_actor>("kiln::archive_actor");
  cfg.add_message_type<llm_gateway_actor>("kiln::llm_gateway_actor");
  cfg.add_message_type<agent_actor>("kiln::agent_actor");
  cfg.add_message_type<evaluator_actor>("kiln::evaluator_actor");
  cfg.add_message_type<dispatcher_actor>("kiln::dispatcher_actor");
  cfg.add_message_type<strategy_actor>("kiln::strategy_actor");
  cfg.add_message_type<supervisor_actor>("kiln::supervisor_actor");
  cfg.add_error_category(error_category,
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = to_string(static_cast<ec>(code));
                           if (!ctx.empty()) {
                             out += ": ";
                             out += caf::deep_to_string(ctx);
                           }
                           return out;
                         });
}

} // namespace kiln
