// The pre-tokenized .bin format of llm.c / nanoGPT-style pipelines, so users can bring data
// tokenized elsewhere (e.g. GPT-2 BPE, vocab 50257):
//   header: 256 little-endian int32: [0] magic 20240520, [1] version 1, [2] token count, rest 0;
//   body:   token count little-endian uint16 tokens.
// The reader reads the whole file into memory (no mmap): the trainer wants int32 ids anyway, so a
// map would still need a converted copy, and reading keeps the error paths simple and portable.
// Invariant: a file read successfully holds exactly the declared count of tokens, each in
// [0, 65535]. Errors are h2::ConfigError (bad user input) naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace h2::data {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;  // uint16 tokens
inline constexpr int kTokenFileHeaderInts = 256;
inline constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;
inline constexpr int32_t kTokenFileMaxToken = 65535;

// Reads a .bin token file; throws ConfigError if the file cannot be read, is shorter than the
// header, has the wrong magic or version, a negative count, or a body of the wrong size.
std::vector<int32_t> read_token_file(const std::string& path);

// Writes tokens as a version-1 .bin file (replacing path). Throws h2::Error naming the position
// and value of a token outside [0, 65535], or the path if it cannot be written.
void write_token_file(const std::string& path, std::span<const int32_t> tokens);

}  // namespace h2::data
