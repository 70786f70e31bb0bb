// Printing and parsing the text form of text_format.h.
#include "parallel/pipeline/text_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <charconv>
#include <optional>
#include <vector>

#include "core/error.h"

namespace h2::parallel::pipeline {
namespace {

std::vector<std::string_view> split_blanks(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// Reads a non-negative decimal number at the front of `text`, advancing past it.
std::optional<int> take_number(std::string_view& text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || text.front() == '-') return std::nullopt;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return value;
}

bool take(std::string_view& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// Parses one action; returns the reason it is malformed, or "" with `out` filled.
std::string read_action(std::string_view token, Action& out) {
  size_t n = 0;
  while (n < token.size() &&
         (std::isupper(static_cast<unsigned char>(token[n])) || token[n] == '_')) {
    ++n;
  }
  const std::optional<ActionKind> kind = parse_action_kind(token.substr(0, n));
  if (!kind) return fmt::format("unknown action kind '{}'", token.substr(0, n));
  std::string_view rest = token.substr(n);
  const std::optional<int> stage = take_number(rest);
  if (!stage) return "expected a stage number after the kind";
  out = Action::stage_wide(*kind, *stage);
  if (!is_stage_wide(*kind)) {
    std::optional<int> mb;
    if (!take(rest, ".") || !(mb = take_number(rest))) {
      return "expected '.' and a micro-batch number after the stage";
    }
    out.microbatch = *mb;
  }
  if (is_comm(*kind)) {
    const std::string_view arrow = is_send(*kind) ? "->" : "<-";
    std::optional<int> peer;
    if (!take(rest, arrow) || !(peer = take_number(rest))) {
      return fmt::format("expected '{}' and a peer stage after the micro-batch", arrow);
    }
    out.peer = *peer;
  }
  if (!rest.empty()) return fmt::format("unexpected '{}' at the end", rest);
  return "";
}

struct Header {
  int ranks = -1;
  int stages = -1;
  int microbatches = -1;
  std::vector<int> stage_ranks;
};

Header read_header(const std::vector<std::string_view>& tokens, size_t line) {
  if (tokens.empty() || tokens[0] != "pipeline") {
    H2_THROW(ConfigError,
             "schedule text line {}: expected the header 'pipeline ranks=P stages=S "
             "microbatches=M', got '{}'",
             line, tokens.empty() ? "" : tokens[0]);
  }
  Header h;
  for (size_t t = 1; t < tokens.size(); ++t) {
    std::string_view tok = tokens[t];
    const size_t eq = tok.find('=');
    const std::string_view key = tok.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : tok.substr(eq + 1);
    auto bad = [&](std::string_view why) {
      H2_THROW(ConfigError, "schedule text line {} token {} '{}': {}", line, t, tok, why);
    };
    if (key == "stage_ranks") {
      while (!value.empty()) {
        const std::optional<int> r = take_number(value);
        if (!r || (!value.empty() && !take(value, ","))) bad("expected comma-separated ranks");
        h.stage_ranks.push_back(*r);
      }
      continue;
    }
    int* field = key == "ranks"          ? &h.ranks
                 : key == "stages"       ? &h.stages
                 : key == "microbatches" ? &h.microbatches
                                         : nullptr;
    if (field == nullptr) bad("unknown key (expected ranks, stages, microbatches, stage_ranks)");
    const std::optional<int> v = take_number(value);
    if (!v || !value.empty() || *v < 1) bad("expected a positive number after '='");
    *field = *v;
  }
  if (h.ranks < 1 || h.stages < 1 || h.microbatches < 1) {
    H2_THROW(ConfigError, "schedule text line {}: the header needs ranks, stages and microbatches",
             line);
  }
  if (h.stage_ranks.empty()) {
    for (int s = 0; s < h.stages; ++s) h.stage_ranks.push_back(s % h.ranks);
  }
  if (h.stage_ranks.size() != static_cast<size_t>(h.stages)) {
    H2_THROW(ConfigError, "schedule text line {}: stage_ranks lists {} ranks for {} stages", line,
             h.stage_ranks.size(), h.stages);
  }
  for (size_t s = 0; s < h.stage_ranks.size(); ++s) {
    if (h.stage_ranks[s] >= h.ranks) {
      H2_THROW(ConfigError, "schedule text line {}: stage {} is mapped to rank {}, outside [0, {})",
               line, s, h.stage_ranks[s], h.ranks);
    }
  }
  return h;
}

}  // namespace

std::string format_schedule(const Schedule& s) {
  s.check_shape();
  std::string text = fmt::format("pipeline ranks={} stages={} microbatches={} stage_ranks={}\n",
                                 s.ranks, s.stages, s.microbatches, fmt::join(s.stage_rank, ","));
  for (size_t r = 0; r < s.per_rank.size(); ++r) {
    text += fmt::format("rank {}:", r);
    for (const Action& a : s.per_rank[r]) {
      text += ' ';
      text += to_string(a);
    }
    text += "\n";
  }
  return text;
}

Action parse_action(std::string_view token) {
  Action a;
  const std::string why = read_action(token, a);
  if (!why.empty()) H2_THROW(ConfigError, "schedule action '{}': {}", token, why);
  return a;
}

Schedule parse_schedule(std::string_view text) {
  std::optional<Schedule> s;
  size_t line_no = 0;
  size_t rank_lines = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    const std::vector<std::string_view> tokens = split_blanks(line);
    if (tokens.empty() || tokens[0].starts_with("#")) continue;
    if (!s) {
      const Header h = read_header(tokens, line_no);
      s = Schedule{h.ranks, h.stages, h.microbatches, h.stage_ranks, {}};
      s->per_rank.resize(static_cast<size_t>(h.ranks));
      continue;
    }
    if (rank_lines >= s->per_rank.size()) {
      H2_THROW(ConfigError, "schedule text line {}: more rank lines than ranks = {}", line_no,
               s->ranks);
    }
    const std::string expected = fmt::format("{}:", rank_lines);
    if (tokens.size() < 2 || tokens[0] != "rank" || tokens[1] != expected) {
      H2_THROW(ConfigError, "schedule text line {}: expected 'rank {}' (ranks in order, {} in all)",
               line_no, expected, s->ranks);
    }
    for (size_t t = 2; t < tokens.size(); ++t) {
      Action a;
      const std::string why = read_action(tokens[t], a);
      if (!why.empty()) {
        H2_THROW(ConfigError, "schedule text line {} token {} '{}': {}", line_no, t - 1, tokens[t],
                 why);
      }
      s->per_rank[rank_lines].push_back(a);
    }
    ++rank_lines;
  }
  if (!s) H2_THROW(ConfigError, "schedule text has no 'pipeline' header");
  if (rank_lines != s->per_rank.size()) {
    H2_THROW(ConfigError, "schedule text has {} rank lines for ranks = {}", rank_lines, s->ranks);
  }
  return *s;
}

}  // namespace h2::parallel::pipeline
