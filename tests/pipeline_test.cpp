#include "ooc/internal/pipeline.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

struct Recorder {
  std::vector<std::size_t> committed;
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
};

void run_recorded(const ooc::TilePlan& plan, int threads, Recorder& rec) {
  ooc::PipelineOptions options;
  options.threads = threads;
  ooc::detail::Streams streams(plan, options);
  ooc::detail::run_pipeline(
      plan, streams, options,
      [&](const ooc::Tile& tile) {
        const int now = ++rec.running;
        int seen = rec.most_running.load();
        while (now > seen && !rec.most_running.compare_exchange_weak(seen, now)) {
        }
        // Uneven kernel times, so tiles finish out of order.
        std::this_thread::sleep_for(std::chrono::microseconds((tile.index * 7919) % 3000));
        --rec.running;
        return tile.index;
      },
      [&](const ooc::Tile& tile, std::size_t&& result) {
        CHECK(result == tile.index);
        rec.committed.push_back(tile.index);
      });
}

}  // namespace

TEST_CASE("the commit stage sees every tile once, in tile order, for any thread count") {
  const auto plan = ooc::TilePlan::contiguous(100 * ooc::kBlockElements + 5, 8, 8 * ooc::kBlockElements);
  REQUIRE(plan.size() == 101);
  for (int threads : {1, 2, 7}) {
    Recorder rec;
    run_recorded(plan, threads, rec);
    REQUIRE(rec.committed.size() == plan.size());
    for (std::size_t i = 0; i < rec.committed.size(); ++i) CHECK(rec.committed[i] == i);
  }
}

TEST_CASE("more threads than cores really run kernels side by side") {
  const auto plan = ooc::TilePlan::contiguous(60 * ooc::kBlockElements, 8, 8 * ooc::kBlockElements);
  Recorder rec;
  run_recorded(plan, 7, rec);
  CHECK(rec.most_running.load() > 2);
  Recorder single;
  run_recorded(plan, 1, single);
  CHECK(single.most_running.load() == 1);
}

TEST_CASE("an exception in a kernel cancels the run and reaches the caller") {
  const auto plan = ooc::TilePlan::contiguous(50 * ooc::kBlockElements, 8, 8 * ooc::kBlockElements);
  ooc::PipelineOptions options;
  ooc::detail::Streams streams(plan, options);
  std::atomic<std::size_t> commits{0};
  CHECK_THROWS_WITH_AS(ooc::detail::run_pipeline(
                           plan, streams, options,
                           [&](const ooc::Tile& tile) {
                             if (tile.index == 10) throw std::runtime_error("tile 10 is bad");
                             return 0;
                           },
                           [&](const ooc::Tile&, int&&) { ++commits; }),
                       "tile 10 is bad", std::runtime_error);
  CHECK(commits.load() <= 10);
}

TEST_CASE("progress is reported after each tile, ending at the whole array") {
  const auto plan = ooc::TilePlan::contiguous(10 * ooc::kBlockElements + 1, 4, 4 * ooc::kBlockElements);
  ooc::PipelineOptions options;
  std::vector<ooc::Progress> seen;
  options.on_progress = [&](const ooc::Progress& p) { seen.push_back(p); };
  ooc::detail::Streams streams(plan, options);
  ooc::detail::run_pipeline(plan, streams, options, [](const ooc::Tile&) { return 0; }, [](const ooc::Tile&, int&&) {});
  REQUIRE(seen.size() == plan.size());
  for (std::size_t i = 0; i < seen.size(); ++i) CHECK(seen[i].tiles_done == i + 1);
  CHECK(seen.back().elements_done == plan.elements());
  CHECK(seen.back().tiles == plan.size());
}

TEST_CASE("an empty plan runs no kernel and commits nothing") {
  const auto plan = ooc::TilePlan::contiguous(0, 8);
  ooc::PipelineOptions options;
  ooc::detail::Streams streams(plan, options);
  int calls = 0;
  ooc::detail::run_pipeline(plan, streams, options, [&](const ooc::Tile&) { return ++calls; }, [&](const ooc::Tile&, int&&) { ++calls; });
  CHECK(calls == 0);
}

TEST_CASE("resolve_threads takes an explicit count and otherwise every core") {
  CHECK(ooc::detail::resolve_threads(3) == 3);
  CHECK(ooc::detail::resolve_threads(0) >= 1);
}

TEST_CASE("a resumed run starts at first_tile, and its progress counts the tiles done before") {
  const auto plan = ooc::TilePlan::contiguous(10 * ooc::kBlockElements, 8, ooc::kBlockElements * 8);
  ooc::PipelineOptions options;
  options.threads = 3;
  options.first_tile = 4;
  std::vector<ooc::Progress> seen;
  std::vector<std::size_t> ran;
  std::mutex m;
  options.on_progress = [&](const ooc::Progress& p) { seen.push_back(p); };
  ooc::detail::Streams streams(plan, options);
  ooc::detail::run_pipeline(
      plan, streams, options,
      [&](const ooc::Tile& tile) {
        std::lock_guard lock(m);
        ran.push_back(tile.index);
        return 0;
      },
      [](const ooc::Tile&, int&&) {});
  std::sort(ran.begin(), ran.end());
  CHECK(ran == std::vector<std::size_t>{4, 5, 6, 7, 8, 9});
  REQUIRE(seen.size() == 6);
  CHECK(seen.front().tiles_done == 5);
  CHECK(seen.front().elements_before == 4 * ooc::kBlockElements);
  CHECK(seen.back().elements_done == plan.elements());
  options.first_tile = plan.size();  // everything was done: nothing runs
  ran.clear();
  ooc::detail::run_pipeline(plan, streams, options, [&](const ooc::Tile& t) { ran.push_back(t.index); return 0; },
                    [](const ooc::Tile&, int&&) {});
  CHECK(ran.empty());
}

namespace {

// Checks the order the journal relies on: a tile is saved before its kernel runs and
// recorded after its commit, in order, with at most tokens_in_flight tiles between.
struct OrderJournal : ooc::TileJournal {
  std::mutex m;
  std::vector<int> state;  // per tile: 0 new, 1 saved, 2 kernel ran, 3 committed, 4 recorded
  std::size_t recorded = 0;
  std::size_t most_ahead = 0;
  explicit OrderJournal(std::size_t tiles) : state(tiles, 0) {}
  void before_write(const ooc::Tile& tile) override {
    std::lock_guard lock(m);
    CHECK(state[tile.index] == 0);
    state[tile.index] = 1;
    most_ahead = std::max(most_ahead, tile.index + 1 - recorded);
  }
  void after_commit(const ooc::Tile& tile) override {
    std::lock_guard lock(m);
    CHECK(state[tile.index] == 3);
    CHECK(tile.index == recorded);
    state[tile.index] = 4;
    ++recorded;
  }
};

}  // namespace

TEST_CASE("a journal sees each tile saved before its kernel and recorded after its commit, in order") {
  const auto plan = ooc::TilePlan::contiguous(64 * ooc::kBlockElements, 8, ooc::kBlockElements * 8);
  for (int threads : {1, 2, 7}) {
    CAPTURE(threads);
    OrderJournal journal(plan.size());
    ooc::PipelineOptions options;
    options.threads = threads;
    options.journal = &journal;
    ooc::detail::Streams streams(plan, options);
    ooc::detail::run_pipeline(
        plan, streams, options,
        [&](const ooc::Tile& tile) {
          {
            std::lock_guard lock(journal.m);
            CHECK(journal.state[tile.index] == 1);
            journal.state[tile.index] = 2;
          }
          std::this_thread::sleep_for(std::chrono::microseconds((tile.index * 7919) % 2000));
          return 0;
        },
        [&](const ooc::Tile& tile, int&&) {
          std::lock_guard lock(journal.m);
          CHECK(journal.state[tile.index] == 2);
          journal.state[tile.index] = 3;
        });
    CHECK(journal.recorded == plan.size());
    // Tile i + tokens never starts before tile i is recorded: the journal's slots suffice.
    CHECK(journal.most_ahead <= ooc::detail::tokens_in_flight(options));
  }
}

namespace {

// A kernel result that counts its live copies.
struct Counted {
  static inline std::atomic<int> alive{0};
  std::vector<double> payload = std::vector<double>(64);
  Counted() { ++alive; }
  Counted(const Counted& other) : payload(other.payload) { ++alive; }
  Counted(Counted&& other) noexcept : payload(std::move(other.payload)) { ++alive; }
  ~Counted() { --alive; }
};

}  // namespace

TEST_CASE("results of tiles in flight when a run fails or is cancelled are all destroyed") {
  const auto plan = ooc::TilePlan::contiguous(200 * ooc::kBlockElements, 8, ooc::kBlockElements * 8);
  for (int threads : {1, 2, 7}) {
    CAPTURE(threads);
    ooc::PipelineOptions options;
    options.threads = threads;
    ooc::detail::Streams streams(plan, options);
    CHECK_THROWS(ooc::detail::run_pipeline(
        plan, streams, options,
        [&](const ooc::Tile& tile) {
          if (tile.index == 40) throw std::runtime_error("bad tile");
          std::this_thread::sleep_for(std::chrono::microseconds((tile.index * 7919) % 500));
          return Counted{};
        },
        [](const ooc::Tile&, Counted&&) {}));
    CHECK(Counted::alive.load() == 0);
    std::atomic<bool> cancel{false};
    options.cancel = &cancel;
    CHECK_THROWS_AS(ooc::detail::run_pipeline(
                        plan, streams, options,
                        [&](const ooc::Tile& tile) {
                          if (tile.index == 30) cancel = true;
                          return Counted{};
                        },
                        [](const ooc::Tile&, Counted&&) {}),
                    ooc::Cancelled);
    CHECK(Counted::alive.load() == 0);
  }
}

TEST_CASE("a part of a plan runs its own tiles, in order, under their numbers in the whole plan") {
  const auto whole = ooc::TilePlan::contiguous(40 * ooc::kBlockElements + 3, 8, 4 * ooc::kBlockElements);
  const auto part = whole.slice({4, 9});
  for (int threads : {1, 2, 7}) {
    Recorder rec;
    run_recorded(part, threads, rec);
    REQUIRE(rec.committed.size() == 5);
    for (std::size_t i = 0; i < rec.committed.size(); ++i) CHECK(rec.committed[i] == 4 + i);
  }
}

TEST_CASE("progress over a part of a plan counts that part's tiles and elements") {
  // Tiles of 4 blocks: 10 whole ones and one of 3 elements.
  const auto part = ooc::TilePlan::contiguous(40 * ooc::kBlockElements + 3, 8, 32 * ooc::kBlockElements).slice({8, 100});
  ooc::PipelineOptions options;
  std::vector<ooc::Progress> seen;
  options.on_progress = [&](const ooc::Progress& p) { seen.push_back(p); };
  ooc::detail::Streams streams(part, options);
  ooc::detail::run_pipeline(part, streams, options, [](const ooc::Tile&) { return 0; }, [](const ooc::Tile&, int&&) {});
  REQUIRE(seen.size() == part.size());
  CHECK(seen.front().elements_done == 4 * ooc::kBlockElements);
  CHECK(seen.back().elements_done == part.elements());
  CHECK(seen.back().elements == 8 * ooc::kBlockElements + 3);
  CHECK(seen.back().tiles_done == 3);
  CHECK(seen.back().tiles == 3);
}
