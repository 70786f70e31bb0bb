// The inner level of the search: the layer split (see search.h).
#include <algorithm>
#include <functional>

#include "parallel/planner/search.h"

namespace h2::parallel::planner {

std::optional<std::vector<int>> split_layers(const SplitProblem& pr) {
  const int P = int(pr.block_s.size()), L = pr.layers;
  if (P == 0 || P > L) return std::nullopt;
  struct Entry {
    double max, sum;
    int prev_layers, prev_index, blocks;
  };
  // front[q][l]: Pareto-optimal (max, sum) of the first q positions holding l blocks.
  std::vector<std::vector<std::vector<Entry>>> front(
      size_t(P + 1), std::vector<std::vector<Entry>>(size_t(L + 1)));
  front[0][0].push_back({0, 0, -1, -1, 0});
  for (int q = 0; q < P; ++q)
    for (int l = 0; l <= L; ++l) {
      const auto& here = front[size_t(q)][size_t(l)];
      for (int e = 0; e < int(here.size()); ++e)
        for (int b = 1; b <= pr.max_blocks[size_t(q)] && l + b <= L - (P - q - 1); ++b) {
          const double c = pr.fixed_s[size_t(q)] + double(b) * pr.block_s[size_t(q)];
          const Entry next{std::max(here[size_t(e)].max, c), here[size_t(e)].sum + c, l, e, b};
          auto& there = front[size_t(q + 1)][size_t(l + b)];
          bool dominated = false;
          for (const Entry& x : there)
            dominated = dominated || (x.max <= next.max && x.sum <= next.sum);
          if (dominated) continue;
          std::erase_if(there,
                        [&](const Entry& x) { return next.max <= x.max && next.sum <= x.sum; });
          there.push_back(next);
        }
    }
  const auto& last = front[size_t(P)][size_t(L)];
  if (last.empty()) return std::nullopt;
  const double m1 = double(pr.micro_batches - 1);
  int best = 0;
  for (int e = 1; e < int(last.size()); ++e) {
    const double f = last[size_t(e)].sum + m1 * last[size_t(e)].max;
    const double g = last[size_t(best)].sum + m1 * last[size_t(best)].max;
    if (f < g || (f == g && last[size_t(e)].max < last[size_t(best)].max)) best = e;
  }
  std::vector<int> blocks(static_cast<size_t>(P));
  int l = L, e = best;
  for (int q = P; q > 0; --q) {
    const Entry& x = front[size_t(q)][size_t(l)][size_t(e)];
    blocks[size_t(q - 1)] = x.blocks;
    e = x.prev_index;
    l = x.prev_layers;
  }
  return blocks;
}

std::optional<std::vector<std::vector<int>>> all_splits(const SplitProblem& pr, int64_t limit) {
  const int P = int(pr.max_blocks.size());
  std::vector<std::vector<int>> out;
  if (P == 0 || P > pr.layers) return out;
  for (int b : pr.max_blocks)
    if (b < 1) return out;  // a position that holds no block: no split
  // most[q]: the most blocks positions q.. can hold, so that every branch taken ends in a split.
  std::vector<int64_t> most(size_t(P + 1), 0);
  for (int q = P - 1; q >= 0; --q) most[size_t(q)] = most[size_t(q + 1)] + pr.max_blocks[size_t(q)];
  std::vector<int> blocks(static_cast<size_t>(P), 0);
  bool over = false;
  std::function<void(int, int)> place = [&](int q, int left) {
    if (over) return;
    if (q == P) {
      if (int64_t(out.size()) == limit)
        over = true;
      else
        out.push_back(blocks);
      return;
    }
    for (int b = 1; b <= std::min(left - (P - q - 1), pr.max_blocks[size_t(q)]) && !over; ++b) {
      if (left - b > most[size_t(q + 1)]) continue;  // the rest cannot hold what is left
      blocks[size_t(q)] = b;
      place(q + 1, left - b);
    }
  };
  place(0, pr.layers);
  if (over) return std::nullopt;
  return out;
}

}  // namespace h2::parallel::planner
