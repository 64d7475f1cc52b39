// Tests for ooc::Error's kind and option (ooc/error.hpp): what a caller decides on, never
// the message's words; and ooc::parse_size and ooc::RunOptions (ooc/pipeline.hpp), which
// oocrun and the Python module read their run options with.

#include "ooc/ooc.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <string>

namespace {

using ooc::ErrorKind;

// The Error `f` throws (failing the test if it throws none).
ooc::Error caught(const std::function<void()>& f) {
  try {
    f();
  } catch (const ooc::Error& e) {
    return e;
  }
  FAIL("no ooc::Error thrown");
  return ooc::Error("unreachable");
}

}  // namespace

TEST_CASE("an Error's kind is other unless it says, and what() reads FILE: PROBLEM") {
  const ooc::Error plain("x.npy", "something");
  CHECK(plain.kind() == ErrorKind::other);
  CHECK(plain.option().empty());
  CHECK(std::string(plain.what()) == "x.npy: something");
  const ooc::Error full("x.npy", "dataset already exists (overwrite replaces it)", ErrorKind::busy, "overwrite");
  CHECK(full.kind() == ErrorKind::busy);
  CHECK(full.option() == "overwrite");
  CHECK(std::string(full.what()) == "x.npy: dataset already exists (overwrite replaces it)");
}

TEST_CASE("a UsageError's kind is usage and a Cancelled's cancelled") {
  CHECK(ooc::UsageError("bad").kind() == ErrorKind::usage);
  CHECK(ooc::UsageError("f", "bad", "fmt").option() == "fmt");
  CHECK(ooc::Cancelled("f", "cancelled").kind() == ErrorKind::cancelled);
  const ooc::IndexError index("x.npy", "selection [9]: index 9 is out of bounds for axis 0 with size 9",
                              "index 9 is out of bounds for axis 0 with size 9");
  CHECK(index.kind() == ErrorKind::index);
  CHECK(index.numpy_text() == "index 9 is out of bounds for axis 0 with size 9");
  CHECK(std::string(index.what()) == "x.npy: selection [9]: index 9 is out of bounds for axis 0 with size 9");
  CHECK(std::string(ooc::kind_name(ErrorKind::index)) == "index");
}

TEST_CASE("errno values give their kinds") {
  CHECK(ooc::kind_of_errno(ENOENT) == ErrorKind::not_found);
  CHECK(ooc::kind_of_errno(EACCES) == ErrorKind::permission);
  CHECK(ooc::kind_of_errno(EPERM) == ErrorKind::permission);
  CHECK(ooc::kind_of_errno(EROFS) == ErrorKind::permission);
  CHECK(ooc::kind_of_errno(ENOSPC) == ErrorKind::no_space);
  CHECK(ooc::kind_of_errno(EDQUOT) == ErrorKind::no_space);
  CHECK(ooc::kind_of_errno(EIO) == ErrorKind::other);
  CHECK(ooc::kind_of_errno(0) == ErrorKind::other);
}

TEST_CASE("every kind has its name") {
  CHECK(std::string(ooc::kind_name(ErrorKind::other)) == "other");
  CHECK(std::string(ooc::kind_name(ErrorKind::not_found)) == "not_found");
  CHECK(std::string(ooc::kind_name(ErrorKind::permission)) == "permission");
  CHECK(std::string(ooc::kind_name(ErrorKind::no_space)) == "no_space");
  CHECK(std::string(ooc::kind_name(ErrorKind::corrupt)) == "corrupt");
  CHECK(std::string(ooc::kind_name(ErrorKind::busy)) == "busy");
  CHECK(std::string(ooc::kind_name(ErrorKind::value)) == "value");
  CHECK(std::string(ooc::kind_name(ErrorKind::out_of_memory)) == "out_of_memory");
  CHECK(std::string(ooc::kind_name(ErrorKind::usage)) == "usage");
  CHECK(std::string(ooc::kind_name(ErrorKind::cancelled)) == "cancelled");
}

TEST_CASE("a file that is not there is not_found") {
  ooc::testing::ScratchDir dir;
  const ooc::Error e = caught([&] { ooc::map_file(dir.file("missing.npy")); });
  CHECK(e.kind() == ErrorKind::not_found);
  CHECK(e.path() == dir.file("missing.npy"));
  CHECK(e.problem() == "no such file or directory");
}

TEST_CASE("a damaged .npy header is corrupt") {
  ooc::testing::ScratchDir dir;
  std::ofstream(dir.file("bad.npy")) << "this is not an array at all";
  const ooc::Error e = caught([&] { ooc::map_file(dir.file("bad.npy")); });
  CHECK(e.kind() == ErrorKind::corrupt);
  CHECK(e.problem().find("not a .npy file") != std::string::npos);
}

TEST_CASE("a dataset that is not there is not_found") {
  ooc::testing::ScratchDir dir;
  {
    ooc::MappedArray a = ooc::create_array(dir.file("good.h5") + ":/a", ooc::dtype_of<double>, {4});
    a.commit();
  }
  const ooc::Error e = caught([&] { ooc::map_file(dir.file("good.h5") + ":/nope"); });
  CHECK(e.kind() == ErrorKind::not_found);
  CHECK(e.problem() == "no such dataset");
}

TEST_CASE("an existing dataset names the overwrite option, in the API's words") {
  ooc::testing::ScratchDir dir;
  const std::string path = dir.file("o.h5") + ":/a";
  {
    ooc::MappedArray a = ooc::create_array(path, ooc::dtype_of<double>, {4});
    a.commit();
  }
  const ooc::Error e = caught([&] { ooc::create_array(path, ooc::dtype_of<double>, {4}); });
  CHECK(e.kind() == ErrorKind::usage);
  CHECK(e.option() == "overwrite");
  CHECK(e.problem() == "dataset already exists (overwrite replaces it)");
  CHECK(e.problem().find(e.option()) != std::string::npos);
}

TEST_CASE("an array another run holds for an in-place run is busy") {
  ooc::testing::ScratchDir dir;
  const std::string path = dir.file("b.npy");
  {
    ooc::MappedArray a = ooc::create_array(path, ooc::dtype_of<double>, {4});
    a.commit();
  }
  const ooc::MappedArray first = ooc::map_file(path, ooc::Access::read_write);
  ooc::lock_for_in_place(first);
  const ooc::MappedArray second = ooc::map_file(path, ooc::Access::read_write);
  CHECK(caught([&] { ooc::lock_for_in_place(second); }).kind() == ErrorKind::busy);
  CHECK(caught([&] { ooc::check_not_in_place(second); }).kind() == ErrorKind::busy);
}

TEST_CASE("numpy's refusal of an empty array is a value error") {
  ooc::testing::ScratchDir dir;
  const std::string path = dir.file("empty.npy");
  {
    ooc::MappedArray a = ooc::create_array(path, ooc::dtype_of<double>, {0});
    a.commit();
  }
  const auto min = ooc::kernels::ReduceOp::parse("min");
  const ooc::Error e = caught([&] { min.run(ooc::map_file(path), {}); });
  CHECK(e.kind() == ErrorKind::value);
  CHECK(e.problem().find("zero-size array") != std::string::npos);
}

TEST_CASE("library messages name options in the API's words, and say which words") {
  ooc::kernels::ReduceParams params;
  params.ddof = -1;
  const ooc::Error ddof = caught([&] { ooc::kernels::ReduceOp::parse("std", params); });
  CHECK(ddof.kind() == ErrorKind::usage);
  CHECK(ddof.option() == "ddof");
  CHECK(ddof.problem() == "ddof must not be negative");
}

// ---- parse_size and RunOptions -----------------------------------------------------------

TEST_CASE("parse_size reads what --tile-bytes and tile_bytes= take") {
  CHECK(ooc::parse_size("4096") == 4096);
  CHECK(ooc::parse_size("64M") == 64ull << 20);
  CHECK(ooc::parse_size("1GiB") == 1ull << 30);
  const ooc::Error e = caught([] { ooc::parse_size("12Q"); });
  CHECK(e.kind() == ErrorKind::usage);
  CHECK(e.option().empty());  // the caller knows which option the text came from
  CHECK(std::string(e.what()) == "'12Q' is not a size (try 64M or 1G)");
}

TEST_CASE("RunOptions give the PipelineOptions they ask for") {
  ooc::RunOptions run;
  const ooc::PipelineOptions defaults = run.pipeline_options();
  CHECK(defaults.tile_bytes == ooc::kDefaultTileBytes);
  CHECK(defaults.io == ooc::Io::automatic);
  CHECK(defaults.threads == 0);
  CHECK(defaults.prefetch == 2);
  run.threads = 3;
  run.tile_bytes = "64K";
  run.io = "direct";
  run.prefetch = 0;
  const ooc::PipelineOptions asked = run.pipeline_options();
  CHECK(asked.threads == 3);
  CHECK(asked.tile_bytes == 64 * 1024);
  CHECK(asked.io == ooc::Io::direct);
  CHECK(asked.prefetch == 0);
  run.io = "mmap";
  CHECK(run.pipeline_options().io == ooc::Io::mapped);
}

TEST_CASE("RunOptions' errors name the option at fault") {
  struct Case {
    std::function<void(ooc::RunOptions&)> set;
    const char* option;
    const char* message;
  };
  const Case cases[] = {
      {[](ooc::RunOptions& r) { r.tile_bytes = std::string("12Q"); }, "tile_bytes", "tile_bytes: '12Q' is not a size (try 64M or 1G)"},
      {[](ooc::RunOptions& r) { r.tile_bytes = std::string("0"); }, "tile_bytes", "tile_bytes must be positive"},
      {[](ooc::RunOptions& r) { r.io = std::string("fast"); }, "io", "io must be 'auto', 'mmap' or 'direct', not 'fast'"},
      {[](ooc::RunOptions& r) { r.threads = -1; }, "threads", "threads must be 0 (every core) or more, not -1"},
      {[](ooc::RunOptions& r) { r.prefetch = -1; }, "prefetch", "prefetch must be 0 or more"},
  };
  for (const Case& c : cases) {
    ooc::RunOptions run;
    c.set(run);
    const ooc::Error e = caught([&] { run.pipeline_options(); });
    CAPTURE(c.message);
    CHECK(e.kind() == ErrorKind::usage);
    CHECK(e.option() == c.option);
    CHECK(std::string(e.what()) == c.message);
  }
}
