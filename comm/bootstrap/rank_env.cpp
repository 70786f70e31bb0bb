// Rank discovery: reads every launcher's variables, checks that they agree and are possible, and
// picks the store address and job token. Pure over an EnvLookup so that tests pass maps.
#include "comm/bootstrap/rank_env.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace h2::comm {
namespace {

// One integer read from the environment; `source` is "VAR=value" for error messages.
struct Value {
  int value = 0;
  std::string source;
};

// What one launcher says about this process. Present when it gives a rank or a size.
struct Launcher {
  std::string name;
  std::optional<Value> rank, size, local_rank, local_size, node;
  std::string job_id;
  bool present() const { return rank.has_value() || size.has_value(); }
};

std::optional<std::string> lookup(const EnvLookup& env, const std::string& var) {
  std::optional<std::string> text = env(var);
  if (!text || text->empty()) return std::nullopt;  // empty counts as unset, as in core/env.cpp
  return text;
}

// A non-negative decimal int, the whole text.
int parse_count(const std::string& var, const std::string& text) {
  long long parsed = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, parsed);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && ptr == end && parsed > INT_MAX))
    H2_THROW(ConfigError, "{}={} is too large", var, text);
  if (ec != std::errc() || ptr != end)
    H2_THROW(ConfigError, "{}='{}' is not an integer", var, text);
  if (parsed < 0) H2_THROW(ConfigError, "{}={} is negative", var, text);
  return static_cast<int>(parsed);
}

std::optional<Value> read_int(const EnvLookup& env, const std::string& var) {
  std::optional<std::string> text = lookup(env, var);
  if (!text) return std::nullopt;
  return Value{parse_count(var, *text), fmt::format("{}={}", var, *text)};
}

// The first of `vars` that is set.
std::optional<Value> read_first(const EnvLookup& env, std::initializer_list<const char*> vars) {
  for (const char* var : vars)
    if (std::optional<Value> v = read_int(env, var)) return v;
  return std::nullopt;
}

std::string read_first_text(const EnvLookup& env, std::initializer_list<const char*> vars) {
  for (const char* var : vars)
    if (std::optional<std::string> v = lookup(env, var)) return *v;
  return "";
}

// SLURM_TASKS_PER_NODE lists tasks per node compressed: "2(x3),1" is 2,2,2,1. Returns the count
// on node `node`, or on the first node when the node index is unknown.
int slurm_tasks_on_node(const std::string& var, const std::string& text, std::optional<int> node) {
  std::vector<int> counts;
  size_t pos = 0;
  auto bad = [&]() {
    H2_THROW(ConfigError, "{}='{}' is not a Slurm task list like 2(x3),1", var, text);
  };
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    int repeat = 1;
    size_t paren = item.find("(x");
    if (paren != std::string::npos) {
      if (item.back() != ')') bad();
      std::string times = item.substr(paren + 2, item.size() - paren - 3);
      int parsed = 0;
      auto [ptr, ec] = std::from_chars(times.data(), times.data() + times.size(), parsed);
      if (ec != std::errc() || ptr != times.data() + times.size() || parsed <= 0) bad();
      repeat = parsed;
      item = item.substr(0, paren);
    }
    int count = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), count);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || count < 0) bad();
    if (counts.size() + static_cast<size_t>(repeat) > (1u << 24)) bad();
    counts.insert(counts.end(), static_cast<size_t>(repeat), count);
    pos = comma + 1;
  }
  if (counts.empty()) bad();
  size_t index = node ? static_cast<size_t>(*node) : 0;
  if (index >= counts.size())
    H2_THROW(ConfigError, "{}='{}' lists {} nodes but this is node {}", var, text, counts.size(),
             index);
  return counts[index];
}

Launcher read_h2run(const EnvLookup& env) {
  Launcher l;
  l.name = "h2run";
  l.rank = read_int(env, "H2_RANK");
  l.size = read_int(env, "H2_WORLD_SIZE");
  l.local_rank = read_int(env, "H2_LOCAL_RANK");
  l.local_size = read_int(env, "H2_LOCAL_WORLD_SIZE");
  l.node = read_int(env, "H2_NODE_RANK");
  return l;  // no job id: h2run always sets H2_JOB_TOKEN
}

// OMPI_COMM_WORLD_NODE_RANK is not the node's index (Open MPI: "the relative rank of this process
// on this node looking across all jobs"), so Open MPI gives no node index.
Launcher read_openmpi(const EnvLookup& env) {
  Launcher l;
  l.name = "openmpi";
  l.rank = read_int(env, "OMPI_COMM_WORLD_RANK");
  l.size = read_int(env, "OMPI_COMM_WORLD_SIZE");
  l.local_rank = read_int(env, "OMPI_COMM_WORLD_LOCAL_RANK");
  l.local_size = read_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
  l.job_id = read_first_text(env, {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"});
  return l;
}

Launcher read_slurm(const EnvLookup& env) {
  Launcher l;
  l.name = "slurm";
  l.rank = read_int(env, "SLURM_PROCID");
  l.size = read_first(env, {"SLURM_NTASKS", "SLURM_NPROCS"});
  l.local_rank = read_int(env, "SLURM_LOCALID");
  l.node = read_int(env, "SLURM_NODEID");
  l.local_size = read_int(env, "SLURM_NTASKS_PER_NODE");
  if (!l.local_size) {
    if (std::optional<std::string> text = lookup(env, "SLURM_TASKS_PER_NODE")) {
      std::optional<int> node;
      if (l.node) node = l.node->value;
      int count = slurm_tasks_on_node("SLURM_TASKS_PER_NODE", *text, node);
      l.local_size = Value{count, fmt::format("SLURM_TASKS_PER_NODE={}", *text)};
    }
  }
  // Two steps of one allocation are two jobs as far as the store is concerned.
  std::string job = read_first_text(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  std::string step = read_first_text(env, {"SLURM_STEP_ID", "SLURM_STEPID"});
  if (!job.empty()) l.job_id = step.empty() ? job : job + "." + step;
  return l;
}

// PMIx servers export only the rank and namespace; the size comes from the PMIx API, so another
// launcher (Open MPI, Slurm) or H2_WORLD_SIZE must give it.
Launcher read_pmix(const EnvLookup& env) {
  Launcher l;
  l.name = "pmix";
  l.rank = read_int(env, "PMIX_RANK");
  if (l.rank) l.job_id = read_first_text(env, {"PMIX_NAMESPACE"});
  return l;
}

Launcher read_pmi(const EnvLookup& env) {
  Launcher l;
  l.name = "pmi";
  l.rank = read_int(env, "PMI_RANK");
  l.size = read_int(env, "PMI_SIZE");
  l.local_rank = read_int(env, "MPI_LOCALRANKID");
  l.local_size = read_int(env, "MPI_LOCALNRANKS");
  l.job_id = read_first_text(env, {"PMI_JOBID"});
  return l;
}

Launcher read_torchrun(const EnvLookup& env) {
  Launcher l;
  l.name = "torchrun";
  l.rank = read_int(env, "RANK");
  l.size = read_int(env, "WORLD_SIZE");
  l.local_rank = read_int(env, "LOCAL_RANK");
  l.local_size = read_int(env, "LOCAL_WORLD_SIZE");
  l.node = read_int(env, "GROUP_RANK");
  l.job_id = read_first_text(env, {"TORCHELASTIC_RUN_ID"});
  return l;
}

// Launchers that start processes themselves and may run inside a Slurm step (see rank_env.h).
bool started_inside_slurm_step(const EnvLookup& env) {
  for (const char* var : {"H2_RANK", "H2_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "RANK", "WORLD_SIZE", "MPI_LOCALRANKID"})
    if (lookup(env, var)) return true;
  return false;
}

// Every launcher present, in reporting priority order.
std::vector<Launcher> read_launchers(const EnvLookup& env) {
  std::vector<Launcher> all;
  all.push_back(read_h2run(env));
  all.push_back(read_openmpi(env));
  if (!started_inside_slurm_step(env)) all.push_back(read_slurm(env));
  all.push_back(read_pmix(env));
  all.push_back(read_pmi(env));
  all.push_back(read_torchrun(env));
  std::vector<Launcher> present;
  for (Launcher& l : all)
    if (l.present()) present.push_back(std::move(l));
  return present;
}

// The first launcher's value of `field`, after checking that every other launcher that has one
// agrees with it.
std::optional<Value> agreed(const std::vector<Launcher>& launchers,
                            std::optional<Value> Launcher::*field, const char* what) {
  const Launcher* first = nullptr;
  for (const Launcher& l : launchers) {
    const std::optional<Value>& v = l.*field;
    if (!v) continue;
    if (first == nullptr) {
      first = &l;
    } else if ((first->*field)->value != v->value) {
      H2_THROW(ConfigError, "launchers disagree about the {}: {} ({}) but {} ({})", what,
               (first->*field)->source, first->name, v->source, l.name);
    }
  }
  if (first == nullptr) return std::nullopt;
  return first->*field;
}

// The first launcher's value of `field`, without an agreement check.
std::optional<Value> first_of(const std::vector<Launcher>& launchers,
                              std::optional<Value> Launcher::*field) {
  for (const Launcher& l : launchers)
    if (l.*field) return l.*field;
  return std::nullopt;
}

void fill_counts(const std::vector<Launcher>& launchers, RankInfo& info) {
  std::optional<Value> rank = agreed(launchers, &Launcher::rank, "rank");
  std::optional<Value> size = agreed(launchers, &Launcher::size, "world size");
  if (rank && !size)
    H2_THROW(ConfigError,
             "{} gives this process's rank but no launcher variable gives the world size; set "
             "H2_WORLD_SIZE",
             rank->source);
  if (size && !rank)
    H2_THROW(ConfigError,
             "{} gives the world size but no launcher variable gives this process's rank; set "
             "H2_RANK",
             size->source);
  if (!rank) return;  // no launcher: a world of one
  if (size->value == 0)
    H2_THROW(ConfigError, "{}: the world size must be at least 1", size->source);
  if (rank->value >= size->value)
    H2_THROW(ConfigError, "{} is not below {}: a rank must be less than the world size",
             rank->source, size->source);
  info.rank = rank->value;
  info.size = size->value;

  std::optional<Value> local_rank = first_of(launchers, &Launcher::local_rank);
  std::optional<Value> local_size = first_of(launchers, &Launcher::local_size);
  info.local_rank = local_rank ? local_rank->value : info.rank;
  info.local_size = local_size ? local_size->value : info.size;
  std::string local_size_source =
      local_size ? local_size->source : fmt::format("the world size {}", size->source);
  if (local_size && local_size->value == 0)
    H2_THROW(ConfigError, "{}: a node runs at least 1 process", local_size->source);
  if (local_size && local_size->value > info.size)
    H2_THROW(ConfigError, "{} exceeds the world size {}", local_size->source, size->source);
  if (info.local_rank >= info.local_size)
    H2_THROW(ConfigError, "{} is not below {}: a local rank must be less than the local size",
             local_rank ? local_rank->source : rank->source, local_size_source);

  std::optional<Value> node = first_of(launchers, &Launcher::node);
  info.node_rank = node ? node->value : (local_size ? info.rank / info.local_size : 0);
  info.launcher = launchers.front().name;
  for (const Launcher& l : launchers) {
    if (l.job_id.empty()) continue;
    info.job_id = l.job_id;
    break;
  }
}

// "host:port" or "[v6 address]:port", port in [1, 65535].
void parse_store_addr(const std::string& var, const std::string& text, RankInfo& info) {
  auto bad = [&]() {
    H2_THROW(ConfigError, "{}='{}' is not HOST:PORT (e.g. 10.0.0.1:29500 or [fd00::1]:29500)", var,
             text);
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) bad();
  std::string host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') bad();
    host = host.substr(1, host.size() - 2);
  } else if (host.find_first_of(":[]") != std::string::npos) {
    bad();
  }
  std::string port_text = text.substr(colon + 1);
  int port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 || port > 65535)
    bad();
  info.store_host = host;
  info.store_host_given = true;
  info.store_port = port;
}

void fill_store_addr(const EnvLookup& env, RankInfo& info) {
  if (std::optional<std::string> addr = lookup(env, "H2_STORE_ADDR")) {
    parse_store_addr("H2_STORE_ADDR", *addr, info);
    return;
  }
  if (std::optional<std::string> host = lookup(env, "MASTER_ADDR")) {
    info.store_host = *host;
    info.store_host_given = true;
  }
  if (std::optional<std::string> port = lookup(env, "MASTER_PORT")) {
    int parsed = parse_count("MASTER_PORT", *port);
    if (parsed < 1 || parsed > 65534)
      H2_THROW(ConfigError, "MASTER_PORT={} is outside [1, 65534] (the store uses MASTER_PORT + 1)",
               *port);
    info.store_port = parsed + 1;
  }
}

}  // namespace

std::string random_token() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) token += fmt::format("{:08x}", static_cast<uint32_t>(device()));
  return token;
}

namespace {

void fill_token(const EnvLookup& env, RankInfo& info) {
  if (std::optional<std::string> token = lookup(env, "H2_JOB_TOKEN")) {
    info.token = *token;
  } else if (!info.job_id.empty()) {
    info.token = "job:" + info.job_id;  // not secret: see rank_env.h
    info.token_from_job_id = true;
    if (info.size > 1 && info.local_size < info.size && info.rank == 0)
      H2_LOG_WARN(
          "H2_JOB_TOKEN is not set: the rendezvous store's token is derived from the {} job id "
          "{}, which other users of these machines can read; export "
          "H2_JOB_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n') before {} "
          "(README, Slurm)",
          info.launcher, info.job_id, info.launcher == "slurm" ? "srun" : "mpirun");
  } else if (info.size == 1) {
    info.token = random_token();
  } else {
    H2_THROW(ConfigError,
             "a world of {} ranks (launcher {}) needs H2_JOB_TOKEN: the launcher exports no job "
             "id to derive it from; set it to the same string on every rank",
             info.size, info.launcher);
  }
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

RankInfo discover_rank(const EnvLookup& env) {
  RankInfo info;
  std::vector<Launcher> launchers = read_launchers(env);
  if (!launchers.empty()) fill_counts(launchers, info);
  fill_store_addr(env, info);
  fill_token(env, info);
  return info;
}

int derived_store_port(const std::string& job_id) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (unsigned char c : job_id) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return kDerivedPortFirst + static_cast<int>(hash % (kDerivedPortEnd - kDerivedPortFirst));
}

}  // namespace h2::comm
