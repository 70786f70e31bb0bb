// Fuzzes Hugging Face model folders as `h2 import` and `h2 train` (model loading) read them
// (train/checkpoint/hf_format.h: read_hf_model): config.json (parse_hf_config) and the
// model.safetensors.index.json weight_map that names each tensor's shard. The folder (a scratch
// folder of this process, fuzz/fuzz_common.h) holds valid shards of a tiny Llama (vocab 4, dim 4,
// 1 layer, untied head): model-00001-of-00002.safetensors (f32), model-00002-of-00002.safetensors
// (bf16) and model.safetensors (all of them).
// Input: config.json, a NUL byte, then model.safetensors.index.json; without a NUL, the input is
// the index and config.json is the tiny model's. An empty index part removes the index (the folder
// then reads as one model.safetensors).
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h).
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "train/checkpoint/hf_format.h"
#include "train/checkpoint/safetensors.h"

namespace {

h2::config::ModelConfig tiny_model() {
  h2::config::ModelConfig m;
  m.vocab_size = 4;
  m.dim = 4;
  m.n_layers = 1;
  m.n_heads = 2;
  m.n_kv_heads = 1;
  m.ffn_dim = 4;
  m.seq_len = 8;
  m.tie_embeddings = false;
  return m;
}

h2::checkpoint::StoredTensor tensor(h2::DType dtype, const h2::Shape& shape) {
  h2::checkpoint::StoredTensor t{dtype, shape, {}};
  t.bytes.resize(size_t(h2::dtype_storage_bytes(dtype, shape.numel())));
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = std::byte(i % 7 == 0 ? 0x3f : 0);
  return t;
}

// The folder with the tiny model's shards; config.json and the index come from each input.
const std::string& model_dir() {
  static const std::string dir = [] {
    using namespace h2;
    const std::string d = fuzz::scratch_dir() + "/hf";
    std::filesystem::create_directories(d);
    checkpoint::TensorMap first, second, all;
    size_t i = 0;
    for (const checkpoint::HfTensorSpec& spec : checkpoint::hf_tensor_specs(tiny_model())) {
      const bool in_first = i++ < 5;
      (in_first ? first : second)[spec.name] =
          tensor(in_first ? DType::f32 : DType::bf16, spec.shape);
      all[spec.name] = tensor(DType::f32, spec.shape);
    }
    checkpoint::write_safetensors(d + "/model-00001-of-00002.safetensors", first);
    checkpoint::write_safetensors(d + "/model-00002-of-00002.safetensors", second);
    checkpoint::write_safetensors(d + "/model.safetensors", all);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)model_dir();
  return 0;
}

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2;
  const std::string& dir = model_dir();
  const std::string input(fuzz::text(data, size));
  const size_t nul = input.find('\0');
  static const std::string default_config = checkpoint::hf_config_json(tiny_model(), DType::f32);
  const std::string config = nul == std::string::npos ? default_config : input.substr(0, nul);
  const std::string index = nul == std::string::npos ? input : input.substr(nul + 1);
  fuzz::write_file(dir + "/config.json", config);
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (index.empty())
    std::filesystem::remove(index_path);
  else
    fuzz::write_file(index_path, index);
  try {
    const checkpoint::HfModel model = checkpoint::read_hf_model(dir);
    for (const auto& [name, t] : model.tensors)
      H2_FUZZ_EXPECT(t.dtype == DType::f32 && int64_t(t.bytes.size()) == 4 * t.shape.numel(),
                     "tensor '" + name + "' " + t.shape.str() + " is not f32 of its shape");
  } catch (const Error& e) {
    fuzz::refused(e);
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
