// UCP context creation: features, thread sharing and what memory UCX can reach.
#include "comm/transports/ucx/ucx_context.h"

#include <cstdlib>
#include <memory>

#include "comm/transports/ucx/ucx_check.h"

namespace h2::comm {

std::shared_ptr<UcxContext> UcxContext::create(const UcxContextOptions& options) {
  std::shared_ptr<UcxContext> ctx(new UcxContext());
  ucp_config_t* config = nullptr;
  H2_UCX_CHECK(ucp_config_read(nullptr, nullptr, &config));
  std::unique_ptr<ucp_config_t, decltype(&ucp_config_release)> config_guard(config,
                                                                            ucp_config_release);
  if (options.eager) H2_UCX_CHECK(ucp_config_modify(config, "RNDV_THRESH", "inf"));
  if (!options.net_devices.empty())
    H2_UCX_CHECK(ucp_config_modify(config, "NET_DEVICES", options.net_devices.c_str()));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM;
  // Communicators split from one world own one worker each and may run on different threads.
  params.mt_workers_shared = 1;
  H2_UCX_CHECK(ucp_init(&params, config, &ctx->context_));

  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  H2_UCX_CHECK(ucp_context_query(ctx->context_, &attr));
  ctx->reaches_cuda_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  const char* tls = std::getenv("UCX_TLS");
  ctx->transports_ = tls != nullptr && *tls != '\0' ? tls : "all";
  return ctx;
}

UcxContext::~UcxContext() {
  if (context_ != nullptr) ucp_cleanup(context_);
}

}  // namespace h2::comm
