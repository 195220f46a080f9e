// The experiment's scheduler (src/experiment/scheduler.cpp) under many threads, alone (it links
// nothing of dcalign), so that scripts/test-tsan.sh runs it under ThreadSanitizer: trials whose
// own code queues tasks while other workers fill earlier slots, each trial collected once its
// last task is done, the records in the order they were opened, and a failure that stops the
// pool while tasks still queue more.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "experiment/scheduler.hpp"

namespace dcalign::experiment::detail {
namespace {

Record rec(index_t trial, int k) {
  Record r;
  r.trial = trial;
  r.metric = std::to_string(k);
  r.value = k;
  return r;
}

TEST(SchedulerThreads, TrialsCollectTheirSlotsInOrderWhateverFinishesFirst) {
  constexpr int kTrials = 60, kTasks = 7;
  std::mutex m;
  std::map<index_t, std::vector<Record>> collected;
  std::vector<std::shared_ptr<UnitRun>> units;
  {
    TaskPool pool(4);
    for (index_t t = 0; t < kTrials; ++t) {
      auto run = std::make_shared<UnitRun>(pool, t, [&, t](UnitRun& u) {
        std::vector<Record> records;
        std::vector<RoundRecord> rounds;
        u.out().collect(records, rounds);
        EXPECT_EQ(rounds.size(), static_cast<size_t>(kTasks));
        std::lock_guard<std::mutex> lock(m);
        EXPECT_TRUE(collected.emplace(t, records).second) << "trial " << t << " finished twice";
      });
      units.push_back(run);
      pool.submit(static_cast<std::uint64_t>(t), 0, [run, t] {
        // The trial's own records between tasks, as Runner::trial makes them.
        int k = 0;
        for (int j = 0; j < kTasks; ++j) {
          run->out().now().push_back(rec(t, k++));
          const int mine = k++;
          run->defer([t, mine](TrialOut::Slot& slot) {
            volatile double spin = 0;
            for (int i = 0; i < 1000 * ((mine * 7 + static_cast<int>(t)) % 13); ++i) spin += i;
            slot.records.push_back(rec(t, mine));
            RoundRecord rr;
            rr.trial = t;
            rr.round = mine;
            slot.rounds.push_back(rr);
          });
        }
        run->release();
      });
    }
    pool.wait();
  }
  ASSERT_EQ(collected.size(), static_cast<size_t>(kTrials));
  for (const auto& [t, records] : collected) {
    ASSERT_EQ(records.size(), static_cast<size_t>(2 * kTasks));
    for (int k = 0; k < 2 * kTasks; ++k) EXPECT_EQ(records[k].value, k) << "trial " << t;
  }
}

TEST(SchedulerThreads, AFailureStopsThePoolWhileTasksStillQueue) {
  // Many workers: the first error comes out of wait(), whatever still runs or queues.
  std::atomic<int> ran{0};
  {
    TaskPool pool(4);
    for (std::uint64_t u = 0; u < 40; ++u)
      pool.submit(u, 0, [&pool, &ran, u] {
        ++ran;
        for (std::uint64_t s = 1; s <= 5; ++s) pool.submit(u, s, [&ran] { ++ran; });
        if (u == 3) throw std::runtime_error("unit 3");
      });
    EXPECT_THROW(pool.wait(), std::runtime_error);
  }
  EXPECT_GE(ran.load(), 1);
  // One worker: what is queued after the failure never runs.
  std::atomic<int> one{0};
  TaskPool single(1);
  single.submit(0, 0, [&] {
    ++one;
    single.submit(0, 1, [&] { ++one; });
    throw std::runtime_error("first");
  });
  EXPECT_THROW(single.wait(), std::runtime_error);
  single.submit(1, 0, [&] { ++one; });
  EXPECT_EQ(one.load(), 1);
}

}  // namespace
}  // namespace dcalign::experiment::detail
