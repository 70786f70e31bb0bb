// Who this process is in the job: rank, size, local rank and where the rendezvous store lives,
// read from the variables of whichever launcher started it (Open MPI, PMIx, MPICH/Intel MPI,
// Slurm, torchrun, h2run).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace h2::comm {

struct RankInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node_rank = 0;
  std::string launcher = "none";  // "h2run", "openmpi", "pmix", "pmi", "slurm", "torchrun", "none"
  std::string store_host = "127.0.0.1";
  bool store_host_given = false;   // by H2_STORE_ADDR or MASTER_ADDR (else the default above)
  int store_port = 0;              // 0: derived from the job id (one node only)
  std::string job_id;              // the launcher's job id; "" when there is none
  std::string token;               // per-job secret the store asks every client for
  bool token_from_job_id = false;  // derived, not secret: World::join replaces it on one node
};

// Returns the variable's value, or nullopt when unset. Tests pass a map; production getenv.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// Reads the launcher variables. Throws ConfigError naming the variables when they are malformed
// (not an integer), impossible (rank >= size, local_rank >= local_size) or when two launchers
// disagree about rank or size. No launcher variables at all: a world of one.
//
// Details (rank_env.cpp):
// - Slurm allocates; mpirun (Open MPI), mpiexec.hydra (MPICH/Intel MPI: MPI_LOCALRANKID is set),
//   torchrun and h2run start processes themselves and are often run inside a Slurm step. When one
//   of them is present, the SLURM_* variables describe the outer step, not this process, and are
//   ignored. Every other pair of launchers present must agree.
// - A launcher without local variables: local_rank = rank, local_size = size (one node). A
//   launcher without a node index: node_rank = rank / local_size (block placement).
// - Store address: H2_STORE_ADDR (HOST:PORT, IPv6 as [addr]:port); else MASTER_ADDR with
//   MASTER_PORT + 1 (torchrun's own TCPStore already listens on MASTER_PORT); else 127.0.0.1 and
//   port 0 (the caller derives one with derived_store_port).
// - Token: H2_JOB_TOKEN; else "job:<job id>", which is NOT secret (anyone who can read the job id
//   can join the store): on one node World::join replaces it by a random one shared through a
//   private file (comm/bootstrap/local_token.h), across nodes rank 0 warns; else, for a world of
//   one, a random token. A larger world with neither is a ConfigError.
RankInfo discover_rank(const EnvLookup& env);

// 32 random hex digits from std::random_device.
std::string random_token();

// A port in [kDerivedPortFirst, kDerivedPortEnd) from the FNV-1a hash of `job_id`, stable across
// processes, builds and platforms: every rank of a one-node job started without a store address
// computes the same one. The range ends where Linux's ephemeral ports begin
// (/proc/sys/net/ipv4/ip_local_port_range: 32768-60999 by default), so no socket the kernel numbers
// for itself (another job's listener on port 0, an outgoing connection) can hold it; in that range
// a CI run of concurrent tests once found its port taken ("Address already in use").
inline constexpr int kDerivedPortFirst = 20000;
inline constexpr int kDerivedPortEnd = 32768;
int derived_store_port(const std::string& job_id);

}  // namespace h2::comm
