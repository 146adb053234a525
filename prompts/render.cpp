#include "prompts/render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <stdexcept>

#include "prompts/templates.hpp"

namespace kiln {

namespace {

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}

/// A `{{ name }}` occurrence: where it starts, how long it is, and the name inside.
struct slot_ref {
  size_t length = 0;
  std::string_view name;
};

/// Matches the slot pattern at `pos` (which holds `{{`). Anything else that starts with `{{`,
/// such as a C++ initialiser in an example, is not a slot and stays in the text as written.
std::optional<slot_ref> match_slot(std::string_view text, size_t pos) {
  size_t i = pos + 2;
  while (i < text.size() && text[i] == ' ')
    ++i;
  if (i >= text.size() || !is_name_start(text[i]))
    return std::nullopt;
  size_t name_begin = i;
  while (i < text.size() && is_name_char(text[i]))
    ++i;
  size_t name_end = i;
  while (i < text.size() && text[i] == ' ')
    ++i;
  if (text.substr(i, 2) != "}}")
    return std::nullopt;
  return slot_ref{i + 2 - pos, text.substr(name_begin, name_end - name_begin)};
}

// Values sit inside fenced blocks and bullet lists; trailing blank lines would only make the
// prompt ragged, so they go.
std::string trim_trailing_newlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.pop_back();
  return s;
}

// Three significant digits are plenty for a model deciding what went wrong, and keep
// "0.31" reading as 0.31 rather than 0.310000.
std::string format_number(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string render_diffs(const verdict& v) {
  std::string out;
  size_t n = std::max(v.max_abs_diff.size(), v.max_rel_diff.size());
  for (size_t i = 0; i < n; ++i) {
    if (!out.empty())
      out += '\n';
    out += "output " + std::to_string(i) + ":";
    if (i < v.max_abs_diff.size())
      out += " max abs diff " + format_number(v.max_abs_diff[i]);
    if (i < v.max_rel_diff.size())
      out += std::string(i < v.max_abs_diff.size() ? "," : "") + " max rel diff "
             + format_number(v.max_rel_diff[i]);
  }
  return out.empty() ? "(none)" : out;
}

std::string format_gib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// The `- key: value` lines below `### Device`. The rules provider parses them back, so the keys
// and the yes/no spelling are part of the prompt contract (docs/prompts.md).
std::string render_device_facts(const runner_facts& f) {
  auto yes_no = [](bool b) { return b ? "yes" : "no"; };
  std::string out = "- device: " + (f.device.empty() ? std::string{"unknown"} : f.device);
  if (!f.device_name.empty())
    out += " (" + f.device_name + ")";
  out += "\n- torch: " + (f.torch_version.empty() ? std::string{"unknown"} : f.torch_version);
  out += std::string{"\n- cuda: "} + yes_no(f.cuda);
  out += std::string{"\n- triton: "} + yes_no(f.triton);
  out += std::string{"\n- torch.compile: "} + yes_no(f.compile);
  out += "\n- threads: " + std::to_string(f.cpu_threads);
  if (f.multiprocessors > 0)
    out += "\n- multiprocessors: " + std::to_string(f.multiprocessors);
  if (f.memory_bytes > 0)
    out += "\n- memory: " + format_gib(f.memory_bytes);
  if (f.memory_bandwidth_gbs > 0)
    out += "\n- memory bandwidth (peak): "
           + std::to_string(static_cast<int64_t>(std::lround(f.memory_bandwidth_gbs))) + " GB/s";
  if (f.l2_bytes > 0)
    out += "\n- L2 cache: " + format_number(static_cast<double>(f.l2_bytes) / (1024.0 * 1024.0))
           + " MiB";
  if (!f.capability.empty())
    out += "\n- capability: " + f.capability;
  return out;
}

std::string render_measurement(const program_note& p) {
  if (p.runtime_ms <= 0)
    return "not measured";
  return format_number(p.runtime_ms) + " ms per call, " + format_number(p.speedup)
         + "x the reference's speed";
}

/// Other programs, best first, each with its measurement in a heading and its code fenced.
std::string render_inspirations(const std::vector<program_note>& programs) {
  if (programs.empty())
    return "(none yet)";
  std::string out;
  for (size_t i = 0; i < programs.size(); ++i) {
    out += (i ? "\n\n" : "") + std::string{"#### Program "} + std::to_string(i + 1) + ": "
           + render_measurement(programs[i]) + "\n```python\n"
           + trim_trailing_newlines(programs[i].code) + "\n```";
  }
  return out;
}

std::string or_empty_note(std::string s) {
  s = trim_trailing_newlines(std::move(s));
  return s.empty() ? "(empty)" : s;
}

} // namespace

std::string render_template(std::string_view tmpl,
                            const std::map<std::string, std::string>& slots) {
  std::string out;
  out.reserve(tmpl.size() * 2);
  size_t pos = 0;
  while (pos < tmpl.size()) {
    size_t open = tmpl.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(tmpl.substr(pos));
      break;
    }
    out.append(tmpl.substr(pos, open - pos));
    auto slot = match_slot(tmpl, open);
    if (!slot) {
      // Not a slot: keep one brace and rescan from the next, so `{{{x}}` still finds `{{x}}`.
      out.push_back('{');
      pos = open + 1;
      continue;
    }
    auto it = slots.find(std::string{slot->name});
    if (it == slots.end())
      throw std::invalid_argument("template uses unknown slot '" + std::string{slot->name} + "'");
    // Values are inserted verbatim and never rescanned: a task source that happens to contain
    // `{{x}}` must reach the model unchanged.
    out.append(it->second);
    pos = open + slot->length;
  }
  return out;
}

std::vector<std::string> template_slots(std::string_view tmpl) {
  std::vector<std::string> names;
  std::set<std::string_view> seen;
  size_t pos = 0;
  while ((pos = tmpl.find("{{", pos)) != std::string_view::npos) {
    auto slot = match_slot(tmpl, pos);
    if (!slot) {
      ++pos;
      continue;
    }
    if (seen.insert(slot->name).second)
      names.emplace_back(slot->name);
    pos += slot->length;
  }
  return names;
}

std::map<std::string, std::string> request_slots(const agent_request& req) {
  std::map<std::string, std::string> s;
  s["reference"] = trim_trailing_newlines(req.task.source);
  s["task"] = req.task.name.empty() ? std::string{"(unnamed)"} : req.task.name;
  s["idea"] = trim_trailing_newlines(req.idea);
  s["code"] = trim_trailing_newlines(req.code);
  s["status"] = to_string(req.last.status);
  s["timed_out"] = req.last.status == verdict_status::timeout ? "yes" : "no";
  s["reason"] = or_empty_note(req.last.reason);
  s["stdout_tail"] = or_empty_note(req.last.stdout_tail);
  s["stderr_tail"] = or_empty_note(req.last.stderr_tail);
  s["diffs"] = render_diffs(req.last);
  s["device_facts"] = render_device_facts(req.facts);
  s["max_ideas"] = std::to_string(req.max_ideas > 0 ? req.max_ideas : 1);
  s["example_reference"] = std::string{example_reference()};
  s["example_candidate"] = std::string{example_candidate()};
  s["current_measurement"] = render_measurement(req.current);
  s["inspirations"] = render_inspirations(req.inspirations);
  return s;
}

std::string render_request(const agent_request& req, std::string_view override_text) {
  auto tmpl = override_text.empty() ? builtin_template(req.kind) : override_text;
  return render_template(tmpl, request_slots(req));
}

} // namespace kiln
