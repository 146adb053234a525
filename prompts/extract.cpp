#include "prompts/extract.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

namespace kiln {

namespace {

// Replies arrive with CRLF (or, rarely, lone CR) line ends depending on the provider; everything
// below works on LF only.
std::string normalise_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < text.size() && text[i + 1] == '\n')
        ++i;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      if (pos < text.size())
        lines.push_back(text.substr(pos));
      break;
    }
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t'))
    ++b;
  size_t e = s.size();
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
    --e;
  return s.substr(b, e - b);
}

size_t indent_of(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t'))
    ++i;
  return i;
}

/// An opening or closing fence: a run of at least three backticks or tildes at the start of a
/// (possibly indented) line, then an optional info string such as `python` or `c++`.
struct fence {
  char mark = '`';
  size_t length = 0;
  std::string_view info;
};

std::optional<fence> parse_fence(std::string_view line) {
  auto t = trim(line);
  if (t.size() < 3 || (t[0] != '`' && t[0] != '~'))
    return std::nullopt;
  size_t n = 0;
  while (n < t.size() && t[n] == t[0])
    ++n;
  if (n < 3)
    return std::nullopt;
  auto info = trim(t.substr(n));
  // CommonMark: a backtick fence's info string may not contain backticks (that is inline code).
  if (t[0] == '`' && info.find('`') != std::string_view::npos)
    return std::nullopt;
  return fence{t[0], n, info};
}

/// A closing fence is the same character, at least as long, with nothing after it.
bool closes(const fence& open, std::string_view line) {
  auto f = parse_fence(line);
  return f && f->mark == open.mark && f->length >= open.length && f->info.empty();
}

struct block {
  std::string_view info;
  std::string body;
};

std::vector<block> fenced_blocks(const std::vector<std::string_view>& lines, bool& any_fence) {
  std::vector<block> blocks;
  any_fence = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto open = parse_fence(lines[i]);
    if (!open)
      continue;
    any_fence = true;
    block b;
    b.info = open->info;
    size_t j = i + 1;
    // An unterminated final fence (a reply cut off by the token limit) runs to the end.
    for (; j < lines.size() && !closes(*open, lines[j]); ++j) {
      b.body.append(lines[j]);
      b.body.push_back('\n');
    }
    blocks.push_back(std::move(b));
    i = j;
  }
  return blocks;
}

bool defines_model_new(std::string_view code) {
  static const std::regex pattern{R"((^|\n)[ \t]*class[ \t]+ModelNew\b)"};
  return std::regex_search(code.begin(), code.end(), pattern);
}

bool looks_like_python_start(std::string_view line) {
  auto t = trim(line);
  for (std::string_view p : {"import ", "from ", "class ", "def ", "#", "@"})
    if (t.substr(0, p.size()) == p)
      return true;
  return false;
}

std::string strip_trailing_blank(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  return s + '\n';
}

/// The list marker at the start of `t` (already trimmed): `-`, `*`, `+`, `•`, `1.`, `1)` or
/// `(1)`, followed by a space. Returns its length including the space, or 0.
size_t item_marker(std::string_view t) {
  auto spaced = [&](size_t n) -> size_t {
    return n < t.size() && (t[n] == ' ' || t[n] == '\t') ? n + 1 : 0;
  };
  if (t.empty())
    return 0;
  if (t[0] == '-' || t[0] == '*' || t[0] == '+')
    return spaced(1);
  if (t.substr(0, 3) == "\xe2\x80\xa2") // U+2022 BULLET
    return spaced(3);
  size_t i = t[0] == '(' ? 1 : 0;
  size_t digits = i;
  while (digits < t.size() && digits - i < 3 && t[digits] >= '0' && t[digits] <= '9')
    ++digits;
  if (digits == i || digits >= t.size())
    return 0;
  if (i == 1)
    return t[digits] == ')' ? spaced(digits + 1) : 0;
  return t[digits] == '.' || t[digits] == ')' ? spaced(digits + 1) : 0;
}

/// Item text after the marker; `**1. Fuse**`-style lines put the marker inside bold.
std::optional<std::string_view> list_item(std::string_view line) {
  auto t = trim(line);
  if (auto n = item_marker(t))
    return trim(t.substr(n));
  if (t.substr(0, 2) == "**") {
    auto inner = t.substr(2);
    if (auto n = item_marker(inner); n && inner[0] != '*')
      return trim(inner.substr(n));
  }
  return std::nullopt;
}

std::string strip_bold(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '*' && i + 1 < s.size() && s[i + 1] == '*') {
      ++i;
      continue;
    }
    out.push_back(s[i]);
  }
  return std::string{trim(out)};
}

} // namespace

std::optional<std::string> extract_code(std::string_view reply) {
  auto text = normalise_newlines(reply);
  auto lines = split_lines(text);
  bool any_fence = false;
  auto blocks = fenced_blocks(lines, any_fence);
  // The last block that defines ModelNew wins: models that explain a first draft and then
  // correct it put the final program last. A CUDA or C++ block never qualifies on its own.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    if (defines_model_new(it->body))
      return strip_trailing_blank(std::move(it->body));
  if (any_fence || !defines_model_new(text))
    return std::nullopt;
  // An unfenced program: start at the first line that reads as Python, skipping leading prose.
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!looks_like_python_start(lines[i]))
      continue;
    std::string code;
    for (size_t j = i; j < lines.size(); ++j) {
      code.append(lines[j]);
      code.push_back('\n');
    }
    if (defines_model_new(code))
      return strip_trailing_blank(std::move(code));
    break;
  }
  return std::nullopt;
}

std::vector<std::string> extract_ideas(std::string_view reply, size_t max) {
  auto text = normalise_newlines(reply);
  auto lines = split_lines(text);
  std::vector<std::string> ideas;
  std::string current;
  size_t current_indent = 0;
  bool open = false;
  auto finish = [&] {
    if (open) {
      auto idea = strip_bold(current);
      // A rule line such as `* * *` is a list marker with nothing to say.
      bool has_word = std::any_of(idea.begin(), idea.end(),
                                  [](unsigned char c) { return std::isalnum(c) || c >= 0x80; });
      if (has_word)
        ideas.push_back(std::move(idea));
    }
    current.clear();
    open = false;
  };
  std::optional<fence> in_fence;
  for (auto line : lines) {
    // Bullets inside code blocks are code, not ideas.
    if (in_fence) {
      if (closes(*in_fence, line))
        in_fence.reset();
      continue;
    }
    if (auto f = parse_fence(line)) {
      finish();
      in_fence = f;
      continue;
    }
    auto t = trim(line);
    size_t indent = indent_of(line);
    auto item = list_item(line);
    // A nested bullet elaborates its parent rather than being an idea of its own.
    if (item && !(open && indent > current_indent)) {
      finish();
      current = std::string{*item};
      current_indent = indent;
      open = true;
      continue;
    }
    if (t.empty())
      continue;
    if (open && indent > 0) {
      current += ' ';
      current += item ? std::string{*item} : std::string{t};
      continue;
    }
    finish(); // unindented prose ends the list item
  }
  finish();
  if (ideas.size() > max)
    ideas.resize(max);
  return ideas;
}

} // namespace kiln
