// FlatParamGroup: flattening, sharding, all-gather of parameters and reduce-scatter of gradients
// (see flat_param.h).
#include "parallel/fsdp/flat_param.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "core/runtime.h"
#include "core/tensor_host.h"

namespace h2::parallel::fsdp {
namespace {

// FNV-1a over the layout (names, shapes) and the compute dtype: equal on every rank that built
// the same unit.
int64_t layout_hash(const std::vector<FlatSlot>& layout, DType dtype) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t x) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((x >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  };
  mix(uint64_t(dtype));
  for (const FlatSlot& s : layout) {
    for (unsigned char c : s.name) mix(c);
    mix(uint64_t(s.shape.rank()));
    for (int64_t d : s.shape) mix(uint64_t(d));
  }
  return int64_t(h);
}

// Tests every request once and drops the finished; true when none is left.
bool drop_finished(std::vector<std::unique_ptr<comm::Request>>& requests) {
  std::erase_if(requests, [](const auto& request) { return request->test(); });
  return requests.empty();
}

void wait_all(std::vector<std::unique_ptr<comm::Request>>& requests) {
  for (auto& request : requests) request->wait();
  requests.clear();
}

// The flat elements of a Param's tensor (contiguous copy when it is a strided view).
Tensor flat_view(const Tensor& t) {
  return t.contiguous().view({t.numel()});
}

}  // namespace

FlatParamGroup::FlatParamGroup(comm::Communicator& group, nn::Unit& unit)
    : FlatParamGroup(group, nn::params_of(unit)) {}

FlatParamGroup::FlatParamGroup(comm::Communicator& group, std::vector<nn::Param*> params)
    : group_(&group), rank_(group.rank()), group_size_(group.size()), params_(std::move(params)) {
  H2_CHECK(!params_.empty(), "FlatParamGroup: a unit needs at least one parameter");
  for (size_t i = 0; i < params_.size(); ++i) {
    const nn::Param* p = params_[i];
    H2_CHECK(p != nullptr, "FlatParamGroup: parameter {} is null", i);
    H2_CHECK(std::find(params_.begin(), params_.begin() + i, p) == params_.begin() + i,
             "FlatParamGroup: parameter '{}' is listed twice", p->name);
    H2_CHECK(p->value.defined(),
             "FlatParamGroup: parameter '{}' has no value (already owned by another group?)",
             p->name);
  }
  const nn::Param& first = *params_.front();
  dtype_ = first.value.dtype();
  device_ = &first.value.device();
  H2_CHECK(dtype_ == DType::f32 || dtype_ == DType::bf16 || dtype_ == DType::f16,
           "FlatParamGroup: parameter '{}' has compute dtype {}; FSDP supports f32, bf16, f16",
           first.name, dtype_name(dtype_));
  for (const nn::Param* p : params_) {
    H2_CHECK(p->value.dtype() == dtype_, "FlatParamGroup: '{}' is {} but '{}' is {}", p->name,
             dtype_name(p->value.dtype()), first.name, dtype_name(dtype_));
    H2_CHECK(&p->value.device() == device_, "FlatParamGroup: '{}' is on {} but '{}' is on {}",
             p->name, p->value.device().str(), first.name, device_->str());
    layout_.push_back({p->name, p->value.shape(), numel_, p->value.numel()});
    numel_ += p->value.numel();
  }
  label_ = params_.size() == 1 ? first.name
                               : fmt::format("{} (+{} more)", first.name, params_.size() - 1);
  shard_numel_ = (numel_ + group_size_ - 1) / group_size_;
  check_layout_agrees();

  // This rank's shard of the flat vector: the overlap of [lo, hi) with every parameter.
  master_ = Tensor::zeros({shard_numel_}, DType::f32, *device_);
  grad_shard_ = Tensor::zeros({shard_numel_}, DType::f32, *device_);
  const int64_t lo = shard_offset(), hi = lo + shard_numel_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const FlatSlot& s = layout_[i];
    const int64_t a = std::max(lo, s.offset), b = std::min(hi, s.offset + s.numel);
    if (a >= b) continue;
    master_.slice(0, a - lo, b - lo)
        .copy_from(flat_view(params_[i]->value).slice(0, a - s.offset, b - s.offset));
  }
  for (nn::Param* p : params_) {
    p->value = Tensor();
    p->grad = Tensor();
  }
}

void FlatParamGroup::check_layout_agrees() {
  Device& cpu = device_->runtime().cpu();
  const std::array<int64_t, 2> mine{numel_, layout_hash(layout_, dtype_)};
  Tensor in = tensor_from_ints(mine, {2}, DType::i64, cpu);
  Tensor out = Tensor::empty({2 * int64_t(group_size_)}, DType::i64, cpu);
  group_->all_gather(out, in);
  const std::vector<int64_t> all = tensor_to_ints(out);
  for (int r = 0; r < group_size_; ++r) {
    H2_CHECK(all[size_t(2 * r)] == numel_,
             "FlatParamGroup '{}': rank {} has {} parameter elements but rank {} has {} (every "
             "rank of the group must build the same unit)",
             label_, rank_, numel_, r, all[size_t(2 * r)]);
    H2_CHECK(all[size_t(2 * r + 1)] == mine[1],
             "FlatParamGroup '{}': rank {} has other parameter names, shapes or dtype than rank "
             "{} (layout hash {:016x} vs {:016x})",
             label_, rank_, r, uint64_t(mine[1]), uint64_t(all[size_t(2 * r + 1)]));
  }
}

Tensor FlatParamGroup::rounded_master() const {
  // Round to the compute dtype first, so the gather moves compute-dtype bytes.
  return dtype_ == DType::f32 ? master_ : master_.to(dtype_);
}

void FlatParamGroup::use_full(Tensor full) {
  full_ = std::move(full);
  for (size_t i = 0; i < params_.size(); ++i) {
    const FlatSlot& s = layout_[i];
    params_[i]->value = full_.slice(0, s.offset, s.offset + s.numel).view(s.shape);
  }
}

void FlatParamGroup::unshard() {
  if (gathering_.defined()) return finish_unshard();
  if (!full_.defined()) {
    Tensor full = Tensor::empty({padded_numel()}, dtype_, *device_);
    group_->all_gather(full, rounded_master());
    use_full(std::move(full));
  }
  if (!full_grad_.defined()) allocate_full_grads();
}

template <class RecvInto, class SendFrom>
void FlatParamGroup::post_exchange(int tag, const RecvInto& recv_into, const SendFrom& send_from,
                                   std::vector<std::unique_ptr<comm::Request>>& requests) {
  for (int r = 0; r < group_size_; ++r) {
    if (r == rank_) continue;
    requests.push_back(group_->irecv(recv_into(r), r, tag));
    requests.push_back(group_->isend(send_from(r), r, tag));
  }
}

void FlatParamGroup::begin_unshard(int tag) {
  if (full_.defined() || gathering_.defined()) return;
  gather_source_ = rounded_master();
  gathering_ = Tensor::empty({padded_numel()}, dtype_, *device_);
  ops::copy({.out = gathering_.slice(0, shard_offset(), shard_offset() + shard_numel_),
             .in = gather_source_});
  post_exchange(
      tag, [&](int r) { return gathering_.slice(0, r * shard_numel_, (r + 1) * shard_numel_); },
      [&](int) { return gather_source_; }, gather_requests_);
}

bool FlatParamGroup::poll_unshard() {
  return drop_finished(gather_requests_);
}

void FlatParamGroup::finish_unshard() {
  if (gathering_.defined()) {
    wait_all(gather_requests_);
    use_full(std::move(gathering_));
    gathering_ = Tensor();
    gather_source_ = Tensor();
  }
  if (full_.defined() && !full_grad_.defined()) allocate_full_grads();
}

void FlatParamGroup::reshard() {
  if (gathering_.defined()) finish_unshard();
  for (nn::Param* p : params_) p->value = Tensor();
  full_ = Tensor();
}

void FlatParamGroup::allocate_full_grads() {
  full_grad_ = Tensor::zeros({padded_numel()}, DType::f32, *device_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const FlatSlot& s = layout_[i];
    params_[i]->grad = full_grad_.slice(0, s.offset, s.offset + s.numel).view(s.shape);
  }
}

void FlatParamGroup::release_full_grads() {
  for (nn::Param* p : params_) p->grad = Tensor();
  full_grad_ = Tensor();
}

void FlatParamGroup::check_full_grads() const {
  H2_CHECK(full_grad_.defined(),
           "FlatParamGroup '{}': reduce_grad() without full gradients (unshard() was not called "
           "since the last reduce_grad())",
           label_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const FlatSlot& s = layout_[i];
    const nn::Param& p = *params_[i];
    // A grad replaced behind the group's back would be silently ignored by the reduction.
    H2_CHECK(p.grad.defined() && p.grad.data() == full_grad_.data_as<float>() + s.offset &&
                 p.grad.shape() == s.shape,
             "FlatParamGroup '{}': the grad of '{}' is no longer a view of the group's flat "
             "gradient (it was reassigned)",
             label_, p.name);
  }
}

void FlatParamGroup::take_reduced(const Tensor& reduced, double scale, bool accumulate) {
  if (reduced.data() != grad_shard_.data())  // reduced straight into the shard otherwise
    ops::add({.out = grad_shard_,
              .a = reduced,
              .b = accumulate ? grad_shard_ : Tensor(),
              .alpha = float(scale),
              .beta = 1.0f});
  release_full_grads();
}

Tensor FlatParamGroup::reduce_target(double scale, bool accumulate) const {
  const bool direct = scale == 1.0 && !accumulate;
  return direct ? grad_shard_ : Tensor::empty({shard_numel_}, DType::f32, *device_);
}

void FlatParamGroup::reduce_grad(double scale, bool accumulate) {
  if (reducing_.defined()) return finish_reduce_grad(scale, accumulate);
  check_full_grads();
  Tensor reduced = reduce_target(scale, accumulate);
  group_->reduce_scatter(reduced, full_grad_, comm::ReduceOp::sum);
  take_reduced(reduced, scale, accumulate);
}

Tensor FlatParamGroup::received_block(int q) const {
  const int64_t slot = q < rank_ ? q : q - 1;  // this rank's own block is not received
  return reducing_.slice(0, slot * shard_numel_, (slot + 1) * shard_numel_);
}

void FlatParamGroup::begin_reduce_grad(int tag) {
  if (reducing_.defined()) return;
  check_full_grads();
  reducing_ =
      Tensor::empty({std::max<int64_t>(group_size_ - 1, 1) * shard_numel_}, DType::f32, *device_);
  post_exchange(
      tag, [&](int q) { return received_block(q); },
      [&](int r) { return full_grad_.slice(0, r * shard_numel_, (r + 1) * shard_numel_); },
      reduce_requests_);
}

bool FlatParamGroup::poll_reduce_grad() {
  return drop_finished(reduce_requests_);
}

void FlatParamGroup::finish_reduce_grad(double scale, bool accumulate) {
  if (!reducing_.defined()) return reduce_grad(scale, accumulate);
  wait_all(reduce_requests_);
  auto block = [&](int q) {
    if (q == rank_) return full_grad_.slice(0, shard_offset(), shard_offset() + shard_numel_);
    return received_block(q);
  };
  // The ring's order: the partial sum starts at rank r + 1 and every later rank adds its block,
  // this rank's last (a + b == b + a exactly, so only the order of the additions matters).
  Tensor sum = reduce_target(scale, accumulate);
  ops::copy({.out = sum, .in = block((rank_ + 1) % group_size_)});
  for (int k = 2; k <= group_size_; ++k)
    ops::add({.out = sum, .a = sum, .b = block((rank_ + k) % group_size_)});
  reducing_ = Tensor();
  take_reduced(sum, scale, accumulate);
}

void FlatParamGroup::zero_grad_shard() {
  ops::fill({.out = grad_shard_, .value = 0.0});
}

}  // namespace h2::parallel::fsdp
