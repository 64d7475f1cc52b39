#pragma once
// Zarr v2 arrays: a directory holding `.zarray` (JSON) and one file per chunk, each
// compressed on its own. Read by a staged TileReader (the serial stage only names the
// chunks a tile needs; reading and decoding them runs on the kernel threads, with no
// lock: every chunk is a file of its own) and written by a TileWriter whose kernel
// threads compress and write whole chunks. The codecs are format/codecs.hpp's, shared
// with HDF5's filters. Groups (`.zgroup`) hold arrays and groups; `.zmetadata`
// (consolidated metadata) lists a store's arrays in one file.

#include "format/layer.hpp"

#include "ooc/compression.hpp"
#include "ooc/dtype.hpp"
#include "ooc/shape.hpp"
#include "os/file.hpp"
#include "os/tile_reader.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ooc::zarr {

/// True if `path` is a directory holding `.zarray`, or `.zgroup`.
bool is_array(const std::string& path);
bool is_group(const std::string& path);
/// True if `path` names a Zarr array to write: a component of it ends in ".zarr" (out.zarr,
/// store.zarr/group/x), or its parent directory is a Zarr group.
bool names_zarr(const std::string& path);

/// A compressor or filter of an array, as its JSON names it.
struct Codec {
  std::string id;         // "blosc", "zlib", "gzip", "zstd", "lz4", "shuffle", "delta", "astype"
  int level = -1;         // zlib, gzip, zstd: the level; blosc: clevel; lz4: acceleration
  std::string cname;      // blosc's codec
  int shuffle = 0;        // blosc: 0 none, 1 bytes, 2 bits
  std::size_t item = 0;   // shuffle: its elementsize; delta: the item size of its dtype
  DType stored{Kind::floating, 8};  // delta: the dtype it sums in; astype: its encode_dtype
};

/// An array's `.zarray`, checked: everything ooc needs to read it.
struct Metadata {
  DType dtype{Kind::floating, 8};
  Shape shape;
  std::vector<std::int64_t> chunks;
  Order order = Order::c;
  std::vector<std::byte> fill;        // one element in the array's byte order; empty for null
  std::optional<Codec> compressor;    // none: chunks stored as they are
  std::vector<Codec> filters;         // applied in this order when writing
  char separator = '.';               // dimension_separator
  std::string codecs_text() const;    // "blosc(lz4, clevel 5, shuffle)", "delta+zlib(1)", "none"
};

/// Reads and checks `array`/.zarray; throws ooc::Error naming that file and what is wrong
/// (missing, not JSON, an unknown key, a zarr_format other than 2, a dtype ooc does not
/// read, a shape or chunks that do not fit, a codec ooc does not decode).
Metadata read_metadata(const std::string& array);

/// One array of a group, as `oocrun info` lists it.
struct Listed {
  std::string name;       // relative to the group, "a/b"
  bool readable = true;   // false: `why` says what ooc does not read in it
  std::string why;
  Metadata metadata;      // when readable
  std::string dtype_text; // the .zarray's dtype as written
  Shape shape;
};
/// Every array under the group `group`, in name order: from `.zmetadata` when the group
/// has one (as zarr.open_consolidated), else by walking its directories.
std::vector<Listed> list(const std::string& group);

/// Bytes the chunks of `array` take on disk (the sizes of its chunk files).
std::uint64_t stored_bytes(const std::string& array);

/// The reader of `array`; errors name `shown` and the chunk.
std::unique_ptr<detail::TileReader> open_reader(const std::string& array, const Metadata& metadata,
                                                const std::string& shown);

/// The writer of an uncompressed array rewritten in place (`--in-place`), chunk by chunk as
/// zarr-python writes one: a chunk's new bytes go to a hidden file beside it (`.KEY.ooc-new`),
/// fdatasynced, then renamed over it, so that each chunk file holds either its old bytes or
/// its new ones. Whole chunks are replaced by the kernel threads, chunks that tile
/// boundaries cut once gathered; finish() syncs the directories of the renames. Which
/// chunks a stopped run replaced is told by the files' identities (the in-place journal
/// keeps them from before the run).
class ChunkReplacer : public detail::TileWriter {
 public:
  /// Chunks in the array's grid, written or not.
  virtual std::uint64_t chunks() const = 0;
  /// Each chunk file's identity now (its inode number), 0 for a chunk that has no file.
  virtual std::vector<std::uint64_t> identities() const = 0;
  /// Once the run holds the array's lock: removes the hidden files of a run that stopped
  /// (never renamed, so never the array's) and takes the chunks to leave as they are
  /// (`done`, replaced by that run; empty: none). Every other chunk is written.
  virtual void start(std::vector<bool> done) = 0;
  /// True once any chunk file was replaced.
  virtual bool replaced() const = 0;
};
/// For `array` (no compressor, no filter), whose `.zarray` says `metadata`; errors name
/// `shown`.
std::unique_ptr<ChunkReplacer> open_replacer(const std::string& array, const Metadata& metadata,
                                             const std::string& shown);

/// What a Zarr output is compressed with when nothing is asked: zarr-python's default,
/// Blosc lz4 at level 5 with byte shuffle.
Compression default_compression();

/// The writer of a new array, shape `shape` in `order`, into the empty directory
/// `directory` (the hidden one beside its name): chunks of whole rows (C order: of the
/// first axis; Fortran order: of the last) compressed and written by the kernel threads.
/// Its finish() makes every chunk durable and writes `.zarray` last.
std::unique_ptr<detail::TileWriter> create_writer(const std::filesystem::path& directory, const std::string& shown,
                                                  DType dtype, const Shape& shape, Order order, const Compression& how);

/// Checks the output name `path` and makes what must exist for it: refuses an existing
/// name that is not a Zarr array (a file, a group, another directory), and an array inside
/// a store whose parent is an array; creates missing parent groups (`.zgroup`), durably.
/// Returns the array directory's path (through symbolic links, without a trailing '/').
std::filesystem::path prepare_output(const std::string& path);
/// A new empty hidden directory beside `final_path`, `.NAME.ooc-XXXX` (its name in `temp`),
/// returned open and locked (flock) for as long as the descriptor lives: what marks it as
/// a live run's. Hidden directories of that name whose lock is free (left by a run that
/// was killed) are removed.
os::UniqueFd create_temp_directory(const std::filesystem::path& final_path, std::filesystem::path& temp);
/// Puts the finished, synced directory `temp` in place as `final_path`: renamed there, or
/// atomically exchanged with an existing array (which is then removed), and the parent
/// directory synced. On failure nothing changed and an Error naming `shown` says so.
void publish_directory(const std::filesystem::path& temp, const std::filesystem::path& final_path,
                       const std::string& shown);
/// Removes a directory and everything in it; errors are swallowed (a discarded output).
void remove_tree(const std::filesystem::path& path) noexcept;

}  // namespace ooc::zarr
