#include "ooc/pipeline.hpp"

#include <doctest/doctest.h>

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
  ooc::run_pipeline(
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
  CHECK_THROWS_WITH_AS(ooc::run_pipeline(
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
  ooc::run_pipeline(plan, streams, options, [](const ooc::Tile&) { return 0; }, [](const ooc::Tile&, int&&) {});
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
  ooc::run_pipeline(plan, streams, options, [&](const ooc::Tile&) { return ++calls; }, [&](const ooc::Tile&, int&&) { ++calls; });
  CHECK(calls == 0);
}

TEST_CASE("resolve_threads takes an explicit count and otherwise every core") {
  CHECK(ooc::detail::resolve_threads(3) == 3);
  CHECK(ooc::detail::resolve_threads(0) >= 1);
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
  ooc::run_pipeline(part, streams, options, [](const ooc::Tile&) { return 0; }, [](const ooc::Tile&, int&&) {});
  REQUIRE(seen.size() == part.size());
  CHECK(seen.front().elements_done == 4 * ooc::kBlockElements);
  CHECK(seen.back().elements_done == part.elements());
  CHECK(seen.back().elements == 8 * ooc::kBlockElements + 3);
  CHECK(seen.back().tiles_done == 3);
  CHECK(seen.back().tiles == 3);
}
