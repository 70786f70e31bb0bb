// Runtime: device lookup by spec and the dispatch policy from the environment.
#include "core/runtime.h"

#include <fmt/ranges.h>

#include <charconv>

#include "core/env.h"
#include "core/error.h"

namespace h2 {
namespace {

std::bitset<kOpCount> parse_op_list(std::string_view knob) {
  std::bitset<kOpCount> chosen;
  for (const std::string& name : env_list(knob)) {
    if (name == "all")
      chosen.set();
    else
      chosen.set(size_t(parse_op(name, knob)));
  }
  return chosen;
}

}  // namespace

DispatchPolicy DispatchPolicy::from_env() {
  DispatchPolicy policy;
  policy.fallback = parse_op_list("H2_FALLBACK_OPS");
  policy.check = parse_op_list("H2_CHECK_OPS");
  policy.check_rtol = env_double("H2_CHECK_RTOL", 0, 1);
  return policy;
}

Runtime::Runtime(std::vector<std::unique_ptr<Backend>> backends, DispatchPolicy policy)
    : backends_(std::move(backends)), policy_(std::move(policy)) {
  for (auto& backend : backends_)
    for (int i = 0; i < backend->device_count(); ++i) backend->device(i).attach_runtime(this);
  H2_CHECK(backend("cpu") != nullptr && backend("cpu")->device_count() > 0,
           "a Runtime needs the cpu backend");
  cpu_ = &backend("cpu")->device(0);
}

bool Runtime::first_time(const std::string& key) {
  std::lock_guard lock(seen_mutex_);
  return seen_.insert(key).second;
}

Backend* Runtime::backend(std::string_view name) {
  for (auto& backend : backends_)
    if (backend->name() == name) return backend.get();
  return nullptr;
}

std::vector<Device*> Runtime::devices() {
  std::vector<Device*> all;
  for (auto& backend : backends_)
    for (int i = 0; i < backend->device_count(); ++i) all.push_back(&backend->device(i));
  return all;
}

Device& Runtime::device(std::string_view spec) {
  auto colon = spec.find(':');
  std::string_view kind = spec.substr(0, colon);
  std::string_view rest = colon == std::string_view::npos ? "0" : spec.substr(colon + 1);
  if (Backend* b = backend(kind)) {
    int count = b->device_count();
    bool numeric = !rest.empty() && rest.find_first_not_of("0123456789") == std::string_view::npos;
    if (numeric) {
      int index = -1;
      auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
      if (error == std::errc() && end == rest.data() + rest.size() && index < count)
        return b->device(index);
    } else {
      for (int i = 0; i < count; ++i)
        if (b->device(i).props().name == rest) return b->device(i);
    }
  }
  std::vector<std::string> known;
  for (Device* d : devices()) known.push_back(fmt::format("{} ({})", d->str(), d->props().name));
  H2_THROW(ConfigError, "no device '{}'; devices here: {}", spec, fmt::join(known, ", "));
}

}  // namespace h2
