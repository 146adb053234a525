#include "actors/llm_replay.hpp"

#include <filesystem>
#include <stdexcept>

#include "actors/sqlite.hpp"

namespace kiln::llm {

uint64_t replay_store::key(const std::string& prompt) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : prompt) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

replay_store::replay_store(const std::string& archive_path) {
  if (!std::filesystem::is_regular_file(archive_path))
    throw std::runtime_error("replay archive " + archive_path + " does not exist");
  try {
    sqlite::database db{archive_path, sqlite::open_mode::read_only};
    auto st = db.prepare("SELECT prompt, reply, profile, model, input_tokens, "
                         "output_tokens, reasoning_tokens, cost_usd FROM llm_calls "
                         "WHERE error IS NULL OR error = '' ORDER BY id");
    while (st.step()) {
      llm_reply r;
      r.text = st.column_text(1);
      r.profile = st.column_text(2);
      r.model = st.column_text(3);
      r.input_tokens = st.column_int64(4);
      r.output_tokens = st.column_int64(5);
      r.reasoning_tokens = st.column_int64(6);
      r.cost_usd = st.column_double(7);
      answers_[st.column_text(0)].push_back(std::move(r));
      ++total_;
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("replay archive " + archive_path + ": " + e.what());
  }
}

std::optional<llm_reply> replay_store::next(const std::string& prompt) {
  auto it = answers_.find(prompt);
  if (it == answers_.end() || it->second.empty())
    return std::nullopt;
  llm_reply r = std::move(it->second.front());
  it->second.pop_front();
  return r;
}

} // namespace kiln::llm
