// The private token file of one-node jobs (see local_token.h).
#include "comm/bootstrap/local_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "comm/comm_error.h"
#include "core/error.h"

namespace h2::comm {
namespace {

using Clock = std::chrono::steady_clock;

// $XDG_RUNTIME_DIR/h2 or /tmp/h2-UID, created 0700; refused unless it is a real folder that this
// user owns and nobody else can enter.
std::string private_dir() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::string dir = runtime != nullptr && *runtime != '\0'
                              ? std::string(runtime) + "/h2"
                              : fmt::format("/tmp/h2-{}", ::getuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    H2_THROW(ConfigError, "cannot create {} for the job's token: {} (or set H2_JOB_TOKEN)", dir,
             std::strerror(errno));
  struct stat info {};
  if (::lstat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::getuid() ||
      (info.st_mode & 077) != 0)
    H2_THROW(ConfigError,
             "{} is not a folder that only this user can enter (mode 0700, owned by uid {}): "
             "refusing to keep the job's token there; remove it or set H2_JOB_TOKEN",
             dir, ::getuid());
  return dir;
}

std::string file_name_part(const std::string& text) {
  std::string out;
  for (char c : text) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  return token;
}

}  // namespace

std::string local_token_path(const RankInfo& info, int port) {
  return fmt::format("{}/{}-{}-{}.token", private_dir(), file_name_part(info.launcher),
                     file_name_part(info.job_id), port);
}

std::string publish_local_token(const RankInfo& info, int port) {
  const std::string path = local_token_path(info, port);
  const std::string token = random_token();
  const std::string temp = fmt::format("{}.{}.tmp", path, ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) H2_THROW(Error, "cannot write {}: {}", temp, std::strerror(errno));
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == ssize_t(line.size());
  ::close(fd);
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    H2_THROW(Error, "cannot write the job's token to {}: {}", path, std::strerror(errno));
  }
  return token;
}

void remove_local_token(const RankInfo& info, int port) {
  const std::string path = local_token_path(info, port);
  if (read_token(path) == info.token) std::remove(path.c_str());
}

std::unique_ptr<StoreClient> connect_with_local_token(RankInfo& info, const std::string& host,
                                                      int port, Millis timeout) {
  const std::string path = local_token_path(info, port);
  const auto deadline = Clock::now() + timeout;
  std::string last = "the file did not appear";
  while (Clock::now() < deadline) {
    const std::string token = read_token(path);
    if (!token.empty()) {
      try {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        auto client = std::make_unique<StoreClient>(host, port, token, std::max(left, Millis(1)));
        info.token = token;
        return client;
      } catch (const AuthError& e) {  // an earlier job's file, not yet replaced by rank 0
        last = e.what();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  H2_THROW(CommError,
           "rank {}: no usable job token in {} after {} ms ({}); rank 0 writes it when every rank "
           "runs on one machine, else set H2_JOB_TOKEN to the same secret on every rank",
           info.rank, path, timeout.count(), last);
}

}  // namespace h2::comm
