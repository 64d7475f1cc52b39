// src/format/hdf5: dataset paths, describing datasets, creating them, reading any run of
// elements of a chunked one.

#include "format/hdf5.hpp"
#include "ooc/error.hpp"

#include "test_support.hpp"

#include <Eigen/Core>  // ooc::half (ooc/dtype.hpp only declares it)

#include <hdf5.h>

#include <doctest/doctest.h>

#include <cstring>
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

namespace {

// The address of the object header of `name` in `file`.
haddr_t header_address(const std::string& file, const char* name) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info{};
  REQUIRE(H5Oget_info_by_name3(f, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
  haddr_t address = 0;
  std::memcpy(&address, &info.token, sizeof address);  // the native format's token is the address
#else
  H5O_info_t info{};
  REQUIRE(H5Oget_info_by_name2(f, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
  const haddr_t address = info.addr;
#endif
  H5Fclose(f);
  return address;
}

// Gives the datatype message of the (version 1) object header at `address` a version no
// library knows: the dataset is still found, but no longer opens.
void damage_datatype_message(const std::string& file, haddr_t address) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  std::vector<unsigned char> header(512);
  io.seekg(static_cast<std::streamoff>(address));
  io.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(header.size()));
  REQUIRE(header[0] == 1);  // version 1: messages from byte 16, each type (2), size (2), flags, 3 reserved
  for (std::size_t at = 16; at + 8 < header.size();) {
    const unsigned type = header[at] | header[at + 1] << 8, size = header[at + 2] | header[at + 3] << 8;
    if (type == 0x0003) {  // datatype: its first byte is class (low nibble) and version (high)
      io.seekp(static_cast<std::streamoff>(address + at + 8));
      io.put(static_cast<char>(header[at + 8] & 0x0f));
      REQUIRE(io.good());
      return;
    }
    at += 8 + size;
  }
  FAIL("no datatype message in the object header");
}

}  // namespace

TEST_CASE("a dataset that a damaged file no longer opens fails the list, naming it, instead of vanishing from it") {
  ScratchDir dir;
  const std::string file = dir.file("d.h5");
  ooc::hdf5::create_dataset(file, "/a", ooc::dtype_of<double>, {3});
  ooc::hdf5::create_dataset(file, "/b", ooc::dtype_of<std::int32_t>, {4});
  REQUIRE(ooc::hdf5::list(file).size() == 2);
  damage_datatype_message(file, header_address(file, "/b"));
  try {
    const auto found = ooc::hdf5::list(file);
    FAIL("listed " << found.size() << " dataset(s) of a damaged file");
  } catch (const ooc::Error& e) {
    CHECK(std::string(e.what()) == file + ":/b: cannot open the dataset (damaged file)");
    CHECK(e.kind() == ooc::ErrorKind::corrupt);
  }
  CHECK_THROWS_WITH_AS(ooc::hdf5::describe(file, "/b"), doctest::Contains("d.h5:/b: cannot open"), ooc::Error);
  CHECK(ooc::hdf5::describe(file, "/a").dtype == ooc::dtype_of<double>);  // the rest of the file still reads
}
