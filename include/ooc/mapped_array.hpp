#pragma once
/// MappedArray: one array of a file, memory-mapped, with its dtype, shape and order.

#include "ooc/dtype.hpp"
#include "ooc/error.hpp"
#include "ooc/shape.hpp"

#include <Eigen/Core>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>

namespace ooc {

/// What the file's header says: which bytes hold an array of which dtype, shape, order.
struct ArrayInfo {
  std::string format = "npy";      // the container format
  std::string format_version;      // "1.0", "2.0", "3.0" for .npy
  DType dtype{Kind::floating, 8};
  Shape shape;
  Order order = Order::c;
  std::uint64_t data_offset = 0;   // file offset of the first element

  std::int64_t size() const;       // number of elements
  std::uint64_t nbytes() const;    // size() * itemsize
};

enum class Access { read_only, read_write };

/// Elements [begin, end) of an array, in memory order; the default is all of them.
struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t end = std::numeric_limits<std::int64_t>::max();
  std::int64_t size() const { return end - begin; }
};

template <class T> using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

namespace detail { class MappedArrayAccess; }

/// An array in a file, mapped into memory. Move-only; unmaps in its destructor. A
/// read-only mapping cannot be written through: the pages are mapped PROT_READ and every
/// writing accessor throws. Usually every element is mapped; a MappedArray can also map
/// a window of them (an MPI rank maps only the elements of its tiles).
class MappedArray {
 public:
  MappedArray(MappedArray&&) noexcept;
  MappedArray& operator=(MappedArray&&) noexcept;
  ~MappedArray();

  const ArrayInfo& info() const;
  DType dtype() const { return info().dtype; }
  const Shape& shape() const { return info().shape; }
  Order order() const { return info().order; }
  std::int64_t size() const { return info().size(); }
  std::uint64_t nbytes() const { return info().nbytes(); }
  int ndim() const { return static_cast<int>(shape().size()); }
  /// The name users know the file by (the final name of an output still being written).
  const std::string& path() const;
  bool writable() const;

  /// The elements mapped: [0, size()) unless a window was asked for.
  ElementRange window() const;
  /// The data bytes of the mapped elements, in the file's byte order and memory order.
  std::span<const std::byte> bytes() const&;
  /// Writable data bytes; throws UsageError for a read-only mapping.
  std::span<std::byte> writable_bytes() &;
  void bytes() const&& = delete;
  void writable_bytes() && = delete;

  /// The mapped elements as an Eigen array in memory order; T must be the array's
  /// element type and the array must be in native byte order.
  template <class T> ConstArrayMap<T> values() const& {
    check_view_type(dtype_of<T>);
    return ConstArrayMap<T>(reinterpret_cast<const T*>(bytes().data()), window().size());
  }
  template <class T> ArrayMap<T> writable_values() & {
    check_view_type(dtype_of<T>);
    return ArrayMap<T>(reinterpret_cast<T*>(writable_bytes().data()), window().size());
  }
  // A view of a temporary would outlive its mapping: keep the MappedArray in a variable.
  template <class T> void values() const&& = delete;
  template <class T> void writable_values() && = delete;

  /// Makes the data durable. For an array from create_npy: flushes, fsyncs and renames
  /// the temporary file to its final name; until then the final name is untouched, and
  /// an array destroyed without commit() removes its temporary file. For a read-write
  /// mapping: flushes the mapped window and fsyncs. For a read-only mapping: nothing.
  void commit();
  /// True for an output from create_npy that has not been committed yet.
  bool pending() const;

 private:
  struct Impl;
  explicit MappedArray(std::unique_ptr<Impl> impl);
  void check_view_type(DType wanted) const;

  std::unique_ptr<Impl> impl_;

  friend MappedArray map_file(const std::string& path, Access access, ElementRange window);
  friend ArrayInfo read_info(const std::string& path);
  friend MappedArray create_npy(const std::string& path, DType dtype, const Shape& shape, Order order,
                                ElementRange window);
  friend class detail::MappedArrayAccess;
};

/// Opens and maps the array in `path` (a .npy file): the elements in `window` (clamped
/// to the array), all of them by default. Throws ooc::Error naming the file and the
/// problem if it cannot be read as an array ooc supports.
MappedArray map_file(const std::string& path, Access access = Access::read_only, ElementRange window = {});

/// What the header of the array in `path` says, checked as map_file checks it, without
/// mapping anything.
ArrayInfo read_info(const std::string& path);

/// Creates a .npy file for an array of this dtype, shape and order, pre-allocated to its
/// full size, under a temporary name until commit(), and maps the elements in `window`
/// (all by default) for writing.
MappedArray create_npy(const std::string& path, DType dtype, const Shape& shape,
                       Order order = Order::c, ElementRange window = {});

}  // namespace ooc
