// Training checkpoints: DIR/step_NNNNNN/ holds one safetensors file per writing rank
// (rank_RRRRR.safetensors, the rows of each tensor that rank owns, under "model/NAME" and
// "optimizer/NAME"), manifest.json (every global tensor, how it is split, each file's checksum;
// see manifest.h) and trainer.json (step, data position, seed, the effective config).
//
// Writing is collective over the ranks that train (a shared filesystem is assumed) and atomic:
// every rank writes into DIR/.tmp_step_NNNNNN/ and flushes its file to the disk; rank 0 then
// writes trainer.json and, last, the manifest, flushes them and renames the folder into place. A
// crash at any point leaves the previous checkpoint as the newest complete one. keep_last prunes
// the oldest. Reading verifies each file's checksum before using it and assembles whole tensors
// (or any rows) whatever the number of ranks that wrote them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/safetensors.h"

namespace h2::checkpoint {

struct TrainerState {
  int64_t step = 0;               // optimizer steps completed
  uint64_t sampler_position = 0;  // micro-batches the training sampler has drawn (all ranks)
  std::string config_yaml;        // the effective config (dump_yaml)
  int world_size = 1;             // ranks of the run that wrote it
  // Which launcher job wrote it: a fingerprint of H2_JOB_TOKEN (its XXH3, never the secret
  // itself), the same across h2run's restarts of one job; empty outside a launcher's job and in
  // checkpoints written before it was kept. A restart resumes only its own job's checkpoints.
  std::string job;
  // Tokens of the training split the sampler drew from; -1 where unknown (older checkpoints,
  // h2 import): a resume on other data is told so.
  int64_t train_tokens = -1;
};

// This rank's part of a global tensor: rows [row_begin, row_end) of dim 0 (of shard_rows), read
// from `local` while the file is written (an empty range when it owns none; then local.write is
// never called).
struct OwnedRows {
  std::string name;
  DType dtype = DType::f32;
  Shape global_shape;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  TensorSource local;
};

struct RankContents {
  std::vector<OwnedRows> model, optimizer;
};

// A tensor's elements (any device, any strides) as stored bytes.
StoredTensor store(const Tensor& tensor);
// Rows [begin, end) of `tensor` (dim 0) as a source read while the file is written (no copy of the
// whole state): a contiguous tensor in host memory straight from its memory, others through a
// staging buffer of at most kStagingBytes. `tensor` must not change until the file is written.
inline constexpr int64_t kStagingBytes = int64_t(16) << 20;
TensorSource rows_source(const Tensor& tensor, int64_t begin, int64_t end);
// Copies `stored` into `tensor` (same shape; dtype converted on tensor's device when they differ).
// Errors name `what` (the checkpoint file) and the tensor.
void load_into(Tensor& tensor, const StoredTensor& stored, const std::string& what);

// Collective over `group` (every rank calls it; nullptr: a single process). Returns the folder.
std::string save_checkpoint(comm::Communicator* group, const std::string& dir,
                            const TrainerState& state, const RankContents& mine, int64_t keep_last);
// The same save in its three phases, for a save that overlaps training (async_save.h):
// begin_save (collective) makes DIR/.tmp_step_NNNNNN and returns it; write_rank_share writes this
// rank's file and its sidecar there (no communication: any thread may run it); finish_save
// (collective, after every rank's write_rank_share) writes trainer.json and the manifest, renames
// the folder into place, prunes to keep_last and returns the folder.
std::string begin_save(comm::Communicator* group, const std::string& dir, int64_t step);
void write_rank_share(const std::string& tmp_dir, int rank, const RankContents& mine);
std::string finish_save(comm::Communicator* group, const std::string& dir,
                        const TrainerState& state, int64_t keep_last);
// A single process writing whole tensors (tools such as `h2 import`).
std::string save_checkpoint(const std::string& dir, const TrainerState& state,
                            const TensorMap& model, const TensorMap& optimizer, int64_t keep_last);

// The newest complete checkpoint folder in `dir`, if any.
std::optional<std::string> latest_checkpoint(const std::string& dir);
// The newest complete checkpoint in `dir` that job `job` wrote (TrainerState::job), if any.
std::optional<std::string> latest_checkpoint_of_job(const std::string& dir, const std::string& job);
TrainerState read_trainer_state(const std::string& checkpoint_dir);

// Reads a checkpoint folder: tensors by name, whole or by rows, each file verified against the
// manifest's checksum when first read (ConfigError naming the file when it does not match).
class CheckpointReader {
 public:
  explicit CheckpointReader(std::string checkpoint_dir);
  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  bool has(Section section, const std::string& name) const;
  // Rows [begin, end) of dim 0; the whole tensor by default.
  StoredTensor read(Section section, const std::string& name, int64_t begin = 0, int64_t end = -1);

 private:
  const TensorMap& file(const std::string& name);
  std::string dir_;
  Manifest manifest_;
  std::map<std::string, TensorMap> files_;  // verified and decoded, by file name
};

// The model's FP32 master weights in a checkpoint folder, as whole tensors under their Hugging
// Face names (however the writing ranks split them). ConfigError names a missing or bad file.
TensorMap read_model_tensors(const std::string& checkpoint_dir);

}  // namespace h2::checkpoint
