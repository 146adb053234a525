#include "config/log_sink.hpp"

#include <mutex>

#include <spdlog/sinks/base_sink.h>

#include "config/secrets.hpp"

namespace kiln {

namespace {

class redacting_sink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  explicit redacting_sink(std::vector<spdlog::sink_ptr> sinks) : sinks_(std::move(sinks)) {}

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    auto text = secrets::redact(std::string{msg.payload.data(), msg.payload.size()});
    auto copy = msg;
    copy.payload = spdlog::string_view_t{text.data(), text.size()};
    for (auto& s : sinks_)
      if (s->should_log(copy.level))
        s->log(copy);
  }

  void flush_() override {
    for (auto& s : sinks_)
      s->flush();
  }

private:
  std::vector<spdlog::sink_ptr> sinks_;
};

} // namespace

std::shared_ptr<spdlog::logger> redacting_logger(const std::string& name,
                                                 std::vector<spdlog::sink_ptr> sinks) {
  return std::make_shared<spdlog::logger>(name, std::make_shared<redacting_sink>(std::move(sinks)));
}

} // namespace kiln
