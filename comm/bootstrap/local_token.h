// A secret for a job whose ranks all run on one machine under a launcher that shares none
// (mpirun, srun or torchrun without H2_JOB_TOKEN, whose job id anyone can read): rank 0 writes a
// random token to a file only this user can read, in a folder only this user can enter
// ($XDG_RUNTIME_DIR/h2, else /tmp/h2-UID, mode 0700 and owned by this user or refused), named by
// the launcher, job id and the store's port (torchrun's job id is "none" unless set: two jobs of
// one user share it, never a port); the other ranks read it. Rank 0 replaces a file an earlier job
// with the same id left; a rank that read the old one first is refused by the store and reads again
// (connect_with_local_token). Rank 0 removes the file once every rank has joined, if it still
// holds its token.
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap/rank_env.h"
#include "comm/bootstrap/store_client.h"

namespace h2::comm {

// The token file of this job, whose store listens on `port`; ConfigError when the private folder
// cannot be made safely.
std::string local_token_path(const RankInfo& info, int port);

// Rank 0: a fresh random token, written to local_token_path(info, port) (mode 0600), returned.
std::string publish_local_token(const RankInfo& info, int port);

// Rank 0, once every rank joined: removes the token file if it still holds info.token.
void remove_local_token(const RankInfo& info, int port);

// The other ranks: waits for the token file and connects to the store with its token, reading it
// again while the store refuses it; CommError naming the file after `timeout`. Sets info.token.
std::unique_ptr<StoreClient> connect_with_local_token(RankInfo& info, const std::string& host,
                                                      int port, Millis timeout);

}  // namespace h2::comm
