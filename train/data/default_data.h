// Default training text for the README's main job, available on a fresh machine with no network
// and no ../shared checkout.
//
// Choice: /usr/share/common-licenses/GPL-3 (35 KB of English prose). It ships in Debian's
// base-files package, which is Essential (every Debian 12 system has it, including the minimal
// container images), and its text is stable across releases, so runs are comparable. Where it is
// absent (another distribution, a trimmed image), default_text_path() writes a generated corpus
// instead: deterministic (same bytes on every machine and run, no randomness from the platform),
// English-like sentences from a small fixed grammar, so the loss still falls visibly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace h2::data {

inline constexpr const char* kDefaultTextPath = "/usr/share/common-licenses/GPL-3";
inline constexpr const char* kGeneratedCorpusName = "h2_default_corpus.txt";

// `preferred` (normally kDefaultTextPath) if it is a readable file; otherwise generates the corpus
// into fallback_dir / kGeneratedCorpusName (creating the folder; reusing an identical existing
// file) and returns that path. Throws h2::Error naming the path if it cannot be written.
std::string default_text_path(const std::filesystem::path& fallback_dir,
                              const std::filesystem::path& preferred = kDefaultTextPath);

// The generated corpus: about `bytes` bytes (whole sentences), identical on every platform.
std::string generate_default_corpus(int64_t bytes = 64 * 1024);

}  // namespace h2::data
