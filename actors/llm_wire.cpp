#include "actors/llm_wire.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <simdjson.h>

#include "gpu/json_text.hpp"

namespace kiln::llm {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// ---------------------------------------------------------------------------------------------
// Text helpers

std::string lower(std::string_view s) {
  std::string out{s};
  for (char& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

/// The length of the longest prefix of `s` no longer than `n` bytes that does not end inside a
/// UTF-8 sequence.
size_t utf8_prefix(std::string_view s, size_t n) {
  if (n >= s.size())
    return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
    --n;
  return n;
}

/// One line for logs: control characters become spaces, runs of spaces shrink to one, at most
/// `limit` bytes (cut at a character boundary).
std::string one_line(std::string_view s, size_t limit) {
  s = s.substr(0, utf8_prefix(s, limit));
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    char ch = (c < 0x20 || c == 0x7F) ? ' ' : static_cast<char>(c);
    if (ch == ' ' && (out.empty() || out.back() == ' '))
      continue;
    out += ch;
  }
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  return out;
}

/// Replaces invalid UTF-8 (stray continuation bytes, overlong forms, surrogates, cut sequences)
/// by U+FFFD: providers reject request bodies that are not UTF-8, and prompts carry compiler
/// and program output that may not be.
std::string valid_utf8(std::string_view s) {
  static constexpr char replacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    uint32_t min = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = len != 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (cc & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += replacement;
      ++i;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON writing

void put_string(std::string& out, std::string_view s) {
  out += '"';
  if (simdjson::validate_utf8(s.data(), s.size()))
    append_json_escaped(out, s);
  else
    append_json_escaped(out, valid_utf8(s));
  out += '"';
}

/// The shortest of `%.15g` and `%.17g` that reads back as `x`, so 0.7 stays `0.7`.
std::string number_text(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.15g", x);
  if (std::strtod(buf, nullptr) != x)
    std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

/// Writes `{"k": v, ...}` one member at a time, commas handled.
class object_writer {
public:
  explicit object_writer(std::string& out) : out_(out) { out_ += '{'; }
  std::string& key(std::string_view k) {
    if (!first_)
      out_ += ',';
    first_ = false;
    put_string(out_, k);
    out_ += ':';
    return out_;
  }
  void string(std::string_view k, std::string_view v) { put_string(key(k), v); }
  void integer(std::string_view k, int64_t v) { key(k) += std::to_string(v); }
  void boolean(std::string_view k, bool v) { key(k) += v ? "true" : "false"; }
  /// Left out when not finite (JSON has no NaN): the provider's default applies.
  void number(std::string_view k, double v) {
    if (std::isfinite(v))
      key(k) += number_text(v);
  }
  void strings(std::string_view k, const std::vector<std::string>& v) {
    std::string& out = key(k);
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i)
        out += ',';
      put_string(out, v[i]);
    }
    out += ']';
  }
  void close() { out_ += '}'; }

private:
  std::string& out_;
  bool first_ = true;
};

std::string base_of(const wire_query& q) {
  std::string base = q.base_url;
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  return base;
}

/// `model` percent-encoded for a URL path segment (`models/` prefix, as Gemini lists its
/// models, dropped: the URL has it already).
std::string path_segment(std::string_view model) {
  if (model.substr(0, 7) == "models/")
    model.remove_prefix(7);
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : model) {
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                 || c == '.' || c == '_' || c == '~' || c == '-';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

void check_key(std::string_view key) {
  for (unsigned char c : key)
    if (c < 0x20 || c == 0x7F)
      throw std::invalid_argument("the API key contains control characters");
}

http_request build_openai(const wire_query& q) {
  http_request r;
  r.url = base_of(q) + "/chat/completions";
  r.headers.push_back("Content-Type: application/json");
  if (!q.api_key.empty())
    r.headers.push_back("Authorization: Bearer " + q.api_key);
  object_writer b{r.body};
  b.string("model", q.model);
  std::string& m = b.key("messages");
  m += '[';
  if (!q.system.empty()) {
    m += "{\"role\":\"system\",\"content\":";
    put_string(m, q.system);
    m += "},";
  }
  m += "{\"role\":\"user\",\"content\":";
  put_string(m, q.prompt);
  m += "}]";
  b.number("temperature", q.temperature);
  if (q.reasoning_effort.empty()) {
    if (q.max_tokens > 0)
      b.integer("max_tokens", q.max_tokens);
  } else {
    // Reasoning models take max_completion_tokens (reasoning included) and refuse max_tokens.
    if (q.max_tokens > 0)
      b.integer("max_completion_tokens", q.max_tokens);
    b.string("reasoning_effort", q.reasoning_effort);
  }
  if (!q.stop.empty())
    b.strings("stop", q.stop);
  b.boolean("stream", q.stream);
  if (q.stream)
    b.key("stream_options") += "{\"include_usage\":true}";
  b.close();
  return r;
}

http_request build_anthropic(const wire_query& q) {
  http_request r;
  r.url = base_of(q) + "/messages";
  r.headers.push_back("Content-Type: application/json");
  if (!q.api_key.empty())
    r.headers.push_back("x-api-key: " + q.api_key);
  r.headers.push_back("anthropic-version: 2023-06-01");
  object_writer b{r.body};
  b.string("model", q.model);
  b.integer("max_tokens", q.max_tokens); // required by the Messages API
  if (!q.system.empty())
    b.string("system", q.system);
  std::string& m = b.key("messages");
  m += "[{\"role\":\"user\",\"content\":";
  put_string(m, q.prompt);
  m += "}]";
  // Extended thinking only runs at the default temperature; the API refuses any other.
  if (q.thinking_budget <= 0)
    b.number("temperature", q.temperature);
  if (!q.stop.empty())
    b.strings("stop_sequences", q.stop);
  b.boolean("stream", q.stream);
  if (q.thinking_budget > 0)
    b.key("thinking") +=
        "{\"type\":\"enabled\",\"budget_tokens\":" + std::to_string(q.thinking_budget) + "}";
  b.close();
  return r;
}

http_request build_gemini(const wire_query& q) {
  http_request r;
  r.url = base_of(q) + "/models/" + path_segment(q.model)
          + (q.stream ? ":streamGenerateContent?alt=sse" : ":generateContent");
  r.headers.push_back("Content-Type: application/json");
  if (!q.api_key.empty())
    r.headers.push_back("x-goog-api-key: " + q.api_key);
  object_writer b{r.body};
  std::string& c = b.key("contents");
  c += "[{\"role\":\"user\",\"parts\":[{\"text\":";
  put_string(c, q.prompt);
  c += "}]}]";
  if (!q.system.empty()) {
    std::string& s = b.key("systemInstruction");
    s += "{\"parts\":[{\"text\":";
    put_string(s, q.system);
    s += "}]}";
  }
  object_writer g{b.key("generationConfig")};
  g.number("temperature", q.temperature);
  if (q.max_tokens > 0)
    g.integer("maxOutputTokens", q.max_tokens);
  if (!q.stop.empty())
    g.strings("stopSequences", q.stop);
  if (q.thinking_budget > 0)
    g.key("thinkingConfig") += "{\"thinkingBudget\":" + std::to_string(q.thinking_budget) + "}";
  g.close();
  b.close();
  return r;
}

// ---------------------------------------------------------------------------------------------
// JSON reading

simdjson::dom::parser& json_parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

/// Parses `text`; throws malformed_reply naming `what` when it is not JSON.
element parse_json(std::string_view text, const char* what) {
  simdjson::padded_string padded{text};
  element doc;
  if (auto err = json_parser().parse(padded).get(doc))
    throw malformed_reply(std::string{what} + " is not JSON (" + simdjson::error_message(err)
                          + "): " + one_line(text, 80));
  return doc;
}

bool member(element e, const char* key, element& out) {
  return !e[key].get(out) && !out.is_null();
}

bool get_string(element e, const char* key, std::string& out) {
  std::string_view v;
  if (e[key].get(v))
    return false;
  out.assign(v);
  return true;
}

std::string string_or_empty(element e, const char* key) {
  std::string v;
  get_string(e, key, v);
  return v;
}

bool as_int(element v, int64_t& out) {
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  if (!v.get(i))
    out = i;
  else if (!v.get(u))
    out = INT64_MAX;
  else if (!v.get(d) && std::isfinite(d) && std::fabs(d) < 9e18)
    out = std::llround(d);
  else
    return false;
  return true;
}

bool get_int(element e, const char* key, int64_t& out) {
  element v;
  return member(e, key, v) && as_int(v, out);
}

bool first_of(element e, const char* key, element& out) {
  array a;
  if (e[key].get(a))
    return false;
  return !a.at(0).get(out);
}

bool retryable_text(std::string_view s) {
  std::string l = lower(s);
  return contains(l, "rate_limit") || contains(l, "rate limit") || contains(l, "ratelimit")
         || contains(l, "overloaded") || contains(l, "server_error") || contains(l, "server error")
         || contains(l, "api_error") || contains(l, "timeout_error");
}

bool retryable_code(int64_t code) {
  return code == 429 || (code >= 500 && code <= 599);
}

/// Throws provider_error when `doc` is an error reply (or event) of `w`.
void check_error(wire w, element doc) {
  element err;
  bool is_error = member(doc, "error", err);
  if (!is_error) {
    // vLLM and some other OpenAI-compatible servers flatten the error into the top level;
    // Anthropic's error events carry `"type": "error"`.
    std::string type = string_or_empty(doc, "object");
    if (type.empty())
      type = string_or_empty(doc, "type");
    if (type != "error")
      return;
    err = doc;
  }
  std::string message;
  std::string kind;
  bool retryable = false;
  std::string_view text;
  if (!err.get(text)) {
    message.assign(text);
  } else {
    message = string_or_empty(err, "message");
    int64_t code = 0;
    bool numeric = get_int(err, "code", code);
    switch (w) {
      case wire::openai: {
        kind = string_or_empty(err, "type");
        std::string code_text = string_or_empty(err, "code");
        if (!code_text.empty())
          kind = kind.empty() ? code_text : kind + "/" + code_text;
        retryable = retryable_text(kind) || (numeric && retryable_code(code));
        if (numeric && kind.empty())
          kind = std::to_string(code);
        break;
      }
      case wire::anthropic: {
        kind = string_or_empty(err, "type");
        retryable = kind == "overloaded_error" || kind == "rate_limit_error" || kind == "api_error"
                    || kind == "timeout_error";
        break;
      }
      case wire::gemini: {
        kind = string_or_empty(err, "status");
        retryable = kind == "RESOURCE_EXHAUSTED" || kind == "UNAVAILABLE" || kind == "INTERNAL"
                    || kind == "DEADLINE_EXCEEDED" || (numeric && retryable_code(code));
        if (numeric)
          kind = kind.empty() ? std::to_string(code) : std::to_string(code) + " " + kind;
        break;
      }
    }
  }
  std::string what = std::string{to_string(w)} + " error";
  if (!kind.empty())
    what += " (" + one_line(kind, 80) + ")";
  what += ": " + (message.empty() ? std::string{"no message"} : one_line(message, 300));
  throw provider_error(what, retryable);
}

// OpenAI ------------------------------------------------------------------------------------

void openai_usage(element doc, parsed_reply& r) {
  element usage;
  if (!member(doc, "usage", usage))
    return;
  get_int(usage, "prompt_tokens", r.input_tokens);
  get_int(usage, "completion_tokens", r.output_tokens);
  element details;
  if (member(usage, "completion_tokens_details", details))
    get_int(details, "reasoning_tokens", r.reasoning_tokens);
}

/// Message content: a string, null, or (some compatible servers) an array of text parts.
void openai_content(element content, std::string& text) {
  std::string_view s;
  if (!content.get(s)) {
    text.append(s);
    return;
  }
  array parts;
  if (!content.get(parts))
    for (element p : parts)
      if (string_or_empty(p, "type") == "text")
        text += string_or_empty(p, "text");
}

void openai_finish(element choice, parsed_reply& r) {
  if (get_string(choice, "finish_reason", r.finish_reason))
    r.complete = true;
}

parsed_reply openai_body(element doc) {
  array choices;
  if (doc["choices"].get(choices))
    throw malformed_reply("openai reply without choices");
  parsed_reply r;
  get_string(doc, "model", r.model);
  element choice;
  if (!choices.at(0).get(choice)) {
    element message;
    element content;
    if (member(choice, "message", message) && member(message, "content", content))
      openai_content(content, r.text);
    openai_finish(choice, r);
  }
  openai_usage(doc, r);
  return r;
}

void openai_chunk(element doc, parsed_reply& r) {
  get_string(doc, "model", r.model);
  element choice;
  if (first_of(doc, "choices", choice)) {
    element delta;
    element content;
    if (member(choice, "delta", delta) && member(delta, "content", content))
      openai_content(content, r.text);
    openai_finish(choice, r);
  }
  openai_usage(doc, r);
}

// Anthropic ---------------------------------------------------------------------------------

void anthropic_usage(element usage, parsed_reply& r) {
  get_int(usage, "input_tokens", r.input_tokens);
  get_int(usage, "output_tokens", r.output_tokens);
}

void anthropic_stop(element e, parsed_reply& r) {
  if (get_string(e, "stop_reason", r.finish_reason))
    r.complete = true;
}

parsed_reply anthropic_body(element doc) {
  array content;
  if (doc["content"].get(content))
    throw malformed_reply("anthropic reply without content");
  parsed_reply r;
  for (element block : content)
    if (string_or_empty(block, "type") == "text") // thinking and redacted_thinking left out
      r.text += string_or_empty(block, "text");
  get_string(doc, "model", r.model);
  anthropic_stop(doc, r);
  element usage;
  if (member(doc, "usage", usage))
    anthropic_usage(usage, r);
  return r;
}

/// One streamed event; returns true for `message_stop`.
bool anthropic_event(std::string_view type, element doc, parsed_reply& r) {
  if (type == "message_start") {
    element message;
    if (member(doc, "message", message)) {
      get_string(message, "model", r.model);
      element usage;
      if (member(message, "usage", usage))
        anthropic_usage(usage, r);
    }
  } else if (type == "content_block_start") {
    element block;
    if (member(doc, "content_block", block) && string_or_empty(block, "type") == "text")
      r.text += string_or_empty(block, "text");
  } else if (type == "content_block_delta") {
    element delta;
    if (member(doc, "delta", delta) && string_or_empty(delta, "type") == "text_delta")
      r.text += string_or_empty(delta, "text");
  } else if (type == "message_delta") {
    element delta;
    if (member(doc, "delta", delta))
      anthropic_stop(delta, r);
    element usage;
    if (member(doc, "usage", usage))
      anthropic_usage(usage, r); // cumulative counts
  } else if (type == "message_stop") {
    r.complete = true;
    return true;
  }
  return false; // ping, content_block_stop and event types added later
}

// Gemini ------------------------------------------------------------------------------------

/// One GenerateContentResponse (a whole reply or a streamed chunk) into `r`; returns true when
/// it ends the reply (a finish reason, or a prompt the provider blocked).
bool gemini_response(element doc, parsed_reply& r) {
  bool finished = false;
  get_string(doc, "modelVersion", r.model);
  element candidate;
  if (first_of(doc, "candidates", candidate)) {
    element content;
    array parts;
    if (member(candidate, "content", content) && !content["parts"].get(parts))
      for (element part : parts) {
        bool thought = false;
        if (!part["thought"].get(thought) && thought)
          continue;
        r.text += string_or_empty(part, "text");
      }
    std::string reason;
    if (get_string(candidate, "finishReason", reason) && reason != "FINISH_REASON_UNSPECIFIED") {
      r.finish_reason = reason;
      finished = true;
    }
  } else {
    element feedback;
    std::string reason;
    if (member(doc, "promptFeedback", feedback) && get_string(feedback, "blockReason", reason)) {
      r.finish_reason = reason;
      finished = true;
    }
  }
  element usage;
  if (member(doc, "usageMetadata", usage)) {
    int64_t prompt = 0;
    int64_t candidates = 0;
    int64_t thoughts = 0;
    get_int(usage, "promptTokenCount", prompt);
    get_int(usage, "candidatesTokenCount", candidates);
    get_int(usage, "thoughtsTokenCount", thoughts);
    r.input_tokens = prompt;
    r.output_tokens = candidates + thoughts;
    r.reasoning_tokens = thoughts;
  }
  if (finished)
    r.complete = true;
  return finished;
}

parsed_reply gemini_body(element doc) {
  array candidates;
  element feedback;
  if (doc["candidates"].get(candidates) && !member(doc, "promptFeedback", feedback))
    throw malformed_reply("gemini reply without candidates");
  parsed_reply r;
  gemini_response(doc, r);
  return r;
}

/// Gemini's REST errors sometimes come wrapped in an array.
element unwrap(element doc) {
  array a;
  element first;
  if (!doc.get(a) && !a.at(0).get(first))
    return first;
  return doc;
}

} // namespace

wire wire_of(std::string_view provider) {
  if (provider == "openai")
    return wire::openai;
  if (provider == "anthropic")
    return wire::anthropic;
  if (provider == "gemini")
    return wire::gemini;
  throw std::invalid_argument("provider '" + std::string{provider}
                              + "' has no wire format (expected openai, anthropic or gemini)");
}

const char* to_string(wire w) {
  switch (w) {
    case wire::openai:
      return "openai";
    case wire::anthropic:
      return "anthropic";
    case wire::gemini:
      return "gemini";
  }
  return "unknown";
}

http_request build_request(wire w, const wire_query& q) {
  check_key(q.api_key);
  switch (w) {
    case wire::openai:
      return build_openai(q);
    case wire::anthropic:
      return build_anthropic(q);
    case wire::gemini:
      return build_gemini(q);
  }
  throw std::invalid_argument("unknown wire format");
}

parsed_reply parse_body(wire w, std::string_view body) {
  std::string what = std::string{to_string(w)} + " reply";
  element doc = parse_json(body, what.c_str());
  if (w == wire::gemini)
    doc = unwrap(doc);
  if (!doc.is_object())
    throw malformed_reply(what + " is not a JSON object");
  check_error(w, doc);
  switch (w) {
    case wire::openai:
      return openai_body(doc);
    case wire::anthropic:
      return anthropic_body(doc);
    case wire::gemini:
      return gemini_body(doc);
  }
  throw malformed_reply("unknown wire format");
}

void sse_decoder::feed(std::string_view bytes) {
  size_t scan = buffer_.size(); // the buffer holds no complete line between calls
  buffer_.append(bytes);
  size_t start = 0;
  try {
    for (size_t nl; (nl = buffer_.find('\n', scan)) != std::string::npos; scan = start) {
      std::string_view line{buffer_.data() + start, nl - start};
      start = nl + 1;
      if (!line.empty() && line.back() == '\r')
        line.remove_suffix(1);
      if (line.empty()) {
        // Dispatch. The data buffer keeps a `\n` after every line; the last one goes.
        std::string name = std::move(event_name_);
        std::string data = std::move(data_);
        event_name_.clear();
        data_.clear();
        if (data.empty())
          continue;
        data.pop_back();
        event(name.empty() ? "message" : name, data);
        continue;
      }
      if (line.front() == ':')
        continue; // comment: a keep-alive
      size_t colon = line.find(':');
      std::string_view field = line.substr(0, colon);
      std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ')
        value.remove_prefix(1);
      if (field == "event") {
        event_name_.assign(value);
      } else if (field == "data") {
        data_.append(value);
        data_ += '\n';
      } // id, retry and unknown fields: nothing to do
    }
  } catch (...) {
    buffer_.erase(0, start);
    throw;
  }
  buffer_.erase(0, start);
}

void sse_decoder::event(std::string_view name, std::string_view data) {
  if (done_)
    return; // nothing counts after the end marker
  if (wire_ == wire::openai && data == "[DONE]") {
    done_ = true;
    reply_.complete = true;
    return;
  }
  std::string what = std::string{to_string(wire_)} + " stream event";
  element doc = parse_json(data, what.c_str());
  if (!doc.is_object())
    throw malformed_reply(what + " is not a JSON object");
  check_error(wire_, doc);
  switch (wire_) {
    case wire::openai:
      openai_chunk(doc, reply_);
      break;
    case wire::anthropic: {
      std::string type = string_or_empty(doc, "type");
      if (anthropic_event(type.empty() ? name : std::string_view{type}, doc, reply_))
        done_ = true;
      break;
    }
    case wire::gemini:
      if (gemini_response(doc, reply_))
        done_ = true;
      break;
  }
}

std::string error_message(wire w, long status, std::string_view body) {
  std::string out = "HTTP " + std::to_string(status);
  std::string message;
  simdjson::padded_string padded{body};
  element doc;
  if (!json_parser().parse(padded).get(doc)) {
    doc = unwrap(doc);
    element err;
    if (member(doc, "error", err)) {
      if (!get_string(err, "message", message))
        get_string(doc, "error", message); // `{"error": "text"}`
    } else if (!get_string(doc, "message", message)) {
      get_string(doc, "detail", message); // FastAPI servers
    }
  }
  message = one_line(message, 300);
  if (message.empty())
    message = one_line(body, 200);
  if (!message.empty())
    out += ": " + message;
  return out;
}

} // namespace kiln::llm
