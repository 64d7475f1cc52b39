#pragma once
/// MappedArray: one array of a file, memory-mapped, with its dtype, shape and order.

#include "ooc/compression.hpp"
#include "ooc/dtype.hpp"
#include "ooc/error.hpp"
#include "ooc/shape.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

  /// False for an array read tile by tile rather than mapped (a chunked or compressed
  /// HDF5 dataset): the pipeline (transform, reduce, for_each_tile) reads it, but
  /// bytes() and the views below throw for it.
  bool mapped() const;

  /// The elements mapped: [0, size()) unless a window was asked for (always all of them
  /// for an array that is not mapped).
  ElementRange window() const;
  /// The data bytes of the mapped elements, in the file's byte order and memory order.
  std::span<const std::byte> bytes() const&;
  /// Writable data bytes; throws UsageError for a read-only mapping.
  std::span<std::byte> writable_bytes() &;
  void bytes() const&& = delete;
  void writable_bytes() && = delete;

  /// The mapped elements as an Eigen array in memory order, ConstArrayMap<T> and
  /// ArrayMap<T>; T must be the array's element type, the array must be in native byte
  /// order, and its data aligned for T (np.save's files always are; a hand-made header
  /// may put the data anywhere). Defined in <ooc/array_map.hpp> (included by
  /// <ooc/kernel.hpp> and <ooc/ooc.hpp>), so that this header does not bring in Eigen.
  template <class T> auto values() const&;
  template <class T> auto writable_values() &;
  // A view of a temporary would outlive its mapping: keep the MappedArray in a variable.
  template <class T> void values() const&& = delete;
  template <class T> void writable_values() && = delete;

  /// This array's elements that a numpy-style selection picks, as `a[::5, 3]`:
  /// `ooc::map_file("log.npy").select("::5, 3")` (ooc/selection.hpp has the forms).
  /// On a named array, `auto col = x.select(":, 2");` is a view beside x, as numpy's
  /// `x[:, 2]`: x stays usable and the selection shares its mapping (or, for an array
  /// read tile by tile, its reader: then do not run both from two threads at once), which
  /// lives as long as either does. On a temporary (or std::move(x)) it takes x over.
  MappedArray select(std::string_view selection) const&;
  MappedArray select(std::string_view selection) &&;

  /// Makes the data durable. Throws if the file shrank under the mapping. For an array
  /// from create_npy: flushes, fsyncs and renames
  /// the temporary file to its final name; until then the final name is untouched, and
  /// an array destroyed without commit() removes its temporary file. For a read-write
  /// mapping: flushes the mapped window and fsyncs. For a read-only mapping: nothing.
  /// The mapping stays: writes after commit() go to the file under its final name, as
  /// to any read-write mapping, and are durable once commit() is called again.
  void commit();
  /// True for an output from create_npy that has not been committed yet.
  bool pending() const;
  /// True once a read or write through the mapping found the file shorter than the
  /// array (another process truncated it): the rest of the mapping then reads as zeros
  /// instead of raising SIGBUS. commit() refuses such an array, and so does every run.
  bool shrank() const;
  /// Throws ooc::Error ("file shrank while being read") if shrank().
  void check_intact() const;

 private:
  struct Impl;
  explicit MappedArray(std::shared_ptr<Impl> impl);
  void check_view_type(DType wanted) const;

  // Shared by the selections made of a named array (select() const&), which read its
  // mapping; the array itself stays move-only.
  std::shared_ptr<Impl> impl_;

  friend MappedArray map_file(const std::string& path, Access access, ElementRange window);
  friend ArrayInfo read_info(const std::string& path);
  friend MappedArray create_npy(const std::string& path, DType dtype, const Shape& shape, Order order,
                                ElementRange window);
  friend MappedArray create_hdf5(const std::string& path, DType dtype, const Shape& shape, bool overwrite);
  friend class detail::MappedArrayAccess;
};

/// Opens and maps the array `path` names: a .npy file, or a dataset of an HDF5 file as
/// "file.h5:/group/dataset" (contiguous datasets are mapped; chunked, compressed and other
/// datasets are read tile by tile, see mapped()). Only the elements in `window` (clamped
/// to the array's end; all by default) are mapped; a window with a negative begin or an
/// end before its begin is an ooc::UsageError. Throws ooc::Error naming the file and the
/// problem if it cannot be read as an array ooc supports.
MappedArray map_file(const std::string& path, Access access = Access::read_only, ElementRange window = {});

/// What the header of the array `path` names says, checked as map_file checks it,
/// without mapping anything.
ArrayInfo read_info(const std::string& path);

/// Creates a .npy file for an array of this dtype, shape and order, pre-allocated to its
/// full size, under a temporary name until commit(), and maps the elements in `window`
/// (all by default) for writing.
MappedArray create_npy(const std::string& path, DType dtype, const Shape& shape,
                       Order order = Order::c, ElementRange window = {});

/// Creates dataset "file.h5:/group/name" (and missing groups; the file too if absent) as a
/// contiguous dataset h5py reads, mapped for writing. It appears only on commit(): a new
/// file is renamed into place, an existing file gets the dataset renamed from a hidden
/// name, and its other objects are left as they were. An existing dataset of that name
/// is an error unless `overwrite`.
MappedArray create_hdf5(const std::string& path, DType dtype, const Shape& shape, bool overwrite = false);

/// One array a file holds, as `oocrun info` shows it; nothing is mapped.
struct ArrayEntry {
  std::string path;              // what map_file takes: "x.npy" or "run.h5:/sim/p"
  ArrayInfo info;                // dtype meaningful only when `supported`
  bool supported = true;         // a dtype ooc handles
  std::string type;              // numpy's name of the dtype, or what the type is ("string")
  std::string layout = "contiguous";      // HDF5: contiguous, chunked, compact, virtual
  std::vector<std::string> filters;       // HDF5: deflate, shuffle, ...
  std::vector<std::int64_t> chunks;       // HDF5: chunk shape of a chunked dataset, else empty
  std::uint64_t stored_bytes = 0;         // HDF5: bytes its data takes in the file
  bool readable = true;          // ooc reads it (mapped, or tile by tile)
  bool mappable = true;
  std::string why_not_mappable;
};

/// The arrays `path` names: the array of a .npy file, one HDF5 dataset
/// ("run.h5:/sim/p"), or every dataset of an HDF5 file ("run.h5"). Throws ooc::Error for
/// a file that is neither, or a bad header, as map_file would.
std::vector<ArrayEntry> describe(const std::string& path);

/// A new chunked HDF5 dataset `path` (FILE.h5:/dataset), compressed as `how` says:
/// written tile by tile (chunks encoded on the kernel threads), never mapped. Durable and
/// given its name by commit(), as create_hdf5's.
MappedArray create_compressed(const std::string& path, DType dtype, const Shape& shape, const Compression& how,
                              bool overwrite = false);

/// create_npy or create_hdf5, by the form of `path`.
MappedArray create_array(const std::string& path, DType dtype, const Shape& shape, Order order = Order::c,
                         bool overwrite = false);

}  // namespace ooc
