// src/format/hdf5: dataset paths, describing datasets, creating them, reading any run of
// elements of a chunked one.

#include "format/hdf5.hpp"
#include "ooc/error.hpp"

#include "test_support.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <hdf5.h>

#include <doctest/doctest.h>

#include <fstream>
#include <numeric>
#include <vector>

using ooc::testing::ScratchDir;

TEST_CASE("a dataset path splits at the first ':/' after an HDF5 file name") {
  auto where = ooc::hdf5::split("run.h5:/sim/pressure");
  REQUIRE(where);
  CHECK(where->file == "run.h5");
  CHECK(where->dataset == "/sim/pressure");
  CHECK(ooc::hdf5::split("dir/run.hdf5:/a")->file == "dir/run.hdf5");
  CHECK_FALSE(ooc::hdf5::split("plain.npy"));
  CHECK_FALSE(ooc::hdf5::split("notes.txt:/x"));  // neither an HDF5 name nor an existing file
  ScratchDir dir;
  std::ofstream(dir.file("data")) << "x";
  CHECK(ooc::hdf5::split(dir.file("data") + ":/d")->file == dir.file("data"));  // an existing file
}

TEST_CASE("only files with the HDF5 signature are HDF5 files") {
  ScratchDir dir;
  std::ofstream(dir.file("x.h5")) << "not hdf5";
  CHECK_FALSE(ooc::hdf5::is_hdf5_file(dir.file("x.h5")));
  CHECK_FALSE(ooc::hdf5::is_hdf5_file(dir.file("missing.h5")));
  ooc::hdf5::create_dataset(dir.file("y.h5"), "/d", ooc::dtype_of<double>, {3});
  CHECK(ooc::hdf5::is_hdf5_file(dir.file("y.h5")));
}

TEST_CASE("the HDF5 signature is found after a user block of 512, 1024, 2048, ... bytes") {
  ScratchDir dir;
  const std::string signature("\x89HDF\r\n\x1a\n", 8);
  auto write = [&](const std::string& name, std::size_t at) {
    std::string bytes(at, 'u');
    bytes += signature + std::string(100, '\0');
    std::ofstream(dir.file(name), std::ios::binary) << bytes;
    return dir.file(name);
  };
  CHECK(ooc::hdf5::is_hdf5_file(write("at0.h5", 0)));
  CHECK(ooc::hdf5::is_hdf5_file(write("at512.h5", 512)));
  CHECK(ooc::hdf5::is_hdf5_file(write("at4096.h5", 4096)));
  CHECK_FALSE(ooc::hdf5::is_hdf5_file(write("at256.h5", 256)));    // not where the library looks
  CHECK_FALSE(ooc::hdf5::is_hdf5_file(write("at1536.h5", 1536)));  // nor here
  std::string npy("\x93NUMPY", 6);  // a .npy whose data happens to hold the signature
  npy += std::string(506, ' ') + signature;
  std::ofstream(dir.file("a.npy"), std::ios::binary) << npy;
  CHECK_FALSE(ooc::hdf5::is_hdf5_file(dir.file("a.npy")));
}

TEST_CASE("a created dataset is contiguous, allocated, and described with its dtype and offset") {
  ScratchDir dir;
  const ooc::DType big_i4(ooc::Kind::signed_int, 4, ooc::ByteOrder::big);
  const std::uint64_t offset = ooc::hdf5::create_dataset(dir.file("f.h5"), "/a/b/c", big_i4, {4, 5});
  const auto info = ooc::hdf5::describe(dir.file("f.h5"), "/a/b/c");
  CHECK(info.dtype == big_i4);
  CHECK(info.shape == ooc::Shape{4, 5});
  CHECK(info.layout == "contiguous");
  CHECK(info.mappable);
  CHECK(info.offset == offset);
  CHECK(ooc::hdf5::existing_kind(dir.file("f.h5"), "/a/b") == "group");
  CHECK(ooc::hdf5::existing_kind(dir.file("f.h5"), "/") == "group");
  CHECK(ooc::hdf5::existing_kind(dir.file("f.h5"), "/a/b/c") == "dataset");
  CHECK(ooc::hdf5::existing_kind(dir.file("f.h5"), "/a/x/y").empty());
  CHECK_THROWS_WITH_AS(ooc::hdf5::existing_kind(dir.file("f.h5"), "/a/b/c/d"),
                       doctest::Contains("/a/b/c is a dataset, not a group"), ooc::UsageError);
  const auto all = ooc::hdf5::list(dir.file("f.h5"));
  REQUIRE(all.size() == 1);
  CHECK(all[0].name == "/a/b/c");
}

TEST_CASE("bool and float16 datasets are made as h5py makes them and read back as such") {
  ScratchDir dir;
  ooc::hdf5::create_dataset(dir.file("t.h5"), "/b", ooc::dtype_of<bool>, {2});
  ooc::hdf5::create_dataset(dir.file("t.h5"), "/h", ooc::dtype_of<ooc::half>, {});
  CHECK(ooc::hdf5::describe(dir.file("t.h5"), "/b").dtype == ooc::dtype_of<bool>);
  CHECK(ooc::hdf5::describe(dir.file("t.h5"), "/h").dtype == ooc::dtype_of<ooc::half>);
  CHECK(ooc::hdf5::describe(dir.file("t.h5"), "/h").shape.empty());
}

TEST_CASE("moving datasets") {
  ScratchDir dir;
  ooc::hdf5::create_dataset(dir.file("m.h5"), "/tmp1", ooc::dtype_of<float>, {2});
  ooc::hdf5::create_dataset(dir.file("m.h5"), "/final", ooc::dtype_of<float>, {2});
  CHECK_THROWS_AS(ooc::hdf5::move_dataset(dir.file("m.h5"), "/tmp1", "/final", false), ooc::Error);
  ooc::hdf5::move_dataset(dir.file("m.h5"), "/tmp1", "/x/y/final", false);
  CHECK(ooc::hdf5::existing_kind(dir.file("m.h5"), "/x/y/final") == "dataset");
  CHECK(ooc::hdf5::existing_kind(dir.file("m.h5"), "/tmp1").empty());
  ooc::hdf5::move_dataset(dir.file("m.h5"), "/x/y/final", "/final", true);
  CHECK(ooc::hdf5::existing_kind(dir.file("m.h5"), "/x/y/final").empty());
}

TEST_CASE("errors name the file and the dataset") {
  ScratchDir dir;
  ooc::hdf5::create_dataset(dir.file("e.h5"), "/g/d", ooc::dtype_of<double>, {1});
  CHECK_THROWS_WITH_AS(ooc::hdf5::describe(dir.file("e.h5"), "/nope"), doctest::Contains("e.h5:/nope: no such dataset"),
                       ooc::Error);
  CHECK_THROWS_WITH_AS(ooc::hdf5::describe(dir.file("e.h5"), "/g"), doctest::Contains("is a group"), ooc::Error);
  CHECK_THROWS_WITH_AS(ooc::hdf5::describe(dir.file("none.h5"), "/d"), doctest::Contains("none.h5"), ooc::Error);
}

TEST_CASE("a reader returns any run of elements of a chunked, compressed 3-d dataset") {
  ScratchDir dir;
  const std::string file = dir.file("r.h5");
  std::vector<std::int32_t> values(3 * 4 * 5);
  std::iota(values.begin(), values.end(), 0);
  {
    const hsize_t dims[3] = {3, 4, 5}, chunk[3] = {2, 3, 2};
    const hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t space = H5Screate_simple(3, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    H5Pset_deflate(dcpl, 4);
    const hid_t d = H5Dcreate2(f, "/d", H5T_STD_I32BE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  const auto info = ooc::hdf5::describe(file, "/d");
  CHECK_FALSE(info.mappable);
  CHECK(info.readable);
  CHECK(info.filters == std::vector<std::string>{"deflate"});
  auto reader = ooc::hdf5::open_reader(file, "/d");
  // Runs that start and end inside rows and slabs use every box of the selection.
  for (auto [b, e] : {std::pair{0, 60}, {7, 8}, {3, 27}, {19, 41}, {59, 60}, {20, 40}, {4, 6}}) {
    ooc::detail::AlignedBuffer buffer;
    const std::byte* got = reader->read(b, e, buffer);  // raw big-endian bytes, as the file holds them
    for (int i = 0; i < e - b; ++i) {
      std::int32_t native;
      ooc::convert(info.dtype.value(), got + 4 * i, ooc::dtype_of<std::int32_t>, &native, 1);
      CHECK(native == b + i);
    }
  }
}
