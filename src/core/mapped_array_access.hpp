#pragma once
// What the pipeline and the in-place journal need of a MappedArray beyond its public
// face: its pieces (the descriptor, the mapping, the tile reader or writer, the pending
// output's temporary file), page advice and syncing over element ranges, and the
// factories for arrays the public functions do not make.

#include "core/layer.hpp"

#include "format/hdf5.hpp"
#include "ooc/mapped_array.hpp"
#include "os/file.hpp"
#include "os/mapping.hpp"
#include "os/memory.hpp"
#include "os/tile_reader.hpp"

#include <filesystem>
#include <string>

namespace ooc::detail {

class MappedArrayAccess {
 public:
  /// Advises the pages that hold elements [begin, end).
  static void advise(const MappedArray& array, std::int64_t begin, std::int64_t end, os::Advice advice);
  /// Drops from the resident set the whole pages that hold only elements before `end`
  /// and lie at or after `*mark` (an address; 0 means the start of the data), then moves
  /// the mark. Pages stay in the page cache, dirty ones too.
  static void drop_pages_before(const MappedArray& array, std::int64_t end, std::uintptr_t* mark);
  /// Another MappedArray over the very same bytes (mapping, reader, descriptor) as
  /// `array`, which they outlive as long as either holds them: what a selection of a
  /// named array reads.
  static MappedArray share(const MappedArray& array);
  /// The reader of an array that is not mapped.
  static TileReader* reader(const MappedArray& array);
  /// The writer of an output that is not mapped (a compressed HDF5 dataset), or null.
  static TileWriter* writer(const MappedArray& array);
  /// The mapping of a mapped array (empty when its window holds no bytes), or null for
  /// an array read or written tile by tile.
  static const os::Mapping* mapping(const MappedArray& array);
  /// The descriptor the array was opened and mapped from (locks, identity, fsync,
  /// os::reopen_direct).
  static int fd(const MappedArray& array);
  /// The array whose bytes these are, as an in-place run on them would name it, and a
  /// descriptor of its file: the array itself, a selection's source, or the dataset an
  /// HDF5 external link leads to. Readers lock that file and look for that array's journal.
  struct Source {
    std::string path;
    int fd;
  };
  static Source source(const MappedArray& array);
  /// Writes the elements [begin, end) of a writable array to disk and waits.
  static void sync(const MappedArray& array, std::int64_t begin, std::int64_t end);
  /// Starts writing elements [begin, end) of a writable mapped array to disk, not waiting.
  static void start_writeback(const MappedArray& array, std::int64_t begin, std::int64_t end);

  /// A read-only array named `path` with `info`, read tile by tile by `reader` (a
  /// selection of another array); `source` is the array its bytes come from (see
  /// source()), whose file `fd` is open on (locks, identity).
  static MappedArray read_by(std::string path, ArrayInfo info, std::string source, os::UniqueFd fd,
                             std::unique_ptr<TileReader> reader);
  /// A new HDF5 dataset (`path` is FILE.h5:/name), chunked and compressed as `how` says,
  /// written tile by tile by its writer and hidden until commit(), as create_hdf5's.
  static MappedArray create_compressed_hdf5(const std::string& path, DType dtype, const Shape& shape, bool overwrite,
                                            const hdf5::Compression& how);
  /// A new Zarr array (ooc::create_zarr), written tile by tile by its writer into a hidden
  /// directory that commit() puts in place.
  static MappedArray create_zarr(const std::string& path, DType dtype, const Shape& shape, Order order,
                                 const Compression& how);
  /// The temporary file a pending output from create_npy is written to until commit().
  static std::filesystem::path pending_path(const MappedArray& array);
  /// Maps `window` of the pending output `temp` that another process created (an MPI
  /// rank's part of it) for writing; errors name `final_path`. The file stays its
  /// creator's to rename or remove: commit() only flushes and fsyncs.
  static MappedArray map_output_part(const std::filesystem::path& temp, const std::string& final_path,
                                     ElementRange window);
};

/// Where an output named `path` is written: through symbolic links to the file they
/// name; refused for a directory, a device, a FIFO or a socket (as create_npy refuses).
std::string output_target(const std::string& path);

}  // namespace ooc::detail
