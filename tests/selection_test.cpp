#include "ooc/ooc.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
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
                       ooc::IndexError);
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[0, 0, 0]"), doctest::Contains("too many indices"), ooc::IndexError);
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[:, [1, -5]]"), doctest::Contains("index -5 is out of bounds"), ooc::IndexError);
  // Where numpy raises IndexError the kind says so (Python's IndexError), and numpy's own words
  // come apart from the selection they were said about.
  try {
    ooc::map_file(a + "[:, 4]");
    FAIL("no error");
  } catch (const ooc::IndexError& e) {
    CHECK(e.kind() == ooc::ErrorKind::index);
    CHECK(e.path() == a);
    CHECK(std::string(e.what()) == a + ": selection [:, 4]: index 4 is out of bounds for axis 1 with size 4");
    CHECK(e.numpy_text() == "index 4 is out of bounds for axis 1 with size 4");
  }
  // numpy's ValueError stays a plain usage error
  try {
    ooc::map_file(a + "[::0]");
    FAIL("no error");
  } catch (const ooc::UsageError& e) {
    CHECK(e.kind() == ooc::ErrorKind::usage);
  }
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

namespace {

// A bool .npy of `shape` in `order` whose element at C-order position f is keep(f).
template <class Keep>
std::string mask_file(const std::string& path, const ooc::Shape& shape, ooc::Order order, Keep keep) {
  ooc::MappedArray out = ooc::create_npy(path, ooc::DType(ooc::Kind::boolean, 1), shape, order);
  const std::span<std::byte> bytes = out.writable_bytes();
  const std::size_t k = shape.size();
  std::vector<std::int64_t> digit(k);
  for (std::int64_t f = 0; f < out.size(); ++f) {
    std::int64_t rest = f, at = 0, stride = 1;
    for (std::size_t j = k; j-- > 0;) {
      digit[j] = rest % shape[j];
      rest /= shape[j];
    }
    if (order == ooc::Order::c) {
      at = f;
    } else {
      for (std::size_t j = 0; j < k; ++j) {
        at += digit[j] * stride;
        stride *= shape[j];
      }
    }
    bytes[static_cast<std::size_t>(at)] = std::byte{keep(f) ? std::uint8_t{1} : std::uint8_t{0}};
  }
  out.commit();
  return path;
}

// The values a result of `shape` in `order` holds, in memory order, where value(index)
// gives the element at a C-order multi-index.
template <class Value>
std::vector<double> in_memory_order(const ooc::Shape& shape, ooc::Order order, Value value) {
  const std::int64_t size = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  std::vector<double> out(static_cast<std::size_t>(size));
  std::vector<std::int64_t> index(shape.size());
  for (std::int64_t m = 0; m < size; ++m) {
    std::int64_t rest = m;
    if (order == ooc::Order::c) {
      for (std::size_t j = shape.size(); j-- > 0;) {
        index[j] = rest % shape[j];
        rest /= shape[j];
      }
    } else {
      for (std::size_t j = 0; j < shape.size(); ++j) {
        index[j] = rest % shape[j];
        rest /= shape[j];
      }
    }
    out[static_cast<std::size_t>(m)] = value(index);
  }
  return out;
}

// The positions where keep is true among [0, n).
template <class Keep>
std::vector<std::int64_t> kept(std::int64_t n, Keep keep) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < n; ++i)
    if (keep(i)) out.push_back(i);
  return out;
}

// Masks go both ways: small ones become lists of offsets, large ones are streamed; with
// OOC_MASK_LIST_TRUES=0 every mask is streamed.
struct StreamEveryMask {
  explicit StreamEveryMask(bool on) {
    if (on) ::setenv("OOC_MASK_LIST_TRUES", "0", 1);
  }
  ~StreamEveryMask() { ::unsetenv("OOC_MASK_LIST_TRUES"); }
};

}  // namespace

TEST_CASE("a bool @FILE is a mask: counted, not loaded; one list or mask per selection; numpy's dtype error") {
  ScratchDir dir;
  const std::string m = mask_file(dir.file("m.npy"), {10}, ooc::Order::c, [](std::int64_t i) { return i % 3 == 0; });
  const ooc::Selection s = ooc::Selection::parse("@" + m + ", 5", "a.npy");
  REQUIRE(s.items().size() == 2);
  const auto& mask = std::get<ooc::BoolMask>(s.items()[0]);
  CHECK(mask.count() == 4);
  CHECK(mask.shape() == ooc::Shape{10});
  CHECK(mask.path() == m);
  CHECK(ooc::BoolMask::open(m).count() == 4);
  CHECK_THROWS_WITH_AS(ooc::Selection::parse("@" + m + ", @" + m, "a.npy"),
                       doctest::Contains("only one index list, index array or mask"), ooc::UsageError);
  CHECK_THROWS_WITH_AS(ooc::Selection::parse("@" + m + ", [1]", "a.npy"),
                       doctest::Contains("only one index list, index array or mask"), ooc::UsageError);
  ooc::MappedArray floats = ooc::create_npy(dir.file("f.npy"), ooc::dtype_of<double>, {3});
  floats.commit();
  const std::string at = "@";
  CHECK_THROWS_WITH_AS(ooc::Selection::parse(at + dir.file("f.npy"), "a.npy"),
                       doctest::Contains("arrays used as indices must be of integer (or boolean) type"), ooc::IndexError);
  CHECK_THROWS_AS(ooc::BoolMask::open(dir.file("f.npy")), ooc::UsageError);
  mask_file(dir.file("zero_d.npy"), {}, ooc::Order::c, [](std::int64_t) { return true; });
  CHECK_THROWS_WITH_AS(ooc::Selection::parse(at + dir.file("zero_d.npy"), "a.npy"),
                       doctest::Contains("0-d boolean index"), ooc::UsageError);
  CHECK_THROWS_WITH_AS(ooc::Selection::parse(at + dir.file("missing.npy"), "a.npy"), doctest::Contains("missing.npy"),
                       ooc::UsageError);
}

TEST_CASE("a mask selects as numpy's boolean indexing: rows, columns, with indices, full shape, leading axes") {
  ScratchDir dir;
  constexpr std::int64_t kRows = 30000, kCols = 6;
  auto row_kept = [](std::int64_t i) { return (i * 7919) % 13 < 5 || (i >= 1000 && i < 9000); };
  auto col_kept = [](std::int64_t j) { return j == 1 || j == 4 || j == 5; };
  auto cell_kept = [](std::int64_t f) { return (f * 2654435761u) % 7 < 3; };
  const std::vector<std::int64_t> rows = kept(kRows, row_kept), cols = kept(kCols, col_kept);
  const std::vector<std::int64_t> cells = kept(kRows * kCols, cell_kept);
  const auto count = static_cast<std::int64_t>(rows.size());
  for (bool streamed : {false, true}) {
    StreamEveryMask stream(streamed);
    for (ooc::Order order : {ooc::Order::c, ooc::Order::fortran}) {
      CAPTURE(streamed);
      CAPTURE(static_cast<int>(order));
      iota_array(dir.file("a.npy"), kRows, kCols, order);
      auto source = [&](std::int64_t r, std::int64_t c) {
        return static_cast<double>(order == ooc::Order::c ? r * kCols + c : c * kRows + r);
      };
      const std::string a = dir.file("a.npy");
      const std::string m = mask_file(dir.file("rows.npy"), {kRows}, ooc::Order::c, row_kept);
      const std::string mc = mask_file(dir.file("cols.npy"), {kCols}, ooc::Order::c, col_kept);

      const ooc::MappedArray x = ooc::map_file(a + "[@" + m + "]");  // a[m]: (count, 6), the list axis first: C
      CHECK(x.shape() == ooc::Shape{count, kCols});
      CHECK(x.order() == ooc::Order::c);
      const std::vector<double> want_rows = in_memory_order(x.shape(), x.order(), [&](const std::vector<std::int64_t>& i) {
        return source(rows[static_cast<std::size_t>(i[0])], i[1]);
      });
      for (std::uint64_t tile : {std::uint64_t{64 << 10}, std::uint64_t{1 << 20}}) CHECK(values_of(x, tile) == want_rows);

      const ooc::MappedArray one = ooc::map_file(a + "[@" + m + ", -2]");  // a[m, -2]: (count,)
      CHECK(one.shape() == ooc::Shape{count});
      CHECK(values_of(one) == in_memory_order(one.shape(), one.order(), [&](const std::vector<std::int64_t>& i) {
              return source(rows[static_cast<std::size_t>(i[0])], 4);
            }));

      const ooc::MappedArray sliced = ooc::map_file(a + "[@" + m + ", 1::2]");  // a[m, 1::2]: (count, 3)
      CHECK(sliced.shape() == ooc::Shape{count, 3});
      CHECK(values_of(sliced) == in_memory_order(sliced.shape(), sliced.order(), [&](const std::vector<std::int64_t>& i) {
              return source(rows[static_cast<std::size_t>(i[0])], 1 + 2 * i[1]);
            }));

      // a[::-3, mc]: numpy's result holds the list axis outermost, in the second place of
      // the shape: Fortran order.
      const ooc::MappedArray columns = ooc::map_file(a + "[::-3, @" + mc + "]");
      CHECK(columns.shape() == ooc::Shape{kRows / 3, 3});
      CHECK(columns.order() == ooc::Order::fortran);
      CHECK(values_of(columns) == in_memory_order(columns.shape(), columns.order(), [&](const std::vector<std::int64_t>& i) {
              return source(kRows - 1 - 3 * i[0], cols[static_cast<std::size_t>(i[1])]);
            }));

      // A mask of the whole shape, in either order itself: the elements, in C order, as one axis.
      for (ooc::Order mask_order : {ooc::Order::c, ooc::Order::fortran}) {
        const std::string mf = mask_file(dir.file("cells.npy"), {kRows, kCols}, mask_order, cell_kept);
        const ooc::MappedArray elements = ooc::map_file(a + "[@" + mf + "]");
        CHECK(elements.shape() == ooc::Shape{static_cast<std::int64_t>(cells.size())});
        std::vector<double> want;
        for (std::int64_t f : cells) want.push_back(source(f / kCols, f % kCols));
        CHECK(values_of(elements, 96 << 10) == want);
        double sum = 0;  // integers: exact in any order
        for (double v : want) sum += v;
        CHECK(ooc::reduce(elements, ooc::kernels::Sum{}).as_double() == sum);
      }
    }
  }
}

TEST_CASE("a mask over the leading axes of a cube, and beside an index in the last") {
  ScratchDir dir;
  constexpr std::int64_t kA = 40, kB = 30, kC = 5;
  auto keep = [](std::int64_t f) { return f % 3 != 1; };
  const std::vector<std::int64_t> cells = kept(kA * kB, keep);
  for (bool streamed : {false, true}) {
    StreamEveryMask stream(streamed);
    for (ooc::Order order : {ooc::Order::c, ooc::Order::fortran}) {
      CAPTURE(streamed);
      CAPTURE(static_cast<int>(order));
      ooc::MappedArray cube = ooc::create_npy(dir.file("c.npy"), ooc::dtype_of<double>, {kA, kB, kC}, order);
      auto values = cube.writable_values<double>();
      std::iota(values.begin(), values.end(), 0.0);
      cube.commit();
      auto source = [&](std::int64_t i, std::int64_t j, std::int64_t k) {
        return static_cast<double>(order == ooc::Order::c ? (i * kB + j) * kC + k : (k * kB + j) * kA + i);
      };
      const std::string m = mask_file(dir.file("m.npy"), {kA, kB}, ooc::Order::c, keep);
      const auto count = static_cast<std::int64_t>(cells.size());
      const ooc::MappedArray x = ooc::map_file(dir.file("c.npy") + "[@" + m + "]");  // (count, 5), C
      CHECK(x.shape() == ooc::Shape{count, kC});
      CHECK(values_of(x) == in_memory_order(x.shape(), x.order(), [&](const std::vector<std::int64_t>& i) {
              const std::int64_t f = cells[static_cast<std::size_t>(i[0])];
              return source(f / kB, f % kB, i[1]);
            }));
      const ooc::MappedArray y = ooc::map_file(dir.file("c.npy") + "[@" + m + ", 3]");  // (count,)
      CHECK(y.shape() == ooc::Shape{count});
      CHECK(values_of(y) == in_memory_order(y.shape(), y.order(), [&](const std::vector<std::int64_t>& i) {
              const std::int64_t f = cells[static_cast<std::size_t>(i[0])];
              return source(f / kB, f % kB, 3);
            }));
      // A 1-d mask in the middle axis of a cube with an index last: the advanced
      // indices are adjacent, so the mask's axis stays second.
      const std::string mid = mask_file(dir.file("mid.npy"), {kB}, ooc::Order::c, [](std::int64_t j) { return j % 4 == 0; });
      const ooc::MappedArray z = ooc::map_file(dir.file("c.npy") + "[2:9, @" + mid + ", 1]");
      CHECK(z.shape() == ooc::Shape{7, 8});
      CHECK(values_of(z) == in_memory_order(z.shape(), z.order(), [&](const std::vector<std::int64_t>& i) {
              return source(2 + i[0], 4 * i[1], 1);
            }));
      // Apart from it (index first), the mask's axis goes first.
      const std::string last = mask_file(dir.file("last.npy"), {kC}, ooc::Order::c, [](std::int64_t k) { return k != 2; });
      const ooc::MappedArray w = ooc::map_file(dir.file("c.npy") + "[1, :, @" + last + "]");
      CHECK(w.shape() == ooc::Shape{4, kB});
      const std::vector<std::int64_t> ks{0, 1, 3, 4};
      CHECK(values_of(w) == in_memory_order(w.shape(), w.order(), [&](const std::vector<std::int64_t>& i) {
              return source(1, i[1], ks[static_cast<std::size_t>(i[0])]);
            }));
    }
  }
}

TEST_CASE("mask errors: numpy's IndexError texts; all false and all true") {
  ScratchDir dir;
  iota_array(dir.file("a.npy"), 100, 8, ooc::Order::c);
  const std::string a = dir.file("a.npy");
  const std::string short_mask = mask_file(dir.file("s.npy"), {99}, ooc::Order::c, [](std::int64_t) { return true; });
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[@" + short_mask + "]"),
                       doctest::Contains("boolean index did not match indexed array along dimension 0; dimension is 100 "
                                         "but corresponding boolean dimension is 99"),
                       ooc::IndexError);
  const std::string wide = mask_file(dir.file("w.npy"), {100, 9}, ooc::Order::c, [](std::int64_t) { return true; });
  CHECK_THROWS_WITH_AS(ooc::read_info(a + "[@" + wide + "]"),
                       doctest::Contains("along dimension 1; dimension is 8 but corresponding boolean dimension is 9"),
                       ooc::UsageError);
  const std::string deep = mask_file(dir.file("d.npy"), {100, 8, 2}, ooc::Order::c, [](std::int64_t) { return true; });
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[@" + deep + "]"),
                       doctest::Contains("too many indices for array: array is 2-dimensional, but 3 were indexed"),
                       ooc::IndexError);
  const std::string cols = mask_file(dir.file("c.npy"), {8}, ooc::Order::c, [](std::int64_t) { return true; });
  CHECK_THROWS_WITH_AS(ooc::map_file(a + "[1, 2, @" + cols + "]"), doctest::Contains("but 3 were indexed"),
                       ooc::UsageError);
  for (bool streamed : {false, true}) {
    StreamEveryMask stream(streamed);
    const std::string none = mask_file(dir.file("n.npy"), {100}, ooc::Order::c, [](std::int64_t) { return false; });
    const ooc::MappedArray empty = ooc::map_file(a + "[@" + none + "]");
    CHECK(empty.shape() == ooc::Shape{0, 8});
    CHECK(ooc::reduce(empty, ooc::kernels::Sum{}).as_double() == 0);
    const std::string all = mask_file(dir.file("all.npy"), {100, 8}, ooc::Order::c, [](std::int64_t) { return true; });
    const ooc::MappedArray every = ooc::map_file(a + "[@" + all + "]");
    CHECK(every.shape() == ooc::Shape{800});
    CHECK(ooc::reduce(every, ooc::kernels::Sum{}).as_double() == 799.0 * 800 / 2);
  }
}

TEST_CASE("a mask file that shrinks or changes while it is read fails the run, naming the mask") {
  ScratchDir dir;
  constexpr std::int64_t kRows = 400000;
  iota_array(dir.file("a.npy"), kRows, 2, ooc::Order::c);
  StreamEveryMask stream(true);
  const std::string m = mask_file(dir.file("m.npy"), {kRows}, ooc::Order::c, [](std::int64_t i) { return i % 2 == 0; });
  ooc::PipelineOptions options;
  options.tile_bytes = 64 << 10;
  {
    const ooc::MappedArray x = ooc::map_file(dir.file("a.npy") + "[@" + m + "]");
    std::filesystem::resize_file(m, 128 + kRows / 2);  // the header and half the mask
    const std::string shrank = m + ": file shrank while being read";
    CHECK_THROWS_WITH_AS(ooc::reduce(x, ooc::kernels::Sum{}, options), doctest::Contains(shrank.c_str()), ooc::Error);
  }
  mask_file(m, {kRows}, ooc::Order::c, [](std::int64_t i) { return i % 2 == 0; });
  {
    const ooc::MappedArray x = ooc::map_file(dir.file("a.npy") + "[@" + m + "]");
    ooc::MappedArray writable = ooc::map_file(m, ooc::Access::read_write);
    std::span<std::byte> bytes = writable.writable_bytes();
    for (std::size_t i = 200000; i < 200100; ++i) bytes[i] = std::byte{0};  // 50 true elements fewer
    const std::string changed = m + ": changed while being read";
    CHECK_THROWS_WITH_AS(ooc::reduce(x, ooc::kernels::Sum{}, options), doctest::Contains(changed.c_str()), ooc::Error);
  }
}

namespace {

// Mappings of `path` in this process (lines of /proc/self/maps naming it).
int mappings_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  const std::string name = std::filesystem::canonical(path).string();
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.size() >= name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0) ++n;
  return n;
}

}  // namespace

TEST_CASE("select on a named array is a view beside it, sharing its mapping; on a temporary it takes it over") {
  ScratchDir dir;
  iota_array(dir.file("a.npy"), 1000, 8, ooc::Order::c);
  std::optional<ooc::MappedArray> col;
  {
    const ooc::MappedArray x = ooc::map_file(dir.file("a.npy"));
    const int before = mappings_of(dir.file("a.npy"));
    col.emplace(x.select(":, 2"));
    CHECK(mappings_of(dir.file("a.npy")) == before);  // no second mapping of the file
    CHECK(x.shape() == ooc::Shape{1000, 8});             // x stays usable
    CHECK(ooc::reduce(x, ooc::kernels::Sum{}).as_double() == 7999.0 * 8000 / 2);
    const ooc::MappedArray every_other = x.select("::2");
    CHECK(every_other.shape() == ooc::Shape{500, 8});
  }
  // The view keeps the mapping alive after x is gone.
  double expected = 0;
  for (int r = 0; r < 1000; ++r) expected += r * 8 + 2;
  CHECK(ooc::reduce(*col, ooc::kernels::Sum{}).as_double() == expected);
  CHECK(col->path() == dir.file("a.npy") + "[:, 2]");
  ooc::MappedArray moved = ooc::map_file(dir.file("a.npy")).select("5");  // the && form
  CHECK(values_of(moved) == std::vector<double>{40, 41, 42, 43, 44, 45, 46, 47});
}

TEST_CASE("a selection's tiles span tile_bytes of its source, whoever calls (issue 28)") {
  // ooc::reduce(x.select(":, 2"), Sum{}) with the default options once cut tiles of 16 MiB
  // of the column, each spanning 128 MiB of the file: a masked sum of an 8 GiB file then
  // held 159 MiB, where oocrun, which sized its tiles itself, held 100.
  ScratchDir dir;
  const ooc::MappedArray x = iota_array(dir.file("t.npy"), std::int64_t{1} << 16, 8, ooc::Order::c);  // 4 MiB
  const ooc::MappedArray column = x.select(":, 2");                                                 // 512 KiB
  const double expected = 8.0 * (65535.0 * 65536.0 / 2) + 2.0 * 65536;
  auto tiles_of = [&](bool span_source) {
    ooc::PipelineOptions options;
    options.tile_bytes = 256 * 1024;
    options.tiles_span_source = span_source;
    std::size_t tiles = 0;
    options.on_progress = [&](const ooc::Progress& p) { tiles = p.tiles; };
    CHECK(ooc::reduce(column, ooc::kernels::Sum{}, options).as_double() == expected);
    return tiles;
  };
  const std::size_t spanning = tiles_of(true), selected = tiles_of(false);
  CAPTURE(spanning);
  CAPTURE(selected);
  CHECK(selected >= 1);
  CHECK(spanning >= 4 * selected);  // 8 times as many, up to the plans' block rounding
}
