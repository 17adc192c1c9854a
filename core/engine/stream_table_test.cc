#include "core/engine/stream_table.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/fake_worker_stream.h"

namespace ferry {
namespace {

using ::ferry::testing::FakeWorkerStream;
using ::testing::ElementsAre;

TEST(StreamTableTest, CandidatesStartAfterTheStreamUsedLast) {
  FakeWorkerStream a("a"), b("b"), c("c"), other("other");
  StreamTable table(2);
  const int64_t ia = table.Add(0, &a);
  const int64_t ib = table.Add(0, &b);
  table.Add(1, &other);
  const int64_t ic = table.Add(0, &c);
  auto all = [](const StreamTable::Entry&) { return true; };
  std::vector<int64_t> candidates;
  table.Candidates(0, all, &candidates);
  EXPECT_THAT(candidates, ElementsAre(ia, ib, ic));
  table.NoteUsed(0, ib);
  table.Candidates(0, all, &candidates);
  EXPECT_THAT(candidates, ElementsAre(ic, ia, ib));
  table.Find(ia)->ready = true;
  table.Candidates(0, [](const StreamTable::Entry& s) { return s.ready; }, &candidates);
  EXPECT_THAT(candidates, ElementsAre(ia));
}

TEST(StreamTableTest, HugeCreditIsClampedAndReported) {
  FakeWorkerStream a("a");
  StreamTable table(1);
  StreamTable::Entry& entry = *table.Find(table.Add(0, &a));
  EXPECT_TRUE(StreamTable::AddCredit(entry, 10));
  EXPECT_EQ(entry.credit, 10);
  EXPECT_TRUE(StreamTable::AddCredit(entry, 1u << 30));  // still under the clamp
  EXPECT_FALSE(StreamTable::AddCredit(entry, 1u << 30));
  EXPECT_EQ(entry.credit, StreamTable::kMaxCredit);
}

TEST(StreamTableTest, SnapshotCountsReadyStreamsPerProcessor) {
  FakeWorkerStream a("a"), b("b");
  StreamTable table(1);
  const int64_t ia = table.Add(0, &a);
  table.Add(0, &b);
  StreamTable::Entry& ready = *table.Find(ia);
  ready.ready = true;
  ready.credit = 5;
  ready.in_flight = 2;
  table.EventLeft(ia);
  table.EventLeft(999);  // unknown: ignored
  EngineSnapshot snapshot;
  snapshot.processors.resize(1);
  table.AddToSnapshot(&snapshot);
  EXPECT_EQ(snapshot.connected_streams, 1);
  EXPECT_EQ(snapshot.processors[0].connected_streams, 1);
  EXPECT_EQ(snapshot.processors[0].credit, 5);
  EXPECT_EQ(snapshot.processors[0].in_flight, 1);
  EXPECT_EQ(snapshot.streams.size(), 2u);
}

}  // namespace
}  // namespace ferry
