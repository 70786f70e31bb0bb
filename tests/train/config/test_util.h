// Helpers shared by the config tests: a temporary directory (RAII) and "expect a ConfigError whose
// message contains every fragment".
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>

#include "core/error.h"

namespace h2::config::test {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("h2_config_test_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to NAME inside the directory and returns the full path.
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = (path_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs f, expecting ConfigError with every fragment in its message.
template <typename F>
void expect_config_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "no ConfigError thrown; expected one containing '" << *fragments.begin()
                  << "'";
  } catch (const ConfigError& e) {
    std::string message = e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message: " << message << "\nmissing: " << fragment;
  }
}

}  // namespace h2::config::test
