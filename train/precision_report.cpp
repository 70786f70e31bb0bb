// Precision figures for metrics and the progress line (see precision_report.h).
#include "train/precision_report.h"

#include <utility>

#include <fmt/format.h>

namespace h2::train {
namespace {

// Recipe names with their layer counts, in first-use order.
std::vector<std::pair<std::string, int>> count_recipes(
    const std::vector<models::Linear*>& linears) {
  std::vector<std::pair<std::string, int>> counts;
  for (const models::Linear* linear : linears) {
    const std::string name(linear->recipe_name());
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto& c) { return c.first == name; });
    if (it == counts.end())
      counts.emplace_back(name, 1);
    else
      ++it->second;
  }
  return counts;
}

}  // namespace

std::string recipe_summary(const std::vector<models::Linear*>& linears) {
  std::string out;
  for (const auto& [name, n] : count_recipes(linears))
    out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", name, n);
  return out;
}

PrecisionReport precision_report(const std::vector<models::Linear*>& linears) {
  PrecisionReport report;
  nlohmann::json recipes = nlohmann::json::object(), layers = nlohmann::json::object();
  for (const auto& [name, n] : count_recipes(linears)) recipes[name] = n;
  struct Worst {
    double fraction = -1;
    std::string module, operand;
  } worst;
  for (const models::Linear* linear : linears) {
    if (!linear->quantized()) continue;
    const models::LinearStats s = linear->stats();
    nlohmann::json entry = {{"recipe", linear->recipe_name()}};
    for (const auto& [operand, stats] :
         {std::pair{"x", s.x}, std::pair{"w", s.w}, std::pair{"dy", s.dy}}) {
      entry[fmt::format("{}_amax", operand)] = stats.amax;
      entry[fmt::format("{}_saturated", operand)] = stats.saturated_fraction;
      if (stats.saturated_fraction > worst.fraction)
        worst = {stats.saturated_fraction, linear->module(), operand};
    }
    layers[linear->module()] = std::move(entry);
  }
  report.json = {{"recipes", recipes}, {"layers", layers}};
  report.progress = recipe_summary(linears);
  if (worst.fraction >= 0) {
    report.json["worst_saturation"] = {
        {"module", worst.module}, {"operand", worst.operand}, {"fraction", worst.fraction}};
    report.progress +=
        worst.fraction > 0
            ? fmt::format(" | sat {:.3g}% {} {}", 100 * worst.fraction, worst.module, worst.operand)
            : std::string(" | sat 0");
  }
  return report;
}

}  // namespace h2::train
