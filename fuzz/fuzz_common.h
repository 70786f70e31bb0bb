// Shared by the fuzz targets (fuzz/README.md): the input as text or as NUL-separated parts, a
// scratch folder per fuzzing process for parsers that only read paths, and invariant checks.
//
// A finding, in every target: a crash, a sanitizer report (ASan, UBSan; libFuzzer's timeout,
// leak and memory limits), a violated invariant (H2_FUZZ_EXPECT), or an exception other than
// h2::Error. H2 refuses bad input by throwing h2::Error or a subclass (core/error.h:
// ConfigError, UnsupportedError; comm/comm_error.h: CommError); the targets catch exactly that
// and nothing else. Any other exception (std::invalid_argument from std::stoi, YAML:: or
// nlohmann:: exceptions, std::out_of_range, std::bad_alloc) is left uncaught on purpose: no frame
// handles it, so std::terminate runs inside __cxa_throw and libFuzzer's report shows the frame
// that threw.
#pragma once

#include <cxxabi.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

namespace h2::fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The parts of `input` between NUL bytes (one part when there is none). Text formats cannot hold
// a NUL, so it separates, e.g., a YAML document from the --set overrides that follow it.
inline std::vector<std::string_view> split_nul(std::string_view input) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t nul = input.find('\0', start);
    if (nul == std::string_view::npos) {
      parts.push_back(input.substr(start));
      return parts;
    }
    parts.push_back(input.substr(start, nul - start));
    start = nul + 1;
  }
}

// This process's scratch folder, $H2_FUZZ_TMPDIR/h2-fuzz-XXXXXX (tools/fuzz.sh sets the variable
// to a folder of its run) or /dev/shm/h2-fuzz-XXXXXX; removed when the process exits normally.
inline const std::string& scratch_dir() {
  static std::string* dir = [] {
    const char* base = std::getenv("H2_FUZZ_TMPDIR");
    const std::string root = base != nullptr && *base != '\0' ? base : "/dev/shm";
    std::error_code error;
    std::filesystem::create_directories(root, error);
    std::string name = root + "/h2-fuzz-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) {
      std::perror(("h2 fuzz: mkdtemp " + name).c_str());
      std::abort();
    }
    auto* path = new std::string(name);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return path;
  }();
  return *dir;
}

// Writes `bytes` to `path` (replacing it); aborts when it cannot, which is no finding of H2's.
inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out.flush()) {
    std::fprintf(stderr, "h2 fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// What a target returns when H2 refused the input with its own error (the expected outcome for
// most inputs). With H2_FUZZ_VERBOSE=1 it prints the message: run a target on one seed that way to
// see whether the seed is accepted or where it is refused.
inline int refused(const std::exception& e) {
  static const bool verbose = std::getenv("H2_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "h2 fuzz: refused: %s\n", e.what());
  return 0;
}

// Runs a target's body. Normally it only calls `body`: an exception other than h2::Error escapes
// uncaught, with the throwing frame on the stack. For triage, H2_FUZZ_IGNORE=NAME[,NAME...] lets
// fuzzing go on past findings already reported: an exception whose type name contains a NAME
// (e.g. YAML::BadSubscript, nlohmann, std::invalid_argument) then counts as a refusal; any other
// is rethrown (its type and message still reported, its stack no longer).
template <class Body>
int run(Body&& body) {
  static const char* ignore = std::getenv("H2_FUZZ_IGNORE");
  if (ignore == nullptr || *ignore == '\0') return body();
  try {
    return body();
  } catch (...) {
    const std::type_info* type = abi::__cxa_current_exception_type();
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(
        type ? abi::__cxa_demangle(type->name(), nullptr, nullptr, &status) : nullptr, std::free);
    const std::string type_name = name ? name.get() : type ? type->name() : "?";
    const std::string list = std::string(",") + ignore + ",";
    for (size_t start = 1, comma; (comma = list.find(',', start)) != std::string::npos;
         start = comma + 1)
      if (comma > start && type_name.find(list.substr(start, comma - start)) != std::string::npos)
        return 0;
    throw;
  }
}

[[noreturn]] inline void invariant_failed(const char* condition, const char* file, int line,
                                          const std::string& detail) {
  std::fprintf(stderr, "==h2-fuzz== %s:%d: invariant violated: %s\n%s\n", file, line, condition,
               detail.c_str());
  std::abort();
}

}  // namespace h2::fuzz

// H2_FUZZ_EXPECT(cond, detail): a documented invariant of the code under test; aborts (a finding)
// with `detail` (a std::string) when it does not hold.
#define H2_FUZZ_EXPECT(cond, detail)                                                \
  do {                                                                              \
    if (!(cond)) ::h2::fuzz::invariant_failed(#cond, __FILE__, __LINE__, (detail)); \
  } while (0)
