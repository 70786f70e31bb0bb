// The private token file of one-node jobs: rank 0's file is 0600 in a 0700 folder of this user,
// named by launcher and job id; a folder others can enter is refused; a rank that finds an earlier
// job's token is refused by the store and connects once rank 0 has replaced it.
#include "comm/bootstrap/local_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "comm/bootstrap/store_server.h"
#include "comm/comm_error.h"
#include "core/error.h"

namespace h2::comm {
namespace {

namespace fs = std::filesystem;

// Points XDG_RUNTIME_DIR at a fresh folder of this test's own (CTest runs the cases at once).
class RuntimeDir {
 public:
  RuntimeDir()
      : path_(fs::temp_directory_path() /
              ("h2_local_token_" +
               std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    ::setenv("XDG_RUNTIME_DIR", path_.c_str(), 1);
  }
  ~RuntimeDir() {
    ::unsetenv("XDG_RUNTIME_DIR");
    fs::remove_all(path_);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

RankInfo job(int rank, const std::string& id) {
  return RankInfo{.rank = rank,
                  .size = 2,
                  .local_rank = rank,
                  .local_size = 2,
                  .launcher = "openmpi",
                  .job_id = id};
}

TEST(LocalToken, RankZeroWritesAPrivateFileNamedByTheJobAndItsStore) {
  RuntimeDir runtime;
  const std::string token = publish_local_token(job(0, "1234@5"), 29501);
  EXPECT_EQ(token.size(), 32u);
  const std::string path = local_token_path(job(1, "1234@5"), 29501);
  EXPECT_EQ(path, (runtime.path() / "h2" / "openmpi-1234_5-29501.token").string());
  std::string read;
  std::getline(std::ifstream(path), read);
  EXPECT_EQ(read, token);
  struct stat file {
  }, dir{};
  ASSERT_EQ(::stat(path.c_str(), &file), 0);
  ASSERT_EQ(::stat((runtime.path() / "h2").c_str(), &dir), 0);
  EXPECT_EQ(file.st_mode & 0777, 0600u);
  EXPECT_EQ(dir.st_mode & 0777, 0700u);
  EXPECT_NE(local_token_path(job(0, "other"), 29501), path);
  // Two jobs of one id (torchrun's "none"), each with its own store, keep their own files.
  EXPECT_NE(local_token_path(job(0, "1234@5"), 29601), path);
  // Rank 0 removes its file once the ranks joined, but not a later job's that replaced it.
  RankInfo owner = job(0, "1234@5");
  owner.token = token;
  const std::string replacing = publish_local_token(job(0, "1234@5"), 29501);
  EXPECT_NE(replacing, token) << "each job gets a fresh token";
  remove_local_token(owner, 29501);
  EXPECT_TRUE(fs::exists(path)) << "removed the token of the job that replaced it";
  owner.token = replacing;
  remove_local_token(owner, 29501);
  EXPECT_FALSE(fs::exists(path));
}

TEST(LocalToken, AFolderOthersCanEnterIsRefused) {
  RuntimeDir runtime;
  fs::create_directories(runtime.path() / "h2");
  fs::permissions(runtime.path() / "h2",
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  try {
    publish_local_token(job(0, "7"), 29501);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("only this user can enter"), std::string::npos)
        << e.what();
  }
}

TEST(LocalToken, AStaleTokenIsReadAgainUntilTheStoreTakesIt) {
  RuntimeDir runtime;
  const RankInfo zero = job(0, "42");
  // Rank 0 serves with its own token but has not written it yet; an earlier job of that id and
  // port left its file.
  const std::string fresh = "0123456789abcdef0123456789abcdef";
  StoreServer server("127.0.0.1", 0, fresh);
  std::ofstream(local_token_path(zero, server.port())) << "an-earlier-jobs-token\n";
  std::thread rank_zero([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(local_token_path(zero, server.port())) << fresh << "\n";
  });
  RankInfo one = job(1, "42");
  auto client = connect_with_local_token(one, "127.0.0.1", server.port(), Millis(10000));
  rank_zero.join();
  EXPECT_EQ(one.token, fresh);
  client->set("key", "value");
  EXPECT_EQ(client->get("key", Millis(1000)), "value");
}

TEST(LocalToken, NoFileEndsInAnErrorThatSaysWhatToSet) {
  RuntimeDir runtime;
  StoreServer server("127.0.0.1", 0, "secret");
  RankInfo one = job(1, "none-written");
  try {
    connect_with_local_token(one, "127.0.0.1", server.port(), Millis(200));
    FAIL() << "no CommError";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("H2_JOB_TOKEN"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace h2::comm
