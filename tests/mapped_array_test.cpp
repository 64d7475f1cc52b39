#include "ooc/mapped_array.hpp"
#include "ooc/kernel.hpp"
#include "ooc/kernels/reductions.hpp"

#include "core/mapped_array_access.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

using ooc::testing::ScratchDir;

namespace {

ooc::MappedArray write_iota(const std::string& path, std::int64_t n) {
  ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<double>, {n});
  auto values = out.writable_values<double>();
  std::iota(values.begin(), values.end(), 0.0);
  out.commit();
  return out;
}

}  // namespace

TEST_CASE("an array written with create_npy and committed maps back with the same values") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 1000);
  const ooc::MappedArray a = ooc::map_file(dir.file("a.npy"));
  CHECK(a.dtype() == ooc::dtype_of<double>);
  CHECK(a.shape() == ooc::Shape{1000});
  CHECK(a.info().data_offset == 128);
  CHECK(a.info().format_version == "1.0");
  CHECK(a.values<double>()(999) == 999.0);
  CHECK_FALSE(a.writable());
}

TEST_CASE("an output exists only under a temporary name until commit") {
  ScratchDir dir;
  const std::string path = dir.file("out.npy");
  ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<float>, {4, 5}, ooc::Order::fortran);
  CHECK(out.pending());
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(dir.entries() == 1);  // the hidden temporary
  out.writable_values<float>().setConstant(2.5f);
  out.commit();
  CHECK_FALSE(out.pending());
  CHECK(std::filesystem::exists(path));
  CHECK(dir.entries() == 1);
  const ooc::MappedArray back = ooc::map_file(path);
  CHECK(back.order() == ooc::Order::fortran);
  CHECK(back.values<float>().sum() == doctest::Approx(50.0));
}

TEST_CASE("an output dropped without commit leaves nothing behind") {
  ScratchDir dir;
  {
    ooc::MappedArray out = ooc::create_npy(dir.file("out.npy"), ooc::dtype_of<std::int32_t>, {100});
    out.writable_values<std::int32_t>().setConstant(7);
  }
  CHECK(dir.entries() == 0);
}

TEST_CASE("an output dropped without commit leaves an existing file of that name untouched") {
  ScratchDir dir;
  write_iota(dir.file("keep.npy"), 10);
  { ooc::MappedArray out = ooc::create_npy(dir.file("keep.npy"), ooc::dtype_of<double>, {3}); }
  CHECK(ooc::map_file(dir.file("keep.npy")).size() == 10);
}

TEST_CASE("a read-only mapping refuses every way to write through it") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 10);
  ooc::MappedArray a = ooc::map_file(dir.file("a.npy"));
  CHECK_THROWS_AS(a.writable_bytes(), ooc::UsageError);
  CHECK_THROWS_AS(a.writable_values<double>(), ooc::UsageError);
}

TEST_CASE("a read-write mapping writes the file in place when committed") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 10);
  {
    ooc::MappedArray a = ooc::map_file(dir.file("a.npy"), ooc::Access::read_write);
    a.writable_values<double>() += 1.0;
    a.commit();
  }
  const ooc::MappedArray back = ooc::map_file(dir.file("a.npy"));
  CHECK(back.values<double>()(0) == 1.0);
}

TEST_CASE("typed views check the element type and the byte order") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 10);
  const ooc::MappedArray a = ooc::map_file(dir.file("a.npy"));
  CHECK_THROWS_AS(a.values<float>(), ooc::UsageError);
  ooc::MappedArray big = ooc::create_npy(dir.file("big.npy"), ooc::DType(ooc::Kind::floating, 8, ooc::ByteOrder::big), {3});
  CHECK_THROWS_AS(big.writable_values<double>(), ooc::UsageError);
}

TEST_CASE("the empty array and the 0-d array are arrays like any other") {
  ScratchDir dir;
  {
    ooc::MappedArray empty = ooc::create_npy(dir.file("empty.npy"), ooc::dtype_of<double>, {3, 0});
    empty.commit();
    ooc::MappedArray scalar = ooc::create_npy(dir.file("scalar.npy"), ooc::dtype_of<std::int16_t>, {});
    scalar.writable_values<std::int16_t>()(0) = -5;
    scalar.commit();
  }
  const ooc::MappedArray empty = ooc::map_file(dir.file("empty.npy"));
  CHECK(empty.size() == 0);
  CHECK(empty.bytes().empty());
  CHECK(empty.ndim() == 2);
  const ooc::MappedArray scalar = ooc::map_file(dir.file("scalar.npy"));
  CHECK(scalar.size() == 1);
  CHECK(scalar.ndim() == 0);
  CHECK(scalar.values<std::int16_t>()(0) == -5);
}

TEST_CASE("a moved array keeps its mapping and the moved-from one is inert") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 10);
  ooc::MappedArray a = ooc::map_file(dir.file("a.npy"));
  ooc::MappedArray b = std::move(a);
  CHECK(b.values<double>()(3) == 3.0);
}

TEST_CASE("errors name the file and the problem") {
  ScratchDir dir;
  try {
    ooc::map_file(dir.file("missing.npy"));
    FAIL("no error");
  } catch (const ooc::Error& e) {
    CHECK(e.path() == dir.file("missing.npy"));
    CHECK(std::string(e.what()).find("no such file") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(ooc::map_file(dir.path().string()), doctest::Contains("is a directory"), ooc::Error);
  std::ofstream(dir.file("short.npy")) << "\x93NUMPY";
  CHECK_THROWS_WITH_AS(ooc::map_file(dir.file("short.npy")), doctest::Contains("short.npy: not a .npy file"), ooc::Error);
  CHECK_THROWS_WITH_AS(ooc::create_npy(dir.file("nodir/out.npy"), ooc::dtype_of<double>, {3}),
                       doctest::Contains("cannot create output"), ooc::Error);
  CHECK_THROWS_AS(ooc::create_npy(dir.file("neg.npy"), ooc::dtype_of<double>, {-1}), ooc::UsageError);
}

TEST_CASE("a file shorter than its header promises is refused with both sizes") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 1000);
  std::filesystem::resize_file(dir.file("a.npy"), 128 + 7992);
  CHECK_THROWS_WITH_AS(ooc::map_file(dir.file("a.npy")),
                       doctest::Contains("header says 8000 bytes of data, file holds 7992"), ooc::Error);
}

TEST_CASE("an array whose file shrank reads zeros past the cut, says so, and refuses to commit") {
  ScratchDir dir;
  const std::string path = dir.file("a.npy");
  write_iota(path, 100000);
  ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
  CHECK_FALSE(a.shrank());
  a.check_intact();
  std::filesystem::resize_file(path, 4096);  // as another process's truncate would
  const auto v = a.values<double>();
  CHECK(v(99999) == 0.0);  // no SIGBUS: zeros
  CHECK(a.shrank());
  CHECK_THROWS_WITH_AS(a.check_intact(), doctest::Contains("a.npy: file shrank while being written"), ooc::Error);
  CHECK_THROWS_WITH_AS(a.commit(), doctest::Contains("shrank"), ooc::Error);
}

TEST_CASE("an output whose temporary is cut short by another process is never renamed into place") {
  ScratchDir dir;
  const std::string path = dir.file("out.npy");
  {
    ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<double>, {100000});
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) std::filesystem::resize_file(entry, 0);
    out.writable_values<double>().setConstant(1.0);
    CHECK(out.shrank());
    CHECK_THROWS_WITH_AS(out.commit(), doctest::Contains("shrank"), ooc::Error);
  }
  CHECK(dir.entries() == 0);
}

TEST_CASE("data a hand-made header leaves unaligned is not handed out as a typed view") {
  ScratchDir dir;
  // numpy reads this file (header of 119 bytes: the data starts at offset 129).
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  header += std::string(118 - header.size(), ' ') + "\n";
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  const double values[2] = {1.5, 2.0};
  file.append(reinterpret_cast<const char*>(values), sizeof values);
  std::ofstream(dir.file("odd.npy"), std::ios::binary) << file;
  const ooc::MappedArray a = ooc::map_file(dir.file("odd.npy"));
  CHECK(a.info().data_offset == 129);
  CHECK_THROWS_WITH_AS(a.values<double>(), doctest::Contains("not aligned for float64"), ooc::UsageError);
  CHECK(ooc::reduce(a, ooc::kernels::Sum{}).as<double>() == 3.5);  // the pipeline copies
}

TEST_CASE("a window maps only its elements, at their places in the array") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 100000);
  const ooc::MappedArray part = ooc::map_file(dir.file("a.npy"), ooc::Access::read_only, {40000, 70001});
  CHECK(part.window().begin == 40000);
  CHECK(part.window().end == 70001);
  CHECK(part.size() == 100000);  // the array's size, not the window's
  CHECK(part.bytes().size() == 30001 * sizeof(double));
  CHECK(part.values<double>().size() == 30001);
  CHECK(part.values<double>()(0) == 40000.0);
  CHECK(part.values<double>()(30000) == 70000.0);
}

TEST_CASE("a window is clamped to the array's end and may be empty; a reversed or negative one is refused") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 1000);
  const auto past = ooc::map_file(dir.file("a.npy"), ooc::Access::read_only, {900, 5000});
  CHECK(past.window().begin == 900);
  CHECK(past.window().end == 1000);
  const auto none = ooc::map_file(dir.file("a.npy"), ooc::Access::read_only, {2000, 3000});
  CHECK(none.window().size() == 0);
  CHECK(none.bytes().empty());
  CHECK_THROWS_WITH_AS(ooc::map_file(dir.file("a.npy"), ooc::Access::read_only, {600, 100}),
                       doctest::Contains("a.npy: element window [600, 100) is not a range"), ooc::UsageError);
  CHECK_THROWS_AS(ooc::map_file(dir.file("a.npy"), ooc::Access::read_only, {-10, 5}), ooc::UsageError);
  CHECK(ooc::map_file(dir.file("a.npy")).window().size() == 1000);
}

TEST_CASE("read_info reads a header as map_file does, and refuses what it refuses") {
  ScratchDir dir;
  write_iota(dir.file("a.npy"), 1000);
  const ooc::ArrayInfo info = ooc::read_info(dir.file("a.npy"));
  CHECK(info.shape == ooc::Shape{1000});
  CHECK(info.data_offset == 128);
  CHECK(info.dtype == ooc::dtype_of<double>);
  std::ofstream(dir.file("bad.npy")) << "not an array";
  CHECK_THROWS_AS(ooc::read_info(dir.file("bad.npy")), ooc::Error);
  CHECK_THROWS_AS(ooc::read_info(dir.file("missing.npy")), ooc::Error);
}

TEST_CASE("an output written through windows, one after another, holds every part") {
  ScratchDir dir;
  const std::string path = dir.file("out.npy");
  ooc::MappedArray first = ooc::create_npy(path, ooc::dtype_of<double>, {1000}, ooc::Order::c, {0, 400});
  CHECK(first.window().size() == 400);
  first.writable_values<double>().setConstant(1.0);
  // A second mapping of the same temporary, as another MPI rank makes it.
  ooc::MappedArray second =
      ooc::map_file(ooc::detail::MappedArrayAccess::pending_path(first).string(), ooc::Access::read_write, {400, 1000});
  second.writable_values<double>().setConstant(2.0);
  second.commit();
  first.commit();
  const ooc::MappedArray back = ooc::map_file(path);
  CHECK(back.values<double>().head(400).sum() == 400.0);
  CHECK(back.values<double>().tail(600).sum() == 1200.0);
  CHECK(dir.entries() == 1);
}

TEST_CASE("an output part mapped by another process is named by the final name and not removed with it") {
  ScratchDir dir;
  const std::string path = dir.file("out.npy");
  {
    ooc::MappedArray owner = ooc::create_npy(path, ooc::dtype_of<float>, {64});
    const auto temp = ooc::detail::MappedArrayAccess::pending_path(owner);
    {
      ooc::MappedArray part = ooc::detail::MappedArrayAccess::map_output_part(temp, path, {32, 64});
      CHECK(part.path() == path);
      CHECK_FALSE(part.pending());
      CHECK(part.window().begin == 32);
    }
    CHECK(std::filesystem::exists(temp));  // still the owner's
    CHECK_THROWS_WITH(ooc::detail::MappedArrayAccess::map_output_part(dir.file("gone"), path, {}),
                      doctest::Contains("out.npy: cannot open the output being written"));
  }
  CHECK(dir.entries() == 0);  // the owner, never committed, removed it
}
