#include "actors/dispatcher.hpp"

#include <algorithm>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "config/defaults.hpp"
#include "messages/error.hpp"

namespace kiln {

namespace {

using self_ptr = dispatcher_actor::stateful_pointer<dispatcher_state>;

void pump(self_ptr self);

/// The key jobs take turns by: their task.
std::string task_of(const dispatcher_state::pending& p) {
  return p.is_retime ? p.retime.task.name : p.job.task.name;
}

/// Answers every queued job with `err`: nothing is left that could run them.
void fail_queue(self_ptr self, const caf::error& err) {
  auto& q = self->state.queue;
  while (!q.empty()) {
    auto p = q.pop();
    if (p.is_retime)
      p.retime_promise.deliver(err);
    else
      p.promise.deliver(err);
  }
}

/// What to do when an evaluator fails to answer. A dead evaluator empties its slot (the
/// supervisor installs a new one) and its job gets one more try; an unhealthy device's slot is
/// retired for good and its job goes to another device; any other error is the requester's
/// answer.
auto on_failure(self_ptr self, size_t index, evaluator_actor handle, dispatcher_state::pending p) {
  return [self, index, handle, p](caf::error& err) mutable {
    auto& st = self->state;
    auto& s = st.slots[index];
    const bool dead = err == caf::sec::request_receiver_down;
    const bool unhealthy = is(err, ec::device_unhealthy);
    if (s.handle == handle) {
      s.busy = false;
      if (dead)
        s.handle = nullptr;
      if (unhealthy) {
        spdlog::error("dispatcher: retiring evaluator {}: {}", index, render(err));
        s.retired = true;
      }
    }
    if ((dead || unhealthy) && p.requeued == 0) {
      spdlog::warn("dispatcher: evaluator {} failed on {} ({}); requeueing once", index,
                   p.is_retime ? p.retime.task.name : p.job.candidate_id, render(err));
      ++p.requeued;
      auto key = task_of(p);
      st.queue.push_front(key, std::move(p));
    } else if (p.is_retime) {
      p.retime_promise.deliver(std::move(err));
    } else {
      p.promise.deliver(std::move(err));
    }
    if (std::all_of(st.slots.begin(), st.slots.end(), [](auto& x) { return x.retired; }))
      fail_queue(self, make_error(ec::unavailable, "every device of this host is unhealthy"));
    pump(self);
  };
}

void run_on(self_ptr self, size_t index, dispatcher_state::pending p) {
  auto& slot = self->state.slots[index];
  slot.busy = true;
  auto handle = slot.handle;
  if (p.is_retime) {
    auto job = p.retime;
    self->request(handle, defaults::request_timeout, retime_atom::value, std::move(job))
        .then(
            [self, index, p](retime_result& r) mutable {
              self->state.slots[index].busy = false;
              p.retime_promise.deliver(std::move(r));
              pump(self);
            },
            on_failure(self, index, handle, p));
    return;
  }
  auto job = p.job;
  self->request(handle, defaults::request_timeout, eval_atom::value, std::move(job))
      .then(
          [self, index, p](verdict& v) mutable {
            self->state.slots[index].busy = false;
            v.compile_ms = p.compile.wall_ms;
            v.compile_cached = p.compile.cached;
            p.promise.deliver(std::move(v));
            pump(self);
          },
          on_failure(self, index, handle, p));
}

void pump_compilers(self_ptr self);

/// Sends a job through compiler `index`; when it builds fine the job joins the device queue.
void compile_on(self_ptr self, size_t index, dispatcher_state::pending p) {
  auto& c = self->state.compilers[index];
  c.busy = true;
  auto handle = c.handle;
  auto job = p.job;
  self->request(handle, defaults::request_timeout, compile_atom::value, std::move(job))
      .then(
          [self, index, p](compile_report& r) mutable {
            self->state.compilers[index].busy = false;
            if (!r.ok) {
              r.failure.compile_ms = r.wall_ms;
              p.promise.deliver(std::move(r.failure));
            } else {
              p.compile = std::move(r);
              auto key = task_of(p);
              self->state.queue.push_back(key, std::move(p));
              pump(self);
            }
            pump_compilers(self);
          },
          [self, index, handle, p](caf::error& err) mutable {
            // A compile worker that failed to answer is dropped; the job goes on to the GPU
            // stage, which builds whatever is still missing itself.
            auto& cs = self->state.compilers;
            spdlog::warn("dispatcher: compiler {} failed on {} ({}); evaluating without it", index,
                         p.job.candidate_id, render(err));
            if (index < cs.size() && cs[index].handle == handle) {
              cs[index].busy = false;
              if (err == caf::sec::request_receiver_down)
                cs[index].handle = nullptr;
            }
            auto key = task_of(p);
            self->state.queue.push_back(key, std::move(p));
            pump(self);
            pump_compilers(self);
          });
}

void pump_compilers(self_ptr self) {
  auto& st = self->state;
  bool any = false;
  for (size_t i = 0; i < st.compilers.size() && !st.compile_queue.empty(); ++i) {
    if (!st.compilers[i].handle)
      continue;
    any = true;
    if (st.compilers[i].busy)
      continue;
    compile_on(self, i, st.compile_queue.pop());
  }
  if (!any && !st.compile_queue.empty()) {
    // Every compiler is gone: the GPU stage builds for itself.
    while (!st.compile_queue.empty()) {
      auto p = st.compile_queue.pop();
      auto key = task_of(p);
      st.queue.push_back(key, std::move(p));
    }
    pump(self);
  }
}

void pump(self_ptr self) {
  auto& st = self->state;
  for (size_t i = 0; i < st.slots.size() && !st.queue.empty(); ++i) {
    if (!st.slots[i].handle || st.slots[i].busy || st.slots[i].retired)
      continue;
    run_on(self, i, st.queue.pop());
  }
}

void ask_facts(self_ptr self) {
  auto& st = self->state;
  for (auto& s : st.slots) {
    if (!s.handle)
      continue;
    self->request(s.handle, defaults::request_timeout, facts_atom::value)
        .then(
            [self](runner_facts& f) {
              auto& st = self->state;
              st.facts = f;
              st.have_facts = true;
              for (auto& rp : st.facts_waiting)
                rp.deliver(f);
              st.facts_waiting.clear();
            },
            [self](caf::error& err) {
              for (auto& rp : self->state.facts_waiting)
                rp.deliver(err);
              self->state.facts_waiting.clear();
            });
    return;
  }
}

} // namespace

bool builds_extensions(const std::string& code) {
  // A cheap look at the source: a false positive costs one import on a CPU worker, a false
  // negative only moves the build into the GPU stage.
  return code.find("cpp_extension") != std::string::npos
         || code.find("load_inline") != std::string::npos;
}

dispatcher_actor::behavior_type
dispatcher(dispatcher_actor::stateful_pointer<dispatcher_state> self, size_t slots) {
  self->state.slots.resize(slots);
  return {
      [self](eval_atom, eval_job& job) -> caf::result<verdict> {
        auto rp = self->make_response_promise<verdict>();
        dispatcher_state::pending p;
        p.job = std::move(job);
        p.promise = rp;
        auto& st = self->state;
        auto key = p.job.task.name;
        if (!st.compilers.empty() && builds_extensions(p.job.code)) {
          st.compile_queue.push_back(key, std::move(p));
          pump_compilers(self);
        } else {
          st.queue.push_back(key, std::move(p));
          pump(self);
        }
        return rp;
      },
      [self](retime_atom, retime_job& job) -> caf::result<retime_result> {
        auto rp = self->make_response_promise<retime_result>();
        dispatcher_state::pending p;
        p.is_retime = true;
        p.retime = std::move(job);
        p.retime_promise = rp;
        auto key = p.retime.task.name;
        self->state.queue.push_back(key, std::move(p));
        pump(self);
        return rp;
      },
      [self](facts_atom) -> caf::result<runner_facts> {
        auto& st = self->state;
        if (st.have_facts)
          return st.facts;
        auto rp = self->make_response_promise<runner_facts>();
        bool first = st.facts_waiting.empty();
        st.facts_waiting.push_back(rp);
        if (first)
          ask_facts(self);
        return rp;
      },
      [self](put_atom, int32_t index, evaluator_actor& handle) {
        auto& st = self->state;
        if (index < 0)
          return;
        if (static_cast<size_t>(index) >= st.slots.size())
          st.slots.resize(static_cast<size_t>(index) + 1);
        st.slots[static_cast<size_t>(index)] = {std::move(handle), false};
        if (!st.facts_waiting.empty())
          ask_facts(self);
        pump(self);
      },
      [self](put_atom, compiler_actor& handle) {
        self->state.compilers.push_back({std::move(handle), false});
        pump_compilers(self);
      },
  };
}

} // namespace kiln
