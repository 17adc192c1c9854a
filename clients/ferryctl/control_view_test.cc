// The Control views from canned responses: every table, its empty form, the
// "-" for unknown offsets, the reset note, and JSON that reads back as the
// same message.
#include "clients/ferryctl/control_view.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace ferry::ferryctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

template <typename T>
T Parse(const std::string& text) {
  T message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

// The table line that starts with `prefix`, or "" (columns are padded, so
// tests match rows by their words).
std::string Row(const std::string& out, const std::string& prefix) {
  size_t at = out.find("\n" + prefix);
  if (at == std::string::npos) return "";
  at += 1;
  return out.substr(at, out.find('\n', at) - at);
}

// Splits on runs of spaces.
std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (char c : row + " ") {
    if (c != ' ') {
      cell += c;
    } else if (!cell.empty()) {
      cells.push_back(cell);
      cell.clear();
    }
  }
  return cells;
}

TEST(ControlViewTest, StatusTables) {
  const auto status = Parse<v1::GetStatusResponse>(R"pb(
    replica: "ferry-a" group_id: "orders-ferry"
    partitions {
      topic: "orders" partition: 1 committed_offset: 120 end_offset: 150 lag: 30
      in_flight: 4 buffered: 9 lowest_unfinished_offset: 121 blocked_for_ms: 1500
      paused: true fetch_paused: true blocked: true
    }
    partitions {
      topic: "orders" partition: 0 committed_offset: -1 end_offset: -1 lag: -1
      lowest_unfinished_offset: -1
    }
    workers { processor: "billing" stream_id: 7 ready: true credit: 12 in_flight: 4
              worker_name: "billing-7f9c" }
    workers { processor: "audit" stream_id: 2 }
    lanes_in_use: 3 lane_count: 64 buffered_events: 9 buffered_bytes: 4608
    pause_commands: "all" pause_commands: "orders/0,3"
  )pb");
  const std::string out = RenderStatusTables(status);
  EXPECT_THAT(out, HasSubstr("replica ferry-a  group orders-ferry\n"));
  EXPECT_THAT(out, HasSubstr("buffered 9 events (4.5KiB)  lanes in use 3/64\n"));
  EXPECT_THAT(out, HasSubstr("pause commands: all; orders/0,3\n"));
  EXPECT_THAT(Cells(Row(out, "TOPIC")),
              ::testing::ElementsAre("TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "IN-FLIGHT",
                                     "BUFFERED", "LOWEST-UNFINISHED", "BLOCKED-FOR", "FLAGS"));
  EXPECT_THAT(Cells(Row(out, "orders  1")),
              ::testing::ElementsAre("orders", "1", "120", "150", "30", "4", "9", "121", "1.5s",
                                     "paused,fetch-paused,blocked"));
  // Unknown offsets and an idle partition show as "-".
  EXPECT_THAT(Cells(Row(out, "orders  0")),
              ::testing::ElementsAre("orders", "0", "-", "-", "-", "0", "0", "-", "-", "-"));
  // Sorted by topic and partition whatever the server's order.
  EXPECT_LT(out.find("orders  0"), out.find("orders  1"));
  EXPECT_THAT(Cells(Row(out, "PROCESSOR")),
              ::testing::ElementsAre("PROCESSOR", "STREAM", "READY", "CREDIT", "IN-FLIGHT",
                                     "WORKER"));
  EXPECT_THAT(Cells(Row(out, "billing")),
              ::testing::ElementsAre("billing", "7", "yes", "12", "4", "billing-7f9c"));
  EXPECT_THAT(Cells(Row(out, "audit")), ::testing::ElementsAre("audit", "2", "no", "0", "0", "-"));
  EXPECT_LT(out.find("\naudit"), out.find("\nbilling"));
}

TEST(ControlViewTest, StatusColumnsAlign) {
  const auto status = Parse<v1::GetStatusResponse>(R"pb(
    replica: "r" group_id: "g"
    partitions { topic: "a-long-topic-name" partition: 10 committed_offset: 5 end_offset: 5 }
    partitions { topic: "b" partition: 2 committed_offset: 1234567 end_offset: 1234567 }
  )pb");
  const std::string out = RenderStatusTables(status);
  const std::string header = Row(out, "TOPIC");
  const std::string first = Row(out, "a-long");
  const std::string second = Row(out, "b ");
  // Each column starts where its header does.
  EXPECT_EQ(header.find("PARTITION"), first.find("10"));
  EXPECT_EQ(header.find("PARTITION"), second.find("2 "));
  EXPECT_EQ(header.find("COMMITTED"), second.find("1234567"));
  EXPECT_EQ(header.find("COMMITTED"), first.find("5 "));
  // No trailing spaces.
  EXPECT_THAT(out, Not(HasSubstr(" \n")));
}

TEST(ControlViewTest, EmptyStatus) {
  const std::string out = RenderStatusTables(v1::GetStatusResponse());
  EXPECT_EQ(out,
            "replica -  group -\n"
            "buffered 0 events (0B)  lanes in use 0/0\n"
            "pause commands: none\n"
            "\n"
            "(no partitions assigned to this replica)\n"
            "\n"
            "(no worker streams)\n");
}

TEST(ControlViewTest, PauseFoldsPartitionsPerTopic) {
  const auto pause = Parse<v1::PauseResponse>(R"pb(
    partitions { topic: "orders" partition: 3 }
    partitions { topic: "orders" partition: 0 }
    partitions { topic: "audit" partition: 0 }
    partitions { topic: "orders" partition: 1 }
    partitions { topic: "orders" partition: 2 }
    partitions { topic: "orders" partition: 7 }
    control_offset: 17
  )pb");
  EXPECT_EQ(RenderPause(pause),
            "paused 6 partitions (control offset 17)\n"
            "TOPIC   PARTITIONS\n"
            "audit   0\n"
            "orders  0-3,7\n");
}

TEST(ControlViewTest, ResumeAndEmptySelections) {
  const auto resume = Parse<v1::ResumeResponse>(R"pb(
    partitions { topic: "orders" partition: 3 } control_offset: 18
  )pb");
  EXPECT_EQ(RenderResume(resume),
            "resumed 1 partition (control offset 18)\n"
            "TOPIC   PARTITIONS\n"
            "orders  3\n");
  EXPECT_EQ(RenderPause(v1::PauseResponse()), "paused 0 partitions (control offset 0)\n");
  EXPECT_EQ(RenderResume(v1::ResumeResponse()), "resumed 0 partitions (control offset 0)\n");
}

TEST(ControlViewTest, FoldPartitions) {
  EXPECT_EQ(FoldPartitions({}), "");
  EXPECT_EQ(FoldPartitions({5}), "5");
  EXPECT_EQ(FoldPartitions({9, 0, 1, 1, 2, 4, 10}), "0-2,4,9-10");
}

TEST(ControlViewTest, ResetApplied) {
  const auto reset = Parse<v1::ResetOffsetsResponse>(R"pb(
    partitions { topic: "orders" partition: 1 current_offset: -1 new_offset: 0
                 earliest_offset: 0 end_offset: 10 applied: true applied_by: "ferry-b" }
    partitions { topic: "orders" partition: 0 current_offset: 120 new_offset: 40
                 earliest_offset: 3 end_offset: 500 applied: true applied_by: "ferry-a" }
    control_offset: 21
  )pb");
  const std::string out = RenderReset(reset);
  EXPECT_THAT(out, HasSubstr("control offset 21: 2 of 2 partitions applied\n"));
  EXPECT_THAT(Cells(Row(out, "TOPIC")),
              ::testing::ElementsAre("TOPIC", "PARTITION", "CURRENT", "NEW", "EARLIEST", "END",
                                     "APPLIED", "APPLIED-BY"));
  EXPECT_THAT(Cells(Row(out, "orders  0")),
              ::testing::ElementsAre("orders", "0", "120", "40", "3", "500", "yes", "ferry-a"));
  EXPECT_THAT(Cells(Row(out, "orders  1")),
              ::testing::ElementsAre("orders", "1", "-", "0", "0", "10", "yes", "ferry-b"));
  EXPECT_THAT(out, Not(HasSubstr("not applied")));
}

TEST(ControlViewTest, ResetNotApplied) {
  const auto reset = Parse<v1::ResetOffsetsResponse>(R"pb(
    partitions { topic: "orders" partition: 0 current_offset: 5 new_offset: 1
                 applied: true applied_by: "ferry-a" }
    partitions { topic: "orders" partition: 1 current_offset: 5 new_offset: 1 }
    control_offset: 22
  )pb");
  const std::string out = RenderReset(reset);
  EXPECT_THAT(out, HasSubstr("control offset 22: 1 of 2 partitions applied\n"));
  EXPECT_THAT(Cells(Row(out, "orders  1")),
              ::testing::ElementsAre("orders", "1", "5", "1", "0", "0", "no", "-"));
  EXPECT_THAT(out, HasSubstr("1 partition not applied in time: the replica that owns it will "
                             "apply the reset"));
}

TEST(ControlViewTest, ResetErrorsGetAColumn) {
  const auto reset = Parse<v1::ResetOffsetsResponse>(R"pb(
    partitions { topic: "orders" partition: 0 new_offset: 1 applied: true applied_by: "ferry-a" }
    partitions { topic: "orders" partition: 1 new_offset: 1 applied_by: "ferry-b"
                 error: "commit failed: REBALANCE_IN_PROGRESS" }
    partitions { topic: "orders" partition: 2 new_offset: 1 }
    control_offset: 23
  )pb");
  const std::string out = RenderReset(reset);
  EXPECT_THAT(Cells(Row(out, "TOPIC")).back(), "ERROR");
  EXPECT_THAT(Row(out, "orders  1"), HasSubstr("no       ferry-b     commit failed: "
                                               "REBALANCE_IN_PROGRESS"));
  EXPECT_THAT(Cells(Row(out, "orders  0")).back(), "-");
  EXPECT_THAT(out, HasSubstr("\n1 partition not applied in time: the replica that owns it"));
  EXPECT_THAT(out, HasSubstr("(nothing to rerun)\n1 partition could not be applied: see ERROR\n"));
  // No error anywhere: no column.
  EXPECT_THAT(RenderReset(v1::ResetOffsetsResponse()), Not(HasSubstr("ERROR")));
}

TEST(ControlViewTest, ResetDryRun) {
  const auto reset = Parse<v1::ResetOffsetsResponse>(R"pb(
    partitions { topic: "orders" partition: 0 current_offset: 5 new_offset: 1 }
    dry_run: true control_offset: -1
  )pb");
  const std::string out = RenderReset(reset);
  EXPECT_THAT(out, HasSubstr("dry run, nothing changed: 1 partition planned\n"));
  EXPECT_THAT(Cells(Row(out, "orders")),
              ::testing::ElementsAre("orders", "0", "5", "1", "0", "0", "no", "-"));
  // applied=false is what a dry run means, not something to warn about.
  EXPECT_THAT(out, Not(HasSubstr("not applied")));
}

TEST(ControlViewTest, EmptyReset) {
  EXPECT_EQ(RenderReset(v1::ResetOffsetsResponse()), "control offset 0: 0 of 0 partitions applied\n");
  v1::ResetOffsetsResponse dry;
  dry.set_dry_run(true);
  EXPECT_EQ(RenderReset(dry), "dry run, nothing changed: 0 partitions planned\n");
}

TEST(ControlViewTest, Skip) {
  const auto request = Parse<v1::SkipOffsetRequest>(R"pb(
    topic: "orders" partition: 3 offset: 1234
  )pb");
  EXPECT_EQ(RenderSkip(request, Parse<v1::SkipOffsetResponse>(
                                    R"pb(outcome: "dead_lettered" applied_by: "ferry-b")pb")),
            "orders/3 offset 1234: dead_lettered (sent to the dead-letter topic), applied by "
            "ferry-b\n");
  EXPECT_EQ(RenderSkip(request, Parse<v1::SkipOffsetResponse>(
                                    R"pb(outcome: "marked_done" applied_by: "ferry-a")pb")),
            "orders/3 offset 1234: marked_done (no dead-letter topic: marked done), applied by "
            "ferry-a\n");
  EXPECT_EQ(RenderSkip(request, v1::SkipOffsetResponse()),
            "orders/3 offset 1234: -, applied by -\n");
}

TEST(ControlViewTest, JsonIsOneObjectThatReadsBack) {
  const auto reset = Parse<v1::ResetOffsetsResponse>(R"pb(
    partitions { topic: "orders" partition: 1 current_offset: 5 new_offset: 1 }
    control_offset: 9
  )pb");
  const std::string json = RenderJson(reset);
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.back(), '\n');
  EXPECT_EQ(json.find('\n'), json.size() - 1) << json;  // one line
  EXPECT_EQ(json.front(), '{');
  // Defaults are printed, so scripts can test applied == false.
  EXPECT_THAT(json, HasSubstr("\"applied\":false"));
  EXPECT_THAT(json, HasSubstr("\"dryRun\":false"));
  EXPECT_THAT(json, HasSubstr("\"newOffset\":\"1\""));
  v1::ResetOffsetsResponse back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back, reset));
}

TEST(ControlViewTest, JsonOfEmptyResponses) {
  EXPECT_EQ(RenderJson(v1::SkipOffsetResponse()), "{\"outcome\":\"\",\"appliedBy\":\"\"}\n");
  EXPECT_EQ(RenderJson(v1::PauseResponse()), "{\"partitions\":[],\"controlOffset\":\"0\"}\n");
  EXPECT_THAT(RenderJson(v1::GetStatusResponse()), HasSubstr("\"pauseCommands\":[]"));
}

}  // namespace
}  // namespace ferry::ferryctl
