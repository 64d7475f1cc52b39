// Tests for include/ooc/tile_plan.hpp and src/tile_plan.cpp: how an array is cut into
// tiles of whole numpy blocks.

#include "ooc/tile_plan.hpp"

#include "ooc/error.hpp"
#include "ooc/mapped_array.hpp"

#include <doctest/doctest.h>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace {

using ooc::kBlockElements;
using ooc::Tile;
using ooc::TilePlan;

// Checks everything a plan promises: tiles numbered 0..n-1, in order, contiguous, covering
// [0, elements) exactly once, each a whole number of blocks but the last, none empty.
void check_plan(const TilePlan& plan, std::int64_t elements) {
  CHECK(plan.elements() == elements);
  CHECK(plan.empty() == (elements == 0));
  std::int64_t next = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const Tile t = plan[i];
    CAPTURE(i);
    CHECK(t.index == i);
    CHECK(t.begin == next);
    CHECK(t.end > t.begin);
    CHECK(t.size() == t.end - t.begin);
    if (i + 1 < plan.size()) {
      CHECK(t.size() % kBlockElements == 0);
      CHECK(t.size() == plan[0].size());
    } else {
      CHECK(t.size() <= plan[0].size());
    }
    next = t.end;
  }
  CHECK(next == elements);
}

std::vector<Tile> tiles_of(const TilePlan& plan) {
  std::vector<Tile> out;
  for (std::size_t i = 0; i < plan.size(); ++i) out.push_back(plan[i]);
  return out;
}

bool same_tiles(const std::vector<Tile>& a, const std::vector<Tile>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].index != b[i].index || a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  return true;
}

std::filesystem::path temp_dir() {
  const char* env = std::getenv("OOC_TEST_TMP");
  std::filesystem::path dir = env ? env : std::filesystem::temp_directory_path() / "ooc_tile_plan_test";
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("the block size is numpy's ufunc buffer size") {
  CHECK(kBlockElements == 8192);
}

TEST_CASE("an empty array has no tiles") {
  const TilePlan plan = TilePlan::contiguous(0, 8);
  CHECK(plan.size() == 0);
  CHECK(plan.empty());
  CHECK(plan.elements() == 0);
  CHECK(TilePlan::contiguous(0, 1, 1).empty());
}

TEST_CASE("a one-element array has one tile of one element") {
  const TilePlan plan = TilePlan::contiguous(1, 8);
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].index == 0);
  CHECK(plan[0].begin == 0);
  CHECK(plan[0].end == 1);
  CHECK(plan[0].size() == 1);
}

TEST_CASE("an array smaller than one tile is one tile") {
  const TilePlan plan = TilePlan::contiguous(kBlockElements * 3 + 7, 4);
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].size() == kBlockElements * 3 + 7);
}

TEST_CASE("tiles are the tile size rounded down to whole blocks") {
  // 16 MiB of float64 is 2**21 elements: exactly 256 blocks.
  CHECK(TilePlan::contiguous(1 << 24, 8)[0].size() == (1 << 21));
  // 100000 bytes of float32 is 25000 elements: three whole blocks (24576).
  CHECK(TilePlan::contiguous(1 << 20, 4, 100000)[0].size() == 3 * kBlockElements);
  // One byte short of two blocks of uint8 is one block.
  CHECK(TilePlan::contiguous(1 << 20, 1, 2 * kBlockElements - 1)[0].size() == kBlockElements);
}

TEST_CASE("the default tile size is 16 MiB") {
  CHECK(ooc::kDefaultTileBytes == 16ull << 20);
  const TilePlan by_default = TilePlan::contiguous(10'000'000, 8);
  const TilePlan explicit_size = TilePlan::contiguous(10'000'000, 8, 16ull << 20);
  CHECK(same_tiles(tiles_of(by_default), tiles_of(explicit_size)));
}

TEST_CASE("a tile holds at least one block even when the tile size is tiny") {
  for (std::uint64_t tile_bytes : {0ull, 1ull, 7ull, 8ull, 4096ull, 8ull * kBlockElements - 1}) {
    CAPTURE(tile_bytes);
    const TilePlan plan = TilePlan::contiguous(5 * kBlockElements + 3, 8, tile_bytes);
    CHECK(plan.size() == 6);
    CHECK(plan[0].size() == kBlockElements);
    CHECK(plan[5].size() == 3);
    check_plan(plan, 5 * kBlockElements + 3);
  }
}

TEST_CASE("tiles cover every element exactly once, contiguously and in order") {
  for (std::int64_t elements : {std::int64_t{0}, std::int64_t{1}, kBlockElements - 1, kBlockElements,
                                kBlockElements + 1, 4 * kBlockElements, 4 * kBlockElements + 1,
                                std::int64_t{1'000'003}, std::int64_t{10'000'000}}) {
    for (int itemsize : {1, 2, 4, 8}) {
      for (std::uint64_t tile_bytes : {0ull, 1ull << 10, 1ull << 16, 100'000ull, 1ull << 20, 16ull << 20}) {
        CAPTURE(elements);
        CAPTURE(itemsize);
        CAPTURE(tile_bytes);
        check_plan(TilePlan::contiguous(elements, itemsize, tile_bytes), elements);
      }
    }
  }
}

TEST_CASE("an array of an exact number of tiles has no short last tile") {
  const TilePlan plan = TilePlan::contiguous(8 * kBlockElements, 1, 2 * kBlockElements);
  REQUIRE(plan.size() == 4);
  CHECK(plan[3].begin == 6 * kBlockElements);
  CHECK(plan[3].size() == 2 * kBlockElements);
}

TEST_CASE("the last tile takes what is left") {
  const TilePlan plan = TilePlan::contiguous(8 * kBlockElements + 5, 1, 2 * kBlockElements);
  REQUIRE(plan.size() == 5);
  CHECK(plan[4].begin == 8 * kBlockElements);
  CHECK(plan[4].end == 8 * kBlockElements + 5);
  CHECK(plan[4].size() == 5);
}

TEST_CASE("a wider item gets fewer elements per tile for the same tile size") {
  const std::uint64_t tile_bytes = 1 << 20;
  CHECK(TilePlan::contiguous(1 << 22, 1, tile_bytes)[0].size() == 1 << 20);
  CHECK(TilePlan::contiguous(1 << 22, 2, tile_bytes)[0].size() == 1 << 19);
  CHECK(TilePlan::contiguous(1 << 22, 4, tile_bytes)[0].size() == 1 << 18);
  CHECK(TilePlan::contiguous(1 << 22, 8, tile_bytes)[0].size() == 1 << 17);
}

TEST_CASE("a plan as large as any file can be is still planned without overflow") {
  // 2**62 bytes of float64: 2**59 elements in 2**38 tiles of 16 MiB (2**21 elements).
  const std::int64_t elements = std::int64_t{1} << 59;
  const TilePlan plan = TilePlan::contiguous(elements, 8);
  CHECK(plan.size() == (std::size_t{1} << 38));
  const Tile last = plan[plan.size() - 1];
  CHECK(last.end == elements);
  CHECK(last.size() == (1 << 21));
}

// A tile size near 2**64 bytes (parse_size accepts "16777215T") must not overflow.
TEST_CASE("a tile size larger than the array is one tile, however large") {
  for (std::uint64_t tile_bytes : {std::uint64_t{1} << 40, std::uint64_t{1} << 62,
                                  std::numeric_limits<std::uint64_t>::max()}) {
    CAPTURE(tile_bytes);
    const TilePlan plan = TilePlan::contiguous(10, 1, tile_bytes);
    CHECK(plan.size() == 1);
    if (plan.size() == 1) CHECK(plan[0].size() == 10);
  }
}

TEST_CASE("the plan depends only on elements, itemsize and tile size, not on thread count") {
  const auto reference = tiles_of(TilePlan::contiguous(3'000'001, 4, 1 << 18));
  for (std::size_t threads : {1u, 2u, 7u}) {
    CAPTURE(threads);
    oneapi::tbb::global_control limit(oneapi::tbb::global_control::max_allowed_parallelism, threads);
    std::vector<std::vector<Tile>> seen(8);
    oneapi::tbb::parallel_for(std::size_t{0}, seen.size(), [&](std::size_t i) {
      seen[i] = tiles_of(TilePlan::contiguous(3'000'001, 4, 1 << 18));
    });
    for (const auto& tiles : seen) CHECK(same_tiles(tiles, reference));
  }
}

TEST_CASE("tiles can be looked up in any order and give the same answer") {
  const TilePlan plan = TilePlan::contiguous(1'000'003, 2, 1 << 16);
  const auto in_order = tiles_of(plan);
  for (std::size_t i = plan.size(); i-- > 0;) {
    const Tile t = plan[i];
    CHECK(t.begin == in_order[i].begin);
    CHECK(t.end == in_order[i].end);
  }
}

TEST_CASE("a copied plan gives the same tiles") {
  const TilePlan plan = TilePlan::contiguous(123'456, 8, 1 << 17);
  const TilePlan copy = plan;
  CHECK(same_tiles(tiles_of(copy), tiles_of(plan)));
}

TEST_CASE("the plan for a mapped array is the contiguous plan of its size and itemsize") {
  const std::string path = (temp_dir() / "tile_plan_for_array.npy").string();
  {
    ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<float>, {3, 50'000});
    out.commit();
  }
  const ooc::MappedArray array = ooc::map_file(path);
  const TilePlan plan = TilePlan::for_array(array, 1 << 16);
  CHECK(same_tiles(tiles_of(plan), tiles_of(TilePlan::contiguous(150'000, 4, 1 << 16))));
  check_plan(plan, 150'000);
  CHECK(same_tiles(tiles_of(TilePlan::for_array(array)), tiles_of(TilePlan::contiguous(150'000, 4))));
  std::filesystem::remove(path);
}

TEST_CASE("the plan for a 0-d mapped array is one tile of one element") {
  const std::string path = (temp_dir() / "tile_plan_0d.npy").string();
  {
    ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<double>, {});
    out.commit();
  }
  const TilePlan plan = TilePlan::for_array(ooc::map_file(path));
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].size() == 1);
  std::filesystem::remove(path);
}

TEST_CASE("the plan for an empty mapped array has no tiles") {
  const std::string path = (temp_dir() / "tile_plan_empty.npy").string();
  {
    ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<std::int16_t>, {0, 4});
    out.commit();
  }
  CHECK(TilePlan::for_array(ooc::map_file(path)).empty());
  std::filesystem::remove(path);
}

TEST_CASE("a slice of a plan keeps the tiles' numbers and element ranges") {
  const TilePlan plan = TilePlan::contiguous(10 * kBlockElements + 7, 8, 8 * kBlockElements);  // 11 tiles
  REQUIRE(plan.size() == 11);
  const TilePlan part = plan.slice({3, 7});
  CHECK(part.size() == 4);
  CHECK(part.tiles().first == 3);
  CHECK(part.tiles().last == 7);
  CHECK(part.begin() == plan[3].begin);
  CHECK(part.end() == plan[6].end);
  CHECK(part.elements() == part.end() - part.begin());
  for (std::size_t i = 0; i < part.size(); ++i) {
    CAPTURE(i);
    CHECK(part[i].index == 3 + i);
    CHECK(part[i].begin == plan[3 + i].begin);
    CHECK(part[i].end == plan[3 + i].end);
  }
  // A slice of a slice counts positions within it; the last tile keeps its short end.
  const TilePlan tail = part.slice({2, 100});
  CHECK(tail.tiles().first == 5);
  CHECK(tail.tiles().last == 7);
  CHECK(plan.slice({9, 100}).end() == plan.end());
  CHECK(plan.slice({9, 100})[1].size() == 7);
}

TEST_CASE("an empty slice covers no elements and sits where it was cut") {
  const TilePlan plan = TilePlan::contiguous(5 * kBlockElements, 8, 8 * kBlockElements);
  const TilePlan none = plan.slice({2, 2});
  CHECK(none.empty());
  CHECK(none.elements() == 0);
  CHECK(none.begin() == plan[2].begin);
  CHECK(plan.slice({7, 3}).empty());
  CHECK(plan.slice({}).size() == plan.size());
}

TEST_CASE("the shares of a plan are contiguous, in part order, and differ by at most a tile") {
  for (std::int64_t tiles : {0, 1, 2, 3, 7, 64, 101}) {
    const TilePlan plan = TilePlan::contiguous(tiles * kBlockElements, 8, 8 * kBlockElements);
    REQUIRE(plan.size() == static_cast<std::size_t>(tiles));
    for (int parts : {1, 2, 3, 4, 7, 200}) {
      CAPTURE(tiles);
      CAPTURE(parts);
      std::size_t next = 0, smallest = plan.size(), largest = 0;
      for (int part = 0; part < parts; ++part) {
        const ooc::TileRange share = plan.share(part, parts);
        CHECK(share.first == next);
        CHECK(share.last >= share.first);
        smallest = std::min(smallest, share.last - share.first);
        largest = std::max(largest, share.last - share.first);
        next = share.last;
      }
      CHECK(next == plan.size());
      CHECK(largest - smallest <= 1);
    }
  }
  const TilePlan plan = TilePlan::contiguous(3 * kBlockElements, 8, 8 * kBlockElements);
  CHECK_THROWS_AS(plan.share(3, 3), ooc::UsageError);
  CHECK_THROWS_AS(plan.share(0, 0), ooc::UsageError);
}

TEST_CASE("shares of a plan with more tiles than 64 bits times the parts can count do not overflow") {
  const TilePlan plan = TilePlan::contiguous(std::numeric_limits<std::int64_t>::max() / 8, 8, 1);
  const int parts = 1 << 20;
  const ooc::TileRange last = plan.share(parts - 1, parts);
  CHECK(last.last == plan.size());
  CHECK(last.first < last.last);
}

TEST_CASE("a slab plan packs whole slabs into tiles and never splits one across tiles") {
  // 1000 slabs of 300 float64 elements: 2400 bytes a slab, 10 slabs per 24000-byte tile.
  const TilePlan plan = TilePlan::slabs(1000, 300, 8, 24000);
  CHECK(plan.slab_elements() == 300);
  CHECK(plan.size() == 100);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    CHECK(plan[i].begin == static_cast<std::int64_t>(i) * 3000);
    CHECK(plan[i].size() == 3000);
  }
  const TilePlan odd = TilePlan::slabs(7, 300, 8, 24000);  // the last tile takes the rest
  CHECK(odd.size() == 1);
  CHECK(odd[0].end == 2100);
  const TilePlan tiny = TilePlan::slabs(5, 300, 8, 1);  // at least one slab a tile
  CHECK(tiny.size() == 5);
  CHECK(tiny[4].begin == 1200);
}

TEST_CASE("a slab larger than a tile is cut into whole blocks counted from its start") {
  // 3 slabs of 20000 elements, tiles of 2 blocks: pieces [0, 16384) and [16384, 20000).
  const TilePlan plan = TilePlan::slabs(3, 20000, 4, 2 * kBlockElements * 4);
  REQUIRE(plan.size() == 6);
  std::int64_t next = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const Tile t = plan[i];
    CHECK(t.index == i);
    CHECK(t.begin == next);
    CHECK((t.begin % 20000) % kBlockElements == 0);
    CHECK(t.begin / 20000 == (t.end - 1) / 20000);  // within one slab
    next = t.end;
  }
  CHECK(next == 60000);
  CHECK(plan[1].size() == 20000 - 2 * kBlockElements);
  CHECK(TilePlan::slabs(0, 5, 8).empty());
  CHECK(TilePlan::slabs(5, 0, 8).empty());
}
