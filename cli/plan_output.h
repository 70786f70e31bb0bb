// How plans are shown and saved: the search's table (predicted step time, tokens/s, per group the
// chip, its blocks, busy time and memory against the chip), the runner-ups' explanations, and the
// plan file of a candidate with its prediction (train/config/plan.h).
#pragma once

#include <functional>
#include <string>

#include "core/cluster.h"
#include "parallel/planner/search.h"
#include "train/config/config.h"

namespace h2::cli {

using Print = std::function<void(const std::string&)>;

void print_search(const parallel::planner::SearchResult& result, const Cluster& cluster,
                  const parallel::planner::CostInputs& inputs,
                  const parallel::planner::SearchSpace& space, int top, bool explain,
                  const Print& print);

// One plan's prediction: step time, tokens/s, bubble, communication and each group's line.
void print_candidate(const parallel::planner::Candidate& candidate, const std::string& name,
                     const Print& print);

// What a candidate predicts, as the config and metrics carry it.
config::PlanPrediction prediction_of(const parallel::planner::Candidate& candidate,
                                     const parallel::planner::CostInputs& inputs);

// A candidate's plan file text, to be saved at `path` (its header says how to run it); `what` says
// where the plan came from ("the best of the search").
std::string plan_text(const std::string& path, const parallel::planner::Candidate& candidate,
                      const Cluster& cluster, const parallel::planner::CostInputs& inputs,
                      const config::TrainConfig& config, const std::string& what);

// Writes a plan or profile file durably (train/checkpoint/durable_io.h: a temporary file, fsync,
// rename), creating its folder, so a crash leaves the old file or the new one, never half of one.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace h2::cli
