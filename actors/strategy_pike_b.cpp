#include "actors/strategy_pike_b.hpp"

#include <algorithm>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/strategy_common.hpp"
#include "config/defaults.hpp"
#include "messages/error.hpp"

namespace kiln {

std::vector<std::string> resize_ideas(const std::vector<std::string>& ideas, size_t n) {
  if (ideas.size() >= n)
    return {ideas.begin(), ideas.begin() + static_cast<std::ptrdiff_t>(n)};
  std::vector<std::string> out;
  if (ideas.empty())
    return out;
  for (size_t i = 0; i < ideas.size(); ++i) {
    // numpy.array_split: the first n % k bins get one more.
    size_t share = n / ideas.size() + (i < n % ideas.size() ? 1 : 0);
    for (size_t j = 0; j < share; ++j)
      out.push_back(ideas[i]);
  }
  return out;
}

std::vector<int64_t> split_queries(int64_t queries, size_t parents) {
  std::vector<int64_t> out;
  auto k = static_cast<int64_t>(parents);
  for (int64_t p = 0; p < k; ++p)
    out.push_back(queries / k + (p < queries % k ? 1 : 0));
  return out;
}

namespace {

using self_ptr = strategy_actor::stateful_pointer<strategy_pike_b_state>;
using work = strategy_pike_b_state::work;

void pump(self_ptr self);
void check_phase_end(self_ptr self);

agent_request make_request(self_ptr self, const work& w) {
  auto& st = self->state;
  agent_request req;
  req.task = st.task;
  req.kind = w.kind;
  req.idea = w.idea;
  req.code = w.code;
  req.last = w.last;
  req.facts = st.facts;
  req.max_ideas = static_cast<int32_t>(st.cfg.max_ideas);
  // A seed per query that depends only on the run seed and the query's place in the search.
  req.seed = st.cfg.seed * 1000003u + static_cast<uint64_t>(st.next_seq) * 7919u
             + static_cast<uint64_t>(w.attempt);
  return req;
}

void report(self_ptr self) {
  auto& st = self->state;
  st.progress.task = st.task.name;
  st.progress.query_limit = st.cfg.query_limit;
  st.progress.best_speedup = st.result.best_speedup;
  st.progress.evaluations = st.result.evaluations;
  st.progress.correct = st.result.correct;
  st.progress.phase = st.phase;
  self->send(st.supervisor, progress_atom::value, st.progress);
}

void conclude(self_ptr self);

bool start_retime(self_ptr self) {
  return kiln::start_retime(self, "pike-b", [](self_ptr s) { conclude(s); });
}

void finish(self_ptr self) {
  auto& st = self->state;
  // While re-timing, the re-timing's handlers conclude the task.
  if (st.finished || st.retiming)
    return;
  st.result.search_speedup = st.result.best_speedup;
  if (!start_retime(self))
    conclude(self);
}

void conclude(self_ptr self) {
  auto& st = self->state;
  st.finished = true;
  st.result.task = st.task.name;
  st.result.stop_reason = st.stop_reason;
  spdlog::info("pike-b {}: done ({}), {} evaluations, {} correct, best {:.3f}x", st.task.name,
               st.stop_reason, st.result.evaluations, st.result.correct, st.result.best_speedup);
  self->send(st.supervisor, done_atom::value, st.result);
  self->quit();
}

/// Keeps the `retime_top` fastest correct candidates for the final re-timing.
void keep_winner(self_ptr self, const candidate_record& rec) {
  kiln::keep_winner(self->state.winners, rec, self->state.cfg.retime_top);
}

/// Records a judged candidate, keeps it if correct, queues a fix if it failed.
void judged(self_ptr self, const work& w, candidate_record rec) {
  auto& st = self->state;
  count_verdict(st.result, rec);
  const auto& v = rec.result;
  if (v.status == verdict_status::correct) {
    keep_winner(self, rec);
    st.phase_correct.push_back(std::move(rec));
  } else if (w.attempt < st.cfg.max_attempts && !st.stopping) {
    work fix;
    fix.kind = fix_kind_for(v.status);
    fix.role = st.cfg.error_fixer;
    fix.idea = w.idea;
    fix.code = rec.code;
    fix.last = rec.result;
    fix.parent = rec.seq;
    fix.attempt = w.attempt + 1;
    // Fixes go first: finishing a line of repair before opening new ones keeps phases short.
    st.queue.push_front(std::move(fix));
  }
}

void settle(self_ptr self) {
  --self->state.in_flight;
  report(self);
  pump(self);
  check_phase_end(self);
}

void evaluate(self_ptr self, work w, candidate_record rec) {
  auto& st = self->state;
  if (st.cfg.evaluations_limit > 0 && st.evaluations_started >= st.cfg.evaluations_limit) {
    // The candidate stays in the archive, unjudged; the search ends here.
    self->send(st.archive, put_atom::value, rec);
    if (!st.budget_spent)
      spdlog::info("pike-b {}: evaluation budget spent", st.task.name);
    st.budget_spent = true;
    st.stop_reason = "budget: evaluations";
    st.queue.clear();
    settle(self);
    return;
  }
  ++st.evaluations_started;
  eval_job job;
  job.task = st.task;
  job.candidate_id = st.task.name + "#" + std::to_string(rec.seq);
  job.code = rec.code;
  self->send(st.archive, put_atom::value, rec);
  self->request(st.dispatcher, defaults::request_timeout, eval_atom::value, std::move(job))
      .then(
          [self, w, rec](verdict& v) mutable {
            rec.evaluated = true;
            rec.result = std::move(v);
            self->send(self->state.archive, put_atom::value, rec);
            judged(self, w, std::move(rec));
            settle(self);
          },
          [self, rec](caf::error& err) mutable {
            spdlog::error("pike-b {}: evaluation of #{} failed: {}", self->state.task.name, rec.seq,
                          render(err));
            settle(self);
          });
}

/// The reviewer role reads a new program before it is evaluated and answers it corrected or
/// unchanged; the answer is what gets evaluated. A refused or failed review evaluates the
/// program as written.
void review(self_ptr self, work w, candidate_record rec) {
  auto& st = self->state;
  work r = w;
  r.kind = prompt_kind::review;
  r.role = st.cfg.reviewer;
  r.code = rec.code;
  auto req = make_request(self, r);
  self->request(st.supervisor, defaults::request_timeout, ask_atom::value, r.role, std::move(req))
      .then(
          [self, w, rec](agent_reply& reply) mutable {
            ++self->state.progress.queries;
            if (!reply.code.empty() && reply.code != rec.code) {
              rec.code = std::move(reply.code);
              rec.role = w.role + "+" + self->state.cfg.reviewer;
            }
            evaluate(self, std::move(w), std::move(rec));
          },
          [self, w, rec](caf::error& err) mutable {
            auto& st = self->state;
            if (is(err, ec::budget_exhausted)) {
              st.budget_spent = true;
              st.stop_reason = "budget";
            }
            evaluate(self, std::move(w), std::move(rec));
          });
}

void launch(self_ptr self, work w) {
  auto& st = self->state;
  ++st.in_flight;
  auto req = make_request(self, w);
  self->request(st.supervisor, defaults::request_timeout, ask_atom::value, w.role, std::move(req))
      .then(
          [self, w](agent_reply& reply) mutable {
            auto& st = self->state;
            ++st.progress.queries;
            candidate_record rec;
            rec.task = st.task.name;
            rec.seq = st.next_seq++;
            rec.parent = w.parent;
            rec.role = w.role;
            rec.phase = st.phase;
            rec.attempt = w.attempt;
            rec.idea = w.idea;
            if (!reply.code.empty()) {
              rec.code = std::move(reply.code);
              if (!st.cfg.reviewer.empty())
                review(self, std::move(w), std::move(rec));
              else
                evaluate(self, std::move(w), std::move(rec));
              return;
            }
            // No program in the reply: judged without running anything, and sent to the fixer
            // with the reply itself as the code to repair.
            rec.code = std::move(reply.raw);
            rec.evaluated = true;
            rec.result.status = verdict_status::compile_error;
            rec.result.reason = "the reply held no program defining class ModelNew";
            rec.result.code = "no_program";
            self->send(st.archive, put_atom::value, rec);
            judged(self, w, std::move(rec));
            settle(self);
          },
          [self](caf::error& err) {
            auto& st = self->state;
            if (is(err, ec::budget_exhausted)) {
              if (!st.budget_spent)
                spdlog::info("pike-b {}: query budget spent", st.task.name);
              st.budget_spent = true;
              st.stop_reason = "budget";
            } else {
              spdlog::warn("pike-b {}: query failed: {}", st.task.name, render(err));
            }
            settle(self);
          });
}

void pump(self_ptr self) {
  auto& st = self->state;
  while (!st.queue.empty() && !st.budget_spent && !st.stopping
         && st.in_flight < std::max<int64_t>(1, st.cfg.parallel)) {
    auto w = std::move(st.queue.front());
    st.queue.pop_front();
    launch(self, std::move(w));
  }
}

void begin_phase(self_ptr self, std::vector<work> items) {
  auto& st = self->state;
  ++st.phase;
  st.phase_correct.clear();
  st.phase_start_best = st.result.best_speedup;
  spdlog::info("pike-b {}: phase {} with {} candidates", st.task.name, st.phase, items.size());
  for (auto& w : items)
    st.queue.push_back(std::move(w));
  pump(self);
  check_phase_end(self);
}

/// The next phase improves the fastest correct candidates of the last one, `max_ideas`
/// queries split as evenly as possible over them (10 over 4 gives 3/3/2/2, as in PIKE).
std::vector<work> next_phase_items(self_ptr self) {
  auto& st = self->state;
  auto& pool = st.phase_correct;
  std::stable_sort(pool.begin(), pool.end(), [](const auto& a, const auto& b) {
    if (a.result.candidate.median_ms != b.result.candidate.median_ms)
      return a.result.candidate.median_ms < b.result.candidate.median_ms;
    return a.seq < b.seq;
  });
  std::vector<std::pair<std::string, int64_t>> parents;
  for (size_t i = 0; i < pool.size() && static_cast<int64_t>(i) < st.cfg.parents; ++i)
    parents.emplace_back(pool[i].code, pool[i].seq);
  // The reference is always a valid parent, ranked last (runtime infinity): it fills a pool
  // with fewer than `parents` correct candidates, as in PIKE.
  if (static_cast<int64_t>(parents.size()) < st.cfg.parents)
    parents.emplace_back(st.task.source, 0);
  std::vector<work> items;
  auto shares = split_queries(std::max<int64_t>(1, st.cfg.max_ideas), parents.size());
  for (size_t p = 0; p < parents.size(); ++p) {
    for (int64_t j = 0; j < shares[p]; ++j) {
      work w;
      w.kind = prompt_kind::improve;
      w.role = st.cfg.optimizer;
      w.code = parents[p].first;
      w.parent = parents[p].second;
      items.push_back(std::move(w));
    }
  }
  return items;
}

void check_phase_end(self_ptr self) {
  auto& st = self->state;
  if (st.finished || st.in_flight > 0 || st.phase < 0)
    return;
  if (!st.queue.empty() && !st.budget_spent && !st.stopping)
    return;
  if (st.stopping || st.budget_spent) {
    finish(self);
    return;
  }
  if (st.phase + 1 >= st.cfg.phases) {
    st.stop_reason = "phases";
    finish(self);
    return;
  }
  if (st.result.best_speedup > st.phase_start_best)
    st.stalled_phases = 0;
  else
    ++st.stalled_phases;
  if (st.cfg.stall_phases > 0 && st.stalled_phases >= st.cfg.stall_phases) {
    st.stop_reason = "stalled";
    spdlog::info("pike-b {}: no improvement for {} phases", st.task.name, st.stalled_phases);
    finish(self);
    return;
  }
  begin_phase(self, next_phase_items(self));
}

void brainstorm(self_ptr self) {
  auto& st = self->state;
  work w;
  w.kind = prompt_kind::brainstorm;
  w.role = st.cfg.brainstormer;
  auto req = make_request(self, w);
  self->request(st.supervisor, defaults::request_timeout, ask_atom::value, w.role, std::move(req))
      .then(
          [self](agent_reply& reply) {
            auto& st = self->state;
            ++st.progress.queries;
            std::vector<work> items;
            // As in PIKE: fewer ideas than branches are repeated to fill them.
            for (auto& idea : resize_ideas(reply.ideas, static_cast<size_t>(st.cfg.max_ideas))) {
              work w;
              w.kind = prompt_kind::optimize;
              w.role = st.cfg.optimizer;
              w.idea = idea;
              items.push_back(std::move(w));
            }
            if (items.empty()) {
              // No usable ideas: still try to optimise the reference without one.
              work w;
              w.kind = prompt_kind::optimize;
              w.role = st.cfg.optimizer;
              items.push_back(std::move(w));
            }
            report(self);
            begin_phase(self, std::move(items));
          },
          [self](caf::error& err) {
            auto& st = self->state;
            st.stop_reason = is(err, ec::budget_exhausted) ? "budget" : "error: " + render(err);
            finish(self);
          });
}

} // namespace

strategy_actor::behavior_type
strategy_pike_b(strategy_actor::stateful_pointer<strategy_pike_b_state> self, task_spec task,
                pike_b_settings cfg, supervisor_actor supervisor, dispatcher_actor dispatcher,
                archive_actor archive) {
  auto& st = self->state;
  st.task = std::move(task);
  st.cfg = std::move(cfg);
  st.supervisor = std::move(supervisor);
  st.dispatcher = std::move(dispatcher);
  st.archive = std::move(archive);
  st.result.task = st.task.name;
  st.stop_reason = "phases";
  self->request(st.dispatcher, defaults::request_timeout, facts_atom::value)
      .then(
          [self](runner_facts& f) {
            self->state.facts = std::move(f);
            if (self->state.stopping || self->state.budget_spent) {
              if (self->state.stopping)
                self->state.stop_reason = "stopped";
              finish(self);
              return;
            }
            brainstorm(self);
          },
          [self](caf::error& err) {
            self->state.stop_reason = "error: no runner facts: " + render(err);
            finish(self);
          });
  if (st.cfg.wall_s > 0)
    self->delayed_send(self,
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::duration<double>(st.cfg.wall_s)),
                       stop_atom::value, std::string{"wall clock"});
  return {
      [self](stop_atom) {
        auto& st = self->state;
        st.stopping = true;
        st.stop_reason = "stopped";
        st.queue.clear();
        check_phase_end(self);
      },
      [self](stop_atom, const std::string& reason) {
        // A budget ran out: like the query budget, no new work, and the winners are re-timed.
        auto& st = self->state;
        if (st.budget_spent || st.stopping)
          return;
        spdlog::info("pike-b {}: {} budget spent", st.task.name, reason);
        st.budget_spent = true;
        st.stop_reason = reason;
        st.queue.clear();
        check_phase_end(self);
      },
  };
}

} // namespace kiln
