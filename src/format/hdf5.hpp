#pragma once
// HDF5 datasets, through the HDF5 C library only (we never parse HDF5 structures): where
// a contiguous dataset's bytes lie in its file, how to create one for writing, and what a
// file holds. The library runs one call at a time (Debian builds it thread-safe, with one
// global lock): every call here holds one process-wide lock of ours too.

#include "format/layer.hpp"

#include "ooc/compression.hpp"
#include "ooc/dtype.hpp"
#include "ooc/shape.hpp"
#include "os/tile_reader.hpp"

#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ooc::hdf5 {

/// "run.h5:/sim/pressure" -> {"run.h5", "/sim/pressure"}. A text splits at the first ":/"
/// whose left side is an existing file or ends in an HDF5 extension (.h5 .hdf5 .hdf .he5).
struct DatasetPath {
  std::string file;
  std::string dataset;  // absolute, starts with '/'
};
std::optional<DatasetPath> split(std::string_view text);

/// True if `path` holds the HDF5 signature where the library looks for it: at offset 0 or
/// after a user block (512, 1024, 2048, ... bytes).
bool is_hdf5_file(const std::string& path);

/// What a dataset is and whether ooc can map it.
struct DatasetInfo {
  std::string name;                 // absolute path in the file
  std::string elsewhere;            // "other.h5:/data" when links lead out of the file, else ""
  std::optional<DType> dtype;       // empty when the type is not one ooc handles
  std::string type_text;            // numpy-like name of the type, or what it is ("string")
  Shape shape;
  std::string layout;               // "contiguous", "chunked", "compact", "virtual"
  std::vector<std::string> filters; // e.g. "deflate", "shuffle"
  std::vector<std::int64_t> chunks; // chunk shape of a chunked dataset, else empty
  std::uint64_t stored_bytes = 0;   // bytes its data takes in the file (H5Dget_storage_size)
  bool allocated = false;           // storage written (contiguous or chunked)
  std::optional<std::uint64_t> offset;  // file offset of a contiguous, allocated dataset
  bool readable = false;            // ooc can read it at all (number type, a shape)
  bool mappable = false;            // ... and map it, rather than read it tile by tile
  std::string why_not_mappable;     // empty when mappable
};

/// Describes `dataset` in `file`; throws ooc::Error naming file and dataset when the file
/// cannot be opened or the dataset does not exist or is a group.
DatasetInfo describe(const std::string& file, const std::string& dataset);

/// A reader of any run of elements of a dataset that cannot be mapped (chunked,
/// compressed, compact, not yet allocated: what h5py gives, fill values included). A
/// chunked dataset whose filters ooc decodes itself (hdf5/filters.hpp) is read staged:
/// raw chunks (H5Dread_chunk) in the serial stage, decoded on the kernel threads. Any
/// other goes through H5Dread, with a chunk cache that holds a whole row of chunks
/// (within reason), so reading consecutive runs decompresses each chunk once.
std::unique_ptr<detail::TileReader> open_reader(const std::string& file, const std::string& dataset);

/// How a chunked, compressed output is made (oocrun -o f.h5:/x --chunks N --compression C --shuffle).
using Compression = ooc::Compression;

/// Creates `dataset` in `file` (created if absent) chunked and compressed as `how` says,
/// and returns the writer of its chunks: encoded on the kernel threads, written in order
/// with H5Dwrite_chunk. Its finish() flushes and closes the file.
std::unique_ptr<detail::TileWriter> create_compressed(const std::string& file, const std::string& dataset, DType dtype,
                                                      const Shape& shape, const Compression& how,
                                                      const std::string& shown);

/// For a process that must outlive a damaged file (the Python module; oocrun contains the
/// library's crash with a signal handler instead, os/crash_guard.hpp): before the library
/// first opens a version of a file (device, inode, size, mtime) for a dataset, or for its
/// catalogue, a child process forked under the library lock does the same reads and
/// exits; when the library kills it, the call throws ooc::Error naming the file ("damaged
/// HDF5 file ..."), in place of crashing this process. Off by default.
void set_probe_in_child(bool on);

/// Every dataset in the file, in name order.
std::vector<DatasetInfo> list(const std::string& file);

/// Creates `dataset` (and missing groups) in `file` (created if absent) as a contiguous
/// dataset, allocated at once and never filled, and returns the file offset of its data.
std::uint64_t create_dataset(const std::string& file, const std::string& dataset, DType dtype,
                             const Shape& shape);

/// Renames a dataset (link) within `file`, creating missing groups; with `replace` an
/// existing link at `to` is deleted first.
void move_dataset(const std::string& file, const std::string& from, const std::string& to, bool replace);
/// "other.h5:/data" when `name`, or the deepest group of it that exists, lies in another
/// file than `file` (links lead there: an external link); "" when it lies in `file`.
std::string elsewhere(const std::string& file, const std::string& name);
/// What `name` is in `file`: "" when nothing, else "dataset", "group", "named datatype",
/// "link to nothing" (a dangling soft link) or "object". Throws ooc::UsageError when a
/// parent of `name` exists and is not a group.
std::string existing_kind(const std::string& file, const std::string& name);

}  // namespace ooc::hdf5
