// Profiles: what one chip type does with each kind of model unit (the embedding, one transformer
// block, the head with its loss), measured by `h2 profile` on that chip for several micro-batch
// sizes. HeteroAuto's cost model adds them up per stage instead of guessing from peak FLOP/s.
//
// A profile is valid only for what it was measured with, so its key holds all of it: the chip
// type and its spec (peaks, bandwidths, time scale; not the capacity, which changes no figure), the
// model shape, the compute dtype, the H2 version and what made the figures (measured, or derived
// from a data sheet with stated efficiencies). A profile whose key differs from the one asked
// for is refused, naming the difference (a stale or foreign profile would make every prediction
// silently wrong). Files: one JSON document per chip type (profile_file_name), {"format":
// "h2-profile", ...}.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/dtype.h"

namespace h2::parallel::planner {

// The shape of a decoder-only Llama, as far as costs depend on it.
struct ModelShape {
  int64_t vocab_size = 0, dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, ffn_dim = 0;
  int64_t seq_len = 0;
  bool tie_embeddings = false;
  bool operator==(const ModelShape&) const = default;

  // Parameters of one unit of each kind (the tied head owns none).
  int64_t embedding_parameters() const;
  int64_t block_parameters() const;
  int64_t head_parameters() const;
  int64_t parameters() const;  // the whole model
  // Bytes of one micro-batch row's activation between two units: T x C elements of `dtype`.
  int64_t activation_bytes_per_row(DType dtype) const;
};

enum class UnitKind { embedding = 0, block = 1, head = 2 };
inline constexpr int kUnitKinds = 3;
std::string_view unit_kind_name(UnitKind kind);

// One unit of one kind on one chip for one micro-batch of `rows` sequences. Seconds are the
// chip's (measured, pacing included on virtual chips); bytes are the device allocator's.
struct UnitCost {
  double forward_s = 0;
  double backward_s = 0;    // input and weight gradients together (B)
  double input_s = 0;       // input gradient only (ZB-H1's I)
  double weight_s = 0;      // weight gradient only (ZB-H1's W; 0 for units without linear layers)
  double optimizer_s = 0;   // one AdamW step of the unit's parameters
  int64_t stash_bytes = 0;  // held from the forward to the backward
  int64_t forward_workspace_bytes = 0;  // transient during the forward, above what it keeps
  int64_t workspace_bytes = 0;          // transient during the backward, above the stash
  int64_t deferred_bytes = 0;  // held from the input-gradient pass until the weight gradient
};

// The origin of a profile h2 profile measured (ProfileKey::origin; also what a file written
// before origins were recorded reads as).
inline constexpr const char* kMeasuredOrigin = "measured";

struct ProfileKey {
  std::string chip;       // chip type name
  std::string chip_spec;  // the spec's figures as text (peaks, bandwidths, time scale)
  ModelShape model;
  DType dtype = DType::f32;
  std::string h2_version;
  // kMeasuredOrigin for h2 profile's figures, or what else made them (datasheet_origin states a
  // data-sheet profile's efficiencies): profiles of one setup made otherwise are different
  // profiles.
  std::string origin = kMeasuredOrigin;
  bool operator==(const ProfileKey&) const = default;
  // Why `other` does not match this key ("model.dim 128 vs 256"); empty when it does.
  std::string difference(const ProfileKey& other) const;
};

// The key of a profile of `chip` (with the time scale it runs under) for `model` in `dtype`, made
// as `origin` says.
ProfileKey profile_key(const ChipSpec& chip, double time_scale, const ModelShape& model,
                       DType dtype, std::string origin = kMeasuredOrigin);

struct ChipProfile {
  ProfileKey key;
  // Emulated chips: the share of the modelled time by which the host overran it while measuring
  // (honest emulation needs it below 2%; core/device.h PacingStats). 0 for real chips.
  double overrun_share = 0;
  // By micro-batch rows (measured sizes), each unit kind's cost.
  std::map<int64_t, std::array<UnitCost, kUnitKinds>> by_rows;

  // The cost for `rows` rows: measured, or interpolated linearly between the nearest measured
  // sizes (per row beyond the largest, from the two largest). Error when nothing is measured.
  UnitCost cost(UnitKind kind, int64_t rows) const;
};

std::string to_json(const ChipProfile& profile);
// `source` names the text in errors (a file path).
ChipProfile profile_from_json(const std::string& text, const std::string& source);
// "chip-a.f32.<hash of the key>.json": one file per key in a profile folder.
std::string profile_file_name(const ProfileKey& key);

}  // namespace h2::parallel::planner
