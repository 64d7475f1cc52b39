#pragma once
/// Elements as Eigen arrays: the block type kernels see (ConstArrayMap<T>) and
/// MappedArray::values<T>() / writable_values<T>(). The one public header that brings
/// in Eigen, so that the headers not about kernels compile without it.

#include "ooc/dtype.hpp"
#include "ooc/mapped_array.hpp"

#include <Eigen/Core>

namespace ooc {

/// A run of T's in memory, as an Eigen column array (writable, and read-only).
template <class T> using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T> auto MappedArray::values() const& {
  check_view_type(dtype_of<T>);
  return ConstArrayMap<T>(reinterpret_cast<const T*>(bytes().data()), window().size());
}

template <class T> auto MappedArray::writable_values() & {
  check_view_type(dtype_of<T>);
  return ArrayMap<T>(reinterpret_cast<T*>(writable_bytes().data()), window().size());
}

}  // namespace ooc
