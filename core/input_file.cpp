// Whole small input files, checked first (see input_file.h).
#include "core/input_file.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace h2 {

std::string read_input_file(const std::string& path, std::string_view what, size_t max_bytes) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    H2_THROW(ConfigError, "cannot open {} '{}': {}", what, path, std::strerror(errno));
  if (!S_ISREG(info.st_mode)) H2_THROW(ConfigError, "{} '{}' is not a regular file", what, path);
  if (size_t(info.st_size) > max_bytes)
    H2_THROW(ConfigError, "{} '{}' is {} bytes; such files are at most {} bytes", what, path,
             info.st_size, max_bytes);
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) H2_THROW(ConfigError, "{} '{}': cannot read it", what, path);
  return text.str();
}

}  // namespace h2
