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


ByteOrder order_of(hid_t type) { return H5Tget_order(type) == H5T_ORDER_BE ? ByteOrder::big : ByteOrder::little; }


TypeAnswer classify(hid_t type) {
  const std::size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
      if ((size == 1 || size == 2 || size == 4 || size == 8) && H5Tget_precision(type) == size * 8 &&
          H5Tget_offset(type) == 0) {
        const DType d(is_signed ? Kind::signed_int : Kind::unsigned_int, static_cast<int>(size), order_of(type));
        return {d, d.name()};
      }
      return {std::nullopt, std::to_string(H5Tget_precision(type)) + "-bit integer"};
    }
    case H5T_FLOAT: {
      std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
      const std::size_t bias = H5Tget_ebias(type);
      const bool ieee = (size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && bias == 15) ||
                        (size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 && bias == 127) ||
                        (size == 8 && spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52 && bias == 1023);
      if (ieee) {
        const DType d(Kind::floating, static_cast<int>(size), order_of(type));
        return {d, d.name()};
      }
      return {std::nullopt, std::to_string(size * 8) + "-bit non-IEEE float"};
    }
    case H5T_ENUM: {
      // h5py stores numpy bools as an int8 enum {FALSE: 0, TRUE: 1}.
      if (size == 1 && H5Tget_nmembers(type) == 2) {
        char* first = H5Tget_member_name(type, 0);
        char* second = H5Tget_member_name(type, 1);
        const bool is_bool = first && second && std::string(first) == "FALSE" && std::string(second) == "TRUE";
        H5free_memory(first);
        H5free_memory(second);
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


Id make_type(DType dtype) {
  const bool big = dtype.byte_order() == ByteOrder::big;
  if (dtype.kind() == Kind::boolean) {
    Id type(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
    const std::int8_t no = 0, yes = 1;
    H5Tenum_insert(type.get(), "FALSE", &no);
    H5Tenum_insert(type.get(), "TRUE", &yes);
    return type;
  }
  if (dtype.kind() == Kind::floating) {
    if (dtype.itemsize() == 2) {  // as h5py builds float16
      Id type(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
      H5Tset_fields(type.get(), 15, 10, 5, 0, 10);
      H5Tset_size(type.get(), 2);
      H5Tset_ebias(type.get(), 15);
      H5Tset_order(type.get(), big ? H5T_ORDER_BE : H5T_ORDER_LE);
      return type;
    }
    const hid_t base = dtype.itemsize() == 4 ? (big ? H5T_IEEE_F32BE : H5T_IEEE_F32LE)
                                             : (big ? H5T_IEEE_F64BE : H5T_IEEE_F64LE);
    return Id(H5Tcopy(base), H5Tclose);
  }
  const bool is_signed = dtype.kind() == Kind::signed_int;
  hid_t base;
  switch (dtype.itemsize()) {
    case 1: base = is_signed ? H5T_STD_I8LE : H5T_STD_U8LE; break;
    case 2: base = is_signed ? H5T_STD_I16LE : H5T_STD_U16LE; break;
    case 4: base = is_signed ? H5T_STD_I32LE : H5T_STD_U32LE; break;
    default: base = is_signed ? H5T_STD_I64LE : H5T_STD_U64LE; break;
  }
  Id type(H5Tcopy(base), H5Tclose);
  H5Tset_order(type.get(), big ? H5T_ORDER_BE : H5T_ORDER_LE);
  return type;
}

}  // namespace ooc::hdf5
