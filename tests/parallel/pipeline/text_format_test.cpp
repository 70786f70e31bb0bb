// Text form: exact printing of a small lowered schedule, exact round trips of every generated and
// lowered schedule, hand-written input, and parse errors that name the line and the token.
#include "parallel/pipeline/text_format.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"
#include "schedule_test_helpers.h"

namespace h2::parallel::pipeline {
namespace {

using test_helpers::interleaved_shapes;
using test_helpers::shapes;

TEST(PipelineTextFormat, PrintsOneLinePerRank) {
  const Schedule s = add_send_recv(one_f_one_b(2, 2));
  EXPECT_EQ(format_schedule(s),
            "pipeline ranks=2 stages=2 microbatches=2 stage_ranks=0,1\n"
            "rank 0: F0.0 SEND_F0.0->1 F0.1 SEND_F0.1->1 RECV_B0.0<-1 B0.0 RECV_B0.1<-1 B0.1\n"
            "rank 1: RECV_F1.0<-0 F1.0 B1.0 SEND_B1.0->0 RECV_F1.1<-0 F1.1 B1.1 SEND_B1.1->0\n");
}

TEST(PipelineTextFormat, RoundTripsEveryScheduleExactly) {
  std::vector<Schedule> all;
  for (auto [p, m] : shapes()) {
    for (const Schedule& s : {gpipe(p, m), one_f_one_b(p, m), zb_h1(p, m)}) {
      all.push_back(s);
      all.push_back(lower(s, {.fsdp = true, .unshard = {.max_active_stages = 1, .group_size = 2}}));
    }
  }
  for (auto [p, v, m] : interleaved_shapes()) {
    all.push_back(interleaved_1f1b(p, v, m));
    all.push_back(lower(interleaved_1f1b(p, v, m), {.fsdp = true}));
  }
  for (const Schedule& s : all) {
    const std::string text = format_schedule(s);
    const Schedule back = parse_schedule(text);
    EXPECT_EQ(back, s) << text;
    EXPECT_EQ(format_schedule(back), text);
  }
}

TEST(PipelineTextFormat, EveryActionKindRoundTrips) {
  const std::vector<Action> actions = {
      Action::compute(ActionKind::F, 3, 7),           Action::compute(ActionKind::B, 0, 12),
      Action::compute(ActionKind::I, 1, 0),           Action::compute(ActionKind::W, 1, 0),
      Action::comm(ActionKind::SEND_F, 3, 7, 4),      Action::comm(ActionKind::RECV_F, 4, 7, 3),
      Action::comm(ActionKind::SEND_B, 4, 7, 3),      Action::comm(ActionKind::RECV_B, 3, 7, 4),
      Action::stage_wide(ActionKind::UNSHARD, 2),     Action::stage_wide(ActionKind::RESHARD, 2),
      Action::stage_wide(ActionKind::REDUCE_GRAD, 10)};
  const std::vector<std::string> texts = {
      "F3.7",         "B0.12",        "I1.0",     "W1.0",     "SEND_F3.7->4", "RECV_F4.7<-3",
      "SEND_B4.7->3", "RECV_B3.7<-4", "UNSHARD2", "RESHARD2", "REDUCE_GRAD10"};
  for (size_t i = 0; i < actions.size(); ++i) {
    EXPECT_EQ(to_string(actions[i]), texts[i]);
    EXPECT_EQ(parse_action(texts[i]), actions[i]) << texts[i];
  }
}

TEST(PipelineTextFormat, ReadsHandWrittenText) {
  const Schedule s = parse_schedule(
      "# two ranks, four stages, default layout\n"
      "\n"
      "pipeline   microbatches=1 ranks=2 stages=4\n"
      "rank 0:  F0.0   F2.0 B2.0  B0.0\n"
      "  # rank 1 below\n"
      "rank 1: F1.0 F3.0 B3.0 B1.0");
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(s.per_rank[0].size(), 4u);
  EXPECT_EQ(s.per_rank[1][3], Action::compute(ActionKind::B, 1, 0));
  // An empty rank list is allowed.
  const Schedule e = parse_schedule("pipeline ranks=2 stages=2 microbatches=1\nrank 0:\nrank 1:\n");
  EXPECT_TRUE(e.per_rank[0].empty());
}

// The parse error of `text`, or "" when it parses.
std::string parse_error(const std::string& text) {
  try {
    parse_schedule(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineTextFormat, ParseErrorsNameTheLineAndToken) {
  const std::string header = "pipeline ranks=2 stages=2 microbatches=2\n";
  struct Case {
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      {header + "rank 0: F0.0 X0.1\nrank 1:\n", "line 2 token 2 'X0.1': unknown action kind 'X'"},
      {header + "rank 0: F0\nrank 1:\n", "line 2 token 1 'F0': expected '.' and a micro-batch"},
      {header + "rank 0:\nrank 1: SEND_F1.0<-0\n",
       "line 3 token 1 'SEND_F1.0<-0': expected '->' and a peer stage"},
      {header + "rank 0: F0.1x\nrank 1:\n", "line 2 token 1 'F0.1x': unexpected 'x' at the end"},
      {header + "rank 0: F.1\nrank 1:\n", "line 2 token 1 'F.1': expected a stage number"},
      {header + "rank 1:\nrank 0:\n", "line 2: expected 'rank 0:'"},
      {header + "rank 0:\n", "has 1 rank lines for ranks = 2"},
      {header + "rank 0:\nrank 1:\nrank 2:\n", "line 4: more rank lines than ranks = 2"},
      {"rank 0: F0.0\n", "line 1: expected the header"},
      {"pipeline ranks=2 stages=2 micro=2\n", "line 1 token 3 'micro=2': unknown key"},
      {"pipeline ranks=2 stages=x microbatches=2\n",
       "line 1 token 2 'stages=x': expected a "
       "positive number"},
      {"pipeline ranks=2 stages=3 microbatches=2 stage_ranks=0,1\n",
       "line 1: stage_ranks lists 2 ranks for 3 stages"},
      {"pipeline ranks=2 stages=2 microbatches=2 stage_ranks=0,2\n",
       "line 1: stage 1 is mapped to rank 2"},
      {"# nothing\n", "no 'pipeline' header"},
  };
  for (const Case& c : cases) {
    const std::string what = parse_error(c.text);
    EXPECT_NE(what.find(c.want), std::string::npos) << "text:\n" << c.text << "error: " << what;
  }
}

TEST(PipelineTextFormat, ParseActionNamesTheToken) {
  try {
    parse_action("RECV_B3.1->4");
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'RECV_B3.1->4': expected '<-'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace h2::parallel::pipeline
