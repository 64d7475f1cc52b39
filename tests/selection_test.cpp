#include "ooc/ooc.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

using ooc::testing::ScratchDir;

namespace {

// A (rows, cols) array of 0, 1, 2, ... in memory order: an element's value is its
// memory index, so a selection's values say where each element came from.
ooc::MappedArray iota_array(const std::string& path, std::int64_t rows, std::int64_t cols, ooc::Order order) {
  ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<double>, {rows, cols}, order);
  auto values = out.writable_values<double>();
  std::iota(values.begin(), values.end(), 0.0);
  out.commit();
  return ooc::map_file(path);
}

// The selection's values in its memory order, read as the pipeline reads them.
std::vector<double> values_of(const ooc::MappedArray& a, std::uint64_t tile_bytes = 64 * 1024) {
  std::vector<double> out(static_cast<std::size_t>(a.size()));
  ooc::PipelineOptions options;
  options.tile_bytes = tile_bytes;
  ooc::for_each_tile(
      a,
      [&](const ooc::Tile& piece, const auto& x) {
        for (Eigen::Index i = 0; i < x.size(); ++i) out[static_cast<std::size_t>(piece.begin + i)] = static_cast<double>(x[i]);
      },
      options);
  return out;
}

}  // namespace

TEST_CASE("a selection's text splits off its path; brackets inside it nest") {
  CHECK(ooc::split_selection("x.npy[::5, 3]") == std::make_pair(std::string("x.npy"), std::string("::5, 3")));
  CHECK(ooc::split_selection("d.h5:/g/x[1:2, [0, 4]]") ==
        std::make_pair(std::string("d.h5:/g/x"), std::string("1:2, [0, 4]")));
  CHECK_FALSE(ooc::split_selection("x.npy"));
  CHECK_FALSE(ooc::split_selection("[1]"));
  CHECK_FALSE(ooc::split_selection("x.npy]"));
}

TEST_CASE("the parser reads slices, indices, one list, and refuses the rest with the array's name") {
  const ooc::Selection s = ooc::Selection::parse(" -5::-2 , 3, [1, -1, 0] ", "a.npy");
  REQUIRE(s.items().size() == 3);
  const auto& slice = std::get<ooc::Slice>(s.items()[0]);
  CHECK(slice.start == -5);
  CHECK_FALSE(slice.stop);
  CHECK(slice.step == -2);
  CHECK(std::get<std::int64_t>(s.items()[1]) == 3);
  CHECK(std::get<std::vector<std::int64_t>>(s.items()[2]) == std::vector<std::int64_t>{1, -1, 0});
  CHECK(s.text() == "[-5::-2 , 3, [1, -1, 0]]");
  CHECK(ooc::Selection::parse("").items().empty());
  CHECK(ooc::Selection::parse("4,").items().size() == 1);
  for (const char* bad : {"[1], [2]", "...", "None", "1:2:3:4", "x", "99999999999999999999", "[[1]]", "1,,2"})
    CHECK_THROWS_WITH_AS(ooc::Selection::parse(bad, "a.npy"), doctest::Contains("a.npy: selection ["),
                         ooc::UsageError);
}

TEST_CASE("basic slicing keeps the source's order and reads numpy's elements") {
  ScratchDir dir;
  for (ooc::Order order : {ooc::Order::c, ooc::Order::fortran}) {
    CAPTURE(static_cast<int>(order));
    ooc::MappedArray a = ooc::map_file(iota_array(dir.file("a.npy"), 1000, 6, order).path()).select("::-7, 1:4");
    CHECK(a.shape() == ooc::Shape{143, 3});
    CHECK(a.order() == order);
    CHECK_FALSE(a.mapped());
    const std::vector<double> v = values_of(a);
    // Element (i, j) of the selection is source (999 - 7i, 1 + j).
    auto source = [&](std::int64_t r, std::int64_t c) {
      return static_cast<double>(order == ooc::Order::c ? r * 6 + c : c * 1000 + r);
    };
    for (std::int64_t i : {0, 1, 142})
      for (std::int64_t j : {0, 2}) {
        const std::int64_t m = order == ooc::Order::c ? i * 3 + j : j * 143 + i;
        CHECK(v[static_cast<std::size_t>(m)] == source(999 - 7 * i, 1 + j));
      }
  }
}

TEST_CASE("a list in the last axis of a 2-D result is laid out as numpy's: Fortran order") {
  ScratchDir dir;
  iota_array(dir.file("a.npy"), 20, 6, ooc::Order::c);
  const ooc::MappedArray a = ooc::map_file(dir.file("a.npy") + "[10:13, [5, 0]]");
  CHECK(a.shape() == ooc::Shape{3, 2});
  CHECK(a.order() == ooc::Order::fortran);
  // The list's axis outermost: column 5's rows, then column 0's.
  CHECK(values_of(a) == std::vector<double>{65, 71, 77, 60, 66, 72});
  // At the front of the shape it is C order.
  const ooc::MappedArray b = ooc::map_file(dir.file("a.npy") + "[[5, 0], 1:3]");
  CHECK(b.order() == ooc::Order::c);
  CHECK(values_of(b) == std::vector<double>{31, 32, 1, 2});
}

TEST_CASE("index errors are numpy's messages, naming the array") {
  ScratchDir dir;
  iota_array(dir.file("a.npy"), 10, 4, ooc::Order::c);
  const std::string a = dir.file("a.npy");
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[10]"), doctest::Contains("index 10 is out of bounds for axis 0 with size 10"),
                       ooc::UsageError);
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[0, 0, 0]"), doctest::Contains("too many indices"), ooc::UsageError);
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[::0]"), doctest::Contains("slice step cannot be zero"), ooc::UsageError);
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[::2]", ooc::Access::read_write), doctest::Contains("in place"),
                       ooc::UsageError);
  CHECK(ooc::read_info(a + "[:, 3]").shape == ooc::Shape{10});
}

TEST_CASE("a selection sums as numpy sums the selected view, whatever the tiles") {
  ScratchDir dir;
  ooc::MappedArray whole = iota_array(dir.file("a.npy"), 50000, 8, ooc::Order::c);
  (void)whole;
  const ooc::MappedArray a = ooc::map_file(dir.file("a.npy") + "[::3, [1, 6]]");
  CHECK(a.order() == ooc::Order::fortran);
  double expected = 0;  // integers: exact in any order
  for (std::int64_t c : {1, 6})
    for (std::int64_t r = 0; r < 50000; r += 3) expected += static_cast<double>(r * 8 + c);
  for (std::uint64_t tile : {std::uint64_t{64 << 10}, std::uint64_t{1 << 20}}) {
    ooc::PipelineOptions options;
    options.tile_bytes = tile;
    CHECK(ooc::reduce(a, ooc::kernels::Sum{}, options).as_double() == expected);
  }
  CHECK(ooc::selection_summary(a).find("selection [::3, [1, 6]]") != std::string::npos);
  CHECK(ooc::selection_summary(whole).empty());
}

TEST_CASE("a few columns of a row range are read in one pass: the first column's tiles gather the others") {
  ScratchDir dir;
  constexpr std::int64_t kRows = 200000, kCols = 40;
  iota_array(dir.file("a.npy"), kRows, kCols, ooc::Order::c);
  const std::vector<std::int64_t> columns{36, 0, 9, 18, 27};
  auto expected = [&](std::int64_t start, std::int64_t step) {  // numpy's order: column after column
    std::vector<double> out;
    for (std::int64_t c : columns)
      for (std::int64_t r = start; step > 0 ? r < kRows : r >= 0; r += step) out.push_back(static_cast<double>(r * kCols + c));
    return out;
  };
  const std::string list = "[36, 0, 9, 18, 27]";
  const ooc::MappedArray a = ooc::map_file(dir.file("a.npy") + "[::5, " + list + "]");
  CHECK(ooc::selection_summary(a).find("one pass over the rows: 5 blocks of 40000 elements") != std::string::npos);
  // Tiles that end inside a block, that straddle two, and one tile for everything.
  for (std::uint64_t tile : {std::uint64_t{64 << 10}, std::uint64_t{200 << 10}, std::uint64_t{16 << 20}})
    CHECK(values_of(a, tile) == expected(0, 5));
  const ooc::MappedArray backwards = ooc::map_file(dir.file("a.npy") + "[::-3, " + list + "]");
  CHECK(values_of(backwards, 96 << 10) == expected(kRows - 1, -3));

  // The later columns' tiles never read the source: values changed in it after the
  // first tile (rows 0-8191 of every column gathered) are not seen in column 36's tiles
  // of those rows, the source's pages were read once.
  {
    ooc::MappedArray writable = ooc::map_file(dir.file("a.npy"), ooc::Access::read_write);
    const ooc::MappedArray b = ooc::map_file(dir.file("a.npy") + "[:, " + list + "]");
    std::vector<double> got(static_cast<std::size_t>(b.size()));
    ooc::PipelineOptions options;
    options.tile_bytes = 64 << 10;
    options.threads = 1;
    ooc::for_each_tile(
        b,
        [&](const ooc::Tile& piece, const auto& x) {
          if (piece.begin == 0) writable.writable_values<double>().head(8192 * kCols).setConstant(-1);
          for (Eigen::Index i = 0; i < x.size(); ++i) got[static_cast<std::size_t>(piece.begin + i)] = static_cast<double>(x[i]);
        },
        options);
    for (std::size_t j = 1; j < columns.size(); ++j)
      for (std::int64_t r : {std::int64_t{0}, std::int64_t{8191}})
        CHECK(got[j * kRows + static_cast<std::size_t>(r)] == static_cast<double>(r * kCols + columns[j]));
  }
  iota_array(dir.file("a.npy"), kRows, kCols, ooc::Order::c);

  // A run of only later tiles (an MPI rank's share) reads their rows from the source: a
  // fresh selection, nothing gathered.
  const ooc::MappedArray fresh = ooc::map_file(dir.file("a.npy") + "[::5, " + list + "]");
  ooc::PipelineOptions later;
  later.tile_bytes = 64 << 10;
  later.tiles = ooc::TileRange{6, 12};  // elements 49152-98303: the blocks of columns 0 and 9
  const std::vector<double> all = expected(0, 5);
  double sum = 0;  // integers: exact in any order
  for (std::size_t i = 6 * 8192; i < 12 * 8192; ++i) sum += all[i];
  CHECK(ooc::reduce(fresh, ooc::kernels::Sum{}, later).as_double() == sum);
}

TEST_CASE("a list outermost whose blocks lie apart (whole rows) is read block after block, no stash") {
  ScratchDir dir;
  iota_array(dir.file("a.npy"), 1000, 8, ooc::Order::c);
  const ooc::MappedArray rows = ooc::map_file(dir.file("a.npy") + "[[5, 0, 7], 2:6]");  // the list outermost, rows apart
  CHECK(ooc::selection_summary(rows).find("pass") == std::string::npos);
  CHECK(values_of(rows) == std::vector<double>{42, 43, 44, 45, 2, 3, 4, 5, 58, 59, 60, 61});
}

namespace {

// Python's range(*slice(start, stop, step).indices(n)), computed in 128 bits: the
// reference for slices whose steps, starts and stops are near the ends of int64.
std::vector<double> python_slice(std::int64_t n, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
                                 std::int64_t step) {
  using Wide = __int128;
  auto adjust = [&](std::optional<std::int64_t> v, Wide fallback) -> Wide {
    if (!v) return fallback;
    Wide x = *v;
    if (x < 0) x += n;
    if (x < 0) return step < 0 ? -1 : 0;
    if (x >= n) return step < 0 ? n - 1 : n;
    return x;
  };
  const Wide from = adjust(start, step < 0 ? n - 1 : 0), to = adjust(stop, step < 0 ? -1 : n);
  std::vector<double> out;
  for (Wide i = from; step > 0 ? i < to : i > to; i += step) out.push_back(static_cast<double>(i));
  return out;
}

std::string part(std::optional<std::int64_t> v) { return v ? std::to_string(*v) : ""; }

}  // namespace

TEST_CASE("slices with steps, starts and stops near the ends of int64 select Python's elements") {
  ScratchDir dir;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const std::int64_t n = 20;
  iota_array(dir.file("v.npy"), n, 1, ooc::Order::c);  // element i is i
  const std::vector<std::optional<std::int64_t>> ends = {std::nullopt, 0, 3, -3, 19, 20, -20, -21, kMax, kMin,
                                                        kMax - 5, kMin + 5, 4611686018427387904, -4611686018427387904};
  for (std::int64_t step : {kMax, -kMax, kMin, kMax - 7, kMin + 1, kMax / 2, kMin / 2, std::int64_t{1}, std::int64_t{-1},
                            std::int64_t{7}, std::int64_t{-7}})
    for (const auto& start : ends)
      for (const auto& stop : ends) {
        const std::string text = part(start) + ":" + part(stop) + ":" + std::to_string(step) + ", 0";
        CAPTURE(text);
        const std::vector<double> want = python_slice(n, start, stop, step);
        const ooc::MappedArray a = ooc::map_file(dir.file("v.npy") + "[" + text + "]");
        REQUIRE(a.shape() == ooc::Shape{static_cast<std::int64_t>(want.size())});
        CHECK(values_of(a) == want);
      }
}

TEST_CASE("a slice's start, stop or step beyond 64 bits is clamped, as Python clamps it; an index is refused") {
  const ooc::Selection s = ooc::Selection::parse("-99999999999999999999:+99999999999999999999:-99999999999999999999", "a.npy");
  const auto& slice = std::get<ooc::Slice>(s.items()[0]);
  CHECK(slice.start == std::numeric_limits<std::int64_t>::min());
  CHECK(slice.stop == std::numeric_limits<std::int64_t>::max());
  CHECK(slice.step == std::numeric_limits<std::int64_t>::min());
  CHECK_THROWS_WITH_AS(ooc::Selection::parse("99999999999999999999", "a.npy"), doctest::Contains("does not fit in 64 bits"),
                       ooc::UsageError);
  ScratchDir dir;
  iota_array(dir.file("v.npy"), 20, 1, ooc::Order::c);
  CHECK(values_of(ooc::map_file(dir.file("v.npy") + "[:99999999999999999999:99999999999999999999, 0]")) ==
        std::vector<double>{0});
  CHECK(values_of(ooc::map_file(dir.file("v.npy") + "[::-99999999999999999999, 0]")) == std::vector<double>{19});
  CHECK(ooc::map_file(dir.file("v.npy") + "[99999999999999999999:, 0]").size() == 0);
}

TEST_CASE("a selection's tiles are sized by the bytes of its source they span") {
  ScratchDir dir;
  iota_array(dir.file("a.npy"), 5000, 40, ooc::Order::c);
  constexpr std::uint64_t kTile = 16 << 20;
  const ooc::MappedArray whole = ooc::map_file(dir.file("a.npy"));
  CHECK(ooc::tile_bytes_spanning(whole, kTile) == kTile);
  // Every 5th row of 5 of 40 columns: numpy's order is column after column, and each
  // column's elements cover the whole range, one per 200 elements of it (the first
  // column's tiles read the other columns' elements of the same rows: still one tile's
  // span of the source).
  auto spanning = [&](const ooc::MappedArray& a) { return static_cast<double>(ooc::tile_bytes_spanning(a, kTile)); };
  const ooc::MappedArray sparse = ooc::map_file(dir.file("a.npy") + "[::5, [0, 9, 18, 27, 36]]");
  CHECK(spanning(sparse) == doctest::Approx(kTile / 200).epsilon(0.01));
  // Every 5th row, every column: one in 5.
  CHECK(spanning(ooc::map_file(dir.file("a.npy") + "[::5]")) == doctest::Approx(kTile / 5).epsilon(0.01));
  // A dense block of rows spans no more than it selects.
  CHECK(ooc::tile_bytes_spanning(ooc::map_file(dir.file("a.npy") + "[100:200]"), kTile) == kTile);
  // Never below one element.
  CHECK(ooc::tile_bytes_spanning(sparse, 8) == 8);
}

TEST_CASE("a selection of a source not in the page cache also gets tiles spanning the tile size of the source") {
  ScratchDir dir;
  iota_array(dir.file("a.npy"), 20000, 40, ooc::Order::c);
  constexpr std::uint64_t kTile = 16 << 20;
  {  // out of the page cache: written back, then dropped (clean pages go at once)
    const int fd = ::open(dir.file("a.npy").c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::fdatasync(fd) == 0);
    REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
    // tmpfs keeps every page: nothing to test there.
    const auto size = static_cast<std::size_t>(::lseek(fd, 0, SEEK_END));
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(map != MAP_FAILED);
    std::vector<unsigned char> resident((size + 4095) / 4096);
    REQUIRE(::mincore(map, size, resident.data()) == 0);
    ::munmap(map, size);
    ::close(fd);
    if (static_cast<std::size_t>(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; })) * 2 >
        resident.size()) {
      MESSAGE("skipped: the file system keeps the file in memory (tmpfs?)");
      return;
    }
  }
  const ooc::MappedArray cold = ooc::map_file(dir.file("a.npy") + "[::5, [0, 9, 18, 27, 36]]");
  // Cold too, the tiles span --tile-bytes of the source: memory bounded as for a full read.
  CHECK(static_cast<double>(ooc::tile_bytes_spanning(cold, kTile)) == doctest::Approx(kTile / 200).epsilon(0.01));
  {  // read back in
    std::ifstream in(dir.file("a.npy"), std::ios::binary);
    std::vector<char> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(!all.empty());
  }
  const ooc::MappedArray warm = ooc::map_file(dir.file("a.npy") + "[::5, [0, 9, 18, 27, 36]]");
  CHECK(static_cast<double>(ooc::tile_bytes_spanning(warm, kTile)) == doctest::Approx(kTile / 200).epsilon(0.01));
}
