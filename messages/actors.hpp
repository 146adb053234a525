#pragma once

// Every typed actor interface of kiln, in one light header. Each alias names its role; each
// handler has a line saying what it does.

#include <cstdint>
#include <string>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/agent.hpp"
#include "messages/atoms.hpp"
#include "messages/eval.hpp"
#include "messages/llm.hpp"
#include "messages/run.hpp"

namespace kiln {

/// The archive: the run's SQLite file; every event is committed when it arrives.
using archive_actor = caf::typed_actor<
    // Records one LLM call (prompt, reply, tokens).
    caf::reacts_to<put_atom, llm_call_record>,
    // Records a candidate, or its verdict once evaluated (same task and seq).
    caf::reacts_to<put_atom, candidate_record>,
    // Records a budget decision.
    caf::reacts_to<put_atom, budget_event>,
    // Records the outcome of a task.
    caf::reacts_to<put_atom, task_result>,
    // Answers once everything sent before is committed.
    caf::replies_to<flush_atom>::with<ok_atom>>;

/// An LLM gateway: one per LLM profile, whatever its provider.
using llm_gateway_actor = caf::typed_actor<
    // Sends one query and returns the reply with its token usage.
    caf::replies_to<ask_atom, llm_request>::with<llm_reply>,
    // Internal: the gateway's HTTP thread reports query `id` done (reply, or an error text and
    // whether the profile is unusable).
    caf::reacts_to<done_atom, uint64_t, llm_reply, std::string, bool>>;

/// An agent role (brainstormer, optimizer, error fixer, or any role declared in the config).
using agent_actor = caf::typed_actor<
    // Renders the request into a prompt, queries the role's profile, parses the reply.
    caf::replies_to<ask_atom, agent_request>::with<agent_reply>>;

/// An evaluator: one per device, the only one that times work on it.
using evaluator_actor = caf::typed_actor<
    // Judges one candidate.
    caf::replies_to<eval_atom, eval_job>::with<verdict>,
    // Re-times a task's best candidates interleaved with the reference.
    caf::replies_to<retime_atom, retime_job>::with<retime_result>,
    // Reports what the device's runners have.
    caf::replies_to<facts_atom>::with<runner_facts>>;

/// A compile worker: imports a candidate with no GPU visible so that its extensions are built
/// (into the shared cache) before any GPU is held.
using compiler_actor =
    caf::typed_actor<caf::replies_to<compile_atom, eval_job>::with<compile_report>>;

/// The dispatcher: queues evaluations, sends those that build extensions through a compiler
/// first, and hands each to a free evaluator.
using dispatcher_actor = evaluator_actor::extend<
    // Installs (or replaces, after a restart) the evaluator of device slot `index`.
    caf::reacts_to<put_atom, int32_t, evaluator_actor>,
    // Adds a compile worker.
    caf::reacts_to<put_atom, compiler_actor>>;

/// A search strategy: one per task.
using strategy_actor = caf::typed_actor<
    // Asks the strategy to wind down: no new queries, in-flight work finishes, then it reports.
    caf::reacts_to<stop_atom>,
    // The same for a budget (the string becomes the task's stop reason, e.g. `wall clock`):
    // unlike a stop, the winners are still re-timed.
    caf::reacts_to<stop_atom, std::string>>;

/// The supervisor: owns the run, its budgets and the registry of workers.
using supervisor_actor = caf::typed_actor<
    // Starts the run; answers with the summary once every task has ended.
    caf::replies_to<run_atom>::with<run_summary>,
    // Grants or refuses one LLM query of `task` for `role`; forwards the request to the role.
    caf::replies_to<ask_atom, std::string, agent_request>::with<agent_reply>,
    // Grants or refuses one LLM query of `task` (first string) for `role` (second string).
    caf::replies_to<grant_atom, std::string, std::string>::with<query_grant>,
    // A strategy reports how its task stands.
    caf::reacts_to<progress_atom, task_progress>,
    // A strategy reports that its task has ended.
    caf::reacts_to<done_atom, task_result>,
    // Stops the run cleanly (SIGINT, SIGTERM).
    caf::reacts_to<stop_atom>,
    // The run's wall-clock budget is spent: running tasks wind down, no new task starts.
    caf::reacts_to<tick_atom>,
    // Respawns the named worker after its backoff.
    caf::reacts_to<restart_atom, std::string>,
    // Looks up the current actor of a named worker (`agent:optimizer`, `evaluator:0`, ...).
    caf::replies_to<get_atom, std::string>::with<caf::actor>>;

} // namespace kiln
