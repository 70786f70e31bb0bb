// The plan search's branch and bound over classes (parallel/planner/search.h), against the brute
// force of search_brute_force.h on random clusters of 3-6 chips (1-3 types, 2-6 layers, ample or
// tight memory, class bounds loose or close to the step times), keeping few plans so that the
// bound cuts classes and splits:
//   - with keep k (1, 3) the search returns exactly the brute force's k fastest configuration
//     optima (the best equal to the optimum over every configuration and split, 1e-12
//     relative), on 1, 2 and 5 threads, with no gap; so too where ZB-H1's input and weight
//     passes add up to less than the backward;
//   - the ranked list, and every count (classes, classes expanded, outer configurations, plans
//     costed, memory_pruned), are the same on 1, 2 and 5 threads;
//   - no budget (max_classes 0) gives the same result as a budget larger than the classes;
//   - a tiny budget (1, 2 or 5 classes) reports a gap that is a true bound: the best plan is
//     within (1 + gap) of the brute-force optimum; a search that expanded every class reports 0;
//     and it expands no more classes than the budget.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "tests/parallel/planner/search_brute_force.h"

namespace h2::parallel::planner {
namespace {

using brute::Job;

// Ample or tight memory, loose or tight class bounds, by the seed.
Job job_of(uint32_t seed, bool cheap_split_backward = false) {
  std::mt19937 rng(seed);
  return brute::random_job(rng, {.min_chips = 3,
                                 .max_chips = 6,
                                 .memory = seed % 2 ? int64_t(1) << 30 : 0,
                                 .tight = seed % 4 < 2,
                                 .cheap_split_backward = cheap_split_backward});
}

std::string describe(const Job& job) {
  return (::testing::Message() << job.cluster.size() << " chips of "
                               << job.cluster.chip_types().size() << " types, " << job.m.n_layers
                               << " layers, " << job.space.global_rows << " rows, memory "
                               << job.cluster.chips[0].memory_bytes)
      .GetString();
}

struct Counts {
  int64_t classes, expanded, outers, costed, pruned;
  bool operator==(const Counts&) const = default;
};

Counts counts(const SearchResult& r) {
  return {r.classes, r.classes_expanded, r.outer_candidates, r.costed, r.memory_pruned};
}

std::string str(const Counts& c) {
  return (::testing::Message() << c.classes << " classes, " << c.expanded << " expanded, "
                               << c.outers << " configurations, " << c.costed << " costed, "
                               << c.pruned << " pruned")
      .GetString();
}

void expect_same_list(const SearchResult& a, const SearchResult& b) {
  ASSERT_EQ(a.best.size(), b.best.size());
  for (size_t i = 0; i < a.best.size(); ++i) {
    EXPECT_EQ(a.best[i].plan.str(), b.best[i].plan.str()) << i;
    EXPECT_EQ(a.best[i].plan.devices, b.best[i].plan.devices) << i;
    EXPECT_EQ(a.best[i].estimate.step_s, b.best[i].estimate.step_s) << i;
  }
  ASSERT_EQ(a.too_large.size(), b.too_large.size());
  for (size_t i = 0; i < a.too_large.size(); ++i)
    EXPECT_EQ(a.too_large[i].plan.str(), b.too_large[i].plan.str()) << i;
}

constexpr int kTrials = 40;

// The brute force of each job, computed once for the tests that need it.
const brute::Result& want_of(uint32_t seed) {
  static std::map<uint32_t, brute::Result> done;
  auto it = done.find(seed);
  if (it == done.end()) it = done.emplace(seed, brute::brute_force(job_of(seed))).first;
  return it->second;
}

// Each job searched on 1, 2 and 5 threads keeping 1 and 3 plans, computed once.
struct ThreadRuns {
  uint32_t seed;
  int keep;
  SearchResult one, two, five;
};
const std::vector<ThreadRuns>& thread_runs() {
  static const std::vector<ThreadRuns> runs = [] {
    std::vector<ThreadRuns> out;
    for (uint32_t seed = 0; seed < kTrials; ++seed)
      for (int keep : {1, 3}) {
        Job job = job_of(seed);
        job.space.keep = keep;
        ThreadRuns r{.seed = seed, .keep = keep};
        for (auto [threads, result] : {std::pair{1, &r.one}, {2, &r.two}, {5, &r.five}}) {
          job.space.threads = threads;
          *result = search(job.cluster, job.inputs(), job.space);
        }
        out.push_back(std::move(r));
      }
    return out;
  }();
  return runs;
}

TEST(SearchBound, KeepsTheBruteForceFastestPlans) {
  int cut_classes = 0, cut_plans = 0, with_plan = 0;
  for (const ThreadRuns& run : thread_runs()) {
    SCOPED_TRACE(::testing::Message() << describe(job_of(run.seed)) << ", keep " << run.keep);
    const brute::Result& want = want_of(run.seed);
    with_plan += run.keep == 1 && !want.steps.empty();
    for (auto [threads, r] : {std::pair{1, &run.one}, {2, &run.two}, {5, &run.five}}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      EXPECT_EQ(r->classes, want.kept);
      EXPECT_LE(r->classes_expanded, r->classes);
      EXPECT_LE(r->outer_candidates, want.outers);
      EXPECT_LE(r->costed, want.costed);
      EXPECT_EQ(r->optimality_gap, 0);
      ASSERT_EQ(r->best.size(), std::min(size_t(run.keep), want.steps.size()));
      for (size_t i = 0; i < r->best.size(); ++i) {
        EXPECT_NEAR(r->best[i].estimate.step_s, want.steps[i], 1e-12 * want.steps[i])
            << r->best[i].plan.str();
        EXPECT_TRUE(r->best[i].estimate.fits());
      }
      cut_classes += r->classes_expanded < r->classes;
      cut_plans += r->costed < want.costed;
    }
  }
  std::printf(
      "%d of %d jobs with a plan; %d searches left classes unexpanded, %d costed fewer "
      "plans than the brute force\n",
      with_plan, kTrials, cut_classes, cut_plans);
  EXPECT_GE(with_plan, kTrials / 2);
  EXPECT_GE(cut_classes, 10);  // the bound is exercised
  EXPECT_GE(cut_plans, 10);
}

TEST(SearchBound, RankedListIsTheSameOnAnyThreadCount) {
  for (const ThreadRuns& r : thread_runs()) {
    SCOPED_TRACE(::testing::Message() << describe(job_of(r.seed)) << ", keep " << r.keep);
    expect_same_list(r.one, r.two);
    expect_same_list(r.one, r.five);
  }
}

TEST(SearchBound, CountsAreTheSameOnAnyThreadCount) {
  std::string differences;
  for (const ThreadRuns& r : thread_runs()) {
    const Counts one = counts(r.one);
    for (auto [threads, other] : {std::pair{2, &r.two}, {5, &r.five}})
      if (!(counts(*other) == one) && differences.empty())
        differences = (::testing::Message()
                       << describe(job_of(r.seed)) << ", keep " << r.keep << ": 1 thread "
                       << str(one) << "; " << threads << " threads " << str(counts(*other)))
                          .GetString();
  }
  EXPECT_TRUE(differences.empty()) << differences;
}

TEST(SearchBound, NoBudgetIsAHugeBudget) {
  for (uint32_t seed = 0; seed < kTrials; ++seed)
    for (int keep : {1, 3}) {
      Job job = job_of(seed);
      SCOPED_TRACE(::testing::Message() << describe(job) << ", keep " << keep);
      job.space.keep = keep;
      job.space.max_classes = 0;
      const SearchResult none = search(job.cluster, job.inputs(), job.space);
      job.space.max_classes = int64_t(1) << 40;
      const SearchResult huge = search(job.cluster, job.inputs(), job.space);
      expect_same_list(none, huge);
      EXPECT_EQ(counts(none), counts(huge)) << str(counts(none)) << " vs " << str(counts(huge));
      EXPECT_EQ(none.optimality_gap, 0);
      EXPECT_EQ(huge.optimality_gap, 0);
    }
}

TEST(SearchBound, ATinyBudgetReportsATrueGap) {
  int stopped = 0, with_gap = 0, lost = 0, short_of_optimum = 0;
  for (uint32_t seed = 0; seed < kTrials; ++seed) {
    Job job = job_of(seed);
    SCOPED_TRACE(describe(job));
    const brute::Result& want = want_of(seed);
    for (int64_t budget : {1, 2, 5})
      for (int threads : {1, 5}) {
        SCOPED_TRACE(::testing::Message() << "budget " << budget << ", " << threads << " threads");
        job.space.keep = 1, job.space.threads = threads, job.space.max_classes = budget;
        const SearchResult r = search(job.cluster, job.inputs(), job.space);
        EXPECT_GE(r.optimality_gap, 0);
        EXPECT_FALSE(std::isnan(r.optimality_gap));
        if (r.classes_expanded == r.classes) {
          EXPECT_EQ(r.optimality_gap, 0);
        }
        stopped += r.classes_expanded < r.classes;
        with_gap += r.optimality_gap > 0;
        if (r.best.empty()) {
          lost += !want.steps.empty();
          continue;
        }
        ASSERT_FALSE(want.steps.empty());
        const double best = r.best.front().estimate.step_s;
        EXPECT_GE(best, want.optimum * (1 - 1e-12)) << r.best.front().plan.str();
        short_of_optimum += best > want.optimum * (1 + 1e-12);
        EXPECT_LE(best, (1 + r.optimality_gap) * want.optimum * (1 + 1e-12))
            << r.best.front().plan.str() << ": gap " << r.optimality_gap << ", optimum "
            << want.optimum;
      }
  }
  std::printf(
      "%d budget-stopped searches, %d with a gap, %d short of the optimum, %d found no "
      "plan where one exists\n",
      stopped, with_gap, short_of_optimum, lost);
  EXPECT_GE(with_gap, 5);  // the gap is exercised
}

// The first of the plans keep = 3 should return that the search misses, or "" when none.
std::string missed(const Job& job, const brute::Result& want) {
  Job j = job;
  j.space.keep = 3, j.space.threads = 1;
  const SearchResult r = search(j.cluster, j.inputs(), j.space);
  if (r.best.size() != std::min(size_t(3), want.steps.size()))
    return (::testing::Message() << r.best.size() << " plans instead of " << want.steps.size())
        .GetString();
  for (size_t i = 0; i < r.best.size(); ++i)
    if (std::abs(r.best[i].estimate.step_s - want.steps[i]) > 1e-12 * want.steps[i])
      return (::testing::Message()
              << describe(job) << ": plan " << i << " takes " << r.best[i].estimate.step_s << " s ("
              << r.best[i].plan.str() << "), the brute force's " << want.steps[i] << " s")
          .GetString();
  return "";
}

TEST(SearchBound, ZeroBubbleWithSplitBackwardsCheaperThanTheWhole) {
  // Profiles whose input and weight passes add up to less than the backward: ZB-H1 ranks are
  // busy F + I + W per block. Without ZB-H1 the search keeps the brute force's best plans.
  std::string with_zb;
  for (uint32_t seed = 0; seed < kTrials; ++seed) {
    if (seed % 4 >= 2) continue;  // tight bounds only
    Job job = job_of(seed, true);
    std::erase(job.space.schedules, pipeline::ScheduleKind::kZBH1);
    EXPECT_EQ(missed(job, brute::brute_force(job)), "");
    job = job_of(seed, true);
    if (with_zb.empty()) with_zb = missed(job, brute::brute_force(job));
  }
  EXPECT_TRUE(with_zb.empty()) << with_zb;
}

TEST(SearchBound, ABudgetBoundsTheClassesExpanded) {
  std::string over;
  int64_t most = 0;  // the largest overshoot, for the example
  for (uint32_t seed = 0; seed < kTrials; ++seed) {
    Job job = job_of(seed);
    for (int64_t budget : {1, 2, 5}) {
      job.space.keep = 1, job.space.threads = 1, job.space.max_classes = budget;
      const SearchResult r = search(job.cluster, job.inputs(), job.space);
      if (r.classes_expanded - budget > most) {
        most = r.classes_expanded - budget;
        over = (::testing::Message()
                << describe(job) << ": budget " << budget << ", " << r.classes_expanded << " of "
                << r.classes << " classes expanded")
                   .GetString();
      }
    }
  }
  EXPECT_TRUE(over.empty()) << over;
}

}  // namespace
}  // namespace h2::parallel::planner
