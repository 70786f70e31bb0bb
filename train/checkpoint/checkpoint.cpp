// Checkpoint folders (see checkpoint.h).
#include "train/checkpoint/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"

namespace h2::checkpoint {
namespace fs = std::filesystem;
namespace {

std::vector<fs::path> checkpoints_in(const std::string& dir) {
  std::vector<fs::path> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.starts_with("step_") &&
        fs::exists(entry.path() / "trainer.json"))
      found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());  // step_NNNNNN sorts by step
  return found;
}

}  // namespace

StoredTensor store(const Tensor& tensor) {
  Tensor dense = tensor.contiguous();
  StoredTensor s{dense.dtype(), dense.shape(), std::vector<std::byte>(size_t(dense.nbytes()))};
  dense.device().copy_bytes(s.bytes.data(), false, dense.data(), true, s.bytes.size(),
                            dense.device().default_stream());
  return s;
}

void load_into(Tensor& tensor, const StoredTensor& stored, const std::string& what) {
  if (!(stored.shape == tensor.shape()))
    H2_THROW(ConfigError, "{}: tensor is {} but the model expects {}", what, stored.shape.str(),
             tensor.shape().str());
  Device& device = tensor.device();
  Tensor staged = Tensor::empty(stored.shape, stored.dtype, device);
  device.copy_bytes(staged.data(), true, stored.bytes.data(), false, stored.bytes.size(),
                    device.default_stream());
  tensor.copy_from(staged);
}

std::string save_checkpoint(const std::string& dir, const TrainerState& state,
                            const TensorMap& model, const TensorMap& optimizer, int64_t keep_last) {
  fs::create_directories(dir);
  fs::path final_dir = fs::path(dir) / fmt::format("step_{:06}", state.step);
  fs::path tmp = fs::path(dir) / fmt::format(".tmp_step_{:06}", state.step);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  write_safetensors((tmp / "model.safetensors").string(), model);
  write_safetensors((tmp / "optimizer.safetensors").string(), optimizer);
  {
    std::ofstream out(tmp / "trainer.json");
    out << nlohmann::json{{"step", state.step},
                          {"sampler_position", state.sampler_position},
                          {"config_yaml", state.config_yaml}}
               .dump(2)
        << '\n';
    if (!out) H2_THROW(Error, "writing {} failed (disk full?)", (tmp / "trainer.json").string());
  }
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);
  if (keep_last > 0) {
    auto all = checkpoints_in(dir);
    for (size_t i = 0; i + size_t(keep_last) < all.size(); ++i) fs::remove_all(all[i]);
  }
  return final_dir.string();
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  auto all = checkpoints_in(dir);
  if (all.empty()) return std::nullopt;
  return all.back().string();
}

TrainerState read_trainer_state(const std::string& checkpoint_dir) {
  std::string path = (fs::path(checkpoint_dir) / "trainer.json").string();
  std::ifstream in(path);
  if (!in) H2_THROW(ConfigError, "cannot open '{}': not an h2 checkpoint folder", path);
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    return {j.at("step").get<int64_t>(), j.at("sampler_position").get<uint64_t>(),
            j.at("config_yaml").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: malformed trainer state: {}", path, e.what());
  }
}

TensorMap read_model_tensors(const std::string& checkpoint_dir) {
  return read_safetensors((fs::path(checkpoint_dir) / "model.safetensors").string());
}

}  // namespace h2::checkpoint
