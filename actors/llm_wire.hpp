#pragma once

// The three wire formats kiln speaks to LLM providers: OpenAI-compatible chat completions,
// Anthropic Messages and Google Gemini generateContent. Pure functions and a small decoder, no
// I/O: the transport (llm_transport) moves the bytes, the gateway decides what to do with them.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm {

enum class wire { openai, anthropic, gemini };

/// `openai`, `anthropic` or `gemini` for those providers; throws std::invalid_argument for any
/// other (the offline `rules` and `replay` providers have no wire format).
wire wire_of(std::string_view provider);
const char* to_string(wire w);

/// One query as the profile and the request make it.
struct wire_query {
  std::string base_url; ///< API root up to and including its version segment, e.g. `.../v1`
  std::string model;
  std::string api_key; ///< sent in a header only, never in the URL or the body
  std::string system;  ///< empty: no system prompt
  std::string prompt;  ///< the user message
  double temperature = 0;
  int64_t max_tokens = 0;
  std::vector<std::string> stop;
  std::string reasoning_effort; ///< OpenAI `reasoning_effort` (low|medium|high); empty: not sent
  int64_t thinking_budget = 0;  ///< Anthropic `thinking.budget_tokens`, Gemini `thinkingBudget`
  bool stream = true;           ///< server-sent events
};

struct http_request {
  std::string url;
  std::vector<std::string> headers; ///< `Name: value`, including the key's header
  std::string body;                 ///< JSON
};

/// The request for `q` on `w`. URLs: `<base>/chat/completions`, `<base>/messages`,
/// `<base>/models/<model>:generateContent` (`:streamGenerateContent?alt=sse` when streaming);
/// a trailing `/` of the base is dropped.
http_request build_request(wire w, const wire_query& q);

/// A reply, whole or as far as a stream got.
struct parsed_reply {
  std::string text;          ///< the answer's text (reasoning/thinking parts left out)
  std::string model;         ///< as the provider reports it; may be empty
  std::string finish_reason; ///< as the provider says it (`stop`, `length`, `end_turn`, ...)
  int64_t input_tokens = 0;
  /// Every billed output token, reasoning included (OpenAI's completion_tokens, Anthropic's
  /// output_tokens, Gemini's candidatesTokenCount + thoughtsTokenCount).
  int64_t output_tokens = 0;
  int64_t reasoning_tokens = 0; ///< the part of output_tokens spent on reasoning, where reported
  bool complete = false;        ///< the provider marked the end of the reply
};

/// A body or event the decoder cannot use: invalid JSON, or valid JSON without the fields of a
/// reply. The transport retries these (a proxy cut the body, the server sent garbage).
struct malformed_reply : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An error the provider reported inside a 200 reply or a stream (Anthropic `error` events,
/// OpenAI `{"error": ...}` chunks). `retryable` for overload/rate/server errors.
struct provider_error : std::runtime_error {
  provider_error(const std::string& what, bool retryable)
      : std::runtime_error(what), retryable(retryable) {}
  bool retryable;
};

/// Parses a whole (non-streamed) 200 body. A reply without a finish reason is still returned,
/// with complete = false. Throws malformed_reply or provider_error.
parsed_reply parse_body(wire w, std::string_view body);

/// Server-sent events, fed in pieces as they arrive (any split, `\n` or `\r\n` line ends).
/// Throws malformed_reply or provider_error from feed().
class sse_decoder {
public:
  explicit sse_decoder(wire w) : wire_(w) {}
  void feed(std::string_view bytes);
  /// The stream's end marker was seen (`data: [DONE]`, `message_stop`, a Gemini chunk with a
  /// finishReason).
  bool done() const { return done_; }
  const parsed_reply& reply() const { return reply_; }

private:
  void event(std::string_view name, std::string_view data);
  wire wire_;
  std::string buffer_;     ///< bytes of an unfinished line
  std::string event_name_; ///< `event:` of the event being read
  std::string data_;       ///< its `data:` lines, joined with `\n`
  bool done_ = false;
  parsed_reply reply_;
};

/// A one-line description of an error reply (status and the provider's own message from its
/// error JSON, or the start of a non-JSON body), for logs and for the user. Never contains
/// headers, so never the key.
std::string error_message(wire w, long status, std::string_view body);

} // namespace kiln::llm
