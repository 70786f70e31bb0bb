// ModelState of replicated parameters: AdamW on whole tensors (see model_state.h).
#include <cmath>
#include <map>

#include "core/error.h"
#include "parallel/exact_gather.h"
#include "parallel/runtime/model_state.h"

namespace h2::parallel {
namespace {

std::vector<optim::ParamRef> param_refs(const std::vector<nn::Param*>& params) {
  std::vector<optim::ParamRef> refs;
  for (const nn::Param* p : params) refs.push_back({p->name, p->value, p->grad});
  return refs;
}

class ReplicatedState final : public ModelState {
 public:
  ReplicatedState(std::vector<nn::Param*> params, std::vector<std::string> model_order,
                  optim::AdamwOptions options, StateOwnership ownership)
      : adamw_(param_refs(params), options),
        order_(std::move(model_order)),
        own_(std::move(ownership)) {
    for (size_t i = 0; i < order_.size(); ++i) index_[order_[i]] = i;
  }

  void zero_grad() override { adamw_.zero_grad(); }

  // Each parameter's sum of squares from replica 0's rank that counts it, added in the model's
  // order like one process adds them.
  double grad_norm() override {
    const size_t n = order_.size();
    std::vector<double> mine(2 * n, 0.0);  // sums, then "counted here" flags
    const std::vector<double> sums = adamw_.grad_sum_squares();
    for (size_t i = 0; i < sums.size(); ++i) {
      const std::string& name = adamw_.params()[i].name;
      if (own_.replica != 0 || !own_.counts(name)) continue;
      mine[index_.at(name)] = sums[i];
      mine[n + index_.at(name)] = 1;
    }
    const auto gathered = own_.job->size() == 1 ? std::vector<std::vector<double>>{mine}
                                                : gather_doubles(*own_.job, *own_.host, mine);
    double total = 0;
    for (size_t i = 0; i < n; ++i)
      for (const auto& from : gathered)
        if (from[n + i] == 1) total += from[i];
    return std::sqrt(total);
  }

  void step(double lr, double grad_scale) override { adamw_.step(lr, grad_scale); }

  std::vector<StatePiece> pieces() override {
    std::vector<StatePiece> out;
    for (size_t i = 0; i < adamw_.params().size(); ++i) {
      const optim::AdamW::State& s = adamw_.state()[i];
      const std::string& name = adamw_.params()[i].name;
      const bool writes = own_.counts(name);
      out.push_back(
          {name, s.master, s.m, s.v, writes ? own_.replica : 0, writes ? own_.replicas : 0});
    }
    return out;
  }

  void load(StateReader& reader, int64_t steps) override {
    const bool moments = reader.has_moments();
    for (size_t i = 0; i < adamw_.params().size(); ++i) {
      optim::AdamW::State& s = adamw_.state()[i];
      const std::string& name = adamw_.params()[i].name;
      reader.read(StateKind::master, name, s.master);
      if (!moments) continue;
      reader.read(StateKind::m, name, s.m);
      reader.read(StateKind::v, name, s.v);
    }
    adamw_.sync_params_from_masters();
    adamw_.restore_steps(steps);
  }

 private:
  optim::AdamW adamw_;
  std::vector<std::string> order_;  // every parameter of the model
  std::map<std::string, size_t> index_;
  StateOwnership own_;
};

}  // namespace

std::unique_ptr<ModelState> ModelState::replicated(std::vector<nn::Param*> params,
                                                   std::vector<std::string> model_order,
                                                   optim::AdamwOptions options,
                                                   StateOwnership ownership) {
  H2_CHECK(ownership.job != nullptr && ownership.host != nullptr && ownership.counts,
           "replicated state without ownership");
  return std::make_unique<ReplicatedState>(std::move(params), std::move(model_order), options,
                                           std::move(ownership));
}

}  // namespace h2::parallel
