#include "actors/supervisor.hpp"

#include <algorithm>
#include <filesystem>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/agent.hpp"
#include "actors/archive.hpp"
#include "actors/compiler.hpp"
#include "actors/dispatcher.hpp"
#include "actors/evaluator.hpp"
#include "actors/llm_gateway.hpp"
#include "actors/strategy_pike_b.hpp"
#include "actors/strategy_pike_o.hpp"
#include "config/defaults.hpp"
#include "messages/error.hpp"

namespace kiln {

namespace {

using self_ptr = supervisor_actor::stateful_pointer<supervisor_state>;
using clock = std::chrono::steady_clock;

void finalize(self_ptr self);
void start_tasks(self_ptr self);

// -- workers ----------------------------------------------------------------------------------

caf::actor spawn_worker(self_ptr self, const std::string& name);

void install(self_ptr self, const std::string& name, caf::actor handle) {
  auto& st = self->state;
  auto& w = st.workers[name];
  w.name = name;
  if (w.handle)
    st.worker_by_addr.erase(w.handle.address());
  w.handle = handle;
  st.worker_by_addr[handle.address()] = name;
  self->monitor(handle);
}

caf::actor spawn_worker(self_ptr self, const std::string& name) {
  auto& st = self->state;
  auto& cfg = st.plan.cfg;
  caf::actor handle;
  if (name.rfind("llm:", 0) == 0) {
    auto profile = cfg.llm.at(name.substr(4));
    handle = caf::actor_cast<caf::actor>(self->spawn(llm_gateway, profile, st.archive));
  } else if (name.rfind("agent:", 0) == 0) {
    auto role = cfg.agents.at(name.substr(6));
    std::vector<llm_gateway_actor> gateways;
    for (auto& [profile, weight] : weighted_profiles(role))
      gateways.push_back(
          caf::actor_cast<llm_gateway_actor>(st.workers.at("llm:" + profile).handle));
    auto it = st.plan.templates.find(role.name);
    auto texts = it == st.plan.templates.end() ? std::map<std::string, std::string>{} : it->second;
    handle = caf::actor_cast<caf::actor>(self->spawn(agent, role, texts, std::move(gateways)));
  } else if (name.rfind("evaluator:", 0) == 0) {
    auto index = std::stoul(name.substr(10));
    evaluator_actor ev;
    if (st.plan.make_evaluator)
      ev = st.plan.make_evaluator(self->home_system(), index);
    else
      ev = spawn_evaluator(self->home_system(), st.plan.evaluators.at(index), cfg.run.seed);
    self->send(st.dispatcher, put_atom::value, static_cast<int32_t>(index), ev);
    handle = caf::actor_cast<caf::actor>(ev);
  } else if (name.rfind("compiler:", 0) == 0) {
    auto index = std::stoul(name.substr(9));
    auto c = spawn_compiler(self->home_system(), st.plan.compilers.at(index));
    self->send(st.dispatcher, put_atom::value, c);
    handle = caf::actor_cast<caf::actor>(c);
  }
  install(self, name, handle);
  return handle;
}

void unpark(self_ptr self);

void forward_ask(self_ptr self, const std::string& role, agent_request req,
                 caf::typed_response_promise<agent_reply> rp, double reserved) {
  auto current = self->state.workers.at("agent:" + role).handle;
  auto handle = caf::actor_cast<agent_actor>(current);
  auto task = req.task.name;
  self->request(handle, defaults::request_timeout, ask_atom::value, req)
      .then(
          [self, rp, task, reserved](agent_reply& reply) mutable {
            self->state.budget.settle(task, reserved, reply.cost_usd);
            unpark(self);
            for (auto* t : {&self->state.totals, &self->state.task_totals[task]}) {
              ++t->queries;
              t->input_tokens += reply.input_tokens;
              t->output_tokens += reply.output_tokens;
              t->cost_usd += reply.cost_usd;
            }
            rp.deliver(std::move(reply));
          },
          [self, role, req, rp, current, reserved](caf::error& err) mutable {
            // The role died before it took the ask (its crash is not processed yet, or it is
            // restarting): the query was never sent, so it goes to the role's next actor.
            if (err == caf::sec::request_receiver_down && !self->state.finishing) {
              auto& w = self->state.workers.at("agent:" + role);
              if (w.handle && w.handle != current)
                forward_ask(self, role, std::move(req), rp, reserved);
              else
                self->state.waiting[role].push_back({std::move(req), rp, reserved});
              return;
            }
            // A failed query bills nothing that kiln can see; its reservation is released.
            self->state.budget.settle(req.task.name, reserved, 0);
            unpark(self);
            rp.deliver(std::move(err));
          });
}

/// After a gateway comes back, the roles that used it must talk to the new one.
void respawn_dependents(self_ptr self, const std::string& profile) {
  auto& st = self->state;
  for (auto& [role, cfg] : st.plan.cfg.agents) {
    auto profiles = weighted_profiles(cfg);
    if (std::none_of(profiles.begin(), profiles.end(),
                     [&](const auto& p) { return p.first == profile; }))
      continue;
    auto name = "agent:" + role;
    auto old = st.workers[name].handle;
    if (old) {
      st.worker_by_addr.erase(old.address());
      self->demonitor(old);
      self->send_exit(old, caf::exit_reason::user_shutdown);
    }
    spawn_worker(self, name);
  }
}

void restart(self_ptr self, const std::string& name) {
  auto& st = self->state;
  if (st.finishing)
    return;
  spdlog::warn("supervisor: restarting {}", name);
  spawn_worker(self, name);
  if (name.rfind("llm:", 0) == 0)
    respawn_dependents(self, name.substr(4));
  if (name.rfind("agent:", 0) == 0) {
    auto role = name.substr(6);
    auto held = std::move(st.waiting[role]);
    st.waiting.erase(role);
    for (auto& w : held)
      forward_ask(self, role, std::move(w.req), w.promise, w.reserved_usd);
  }
}

void take_down(self_ptr self, std::string why) {
  auto& st = self->state;
  if (!st.fatal.empty())
    return;
  spdlog::error("supervisor: {}", why);
  st.fatal = std::move(why);
  self->send(self, stop_atom::value);
}

void on_worker_down(self_ptr self, const std::string& name, const caf::error& reason) {
  auto& st = self->state;
  auto& w = st.workers[name];
  w.handle = nullptr;
  if (st.finishing)
    return;
  auto now = clock::now();
  const auto& plan = st.plan;
  if (w.restarts == 0 || now - w.window_start > plan.restart_window) {
    w.window_start = now;
    w.restarts = 0;
    w.backoff = plan.restart_backoff_min;
  } else {
    w.backoff = std::min<std::chrono::milliseconds>(w.backoff * 2, plan.restart_backoff_max);
  }
  ++w.restarts;
  if (w.restarts > plan.max_restarts) {
    take_down(self, name + " crashed " + std::to_string(w.restarts) + " times within "
                        + std::to_string(plan.restart_window.count()) + " s; giving up");
    return;
  }
  spdlog::warn("supervisor: {} went down ({}); restart in {} ms", name, caf::to_string(reason),
               w.backoff.count());
  self->delayed_send(self, w.backoff, restart_atom::value, name);
}

// -- budget -----------------------------------------------------------------------------------

/// The most a query of `role` for `req` can cost: its prompt (the template, about 8000
/// characters, with the task, the code and the verdict's tails filled in, at 3 characters a
/// token, which errs high) at the input price and max_tokens at the output price.
double worst_cost(const config& cfg, const std::string& role, const agent_request& req) {
  auto a = cfg.agents.find(role);
  if (a == cfg.agents.end())
    return 0;
  // The dearest of the role's profiles: the query may go to any of them.
  const llm_profile_config* dearest = nullptr;
  double dearest_cost = -1;
  for (auto& [name, weight] : weighted_profiles(a->second)) {
    auto p = cfg.llm.find(name);
    if (p == cfg.llm.end())
      continue;
    double c = p->second.usd_per_mtok_input
               + p->second.usd_per_mtok_output * static_cast<double>(p->second.max_tokens);
    if (c > dearest_cost) {
      dearest_cost = c;
      dearest = &p->second;
    }
  }
  if (dearest == nullptr)
    return 0;
  size_t chars = 8000 + req.task.source.size() + req.code.size() + req.idea.size()
                 + req.last.reason.size() + req.last.stdout_tail.size()
                 + req.last.stderr_tail.size();
  double input = static_cast<double>(chars) / 3.0;
  return (input * dearest->usd_per_mtok_input
          + static_cast<double>(dearest->max_tokens) * dearest->usd_per_mtok_output)
         / 1e6;
}

query_grant grant(self_ptr self, const std::string& task, const std::string& role,
                  double reserve_usd = 0) {
  auto& st = self->state;
  auto g = st.budget.take(task, reserve_usd);
  self->send(st.archive, put_atom::value,
             budget_event{task, role, g.granted ? "grant" : (g.wait ? "wait" : "refuse"), g.used,
                          g.limit});
  return g;
}

/// Grants and forwards an ask, parks it when only in-flight reservations stand in its way, or
/// refuses it. Returns false when it was parked.
bool submit_ask(self_ptr self, const std::string& role, agent_request req,
                caf::typed_response_promise<agent_reply> rp) {
  auto& st = self->state;
  double reserve = worst_cost(st.plan.cfg, role, req);
  auto g = grant(self, req.task.name, role, reserve);
  if (!g.granted && g.wait) {
    st.parked.push_back({role, std::move(req), rp});
    return false;
  }
  if (!g.granted) {
    rp.deliver(make_error(ec::budget_exhausted, g.reason));
    return true;
  }
  auto w = st.workers.find("agent:" + role);
  if (!w->second.handle)
    st.waiting[role].push_back({std::move(req), rp, reserve});
  else
    forward_ask(self, role, std::move(req), rp, reserve);
  return true;
}

void unpark(self_ptr self) {
  auto& st = self->state;
  while (!st.parked.empty() && !st.finishing) {
    auto p = std::move(st.parked.front());
    st.parked.erase(st.parked.begin());
    if (!submit_ask(self, p.role, std::move(p.req), p.promise)) {
      // Parked again, at the back: move it to the front to keep the order, and wait.
      std::rotate(st.parked.rbegin(), st.parked.rbegin() + 1, st.parked.rend());
      break;
    }
  }
}

// -- tasks ------------------------------------------------------------------------------------

pike_b_settings strategy_settings(const config& cfg) {
  pike_b_settings s;
  s.max_ideas = cfg.strategy.max_ideas;
  s.phases = cfg.strategy.phases;
  s.parents = cfg.strategy.parents;
  s.parallel = cfg.strategy.parallel_candidates;
  s.query_limit = cfg.budget.queries_per_task;
  s.seed = cfg.run.seed;
  s.brainstormer = cfg.strategy.brainstormer;
  s.optimizer = cfg.strategy.optimizer;
  s.error_fixer = cfg.strategy.error_fixer;
  s.reviewer = cfg.strategy.reviewer;
  s.retime_rounds = cfg.evaluator.retime_rounds;
  s.retime_top = cfg.evaluator.retime_top;
  s.stall_phases = cfg.strategy.stall_phases;
  s.evaluations_limit = cfg.budget.evaluations_per_task;
  s.wall_s = cfg.budget.wall_s_per_task;
  auto fixer = cfg.agents.find(s.error_fixer);
  if (fixer != cfg.agents.end())
    s.max_attempts = fixer->second.max_attempts;
  return s;
}

pike_o_settings pike_o_settings_of(const config& cfg) {
  pike_o_settings s;
  const auto& st = cfg.strategy;
  s.iterations = st.iterations;
  s.islands = st.islands;
  s.population_size = st.population_size;
  s.archive_size = st.archive_size;
  s.migration_interval = st.migration_interval;
  s.migration_rate = st.migration_rate;
  s.exploration_ratio = st.exploration_ratio;
  s.exploitation_ratio = st.exploitation_ratio;
  s.parallel = st.parallel_candidates;
  s.feature_bins = st.feature_bins;
  s.feature_dimensions = st.feature_dimensions;
  s.top_programs = st.top_programs;
  s.inspirations = st.inspirations;
  s.template_kind = st.template_kind;
  s.query_limit = cfg.budget.queries_per_task;
  s.seed = cfg.run.seed;
  s.optimizer = st.optimizer;
  s.error_fixer = st.error_fixer;
  s.retime_rounds = cfg.evaluator.retime_rounds;
  s.retime_top = cfg.evaluator.retime_top;
  s.evaluations_limit = cfg.budget.evaluations_per_task;
  s.wall_s = cfg.budget.wall_s_per_task;
  auto fixer = cfg.agents.find(s.error_fixer);
  if (fixer != cfg.agents.end())
    s.max_fix_attempts = fixer->second.max_attempts;
  return s;
}

void start_tasks(self_ptr self) {
  auto& st = self->state;
  auto limit = std::max<int64_t>(1, st.plan.cfg.run.parallel_tasks);
  while (!st.stopping && !st.todo.empty() && static_cast<int64_t>(st.running.size()) < limit) {
    auto& task = st.plan.tasks[st.todo.front()];
    st.todo.pop_front();
    auto me = caf::actor_cast<supervisor_actor>(self);
    strategy_actor handle;
    if (st.plan.cfg.strategy.kind == "pike-o")
      handle = self->spawn(strategy_pike_o, task, pike_o_settings_of(st.plan.cfg), me,
                           st.dispatcher, st.archive);
    else
      handle = self->spawn(strategy_pike_b, task, strategy_settings(st.plan.cfg), me, st.dispatcher,
                           st.archive);
    self->monitor(handle);
    st.strategy_by_addr[handle.address()] = task.name;
    st.running[task.name] = handle;
    spdlog::info("supervisor: started task {}", task.name);
  }
  if (st.running.empty() && (st.todo.empty() || st.stopping))
    finalize(self);
}

void task_ended(self_ptr self, task_result r) {
  auto& st = self->state;
  r.queries = st.budget.used(r.task);
  r.llm = st.task_totals[r.task];
  st.running.erase(r.task);
  self->send(st.archive, put_atom::value, r);
  if (st.plan.on_progress) {
    auto p = st.progress[r.task];
    p.task = r.task;
    p.queries = r.queries;
    p.query_limit = st.budget.per_task();
    p.evaluations = r.evaluations;
    p.correct = r.correct;
    p.best_speedup = r.best_speedup;
    st.plan.on_progress(p, true);
  }
  st.results[r.task] = std::move(r);
  start_tasks(self);
}

run_summary make_summary(self_ptr self) {
  auto& st = self->state;
  run_summary s;
  s.strategy = st.plan.cfg.strategy.kind;
  s.interrupted = st.stopping;
  s.llm = st.totals;
  for (auto& t : st.plan.tasks) {
    auto it = st.results.find(t.name);
    if (it != st.results.end()) {
      s.tasks.push_back(it->second);
      continue;
    }
    task_result r;
    r.task = t.name;
    r.stop_reason = st.out_of_time ? "not started (wall clock)" : "not started";
    s.tasks.push_back(std::move(r));
  }
  return s;
}

void shut_down_workers(self_ptr self) {
  auto& st = self->state;
  for (auto& [name, w] : st.workers)
    if (w.handle)
      self->send_exit(w.handle, caf::exit_reason::user_shutdown);
  self->send_exit(st.dispatcher, caf::exit_reason::user_shutdown);
}

void finalize(self_ptr self) {
  auto& st = self->state;
  if (st.finishing)
    return;
  st.finishing = true;
  for (auto& p : st.parked)
    p.promise.deliver(make_error(ec::stopped, "the run ended"));
  st.parked.clear();
  for (auto& [name, held] : st.waiting)
    for (auto& w : held) {
      st.budget.settle(w.req.task.name, w.reserved_usd, 0);
      w.promise.deliver(make_error(ec::stopped, "the run ended"));
    }
  st.waiting.clear();
  shut_down_workers(self);
  auto deliver = [self] {
    auto& st = self->state;
    if (!st.fatal.empty()) {
      st.run_promise.deliver(make_error(ec::stopped, st.fatal));
      return;
    }
    st.run_promise.deliver(make_summary(self));
  };
  self->request(st.archive, defaults::flush_timeout, flush_atom::value)
      .then([deliver](ok_atom) { deliver(); },
            [deliver](caf::error& err) {
              spdlog::error("supervisor: archive flush failed: {}", render(err));
              deliver();
            });
}

} // namespace

supervisor_state::~supervisor_state() {
  for (auto& [task, handle] : running)
    caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  for (auto& [name, w] : workers)
    if (w.handle)
      caf::anon_send_exit(w.handle, caf::exit_reason::user_shutdown);
  if (dispatcher)
    caf::anon_send_exit(dispatcher, caf::exit_reason::user_shutdown);
  // Last, so that events sent before it are committed first (mailbox order).
  if (archive)
    caf::anon_send_exit(archive, caf::exit_reason::user_shutdown);
}

supervisor_actor::behavior_type
supervisor(supervisor_actor::stateful_pointer<supervisor_state> self, run_plan plan,
           archive_actor archive) {
  auto& st = self->state;
  st.plan = std::move(plan);
  st.archive = std::move(archive);
  st.budget = query_budget{st.plan.cfg.budget.queries_per_task, st.plan.cfg.budget.usd_total,
                           st.plan.cfg.budget.usd_per_task};
  self->monitor(st.archive);
  auto slots = st.plan.make_evaluator ? std::max<size_t>(1, st.plan.evaluators.size())
                                      : st.plan.evaluators.size();
  st.dispatcher = self->spawn(dispatcher, slots);
  self->monitor(st.dispatcher);
  for (auto& [name, profile] : st.plan.cfg.llm)
    spawn_worker(self, "llm:" + name);
  for (auto& [name, role] : st.plan.cfg.agents)
    spawn_worker(self, "agent:" + name);
  for (size_t i = 0; i < slots; ++i)
    spawn_worker(self, "evaluator:" + std::to_string(i));
  for (size_t i = 0; i < st.plan.compilers.size(); ++i)
    spawn_worker(self, "compiler:" + std::to_string(i));
  for (size_t i = 0; i < st.plan.tasks.size(); ++i)
    st.todo.push_back(i);

  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (dm.source == st.archive.address() || dm.source == st.dispatcher.address()) {
      if (!st.finishing)
        take_down(self, std::string{dm.source == st.archive.address() ? "archive" : "dispatcher"}
                            + " went down: " + caf::to_string(dm.reason));
      return;
    }
    if (auto s = st.strategy_by_addr.find(dm.source); s != st.strategy_by_addr.end()) {
      auto task = s->second;
      st.strategy_by_addr.erase(s);
      if (st.running.count(task)) {
        // The strategy died without reporting: its task ends with what the archive has.
        task_result r;
        r.task = task;
        r.stop_reason = "error: strategy went down: " + caf::to_string(dm.reason);
        task_ended(self, std::move(r));
      }
      return;
    }
    if (auto w = st.worker_by_addr.find(dm.source); w != st.worker_by_addr.end()) {
      auto name = w->second;
      st.worker_by_addr.erase(w);
      on_worker_down(self, name, dm.reason);
    }
  });

  return {
      [self](run_atom) -> caf::result<run_summary> {
        auto& st = self->state;
        if (st.started)
          return make_error(ec::bad_config, "the run has already been started");
        st.started = true;
        st.run_promise = self->make_response_promise<run_summary>();
        if (st.plan.cfg.budget.wall_s_total > 0)
          self->delayed_send(self,
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::duration<double>(st.plan.cfg.budget.wall_s_total)),
                             tick_atom::value);
        start_tasks(self);
        return st.run_promise;
      },
      [self](ask_atom, const std::string& role, agent_request& req) -> caf::result<agent_reply> {
        auto& st = self->state;
        if (st.stopping || st.finishing)
          return make_error(ec::stopped, "the run is stopping");
        auto w = st.workers.find("agent:" + role);
        if (w == st.workers.end())
          return make_error(ec::bad_config, "no agent role named " + role);
        auto rp = self->make_response_promise<agent_reply>();
        if (!st.parked.empty()) {
          // Earlier asks wait for dollars to settle: this one queues behind them.
          st.parked.push_back({role, std::move(req), rp});
          return rp;
        }
        submit_ask(self, role, std::move(req), rp);
        return rp;
      },
      [self](grant_atom, const std::string& task, const std::string& role) -> query_grant {
        return grant(self, task, role);
      },
      [self](progress_atom, task_progress& p) {
        auto& st = self->state;
        p.queries = st.budget.used(p.task);
        p.query_limit = st.budget.per_task();
        st.progress[p.task] = p;
        if (st.plan.on_progress)
          st.plan.on_progress(p, false);
      },
      [self](done_atom, task_result& r) { task_ended(self, std::move(r)); },
      [self](stop_atom) {
        auto& st = self->state;
        if (st.stopping)
          return;
        st.stopping = true;
        spdlog::warn("supervisor: stopping: {} task(s) in flight finish what they started",
                     st.running.size());
        st.todo.clear();
        for (auto& [task, handle] : st.running)
          self->send(handle, stop_atom::value);
        if (st.running.empty()) {
          if (st.started)
            finalize(self);
          else if (!st.fatal.empty())
            shut_down_workers(self);
        }
      },
      [self](tick_atom) {
        auto& st = self->state;
        if (st.stopping || st.finishing || st.out_of_time)
          return;
        st.out_of_time = true;
        spdlog::info("supervisor: wall_s_total spent: {} running task(s) wind down, {} not started",
                     st.running.size(), st.todo.size());
        st.todo.clear();
        for (auto& [task, handle] : st.running)
          self->send(handle, stop_atom::value, std::string{"wall clock"});
        if (st.running.empty())
          finalize(self);
      },
      [self](restart_atom, const std::string& name) { restart(self, name); },
      [self](get_atom, const std::string& name) -> caf::result<caf::actor> {
        auto& st = self->state;
        auto w = st.workers.find(name);
        if (w == st.workers.end() || !w->second.handle)
          return make_error(ec::unavailable, "no running worker named " + name);
        return w->second.handle;
      },
  };
}

supervisor_actor spawn_supervisor(caf::actor_system& sys, run_plan plan) {
  for (auto& [name, profile] : plan.cfg.llm)
    check_provider(profile);
  for (auto& [name, role] : plan.cfg.agents)
    if (auto texts = load_role_templates(role); !texts.empty())
      plan.templates[name] = std::move(texts);
  std::filesystem::create_directories(plan.cfg.run.out);
  auto archive =
      spawn_archive(sys, (std::filesystem::path{plan.cfg.run.out} / "archive.sqlite").string());
  return sys.spawn(supervisor, std::move(plan), std::move(archive));
}

} // namespace kiln
