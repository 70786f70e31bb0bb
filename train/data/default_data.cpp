// Default training text: the GPL-3 from Debian's base-files, or a generated deterministic corpus
// (see default_data.h). The generator uses its own integer hash, never <random>, so its bytes are
// the same with every standard library.
#include "train/data/default_data.h"

#include <array>
#include <fstream>
#include <iterator>
#include <string_view>
#include <system_error>

#include "core/error.h"

namespace h2::data {
namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A counter-based stream: pick() returns one of the words, below(n) a number in [0, n).
class Picker {
 public:
  template <size_t N>
  std::string_view pick(const std::array<std::string_view, N>& words) {
    return words[mix64(++counter_ * 0x9E3779B97F4A7C15ull) % N];
  }
  uint64_t below(uint64_t n) { return mix64(++counter_ * 0x9E3779B97F4A7C15ull) % n; }

 private:
  uint64_t counter_ = 0;
};

constexpr std::array<std::string_view, 12> kSubjects = {
    "the king",   "the old miller", "a young queen", "the ship",    "my brother", "the river",
    "the farmer", "a grey wolf",    "the children",  "the soldier", "her mother", "the wind"};
constexpr std::array<std::string_view, 12> kVerbs = {
    "sees",   "carries",  "remembers", "follows", "builds", "finds",
    "breaks", "sings of", "waits for", "crosses", "keeps",  "calls"};
constexpr std::array<std::string_view, 12> kObjects = {
    "the long road",    "a silver cup",     "the dark forest", "the northern hills",
    "an empty house",   "the small boat",   "the cold sea",    "a golden field",
    "the stone bridge", "the evening bell", "a quiet garden",  "the city gate"};
constexpr std::array<std::string_view, 8> kEndings = {
    "", " at dawn",   " in the rain",     " before the winter", " with great care",
    "", " once more", " and says nothing"};

std::string capitalised(std::string_view s) {
  std::string out(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = char(out[0] - 'a' + 'A');
  return out;
}

bool file_holds(const std::filesystem::path& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return have == text;
}

}  // namespace

std::string generate_default_corpus(int64_t bytes) {
  Picker picker;
  std::string text;
  int sentences_in_paragraph = 0;
  while (int64_t(text.size()) < bytes) {
    std::string sentence = capitalised(picker.pick(kSubjects));
    sentence += ' ';
    sentence += picker.pick(kVerbs);
    sentence += ' ';
    sentence += picker.pick(kObjects);
    sentence += picker.pick(kEndings);
    sentence += picker.below(4) == 0 ? "!" : ".";
    text += sentence;
    if (++sentences_in_paragraph >= 4 + int(picker.below(3))) {
      text += "\n\n";
      sentences_in_paragraph = 0;
    } else {
      text += ' ';
    }
  }
  return text;
}

std::string default_text_path(const std::filesystem::path& fallback_dir,
                              const std::filesystem::path& preferred) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(preferred, ec) &&
      std::ifstream(preferred, std::ios::binary).good())
    return preferred.string();

  const std::filesystem::path path = fallback_dir / kGeneratedCorpusName;
  const std::string text = generate_default_corpus();
  if (file_holds(path, text)) return path.string();
  std::filesystem::create_directories(fallback_dir, ec);
  if (ec) H2_THROW(Error, "{}: cannot create folder: {}", fallback_dir.string(), ec.message());
  // Write beside the target and rename, so a concurrent reader never sees a partial file.
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), std::streamsize(text.size()));
    if (!out.flush()) H2_THROW(Error, "{}: cannot write the generated corpus", tmp.string());
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) H2_THROW(Error, "{}: cannot rename to {}: {}", tmp.string(), path.string(), ec.message());
  return path.string();
}

}  // namespace h2::data
