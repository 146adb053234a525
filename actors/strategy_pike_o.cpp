#include "actors/strategy_pike_o.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string_view>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/strategy_common.hpp"
#include "config/defaults.hpp"
#include "messages/error.hpp"

// Notes on choices the header leaves open:
//  - Migration copies a program onto the next island with the same seq (one population entry per
//    island it lives on); a program already on the destination is not copied again. The copies
//    count against `population_size` and the cap removes them like any other entry.
//  - Only correct programs are parents (`improve` and `crossover` start from a measured
//    program); the reference is the parent only while its island has no other correct program.
//  - The reference (seq 0) has fitness 1.0 and sits in its island's grid like any program, but it
//    never enters the elite archive, is never removed, never migrates and is not shown as an
//    inspiration (the prompt shows the task's source anyway).

namespace kiln {

namespace {

constexpr size_t edit_distance_cap = 2000;

/// Levenshtein distance of the first `edit_distance_cap` characters of `a` and `b`, divided by
/// the longer of the two (0 for two empty strings).
double normalised_edit_distance(std::string_view a, std::string_view b) {
  a = a.substr(0, std::min(a.size(), edit_distance_cap));
  b = b.substr(0, std::min(b.size(), edit_distance_cap));
  size_t longest = std::max(a.size(), b.size());
  if (longest == 0)
    return 0;
  // A common prefix or suffix costs nothing: strip it (programs of a lineage share most text).
  size_t p = 0;
  while (p < a.size() && p < b.size() && a[p] == b[p])
    ++p;
  a.remove_prefix(p);
  b.remove_prefix(p);
  size_t s = 0;
  while (s < a.size() && s < b.size() && a[a.size() - 1 - s] == b[b.size() - 1 - s])
    ++s;
  a.remove_suffix(s);
  b.remove_suffix(s);
  if (a.size() < b.size())
    std::swap(a, b);
  std::vector<uint32_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0u);
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t diag = row[0];
    row[0] = static_cast<uint32_t>(i + 1);
    for (size_t j = 0; j < b.size(); ++j) {
      uint32_t up = row[j + 1];
      row[j + 1] = std::min({up + 1, row[j] + 1, diag + (a[i] == b[j] ? 0u : 1u)});
      diag = up;
    }
  }
  return static_cast<double>(row[b.size()]) / static_cast<double>(longest);
}

} // namespace

std::vector<int32_t> pike_o_cell(const pike_o_settings& cfg, const std::string& code,
                                 size_t reference_length,
                                 const std::vector<const std::string*>& neighbours) {
  int64_t bins = std::max<int64_t>(1, cfg.feature_bins);
  std::vector<int32_t> cell;
  for (const auto& dim : cfg.feature_dimensions) {
    int64_t bin = 0;
    if (dim == "complexity") {
      auto ref = static_cast<int64_t>(std::max<size_t>(1, reference_length));
      bin = static_cast<int64_t>(code.size()) * bins / (2 * ref);
    } else if (dim == "diversity") {
      double sum = 0;
      size_t n = 0;
      for (const auto* other : neighbours) {
        if (other == nullptr)
          continue;
        sum += normalised_edit_distance(code, *other);
        ++n;
      }
      if (n > 0)
        bin = static_cast<int64_t>(
            std::floor(sum / static_cast<double>(n) * static_cast<double>(bins)));
    }
    cell.push_back(static_cast<int32_t>(std::clamp<int64_t>(bin, 0, bins - 1)));
  }
  return cell;
}

namespace {

using self_ptr = strategy_actor::stateful_pointer<strategy_pike_o_state>;

/// Programs of an island sampled for the diversity feature.
constexpr size_t diversity_sample = 8;

/// One iteration on its way: a query, its evaluation, then maybe fixes.
struct step {
  int64_t index = 0;  ///< the iteration's number (the archive's `phase`)
  int32_t island = 0; ///< where the child goes
  int64_t parent = 0; ///< seq of the parent
  int32_t attempt = 0;
  bool has_child = false;    ///< `child` holds a judged attempt
  bool child_program = true; ///< false when the reply held no program
  candidate_record child;    ///< the last judged attempt
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

size_t pick(std::mt19937_64& rng, size_t n) {
  return static_cast<size_t>(rng() % n);
}

void pump(self_ptr self);
void check_end(self_ptr self);
void conclude(self_ptr self);

/// Index of the entry of `seq` on `island`, or of any entry of `seq` when `island` < 0 or it
/// has none there; programs.size() when there is none at all.
size_t find_program(self_ptr self, int64_t seq, int32_t island) {
  const auto& ps = self->state.programs;
  size_t any = ps.size();
  for (size_t i = 0; i < ps.size(); ++i) {
    if (ps[i].seq != seq)
      continue;
    if (island < 0 || ps[i].island == island)
      return i;
    if (any == ps.size())
      any = i;
  }
  return any;
}

bool usable_parent(const pike_o_program& p) {
  return p.seq != 0 && p.fitness > 0;
}

/// Better first: fitness, then the older program.
bool fitter(const pike_o_program& a, const pike_o_program& b) {
  if (a.fitness != b.fitness)
    return a.fitness > b.fitness;
  return a.seq < b.seq;
}

program_note note_of(const pike_o_program& p) {
  return {p.code, p.runtime_ms, p.fitness};
}

void report(self_ptr self) {
  auto& st = self->state;
  st.progress.task = st.task.name;
  st.progress.query_limit = st.cfg.query_limit;
  st.progress.best_speedup = st.result.best_speedup;
  st.progress.evaluations = st.result.evaluations;
  st.progress.correct = st.result.correct;
  st.progress.phase = static_cast<int32_t>(st.finished);
  self->send(st.supervisor, progress_atom::value, st.progress);
}

// ---- the population -------------------------------------------------------------------------

std::vector<int32_t> cell_for(self_ptr self, const std::string& code, int32_t island, int64_t seq) {
  auto& st = self->state;
  std::vector<const std::string*> pool;
  for (const auto& p : st.programs)
    if (p.island == island && p.seq != seq)
      pool.push_back(&p.code);
  std::vector<const std::string*> sample;
  bool wants_diversity =
      std::find(st.cfg.feature_dimensions.begin(), st.cfg.feature_dimensions.end(), "diversity")
      != st.cfg.feature_dimensions.end();
  if (wants_diversity) {
    while (!pool.empty() && sample.size() < diversity_sample) {
      auto i = pick(st.rng, pool.size());
      sample.push_back(pool[i]);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return pike_o_cell(st.cfg, code, st.task.source.size(), sample);
}

/// Puts the entry at `index` into its island's grid if its cell is empty or it is fitter than
/// the occupant (who stays in the population).
void place_in_grid(self_ptr self, size_t index) {
  auto& st = self->state;
  const auto& p = st.programs[index];
  auto& grid = st.grids[static_cast<size_t>(p.island)];
  auto it = grid.find(p.cell);
  if (it == grid.end()) {
    grid.emplace(p.cell, p.seq);
    return;
  }
  auto occupant = find_program(self, it->second, p.island);
  if (occupant == st.programs.size() || fitter(p, st.programs[occupant]))
    it->second = p.seq;
}

/// Adds a correct program to the elite archive if it is among the best `archive_size`.
void offer_elite(self_ptr self, const pike_o_program& p) {
  auto& st = self->state;
  if (p.seq == 0 || p.fitness <= 0 || st.cfg.archive_size <= 0)
    return;
  if (std::find(st.elite.begin(), st.elite.end(), p.seq) != st.elite.end())
    return;
  auto pos = st.elite.begin();
  while (pos != st.elite.end()) {
    auto i = find_program(self, *pos, -1);
    if (i == st.programs.size() || fitter(p, st.programs[i]))
      break;
    ++pos;
  }
  st.elite.insert(pos, p.seq);
  if (static_cast<int64_t>(st.elite.size()) > st.cfg.archive_size)
    st.elite.pop_back();
}

/// Whether the entry at `index` holds its MAP-Elites cell on its island.
bool holds_cell(self_ptr self, size_t index) {
  const auto& p = self->state.programs[index];
  const auto& grid = self->state.grids[static_cast<size_t>(p.island)];
  auto it = grid.find(p.cell);
  return it != grid.end() && it->second == p.seq;
}

/// Removes entries until the population fits `population_size`: never the reference or an
/// elite; first those that lost their MAP-Elites cell (so every occupied cell keeps its best
/// program, which is what the grid is for), then the worst (lowest fitness, then oldest).
void cap_population(self_ptr self) {
  auto& st = self->state;
  auto limit = static_cast<size_t>(std::max<int64_t>(1, st.cfg.population_size));
  while (st.programs.size() > limit) {
    size_t worst = st.programs.size();
    bool worst_holds = true;
    for (size_t i = 0; i < st.programs.size(); ++i) {
      const auto& p = st.programs[i];
      if (p.seq == 0 || std::find(st.elite.begin(), st.elite.end(), p.seq) != st.elite.end())
        continue;
      bool holds = holds_cell(self, i);
      if (worst == st.programs.size()) {
        worst = i;
        worst_holds = holds;
        continue;
      }
      const auto& w = st.programs[worst];
      bool worse = p.fitness < w.fitness || (p.fitness == w.fitness && p.seq < w.seq);
      if ((worst_holds && !holds) || (holds == worst_holds && worse)) {
        worst = i;
        worst_holds = holds;
      }
    }
    if (worst == st.programs.size())
      return; // only the reference and elites are left
    const auto& gone = st.programs[worst];
    auto& grid = st.grids[static_cast<size_t>(gone.island)];
    auto cell = grid.find(gone.cell);
    if (cell != grid.end() && cell->second == gone.seq)
      grid.erase(cell);
    spdlog::debug("pike-o {}: #{} leaves island {} (fitness {:.3f})", st.task.name, gone.seq,
                  gone.island, gone.fitness);
    st.programs.erase(st.programs.begin() + static_cast<std::ptrdiff_t>(worst));
  }
}

/// The last attempt of an iteration joins its island.
void integrate(self_ptr self, const step& s) {
  auto& st = self->state;
  if (!s.has_child || !s.child_program)
    return;
  const auto& v = s.child.result;
  bool correct = v.status == verdict_status::correct && v.speedup > 0;
  // A failed child only takes room that is free.
  if (!correct && static_cast<int64_t>(st.programs.size()) >= st.cfg.population_size)
    return;
  pike_o_program p;
  p.seq = s.child.seq;
  p.code = s.child.code;
  p.fitness = correct ? v.speedup : 0;
  p.runtime_ms = correct ? v.candidate.median_ms : 0;
  p.island = s.island;
  p.cell = cell_for(self, p.code, p.island, p.seq);
  st.programs.push_back(std::move(p));
  place_in_grid(self, st.programs.size() - 1);
  offer_elite(self, st.programs.back());
  cap_population(self);
}

/// Ring migration: each island copies its best ceil(rate x size) correct programs to the next.
void migrate(self_ptr self) {
  auto& st = self->state;
  auto islands = static_cast<int32_t>(st.grids.size());
  if (islands < 2 || st.cfg.migration_rate <= 0)
    return;
  std::vector<pike_o_program> migrants;
  for (int32_t i = 0; i < islands; ++i) {
    std::vector<const pike_o_program*> members;
    size_t size = 0;
    for (const auto& p : st.programs) {
      if (p.island != i)
        continue;
      ++size;
      if (usable_parent(p))
        members.push_back(&p);
    }
    std::sort(members.begin(), members.end(),
              [](const auto* a, const auto* b) { return fitter(*a, *b); });
    auto k = static_cast<size_t>(std::ceil(st.cfg.migration_rate * static_cast<double>(size)));
    for (size_t j = 0; j < std::min(k, members.size()); ++j) {
      migrants.push_back(*members[j]);
      migrants.back().island = (i + 1) % islands;
    }
  }
  size_t moved = 0;
  for (auto& m : migrants) {
    auto there = find_program(self, m.seq, m.island);
    if (there != st.programs.size() && st.programs[there].island == m.island)
      continue;
    m.cell = cell_for(self, m.code, m.island, m.seq);
    st.programs.push_back(std::move(m));
    place_in_grid(self, st.programs.size() - 1);
    ++moved;
  }
  cap_population(self);
  spdlog::debug("pike-o {}: migration after {} iterations moved {} programs", st.task.name,
                st.finished, moved);
}

// ---- choosing what to ask -------------------------------------------------------------------

/// The parent's index in `programs`, per the header's exploration / exploitation / random rule.
size_t choose_parent(self_ptr self, int32_t island) {
  auto& st = self->state;
  const auto& ps = st.programs;
  std::vector<size_t> island_pool;
  for (size_t i = 0; i < ps.size(); ++i)
    if (ps[i].island == island && usable_parent(ps[i]))
      island_pool.push_back(i);
  double r = uniform01(st.rng);
  std::vector<size_t> pool;
  if (r < st.cfg.exploration_ratio) {
    pool = island_pool;
  } else if (r < st.cfg.exploration_ratio + st.cfg.exploitation_ratio) {
    for (auto seq : st.elite) {
      auto i = find_program(self, seq, island);
      if (i != ps.size())
        pool.push_back(i);
    }
  } else {
    std::map<int64_t, size_t> by_seq; // one entry per program, the island's own copy first
    for (size_t i = 0; i < ps.size(); ++i) {
      if (!usable_parent(ps[i]))
        continue;
      auto it = by_seq.find(ps[i].seq);
      if (it == by_seq.end())
        by_seq.emplace(ps[i].seq, i);
      else if (ps[i].island == island)
        it->second = i;
    }
    for (const auto& [seq, i] : by_seq)
      pool.push_back(i);
  }
  if (pool.empty())
    pool = island_pool;
  if (pool.empty())
    return find_program(self, 0, island);
  return pool[pick(st.rng, pool.size())];
}

/// Distance between two MAP-Elites cells: the largest difference of a coordinate.
int64_t cell_distance(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int64_t d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max<int64_t>(d, std::abs(static_cast<int64_t>(a[i]) - b[i]));
  return d;
}

/// What a crossover prompt shows beside its parent, as OpenEvolve samples it:
///  1. the island's top programs (the parent left out);
///  2. diverse programs: the holders of other MAP-Elites cells of the island, one per cell, the
///     cells nearest the parent's first (OpenEvolve perturbs the parent's cell to find nearby
///     ones; the nearest occupied cells are what that finds), ties in a random order;
///  3. when the grid has too few cells, programs drawn at random from the rest of the
///     population, those living on other islands first.
std::vector<program_note> inspirations_for(self_ptr self, int32_t island, int64_t parent) {
  auto& st = self->state;
  std::vector<program_note> out;
  std::vector<const pike_o_program*> top;
  for (const auto& p : st.programs)
    if (p.island == island && usable_parent(p) && p.seq != parent)
      top.push_back(&p);
  std::sort(top.begin(), top.end(), [](const auto* a, const auto* b) { return fitter(*a, *b); });
  if (static_cast<int64_t>(top.size()) > st.cfg.top_programs)
    top.resize(static_cast<size_t>(std::max<int64_t>(0, st.cfg.top_programs)));
  std::set<int64_t> shown{0, parent};
  std::set<std::vector<int32_t>> cells_shown;
  auto show = [&](const pike_o_program& p) {
    out.push_back(note_of(p));
    shown.insert(p.seq);
    cells_shown.insert(p.cell);
  };
  for (const auto* p : top)
    show(*p);

  int64_t wanted = std::max<int64_t>(0, st.cfg.inspirations);
  const auto parent_at = find_program(self, parent, island);
  if (parent_at < st.programs.size()) {
    const auto parent_cell = st.programs[parent_at].cell;
    cells_shown.insert(parent_cell);
    std::vector<std::pair<int64_t, size_t>> holders; // (distance, program index)
    for (const auto& [cell, seq] : st.grids[static_cast<size_t>(island)]) {
      auto i = find_program(self, seq, island);
      if (i == st.programs.size() || shown.count(seq) > 0 || cells_shown.count(cell) > 0
          || !usable_parent(st.programs[i]))
        continue;
      holders.emplace_back(cell_distance(cell, parent_cell), i);
    }
    std::shuffle(holders.begin(), holders.end(), st.rng);
    std::stable_sort(holders.begin(), holders.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    // One holder per cell (the grid is keyed by cell), none in a cell already shown.
    for (const auto& [distance, i] : holders) {
      if (wanted == 0)
        break;
      show(st.programs[i]);
      --wanted;
    }
  }

  std::set<int64_t> here;
  for (const auto& p : st.programs)
    if (p.island == island)
      here.insert(p.seq);
  std::vector<const pike_o_program*> other, same;
  std::set<int64_t> seen;
  for (const auto& p : st.programs) {
    if (shown.count(p.seq) > 0 || !seen.insert(p.seq).second)
      continue;
    (here.count(p.seq) > 0 ? same : other).push_back(&p);
  }
  for (; wanted > 0; --wanted) {
    auto& from = other.empty() ? same : other;
    if (from.empty())
      break;
    auto i = pick(st.rng, from.size());
    out.push_back(note_of(*from[i]));
    from.erase(from.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return out;
}

agent_request base_request(self_ptr self) {
  auto& st = self->state;
  agent_request req;
  req.task = st.task;
  req.facts = st.facts;
  req.seed = st.rng();
  return req;
}

// ---- the end of the search ------------------------------------------------------------------

bool start_retime(self_ptr self) {
  return kiln::start_retime(self, "pike-o", [](self_ptr s) { conclude(s); });
}

void finish(self_ptr self) {
  auto& st = self->state;
  if (st.done || st.retiming)
    return;
  st.result.search_speedup = st.result.best_speedup;
  if (!start_retime(self))
    conclude(self);
}

void conclude(self_ptr self) {
  auto& st = self->state;
  st.done = true;
  st.result.task = st.task.name;
  st.result.stop_reason = st.stop_reason;
  spdlog::info("pike-o {}: done ({}), {} iterations, {} evaluations, {} correct, best {:.3f}x",
               st.task.name, st.stop_reason, st.finished, st.result.evaluations, st.result.correct,
               st.result.best_speedup);
  self->send(st.supervisor, done_atom::value, st.result);
  self->quit();
}

void keep_winner(self_ptr self, const candidate_record& rec) {
  kiln::keep_winner(self->state.winners, rec, self->state.cfg.retime_top);
}

void check_end(self_ptr self) {
  auto& st = self->state;
  if (st.done || st.in_flight > 0)
    return;
  if (st.stopping || st.budget_spent) {
    finish(self);
    return;
  }
  if (st.started >= st.cfg.iterations) {
    st.stop_reason = "iterations";
    finish(self);
  }
}

/// Marks the query budget spent (the first reason to end the search is the one reported).
void spend_budget(self_ptr self, const std::string& reason) {
  auto& st = self->state;
  if (st.budget_spent || st.stopping)
    return;
  spdlog::info("pike-o {}: {} budget spent", st.task.name, reason);
  st.budget_spent = true;
  st.stop_reason = reason;
}

// ---- one iteration --------------------------------------------------------------------------

void end_iteration(self_ptr self, const step& s) {
  auto& st = self->state;
  integrate(self, s);
  --st.in_flight;
  ++st.finished;
  if (st.cfg.migration_interval > 0 && st.finished % st.cfg.migration_interval == 0)
    migrate(self);
  if (st.finished % 10 == 0)
    spdlog::info("pike-o {}: {} iterations, {} evaluations, {} correct, best {:.3f}x, "
                 "population {}",
                 st.task.name, st.finished, st.result.evaluations, st.result.correct,
                 st.result.best_speedup, st.programs.size());
  report(self);
  pump(self);
  check_end(self);
}

void ask(self_ptr self, step s, std::string role, agent_request req);

/// A judged attempt: counted, kept if correct, sent to the fixer if it failed and fixes are
/// left; otherwise it is the iteration's child.
void judged(self_ptr self, step s, candidate_record rec, bool has_program) {
  auto& st = self->state;
  count_verdict(st.result, rec);
  const auto& v = rec.result;
  if (v.status == verdict_status::correct) {
    if (v.reference.median_ms > 0)
      for (auto& p : st.programs)
        if (p.seq == 0 && p.runtime_ms <= 0)
          p.runtime_ms = v.reference.median_ms;
    keep_winner(self, rec);
  }
  s.has_child = true;
  s.child_program = has_program;
  s.child = std::move(rec);
  if (v.status == verdict_status::correct || s.attempt >= st.cfg.max_fix_attempts || st.stopping
      || st.budget_spent) {
    end_iteration(self, s);
    return;
  }
  ++s.attempt;
  auto req = base_request(self);
  req.kind = fix_kind_for(s.child.result.status);
  req.code = s.child.code;
  req.last = s.child.result;
  spdlog::debug("pike-o {}: #{} failed ({}), fix {} of {}", st.task.name, s.child.seq,
                to_string(s.child.result.status), s.attempt, st.cfg.max_fix_attempts);
  ask(self, std::move(s), st.cfg.error_fixer, std::move(req));
}

void evaluate(self_ptr self, step s, candidate_record rec) {
  auto& st = self->state;
  if (st.cfg.evaluations_limit > 0 && st.evaluations_started >= st.cfg.evaluations_limit) {
    // The candidate stays in the archive, unjudged; the search ends here.
    self->send(st.archive, put_atom::value, rec);
    spend_budget(self, "budget: evaluations");
    end_iteration(self, s);
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
          [self, s, rec](verdict& v) mutable {
            rec.evaluated = true;
            rec.result = std::move(v);
            self->send(self->state.archive, put_atom::value, rec);
            judged(self, std::move(s), std::move(rec), true);
          },
          [self, s, seq = rec.seq](caf::error& err) {
            spdlog::error("pike-o {}: evaluation of #{} failed: {}", self->state.task.name, seq,
                          render(err));
            end_iteration(self, s);
          });
}

void ask(self_ptr self, step s, std::string role, agent_request req) {
  auto& st = self->state;
  self->request(st.supervisor, defaults::request_timeout, ask_atom::value, role, std::move(req))
      .then(
          [self, s, role](agent_reply& reply) mutable {
            auto& st = self->state;
            ++st.progress.queries;
            candidate_record rec;
            rec.task = st.task.name;
            rec.seq = st.next_seq++;
            rec.parent = s.attempt == 0 ? s.parent : s.child.seq;
            rec.role = role;
            rec.phase = static_cast<int32_t>(s.index);
            rec.attempt = s.attempt;
            if (!reply.code.empty()) {
              rec.code = std::move(reply.code);
              evaluate(self, std::move(s), std::move(rec));
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
            judged(self, std::move(s), std::move(rec), false);
          },
          [self, s](caf::error& err) {
            auto& st = self->state;
            if (is(err, ec::budget_exhausted))
              spend_budget(self, "budget");
            else
              spdlog::warn("pike-o {}: query failed: {}", st.task.name, render(err));
            // The last judged attempt, if any, is still the iteration's child.
            end_iteration(self, s);
          });
}

void start_iteration(self_ptr self) {
  auto& st = self->state;
  step s;
  s.index = st.started++;
  ++st.in_flight;
  auto island = st.next_island;
  st.next_island = (st.next_island + 1) % static_cast<int32_t>(st.grids.size());
  auto pi = choose_parent(self, island);
  const auto& parent = st.programs[pi];
  s.parent = parent.seq;
  // The child joins its parent's island: the one it was chosen on, or the one it lives on when
  // it came from the archive or the whole population.
  s.island = parent.island;
  auto req = base_request(self);
  req.code = parent.code;
  if (st.cfg.template_kind == "mutation") {
    req.kind = prompt_kind::improve;
  } else {
    req.kind = prompt_kind::crossover;
    req.current = note_of(parent);
    req.inspirations = inspirations_for(self, s.island, s.parent);
  }
  spdlog::debug("pike-o {}: iteration {} on island {}: parent #{} ({:.3f}x)", st.task.name, s.index,
                s.island, parent.seq, parent.fitness);
  ask(self, std::move(s), st.cfg.optimizer, std::move(req));
}

void pump(self_ptr self) {
  auto& st = self->state;
  while (!st.done && !st.budget_spent && !st.stopping && st.started < st.cfg.iterations
         && st.in_flight < std::max<int64_t>(1, st.cfg.parallel))
    start_iteration(self);
}

/// Every island starts with the reference.
void seed_islands(self_ptr self) {
  auto& st = self->state;
  auto islands = std::max<int64_t>(1, st.cfg.islands);
  st.grids.assign(static_cast<size_t>(islands), {});
  for (int32_t i = 0; i < static_cast<int32_t>(islands); ++i) {
    pike_o_program ref;
    ref.seq = 0;
    ref.code = st.task.source;
    ref.fitness = 1.0;
    ref.island = i;
    ref.cell = pike_o_cell(st.cfg, ref.code, ref.code.size(), {});
    st.programs.push_back(std::move(ref));
    place_in_grid(self, st.programs.size() - 1);
  }
}

} // namespace

strategy_actor::behavior_type
strategy_pike_o(strategy_actor::stateful_pointer<strategy_pike_o_state> self, task_spec task,
                pike_o_settings cfg, supervisor_actor supervisor, dispatcher_actor dispatcher,
                archive_actor archive) {
  auto& st = self->state;
  st.task = std::move(task);
  st.cfg = std::move(cfg);
  st.supervisor = std::move(supervisor);
  st.dispatcher = std::move(dispatcher);
  st.archive = std::move(archive);
  st.rng.seed(st.cfg.seed * 0x9E3779B97F4A7C15ull ^ fnv1a(st.task.name));
  st.result.task = st.task.name;
  st.stop_reason = "iterations";
  seed_islands(self);
  self->request(st.dispatcher, defaults::request_timeout, facts_atom::value)
      .then(
          [self](runner_facts& f) {
            auto& st = self->state;
            st.facts = std::move(f);
            spdlog::info("pike-o {}: {} iterations on {} islands, {} in flight", st.task.name,
                         st.cfg.iterations, st.grids.size(), st.cfg.parallel);
            pump(self);
            check_end(self);
          },
          [self](caf::error& err) {
            auto& st = self->state;
            if (!st.stopping && !st.budget_spent)
              st.stop_reason = "error: no runner facts: " + render(err);
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
        if (st.stopping)
          return;
        st.stopping = true;
        st.stop_reason = "stopped";
        check_end(self);
      },
      [self](stop_atom, const std::string& reason) {
        // A budget ran out: like the query budget, no new work, and the winners are re-timed.
        spend_budget(self, reason);
        check_end(self);
      },
  };
}

} // namespace kiln
