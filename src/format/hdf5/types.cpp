// HDF5 types to ooc's dtypes and back: what numpy and h5py map them to.

#include "format/hdf5/library.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace ooc::hdf5 {
namespace {

// A failure reading a dataset's type: the type was decoded when the dataset opened, so
// the file's metadata is damaged (or the library is in trouble).
constexpr ErrorKind kDamaged = ErrorKind::corrupt;

ByteOrder order_of(hid_t type, const std::string& label) {
  const H5T_order_t order =
      check(H5Tget_order(type), label, "cannot read its type's byte order (damaged file)", kDamaged);
  return order == H5T_ORDER_BE ? ByteOrder::big : ByteOrder::little;
}

// H5Tget_size and H5Tget_precision say a failure with 0, which no type has.
std::size_t nonzero(std::size_t result, const std::string& label, const char* problem) {
  if (result == 0) throw Error(label, problem, kDamaged);
  return result;
}

}  // namespace


TypeAnswer classify(hid_t type, const std::string& label) {
  const std::size_t size = nonzero(H5Tget_size(type), label, "cannot read its type's size (damaged file)");
  switch (check(H5Tget_class(type), label, "cannot read its type's class (damaged file)", kDamaged)) {
    case H5T_INTEGER: {
      const H5T_sign_t sign = check(H5Tget_sign(type), label, "cannot read its type's sign (damaged file)", kDamaged);
      const bool is_signed = sign == H5T_SGN_2;
      const std::size_t precision =
          nonzero(H5Tget_precision(type), label, "cannot read its type's precision (damaged file)");
      const int offset =
          check(H5Tget_offset(type), label, "cannot read its type's bit offset (damaged file)", kDamaged);
      if ((size == 1 || size == 2 || size == 4 || size == 8) && precision == size * 8 && offset == 0) {
        const DType d(is_signed ? Kind::signed_int : Kind::unsigned_int, static_cast<int>(size), order_of(type, label));
        return {d, d.name()};
      }
      return {std::nullopt, std::to_string(precision) + "-bit integer"};
    }
    case H5T_FLOAT: {
      std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      check(H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize), label,
            "cannot read its type's bit fields (damaged file)", kDamaged);
      // 0 is both H5Tget_ebias's failure and a bias: either way not an IEEE float's, so
      // the type is reported as not one ooc handles.
      const std::size_t bias = H5Tget_ebias(type);
      const bool ieee = (size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && bias == 15) ||
                        (size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 && bias == 127) ||
                        (size == 8 && spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52 && bias == 1023);
      if (ieee) {
        const DType d(Kind::floating, static_cast<int>(size), order_of(type, label));
        return {d, d.name()};
      }
      return {std::nullopt, std::to_string(size * 8) + "-bit non-IEEE float"};
    }
    case H5T_ENUM: {
      // h5py stores numpy bools as an int8 enum {FALSE: 0, TRUE: 1}.
      if (size == 1 &&
          check(H5Tget_nmembers(type), label, "cannot read its enum type's members (damaged file)", kDamaged) == 2) {
        char* first = H5Tget_member_name(type, 0);
        char* second = H5Tget_member_name(type, 1);
        const bool named = first && second;
        const bool is_bool = named && std::string(first) == "FALSE" && std::string(second) == "TRUE";
        // Freeing what the library gave (or null) has no failure to act on.
        H5free_memory(first);
        H5free_memory(second);
        if (!named) throw Error(label, "cannot read its enum type's member names (damaged file)", kDamaged);
        if (is_bool) return {DType(Kind::boolean, 1), "bool"};
      }
      return {std::nullopt, "enum"};
    }
    case H5T_STRING: return {std::nullopt, "string"};
    case H5T_COMPOUND: return {std::nullopt, "compound"};
    case H5T_VLEN: return {std::nullopt, "variable-length"};
    case H5T_REFERENCE: return {std::nullopt, "reference"};
    case H5T_ARRAY: return {std::nullopt, "array"};
    case H5T_OPAQUE: return {std::nullopt, "opaque"};
    case H5T_BITFIELD: return {std::nullopt, "bitfield"};
    default: return {std::nullopt, "unknown"};
  }
}


Id make_type(DType dtype, const std::string& label) {
  // These fail only when the library does (out of memory): never for the file's sake.
  static constexpr const char* kCannot = "cannot make the dataset's type (HDF5 library error)";
  const bool big = dtype.byte_order() == ByteOrder::big;
  const H5T_order_t order = big ? H5T_ORDER_BE : H5T_ORDER_LE;
  if (dtype.kind() == Kind::boolean) {
    Id type(check(H5Tenum_create(H5T_NATIVE_INT8), label, kCannot), H5Tclose);
    const std::int8_t no = 0, yes = 1;
    check(H5Tenum_insert(type.get(), "FALSE", &no), label, kCannot);
    check(H5Tenum_insert(type.get(), "TRUE", &yes), label, kCannot);
    return type;
  }
  if (dtype.kind() == Kind::floating) {
    if (dtype.itemsize() == 2) {  // as h5py builds float16
      Id type(check(H5Tcopy(H5T_IEEE_F32LE), label, kCannot), H5Tclose);
      check(H5Tset_fields(type.get(), 15, 10, 5, 0, 10), label, kCannot);
      check(H5Tset_size(type.get(), 2), label, kCannot);
      check(H5Tset_ebias(type.get(), 15), label, kCannot);
      check(H5Tset_order(type.get(), order), label, kCannot);
      return type;
    }
    const hid_t base = dtype.itemsize() == 4 ? (big ? H5T_IEEE_F32BE : H5T_IEEE_F32LE)
                                             : (big ? H5T_IEEE_F64BE : H5T_IEEE_F64LE);
    return Id(check(H5Tcopy(base), label, kCannot), H5Tclose);
  }
  const bool is_signed = dtype.kind() == Kind::signed_int;
  hid_t base;
  switch (dtype.itemsize()) {
    case 1: base = is_signed ? H5T_STD_I8LE : H5T_STD_U8LE; break;
    case 2: base = is_signed ? H5T_STD_I16LE : H5T_STD_U16LE; break;
    case 4: base = is_signed ? H5T_STD_I32LE : H5T_STD_U32LE; break;
    default: base = is_signed ? H5T_STD_I64LE : H5T_STD_U64LE; break;
  }
  Id type(check(H5Tcopy(base), label, kCannot), H5Tclose);
  check(H5Tset_order(type.get(), order), label, kCannot);
  return type;
}

}  // namespace ooc::hdf5
