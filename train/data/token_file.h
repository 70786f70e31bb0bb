// Pre-tokenized data, so users can bring data tokenized elsewhere (e.g. GPT-2 BPE, vocab 50257):
// - llm.c's .bin files (dev/data/data_common.py):
//     header: 256 little-endian int32: [0] magic, [1] version, [2] token count, rest 0;
//     body:   token count little-endian tokens: uint16 for GPT-2 (magic 20240520, version 1),
//             uint32 for Llama 3 (magic 20240801, version 7).
// - nanoGPT's train.bin / val.bin (data/*/prepare.py): headerless little-endian uint16 tokens.
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

inline constexpr int32_t kTokenFileMagic = 20240520;  // GPT-2: uint16 tokens
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int32_t kTokenFileMagicU32 = 20240801;  // Llama 3: uint32 tokens
inline constexpr int32_t kTokenFileVersionU32 = 7;
inline constexpr int kTokenFileHeaderInts = 256;
inline constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;
inline constexpr int32_t kTokenFileMaxToken = 65535;

// Reads an llm.c .bin token file (either kind); throws ConfigError if the file cannot be read, is
// shorter than the header, has the wrong magic or version, a negative count, a body of the wrong
// size, or a token id above INT32_MAX.
std::vector<int32_t> read_token_file(const std::string& path);

// Reads a headerless file of little-endian uint16 tokens (nanoGPT); ConfigError for an odd size or
// an llm.c header at its start (that file is data.format bin).
std::vector<int32_t> read_uint16_file(const std::string& path);

// Whether the file starts with an llm.c token file's magic and version (either kind).
bool has_token_file_header(const std::string& path);

// Writes tokens as a version-1 .bin file (replacing path). Throws h2::Error naming the position
// and value of a token outside [0, 65535], or the path if it cannot be written.
void write_token_file(const std::string& path, std::span<const int32_t> tokens);

}  // namespace h2::data
