#pragma once
// What the expression and selection fuzzers share: a few small arrays written once to a
// scratch directory, for the parsers to bind names and selections to.

#include "ooc/ooc.hpp"

#include <filesystem>
#include <string>
#include <unistd.h>

namespace ooc::fuzz {

/// Small arrays of several shapes, dtypes and orders, in a directory of this process.
struct FuzzArrays {
  std::filesystem::path dir;
  std::string matrix, column, cube, scalar;  // paths

  FuzzArrays() {
    dir = std::filesystem::temp_directory_path() / ("ooc-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    matrix = make("m.npy", ooc::dtype_of<double>, {7, 5}, ooc::Order::c);
    column = make("c.npy", ooc::DType(ooc::Kind::signed_int, 4, ooc::ByteOrder::big), {5}, ooc::Order::c);
    cube = make("k.npy", ooc::dtype_of<float>, {3, 4, 6}, ooc::Order::fortran);
    scalar = make("s.npy", ooc::dtype_of<std::uint8_t>, {}, ooc::Order::c);
  }
  ~FuzzArrays() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }

 private:
  std::string make(const std::string& name, ooc::DType dtype, const ooc::Shape& shape, ooc::Order order) {
    const std::string path = (dir / name).string();
    ooc::MappedArray out = ooc::create_npy(path, dtype, shape, order);
    auto bytes = out.writable_bytes();
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 37 + 11);
    out.commit();
    return path;
  }
};

}  // namespace ooc::fuzz
