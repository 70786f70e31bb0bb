// Rank discovery from launcher variables (every launcher, nesting inside Slurm, disagreements, bad
// values), the derived store port and token, the H2_COMM_TIMEOUT knob and the polling budget.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sched.h>

#include <cstdlib>
#include <map>
#include <string>

#include "comm/bootstrap/rank_env.h"
#include "comm/timeouts.h"
#include "core/error.h"

namespace h2::comm {
namespace {

using ::testing::HasSubstr;
using Vars = std::map<std::string, std::string>;

EnvLookup env_of(Vars vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The ConfigError message discover_rank throws for `vars` ("" when it does not throw).
std::string config_error(Vars vars) {
  try {
    discover_rank(env_of(std::move(vars)));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RankEnvTest, NoLauncherIsAWorldOfOneWithARandomToken) {
  RankInfo info = discover_rank(env_of({}));
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 1);
  EXPECT_EQ(info.node_rank, 0);
  EXPECT_EQ(info.launcher, "none");
  EXPECT_EQ(info.store_host, "127.0.0.1");
  EXPECT_EQ(info.store_port, 0);
  EXPECT_EQ(info.job_id, "");
  EXPECT_EQ(info.token.size(), 32u);
  EXPECT_NE(info.token, discover_rank(env_of({})).token);
}

TEST(RankEnvTest, H2run) {
  RankInfo info = discover_rank(env_of({{"H2_RANK", "5"},
                                        {"H2_WORLD_SIZE", "8"},
                                        {"H2_LOCAL_RANK", "1"},
                                        {"H2_LOCAL_WORLD_SIZE", "4"},
                                        {"H2_NODE_RANK", "1"},
                                        {"H2_STORE_ADDR", "10.1.2.3:29400"},
                                        {"H2_JOB_TOKEN", "s3cret"}}));
  EXPECT_EQ(info.launcher, "h2run");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 4);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.store_host, "10.1.2.3");
  EXPECT_TRUE(info.store_host_given);
  EXPECT_EQ(info.store_port, 29400);
  EXPECT_EQ(info.token, "s3cret");
}

TEST(RankEnvTest, OpenMpiWithItsPmixVariables) {
  Vars vars = {{"OMPI_COMM_WORLD_RANK", "6"},          {"OMPI_COMM_WORLD_SIZE", "8"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},    {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
               {"OMPI_COMM_WORLD_NODE_RANK", "2"},     {"PMIX_RANK", "6"},
               {"PMIX_NAMESPACE", "prterun-host-42@1"}};
  RankInfo info = discover_rank(env_of(vars));
  EXPECT_EQ(info.launcher, "openmpi");
  EXPECT_EQ(info.rank, 6);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.local_size, 4);
  EXPECT_EQ(info.node_rank, 1);         // rank / local_size, not OMPI_COMM_WORLD_NODE_RANK
  EXPECT_FALSE(info.store_host_given);  // 127.0.0.1 by default: World::join refuses 2 nodes
  EXPECT_EQ(info.job_id, "prterun-host-42@1");
  EXPECT_EQ(info.token, "job:prterun-host-42@1");
  vars["OMPI_MCA_ess_base_jobid"] = "3735945217";  // Open MPI 4
  EXPECT_EQ(discover_rank(env_of(vars)).job_id, "3735945217");
}

TEST(RankEnvTest, Slurm) {
  RankInfo info = discover_rank(env_of({{"SLURM_PROCID", "9"},
                                        {"SLURM_NTASKS", "10"},
                                        {"SLURM_LOCALID", "0"},
                                        {"SLURM_NODEID", "3"},
                                        {"SLURM_TASKS_PER_NODE", "3(x3),1"},
                                        {"SLURM_JOB_ID", "4242"},
                                        {"SLURM_STEP_ID", "7"}}));
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 9);
  EXPECT_EQ(info.size, 10);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 1);  // the fourth node's figure
  EXPECT_EQ(info.node_rank, 3);
  EXPECT_EQ(info.job_id, "4242.7");
  EXPECT_EQ(info.token, "job:4242.7");
  EXPECT_EQ(info.store_port, 0);
}

TEST(RankEnvTest, SlurmLocalSizeSources) {
  Vars vars = {{"SLURM_PROCID", "1"},
               {"SLURM_NTASKS", "4"},
               {"SLURM_LOCALID", "1"},
               {"SLURM_JOB_ID", "1"},
               {"SLURM_TASKS_PER_NODE", "2(x2)"}};
  EXPECT_EQ(discover_rank(env_of(vars)).local_size, 2);  // no node index: the first figure
  vars["SLURM_NTASKS_PER_NODE"] = "3";
  EXPECT_EQ(discover_rank(env_of(vars)).local_size, 3);
}

TEST(RankEnvTest, SrunWithPmi2AgreeingIsSlurm) {
  RankInfo info = discover_rank(env_of({{"SLURM_PROCID", "3"},
                                        {"SLURM_NTASKS", "4"},
                                        {"SLURM_JOB_ID", "77"},
                                        {"PMI_RANK", "3"},
                                        {"PMI_SIZE", "4"},
                                        {"PMI_JOBID", "77.0"}}));
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.job_id, "77");
}

TEST(RankEnvTest, PmixAloneGivesNoSize) {
  Vars vars = {{"PMIX_RANK", "3"}, {"PMIX_NAMESPACE", "ns1"}};
  std::string message = config_error(vars);
  EXPECT_THAT(message, HasSubstr("PMIX_RANK=3"));
  EXPECT_THAT(message, HasSubstr("H2_WORLD_SIZE"));
  vars["H2_WORLD_SIZE"] = "4";
  RankInfo info = discover_rank(env_of(vars));
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.job_id, "ns1");
}

TEST(RankEnvTest, HydraMpiAndIntelMpi) {
  Vars vars = {
      {"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}};
  EXPECT_THAT(config_error(vars), HasSubstr("H2_JOB_TOKEN"));  // no job id to derive it from
  vars["H2_JOB_TOKEN"] = "t";
  RankInfo info = discover_rank(env_of(vars));
  EXPECT_EQ(info.launcher, "pmi");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.token, "t");
}

TEST(RankEnvTest, Torchrun) {
  RankInfo info = discover_rank(env_of({{"RANK", "3"},
                                        {"WORLD_SIZE", "4"},
                                        {"LOCAL_RANK", "1"},
                                        {"LOCAL_WORLD_SIZE", "2"},
                                        {"GROUP_RANK", "1"},
                                        {"MASTER_ADDR", "node0"},
                                        {"MASTER_PORT", "29500"},
                                        {"TORCHELASTIC_RUN_ID", "run7"}}));
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 2);
  EXPECT_EQ(info.node_rank, 1);
  EXPECT_EQ(info.store_host, "node0");
  EXPECT_EQ(info.store_port, 29501);  // torchrun's own store holds MASTER_PORT
  EXPECT_EQ(info.token, "job:run7");
}

TEST(RankEnvTest, LaunchersInsideASlurmStepIgnoreTheStepsVariables) {
  // srun starts one torchrun per node; torchrun starts the ranks.
  Vars slurm = {{"SLURM_PROCID", "1"},
                {"SLURM_NTASKS", "2"},
                {"SLURM_LOCALID", "0"},
                {"SLURM_NODEID", "1"},
                {"SLURM_JOB_ID", "55"}};
  Vars torchrun = slurm;
  torchrun.insert({{"RANK", "6"}, {"WORLD_SIZE", "8"}, {"TORCHELASTIC_RUN_ID", "r"}});
  RankInfo info = discover_rank(env_of(torchrun));
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 6);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.job_id, "r");
  // mpirun inside an sbatch script.
  Vars openmpi = slurm;
  openmpi.insert({{"OMPI_COMM_WORLD_RANK", "3"},
                  {"OMPI_COMM_WORLD_SIZE", "16"},
                  {"OMPI_MCA_ess_base_jobid", "99"}});
  info = discover_rank(env_of(openmpi));
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.job_id, "99");  // not Slurm's: ranks on the batch node and on others agree
  // mpiexec.hydra inside an allocation.
  Vars hydra = slurm;
  hydra.insert(
      {{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"}, {"H2_JOB_TOKEN", "t"}});
  EXPECT_EQ(discover_rank(env_of(hydra)).rank, 5);
}

TEST(RankEnvTest, DisagreeingLaunchersNameBothVariables) {
  std::string rank = config_error(
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"PMIX_RANK", "2"}});
  EXPECT_THAT(rank, HasSubstr("OMPI_COMM_WORLD_RANK=1 (openmpi)"));
  EXPECT_THAT(rank, HasSubstr("PMIX_RANK=2 (pmix)"));
  std::string size =
      config_error({{"H2_RANK", "1"}, {"H2_WORLD_SIZE", "4"}, {"RANK", "1"}, {"WORLD_SIZE", "8"}});
  EXPECT_THAT(size, HasSubstr("world size"));
  EXPECT_THAT(size, HasSubstr("H2_WORLD_SIZE=4 (h2run)"));
  EXPECT_THAT(size, HasSubstr("WORLD_SIZE=8 (torchrun)"));
  std::string srun = config_error(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "4"}});
  EXPECT_THAT(srun, HasSubstr("SLURM_PROCID=0 (slurm)"));
  EXPECT_THAT(srun, HasSubstr("PMI_RANK=1 (pmi)"));
}

TEST(RankEnvTest, BadValuesNameTheVariable) {
  EXPECT_THAT(config_error({{"H2_RANK", "abc"}, {"H2_WORLD_SIZE", "2"}}),
              HasSubstr("H2_RANK='abc' is not an integer"));
  EXPECT_THAT(config_error({{"H2_RANK", "1x"}, {"H2_WORLD_SIZE", "2"}}),
              HasSubstr("H2_RANK='1x' is not an integer"));
  EXPECT_THAT(config_error({{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "2"}}),
              HasSubstr("SLURM_PROCID=-1 is negative"));
  EXPECT_THAT(config_error({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}),
              HasSubstr("WORLD_SIZE=99999999999 is too large"));
  EXPECT_THAT(config_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
              HasSubstr("RANK=4 is not below WORLD_SIZE=4"));
  EXPECT_THAT(config_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), HasSubstr("WORLD_SIZE=0"));
  EXPECT_THAT(
      config_error(
          {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
      HasSubstr("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"));
  EXPECT_THAT(config_error({{"OMPI_COMM_WORLD_RANK", "1"},
                            {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}}),
              HasSubstr("OMPI_COMM_WORLD_LOCAL_SIZE=8 exceeds the world size"));
  EXPECT_THAT(config_error({{"WORLD_SIZE", "4"}}),
              HasSubstr("WORLD_SIZE=4 gives the world size but no launcher variable"));
  EXPECT_THAT(
      config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "2(x"}}),
      HasSubstr("SLURM_TASKS_PER_NODE='2(x'"));
  EXPECT_THAT(config_error({{"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "2"},
                            {"SLURM_NODEID", "2"},
                            {"SLURM_TASKS_PER_NODE", "1(x2)"}}),
              HasSubstr("SLURM_TASKS_PER_NODE='1(x2)' lists 2 nodes"));
}

TEST(RankEnvTest, StoreAddress) {
  auto addr = [](Vars vars) {
    RankInfo info = discover_rank(env_of(std::move(vars)));
    return info.store_host + " " + std::to_string(info.store_port);
  };
  EXPECT_EQ(addr({{"H2_STORE_ADDR", "host-1:1234"}}), "host-1 1234");
  EXPECT_EQ(addr({{"H2_STORE_ADDR", "[fd00::1]:1234"}}), "fd00::1 1234");
  EXPECT_EQ(addr({{"H2_STORE_ADDR", "h:1"}, {"MASTER_ADDR", "m"}, {"MASTER_PORT", "9"}}), "h 1");
  EXPECT_EQ(addr({{"MASTER_ADDR", "m"}}), "m 0");
  EXPECT_EQ(addr({{"MASTER_PORT", "9"}}), "127.0.0.1 10");
  for (const char* bad : {"nohost", "h:", ":80", "h:0", "h:65536", "h:8x", "::1:80", "[]:80"})
    EXPECT_THAT(config_error({{"H2_STORE_ADDR", bad}}),
                HasSubstr(std::string("H2_STORE_ADDR='") + bad + "' is not HOST:PORT"))
        << bad;
  EXPECT_THAT(config_error({{"MASTER_PORT", "http"}}),
              HasSubstr("MASTER_PORT='http' is not an integer"));
  EXPECT_THAT(config_error({{"MASTER_PORT", "65535"}}), HasSubstr("MASTER_PORT=65535"));
}

TEST(RankEnvTest, TokenPrecedence) {
  Vars vars = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "12"}};
  EXPECT_EQ(discover_rank(env_of(vars)).token, "job:12");
  vars["H2_JOB_TOKEN"] = "explicit";
  EXPECT_EQ(discover_rank(env_of(vars)).token, "explicit");
}

TEST(RankEnvTest, DerivedStorePortIsStableFnv1a) {
  EXPECT_EQ(derived_store_port("1234"), 28349);  // 20000 + FNV-1a-64("1234") % 12768
  EXPECT_EQ(derived_store_port(""), 29221);
  for (const char* id : {"1", "2", "prterun-host-42@1", "4242.7"}) {
    int port = derived_store_port(id);
    EXPECT_GE(port, 20000);
    EXPECT_LT(port, 32768);  // below the kernel's ephemeral ports
    EXPECT_EQ(port, derived_store_port(id));
  }
  EXPECT_NE(derived_store_port("4242.0"), derived_store_port("4242.1"));
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CommTimeoutTest, ReadsSecondsFromTheKnob) {
  {
    ScopedEnv env("H2_COMM_TIMEOUT", nullptr);
    EXPECT_EQ(comm_timeout(), Millis(300000));
  }
  {
    ScopedEnv env("H2_COMM_TIMEOUT", "0.25");
    EXPECT_EQ(comm_timeout(), Millis(250));
  }
  {
    ScopedEnv env("H2_COMM_TIMEOUT", "0.0001");
    EXPECT_EQ(comm_timeout(), Millis(1));
  }
  for (const char* bad : {"0", "-1", "abc", "1e7"}) {
    ScopedEnv env("H2_COMM_TIMEOUT", bad);
    try {
      comm_timeout();
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr("H2_COMM_TIMEOUT")) << bad;
    }
  }
}

TEST(SpinsBeforeYieldTest, YieldsAtOnceOnlyWhenLocalRanksOutnumberTheCpus) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  const int cpus = CPU_COUNT(&allowed);
  EXPECT_GT(spins_before_yield(1), 0u);
  EXPECT_GT(spins_before_yield(cpus), 0u);
  EXPECT_EQ(spins_before_yield(cpus + 1), 0u);
  // Ranks bound to a core each (one CPU in every mask) spin while the node's CPUs cover them.
  EXPECT_GT(spins_before_yield(2, 2), 0u);
  EXPECT_EQ(spins_before_yield(4, 2), 0u);
}

}  // namespace
}  // namespace h2::comm
