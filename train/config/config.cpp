// Loading a TrainConfig from YAML and `--set` overrides, the help table and the YAML dump: all
// driven by the key table (keys.h).
#include "train/config/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include "core/error.h"
#include "core/input_file.h"
#include "train/config/keys.h"

namespace h2::config {
namespace {

std::string where(const std::string& source, const YAML::Node& node) {
  return fmt::format("{}:{}", source, node.Mark().line + 1);
}

std::string hint(std::string_view name) {
  std::string best = closest_key(name);
  return best.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", best);
}

std::string key_name(const YAML::Node& node, const std::string& source) {
  if (!node.IsScalar())
    H2_THROW(ConfigError, "{}: a key must be a plain name, not a list or map", where(source, node));
  return node.Scalar();
}

void load_entry(TrainConfig& config, const std::string& section, const YAML::Node& key_node,
                const YAML::Node& value, const std::string& source) {
  std::string name = section + "." + key_name(key_node, source);
  std::string at = where(source, key_node);
  const KeyInfo* key = find_key(name);
  if (!key) H2_THROW(ConfigError, "{}: unknown key '{}'{}", at, name, hint(name));
  if (config.origin.count(name))
    H2_THROW(ConfigError, "{}: {} is set twice (first at {})", at, name, config.origin[name]);
  std::string text;
  if (value.IsMap() && name == "precision.modules") {  // pattern: recipe, in file order
    for (const auto& rule : value)
      text += fmt::format("{}{}={}", text.empty() ? "" : "; ", key_name(rule.first, source),
                          rule.second.IsScalar() ? rule.second.Scalar() : std::string());
  } else if (value.IsSequence() && (name == "data.path" || name == "data.val_path")) {
    for (const auto& item : value) {  // a list of files and patterns: the comma-separated form
      if (!item.IsScalar())
        H2_THROW(ConfigError, "{}: {} must list file names or patterns", at, name);
      text += (text.empty() ? "" : ",") + item.Scalar();
    }
  } else if (value.IsMap() || value.IsSequence()) {
    H2_THROW(ConfigError, "{}: {} must be a single value, not a list or map", at, name);
  }
  if (value.IsScalar()) text = value.Scalar();
  if (value.IsNull() && key->type != KeyType::string)
    H2_THROW(ConfigError, "{}: {} has no value (expected {})", at, name, key_type_name(key->type));
  set_from_text(*key, config, text, at);
  config.origin[name] = at;
}

void load_section(TrainConfig& config, const std::string& section, const YAML::Node& body,
                  const std::string& source) {
  if (body.IsNull()) return;
  if (!body.IsMap())
    H2_THROW(ConfigError, "{}: section '{}' must be a map of keys", where(source, body), section);
  for (const auto& entry : body) load_entry(config, section, entry.first, entry.second, source);
}

}  // namespace

std::string TrainConfig::origin_of(std::string_view key) const {
  auto it = origin.find(std::string(key));
  return it == origin.end() ? "default" : it->second;
}

namespace {

// The documents of a YAML text as the parser reports them: where each starts, and where the
// first value of the latest one is (none for an empty document).
class DocumentMarks : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    starts.push_back(mark);
    content.reset();
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { seen(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    seen(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    seen(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    seen(mark);
  }
  void OnMapEnd() override {}

  std::vector<YAML::Mark> starts;
  std::optional<YAML::Mark> content;

 private:
  void seen(const YAML::Mark& mark) {
    if (!content) content = mark;
  }
};

// Refuses a second document that sets anything (YAML::Load reads the first and ignores the rest;
// a trailing '---' with nothing after it is an empty document). Not YAML::LoadAll: on some
// malformed texts yaml-cpp 0.7 reports a document at the same place again and again, and LoadAll
// never returned (a fuzzer's input); a document that starts where the one before it did is taken
// for that.
void refuse_later_documents(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  DocumentMarks marks;
  while (parser.HandleNextDocument(marks)) {
    const size_t n = marks.starts.size();
    const bool stuck = n >= 2 && marks.starts[n - 1].pos <= marks.starts[n - 2].pos;
    if (n >= 2 && (marks.content || stuck))
      H2_THROW(ConfigError,
               "{}:{}: a second YAML document (after '---' or '...'); a config is one document",
               source, (marks.content ? *marks.content : marks.starts[n - 1]).line + 1);
  }
}

}  // namespace

TrainConfig parse_yaml(std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
    refuse_later_documents(text, source);
  } catch (const YAML::Exception& e) {
    H2_THROW(ConfigError, "{}:{}: YAML syntax error: {}", source, e.mark.line + 1, e.msg);
  }
  TrainConfig config;
  if (root.IsNull()) return config;
  if (!root.IsMap())
    H2_THROW(ConfigError, "{}: a config must be a map of sections (model, train, data, ...)",
             where(source, root));
  std::set<std::string> seen;
  for (const auto& entry : root) {
    std::string section = key_name(entry.first, source);
    std::string at = where(source, entry.first);
    if (!is_section(section))
      H2_THROW(ConfigError,
               "{}: unknown section '{}'{}; sections are model, train, data, log, parallel, "
               "cluster, precision, checkpoint",
               at, section, hint(section));
    if (!seen.insert(section).second)
      H2_THROW(ConfigError, "{}: section '{}' appears twice", at, section);
    load_section(config, section, entry.second, source);
  }
  return config;
}

void apply_override(TrainConfig& config, std::string_view assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos)
    H2_THROW(ConfigError, "--set: '{}' has no '='; expected section.key=value (e.g. train.lr=3e-4)",
             assignment);
  std::string name(assignment.substr(0, eq));
  std::string_view text = assignment.substr(eq + 1);
  const KeyInfo* key = find_key(name);
  if (!key) {
    if (is_section(name))
      H2_THROW(ConfigError, "--set: '{}' is a section, not a key; expected section.key=value",
               name);
    H2_THROW(ConfigError, "--set: unknown key '{}'{}", name, hint(name));
  }
  set_from_text(*key, config, text, "--set");
  config.origin[name] = "--set";
}

TrainConfig load_config(const std::string& path, std::span<const std::string> overrides) {
  TrainConfig config = parse_yaml(read_input_file(path, "config file"), path);
  for (const std::string& assignment : overrides) apply_override(config, assignment);
  validate(config);
  return config;
}

std::string help_table() {
  const TrainConfig defaults;
  struct Row {
    std::string key, type, def, meaning;
  };
  std::vector<Row> rows;
  for (const KeyInfo& key : keys()) {
    std::string type =
        key.choices.empty() ? std::string(key_type_name(key.type)) : std::string(key.choices);
    std::string meaning(key.help);
    if (std::string range = key.range.str(); !range.empty()) meaning += fmt::format(" ({})", range);
    rows.push_back({std::string(key.name), type, value_text(key, defaults), meaning});
  }
  size_t wk = 3, wt = 4, wd = 7;
  for (const Row& r : rows)
    wk = std::max(wk, r.key.size()), wt = std::max(wt, r.type.size()),
    wd = std::max(wd, r.def.size());
  std::string out =
      fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", "key", wk, "type", wt, "default", wd, "meaning");
  for (const Row& r : rows)
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", r.key, wk, r.type, wt, r.def, wd, r.meaning);
  return out;
}

std::string dump_yaml(const TrainConfig& config) {
  std::string out = "# Effective H2 training configuration; reproduce with: h2 train THIS_FILE\n";
  std::string_view section;
  for (const KeyInfo& key : keys()) {
    if (key.section() != section) {
      section = key.section();
      out += fmt::format("{}:\n", section);
    }
    out += fmt::format("  {}: {}\n", key.leaf(), value_text(key, config));
  }
  return out;
}

std::string dump_json(const TrainConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  auto& c = const_cast<TrainConfig&>(config);  // the accessors read without modifying
  for (const KeyInfo& key : keys()) {
    nlohmann::json& slot = out[std::string(key.section())][std::string(key.leaf())];
    switch (key.type) {
      case KeyType::integer:
        slot = *std::get<int64_t* (*)(TrainConfig&)>(key.field)(c);
        break;
      case KeyType::number:
        slot = *std::get<double* (*)(TrainConfig&)>(key.field)(c);
        break;
      case KeyType::boolean:
        slot = *std::get<bool* (*)(TrainConfig&)>(key.field)(c);
        break;
      case KeyType::string:
        slot = *std::get<std::string* (*)(TrainConfig&)>(key.field)(c);
        break;
      default:
        slot = value_text(key, config);
    }
  }
  return out.dump();
}

void write_yaml(const TrainConfig& config, const std::string& path) {
  std::ofstream out(path);
  if (!out) H2_THROW(Error, "cannot write config dump '{}'", path);
  out << dump_yaml(config);
  if (!out.flush()) H2_THROW(Error, "error writing config dump '{}'", path);
}

}  // namespace h2::config
