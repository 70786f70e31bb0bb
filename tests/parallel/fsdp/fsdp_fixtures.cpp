// Fixtures for the FSDP tests (see fsdp_fixtures.h).
#include "fsdp_fixtures.h"

#include <cmath>
#include <cstring>

#include "core/tensor_host.h"

namespace h2::parallel::fsdp::testing {

std::vector<models::Param*> ParamSet::pointers() {
  std::vector<models::Param*> out;
  if (block) {
    block->collect(out);
    return out;
  }
  for (models::Param& p : params) out.push_back(&p);
  return out;
}

int64_t ParamSet::numel() {
  int64_t n = 0;
  for (models::Param* p : pointers()) n += p->value.numel();
  return n;
}

std::vector<std::string> param_set_names() {
  return {"divisible", "odd", "tiny", "block"};
}

ParamSet make_param_set(const std::string& name, DType dtype, Device& device, uint64_t seed) {
  ParamSet set;
  set.name = name;
  std::vector<std::pair<std::string, Shape>> shapes;
  if (name == "divisible") {
    shapes = {{"a.weight", {4, 6}}, {"a.norm.weight", {6}}, {"b.weight", {3, 2}}};
  } else if (name == "odd") {
    shapes = {{"c.norm.weight", {5}}, {"c.weight", {5, 5}}, {"d.bias", {7}}};
  } else if (name == "tiny") {
    shapes = {{"e.norm.weight", {2}}};
  } else if (name == "block") {
    models::LlamaConfig cfg;
    cfg.vocab_size = 16;
    cfg.dim = 8;
    cfg.n_layers = 1;
    cfg.n_heads = 2;
    cfg.n_kv_heads = 1;
    cfg.ffn_dim = 12;
    cfg.seq_len = 8;
    set.block = std::make_unique<models::BlockUnit>(0, cfg, seed, dtype, device, false);
    return set;
  } else {
    H2_THROW(Error, "unknown parameter set '{}'", name);
  }
  for (auto& [pname, shape] : shapes)
    set.params.push_back(
        models::make_param(pname, shape, models::Init::normal, 0.5f, seed, dtype, device));
  return set;
}

float grad_value(int rank, int step, int64_t i) {
  return float((i * 7 + rank * 13 + step * 5) % 17 - 8) / 16.0f;
}

void write_grads(const std::vector<models::Param*>& params, int rank, int step, int64_t salt,
                 bool accumulate) {
  int64_t offset = salt;
  for (models::Param* p : params) {
    H2_CHECK(p->grad.defined(), "'{}' has no grad to write", p->name);
    std::vector<float> host(size_t(p->grad.numel()));
    for (size_t i = 0; i < host.size(); ++i) host[i] = grad_value(rank, step, offset + int64_t(i));
    Tensor g = tensor_from_floats(host, p->grad.shape(), DType::f32, p->grad.device());
    if (accumulate)
      models::accumulate_into(p->grad, g);
    else
      p->grad.copy_from(g);
    offset += p->grad.numel();
  }
}

std::vector<float> summed_grads(int64_t n, int ranks, int step, int64_t salt) {
  std::vector<float> out(size_t(n), 0.0f);
  for (int r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] += grad_value(r, step, salt + i);
  return out;
}

std::vector<float> flat_values(const std::vector<models::Param*>& params) {
  std::vector<float> out;
  for (const models::Param* p : params) {
    H2_CHECK(p->value.defined(), "'{}' has no value", p->name);
    std::vector<float> v = tensor_to_floats(p->value);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  H2_CHECK(got.size() == want.size(), "{}: {} elements, expected {}", what, got.size(),
           want.size());
  for (size_t i = 0; i < got.size(); ++i)
    H2_CHECK(std::memcmp(&got[i], &want[i], sizeof(float)) == 0,
             "{}: element {} is {} but expected {} (bit exact)", what, i, got[i], want[i]);
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                  double atol, const std::string& what) {
  H2_CHECK(got.size() == want.size(), "{}: {} elements, expected {}", what, got.size(),
           want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(double(got[i]) - double(want[i]));
    H2_CHECK(diff <= rtol * std::fabs(double(want[i])) + atol,
             "{}: element {} is {:.9g} but expected {:.9g} (difference {:.3g}, rtol {})", what, i,
             got[i], want[i], diff, rtol);
  }
}

}  // namespace h2::parallel::fsdp::testing
