#include "ooc/journal.hpp"

#include "format/hdf5.hpp"
#include "format/zarr.hpp"

#include "core/mapped_array_access.hpp"
#include "ooc/internal/pipeline.hpp"
#include "os/direct_io.hpp"
#include "os/file.hpp"
#include "os/tile_reader.hpp"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ooc {
namespace {

// The journal file:
//   [0, 4096)            Header: which array, which command, the slot layout
//   [4096, 4096 + 1024)  two progress records, written alternately; the valid one with
//                        the higher sequence number counts, so a torn write of one
//                        leaves the other
//   [8192, ...)          a ring of slots, tile q in slot q % slots: a SlotHeader block, then
//                        the tile's original bytes
// Three threads do the journal's I/O (Impl::write_step, sync_step, flush_step): the writer
// writes a batch of tiles' originals into their slots while the syncer makes the batch
// before durable with one fdatasync (before their kernels may write); the flusher puts a
// batch of committed tiles on disk (msync); the syncer writes the record that says so just
// before its next fdatasync, which makes it durable. A slot is reused only when the tile it held is
// recorded done by a durable record. docs/decisions/2026-12-01-group-commit.md has the argument.
// Every record carries a checksum of its bytes, the slot header one of the slot's data
// too, so a record torn by a power cut reads as absent, never as wrong.
//
// An array made anew under the same name (np.save or h5py rewrite the same inode) must not
// be "resumed": its tiles would be skipped or overwritten with the old array's saved bytes.
// So the progress record holds a checksum of the last done tile's bytes as written (16
// pieces of it), and the header one of the array's last bytes (its tail), which this run
// writes last; a resumed run checks both (the tail where no tile the run saved, so none its
// kernels may have written, reaches it) before it puts anything back.
constexpr std::uint64_t kBlock = 4096;
constexpr std::uint64_t kProgressAt = kBlock;
constexpr std::uint64_t kProgressStride = 512;
constexpr std::uint64_t kSlotsAt = 2 * kBlock;
// Bytes of originals saved per fdatasync (group commit), and of committed tiles put on
// disk per msync and progress record: 64 MiB, and no more than 4 tiles, so that a run on
// small tiles keeps few tiles saved ahead (the bytes past them stay checkable, see
// same_bytes_as_left).
constexpr std::uint64_t kGroupBytes = 64ull << 20;
constexpr std::size_t kGroupTiles = 4;

// Version 3: a slot's tile bytes start at their offset within a disk block in the array's
// file (its "skew"), so that the slot can be written with O_DIRECT straight from the
// mapping; version 2 (before 2026-12-01) put them at the slot's data start. Both resume.
constexpr char kHeaderMagic[8] = {'O', 'O', 'C', 'J', 'R', 'N', 'L', '3'};
constexpr char kHeaderMagicV2[8] = {'O', 'O', 'C', 'J', 'R', 'N', 'L', '2'};
constexpr char kProgressMagic[8] = {'O', 'O', 'C', 'J', 'P', 'R', 'G', '2'};
constexpr char kSlotMagic[8] = {'O', 'O', 'C', 'J', 'S', 'L', 'T', '1'};

struct Header {
  char magic[8];
  std::uint64_t device, inode;      // the array file the journal belongs to
  std::int64_t elements;
  std::int64_t tile_elements;       // the tile plan, kept by every resumed run
  std::uint64_t tiles;
  std::uint64_t slots, slot_bytes;  // this run's slot layout
  char command[1024];               // what finishes the run, without the path
  char array[1024];                 // dtype, shape, order, data offset and size
  std::int64_t tail_begin;          // elements [tail_begin, elements) as this run found them ...
  std::uint64_t tail_checksum;      // ... have this checksum
  std::uint64_t checksum;
};

struct ProgressRecord {
  char magic[8];
  std::uint64_t sequence;
  std::uint64_t tiles_done;         // tiles [0, tiles_done) are committed and on disk
  std::int64_t elements_done;
  std::uint64_t done_tile_checksum; // sampled_checksum of tile tiles_done - 1 as committed
  std::uint64_t checksum;
};

struct SlotHeader {
  char magic[8];
  std::uint64_t tile;
  std::int64_t begin, end;          // elements whose original bytes follow
  std::uint64_t data_checksum;
  std::uint64_t checksum;
};

// A Zarr array rewritten in place (format/zarr.hpp, ChunkReplacer) keeps no slots: each
// chunk is replaced whole, by a rename. Its journal holds, at kSlotsAt, this record and
// then each chunk file's identity (inode number, 0 for none) from before the run: a chunk
// whose file is another now was replaced. Its header has no slots and no tile plan.
constexpr char kChunkTableMagic[8] = {'O', 'O', 'C', 'J', 'C', 'H', 'K', '1'};
struct ChunkTable {
  char magic[8];
  std::uint64_t chunks;
  std::uint64_t identities_checksum;
  std::uint64_t checksum;
};

static_assert(sizeof(Header) <= kBlock && sizeof(SlotHeader) <= kBlock && 2 * kProgressStride <= kBlock);

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// A 64-bit checksum in the shape of xxHash64 (four multiply-rotate lanes over 8-byte
// words): it keeps up with memory bandwidth on a 16 MiB tile, and a torn or stale
// record does not match it. Not a defence against a forger, which nothing here needs.
std::uint64_t checksum(const void* data, std::size_t size) {
  constexpr std::uint64_t p1 = 0x9E3779B185EBCA87ull, p2 = 0xC2B2AE3D27D4EB4Full, p3 = 0x165667B19E3779F9ull;
  const auto* bytes = static_cast<const unsigned char*>(data);
  auto word = [&](std::size_t at) {
    std::uint64_t w;
    std::memcpy(&w, bytes + at, sizeof w);
    return w;
  };
  std::uint64_t lanes[4] = {p1 + p2, p2, 0, 0 - p1};
  std::size_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int k = 0; k < 4; ++k) lanes[k] = rotl(lanes[k] + word(i + 8 * k) * p2, 31) * p1;
  std::uint64_t h = rotl(lanes[0], 1) + rotl(lanes[1], 7) + rotl(lanes[2], 12) + rotl(lanes[3], 18) + size;
  for (; i + 8 <= size; i += 8) h = rotl(h ^ (rotl(word(i) * p2, 31) * p1), 27) * p1 + p3;
  for (; i < size; ++i) h = rotl(h ^ (bytes[i] * p3), 11) * p1;
  h ^= h >> 33;
  h *= p2;
  h ^= h >> 29;
  h *= p3;
  return h ^ (h >> 32);
}

template <class Record> std::uint64_t record_checksum(const Record& r) {
  return checksum(&r, offsetof(Record, checksum));
}

template <class Record> bool valid(const Record& r, const char (&magic)[8]) {
  return std::memcmp(r.magic, magic, sizeof magic) == 0 && r.checksum == record_checksum(r);
}

bool valid_header(const Header& h) { return valid(h, kHeaderMagic) || valid(h, kHeaderMagicV2); }

template <std::size_t N> void copy_text(char (&to)[N], const std::string& text) {
  std::memset(to, 0, N);
  std::memcpy(to, text.data(), std::min(text.size(), N - 1));
}

template <std::size_t N> std::string text_of(const char (&from)[N]) {
  return std::string(from, strnlen(from, N));
}

std::string array_key(const MappedArray& a) {
  return "dtype " + a.dtype().descr() + ", shape " + shape_repr(a.shape()) + ", " +
         (a.order() == Order::c ? "C" : "Fortran") + " order, " + std::to_string(a.nbytes()) +
         " bytes of data at offset " + std::to_string(a.info().data_offset);
}

template <class Record> Record read_record(int fd, std::uint64_t at, const std::string& path) {
  Record r{};
  if (os::read_at(fd, &r, sizeof r, at, path) != sizeof r) std::memset(&r, 0, sizeof r);
  return r;
}

// The valid progress record with the highest sequence number, or none.
bool read_progress(int fd, const std::string& path, ProgressRecord& best) {
  bool found = false;
  for (std::uint64_t i = 0; i < 2; ++i) {
    const auto p = read_record<ProgressRecord>(fd, kProgressAt + i * kProgressStride, path);
    if (valid(p, kProgressMagic) && (!found || p.sequence > best.sequence)) {
      best = p;
      found = true;
    }
  }
  return found;
}

// The checksum of elements [begin, end) of `a` as they are now.
std::uint64_t checksum_of(const MappedArray& a, std::int64_t begin, std::int64_t end) {
  const auto item = static_cast<std::size_t>(a.dtype().itemsize());
  return checksum(a.bytes().data() + static_cast<std::size_t>(begin) * item, static_cast<std::size_t>(end - begin) * item);
}

// A checksum of 16 pieces of 4 KiB spread evenly over elements [begin, end) of `a` (all of
// them below 64 KiB): the done tile's, computed in the serial commit stage, where the whole
// tile's (16 MiB at 6 GB/s) would cost a sixth of the time that stage spends per tile.
std::uint64_t sampled_checksum(const MappedArray& a, std::int64_t begin, std::int64_t end) {
  constexpr std::size_t kPieces = 16, kPiece = 4096;
  const auto item = static_cast<std::size_t>(a.dtype().itemsize());
  const std::byte* data = a.bytes().data() + static_cast<std::size_t>(begin) * item;
  const std::size_t bytes = static_cast<std::size_t>(end - begin) * item;
  if (bytes <= kPieces * kPiece) return checksum(data, bytes);
  std::uint64_t pieces[kPieces];
  for (std::size_t k = 0; k < kPieces; ++k) pieces[k] = checksum(data + k * ((bytes - kPiece) / (kPieces - 1)), kPiece);
  return checksum(pieces, sizeof pieces);
}

// The tail a journal's header checks: the array's last 1 MiB, or all of a smaller one.
constexpr std::uint64_t kTailBytes = 1 << 20;

constexpr const char* kInUseByAnotherRun =
    "is in use by another run (being read, or rewritten in place); try again when it has finished";

// The end of the last tile whose original bytes journal `fd` (header h) saved: no kernel
// of that run wrote past it, nor past the done tiles. A slot header is enough: a tile whose
// saved bytes are torn never ran, and counting it only moves the bound up.
std::int64_t touched_end(int fd, const std::string& path, const Header& h, const ProgressRecord& p) {
  std::int64_t end = p.elements_done;
  const std::uint64_t stride = kBlock + (h.slot_bytes + kBlock - 1) / kBlock * kBlock;
  for (std::uint64_t slot = 0; slot < h.slots; ++slot) {
    const auto s = read_record<SlotHeader>(fd, kSlotsAt + slot * stride, path);
    if (valid(s, kSlotMagic)) end = std::max(end, s.end);
  }
  return end;
}

// Whether `array` still holds what the run that wrote journal (h, p) left in it: its last
// done tile as committed, and its tail as that run found it where no tile it saved (so
// none its kernels may have written) reaches the tail. An array made anew since differs
// in one or the other, unless no tile was done and the run had saved tiles into its tail.
bool same_bytes_as_left(const MappedArray& array, const Header& h, const ProgressRecord& p, std::int64_t touched) {
  if (p.tiles_done > 0) {
    const std::int64_t begin = static_cast<std::int64_t>(p.tiles_done - 1) * h.tile_elements;
    if (begin < 0 || begin >= p.elements_done || sampled_checksum(array, begin, p.elements_done) != p.done_tile_checksum)
      return false;
  }
  const bool tail_untouched = h.tail_begin >= 0 && h.tail_begin <= array.size() &&
                              h.tail_begin >= std::min(array.size(), touched);
  return !tail_untouched || checksum_of(array, h.tail_begin, array.size()) == h.tail_checksum;
}

std::string finish_hint(const Header& h, const std::string& array_path) {
  return "finish it by running `" + text_of(h.command) + " " + array_path + "` again";
}

// The file a symbolic link names, so that a run started through one name of the array
// and resumed through another finds the same journal; any other path as it is.
std::string link_target(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec)) return path;
  const std::filesystem::path target = std::filesystem::canonical(path, ec);
  return ec ? path : target.string();
}

// The mark: an extended attribute on the array's file, so on its inode, which every name
// of the file (hard links in any directory) sees, holding the absolute path of the
// journal of an in-place run that may leave the array partly rewritten. Journals are
// found by it first, by the name beside the array second (journals from before the mark,
// file systems without extended attributes). For an HDF5 dataset the name holds the
// dataset's path (a checksum of it where it is long): one file, many datasets.
std::string mark_name(const std::string& array_path) {
  const auto dataset = hdf5::split(array_path);
  if (!dataset) return "user.ooc.journal";
  std::string name = "user.ooc.journal:" + dataset->dataset;
  if (name.size() > 200) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(checksum(dataset->dataset.data(), dataset->dataset.size())));
    name = std::string("user.ooc.journal#") + hex;
  }
  return name;
}

// The journal path the mark `name` on the file `fd` is open on holds, or empty.
std::string read_mark(int fd, const std::string& name) {
  char value[8192];
  const ssize_t n = ::fgetxattr(fd, name.c_str(), value, sizeof value);
  return n > 0 ? std::string(value, static_cast<std::size_t>(n)) : std::string();
}

// Errors of fsetxattr that say the file system (or this file) keeps no such attribute.
bool no_extended_attributes(int err) {
  return err == ENOTSUP || err == EOPNOTSUPP || err == EPERM || err == EACCES || err == E2BIG || err == ERANGE;
}

// The journal of the array `array_path`, whose file `fd` is open on: the one its file's
// mark names (whichever name the run that wrote it used), else the one beside this name.
// Empty if there is none. A mark whose journal is gone is stale (a journal removed by
// hand, as the messages allow) and does not count.
std::string find_journal(int fd, const std::string& array_path) {
  std::error_code ec;
  const std::string marked = read_mark(fd, mark_name(array_path));
  const std::string beside = journal_path(array_path);
  const bool near = std::filesystem::exists(beside, ec);
  // The name beside this one where it is the same journal: the one messages show.
  if (!marked.empty() && std::filesystem::exists(marked, ec) && !(near && std::filesystem::equivalent(marked, beside, ec)))
    return marked;
  return near ? beside : std::string();
}

// A journal whose record says every tile is done: its run finished and only the
// journal's removal was cut short (a crash, a failed sync of its directory). The array
// holds that run's result; the same command applies nothing and removes it.
bool finished(const Header& h, const ProgressRecord& p) { return p.tiles_done >= h.tiles; }

}  // namespace

std::string journal_path(const std::string& array_path) {
  // An HDF5 dataset's journal sits beside its file, the dataset's path folded into the
  // name: run.h5:/sim/p -> run.h5%sim%p.ooc-journal.
  if (const auto dataset = hdf5::split(array_path)) {
    std::string name = dataset->dataset;
    std::replace(name.begin(), name.end(), '/', '%');
    return link_target(dataset->file) + name + ".ooc-journal";
  }
  // A Zarr array is a directory: x.zarr/ and x.zarr have the one journal beside it.
  std::string path = array_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return link_target(path) + ".ooc-journal";
}

struct InPlaceJournal::Impl {
  MappedArray* array = nullptr;
  zarr::ChunkReplacer* chunks = nullptr;  // a Zarr array's chunks, replaced whole: no slots, no threads
  std::string path;
  std::string mark;     // mark_name of the array
  bool marked = false;  // this run set the mark (the file system keeps extended attributes)
  os::UniqueFd fd;
  std::size_t item = 0;
  std::size_t slots = 0;
  std::uint64_t slot_bytes = 0;
  std::size_t tiles = 0;
  std::size_t first_tile = 0;
  std::int64_t tile_elements = 0;
  bool resumed = false;
  bool finished = false;
  std::atomic<bool> touched{false};
  std::uint64_t sequence = 0;
  std::size_t durable_record = 0;  // which of the two progress records is the durable one
  bool record_pending = false;     // a record was written since the last sync (syncer thread)
  std::size_t batch = 1;           // tiles saved per fdatasync at most
  std::size_t flush_every = 1;     // committed tiles that make the flusher flush them unasked

  // Three threads do the journal's I/O (see docs/decisions/2026-12-01-group-commit.md): the writer
  // writes tiles' original bytes into their slots, the syncer writes the progress records
  // and syncs the journal (one record per sync, in one order), and the flusher does the
  // array's msyncs, so that the writes of one batch overlap the sync of the batch before
  // and the array's write-back. Tiles, by number:
  //   [first_tile, durable_to)   recorded done by a durable progress record
  //   [durable_to, recorded_to)  recorded by a record written but not yet durable
  //   [recorded_to, flushed_to)  on disk (msynced), not recorded yet
  //   [flushed_to, committed_to) committed by the pipeline, maybe not on disk
  //   [.., saved_to)             original bytes durable in their slot: kernels may write
  //   [saved_to, written_to)     original bytes written into their slot, not yet synced
  // Tile q's slot (q % slots) is written only when q < durable_to + slots: the tile it held
  // before, q - slots, is then recorded done by a durable record, so no put-back needs it.
  std::mutex m;
  std::condition_variable changed;
  std::size_t written_to = 0, saved_to = 0, committed_to = 0, flushed_to = 0, recorded_to = 0, durable_to = 0;
  std::uint64_t flushed_checksum = 0;  // sampled_checksum of tile flushed_to - 1
  std::size_t want_durable = 0;  // checkpoint(): make tiles up to here durable
  std::size_t needed_to = 0;     // a kernel waits for the tiles before this one to be saved
  std::size_t lookahead = 1;     // tiles saved ahead of the commit point at most ...
  std::size_t first_lookahead = 1;  // ... and before a tile of this run is recorded done durably
  // OOC_JOURNAL_STATS=1 prints, when the run ends, how often each thread acted and how
  // long it spent at it (and the kernels waiting for saves), to see where a run's time goes.
  struct Stats {
    std::size_t flushes = 0, writes = 0, syncs = 0, record_syncs = 0;
    std::atomic<std::int64_t> flush_ns{0}, write_ns{0}, sync_ns{0}, wait_ns{0};
  } stats;
  std::optional<os::UniqueFd> direct;  // the journal opened with O_DIRECT, where the file system allows
  std::vector<detail::AlignedBuffer> buffers;  // bounce buffers, one per tile of a batch (a mapping not block-aligned like the file)
  bool stop = false;
  std::exception_ptr failure;
  std::thread writer, syncer, flusher;

  std::int64_t tile_begin(std::size_t q) const { return static_cast<std::int64_t>(q) * tile_elements; }
  std::int64_t tile_end(std::size_t q) const {
    return std::min<std::int64_t>(array->size(), static_cast<std::int64_t>(q + 1) * tile_elements);
  }

  // Where element `begin`'s bytes fall within a disk block of the array's file: where
  // they start within their slot's data.
  std::size_t skew(std::int64_t begin) const {
    return static_cast<std::size_t>((array->info().data_offset + static_cast<std::uint64_t>(begin) * item) % kBlock);
  }

  std::uint64_t slot_offset(std::size_t slot) const {
    return kSlotsAt + slot * (kBlock + (slot_bytes + kBlock - 1) / kBlock * kBlock);
  }

  // Puts back the original bytes of every tile the old journal saved but did not record
  // as done, and makes them durable before anything else can overwrite the old journal.
  void restore(int old, const Header& h, std::int64_t done_elements) {
    std::vector<std::byte> buffer;
    std::span<std::byte> data = array->writable_bytes();
    const std::uint64_t stride = kBlock + (h.slot_bytes + kBlock - 1) / kBlock * kBlock;
    for (std::uint64_t slot = 0; slot < h.slots; ++slot) {
      const std::uint64_t at = kSlotsAt + slot * stride;
      const auto s = read_record<SlotHeader>(old, at, path);
      if (!valid(s, kSlotMagic) || s.begin < done_elements || s.end <= s.begin ||
          s.end > static_cast<std::int64_t>(array->size()))
        continue;  // empty, torn (its tile was never written), or done
      const std::size_t bytes = static_cast<std::size_t>(s.end - s.begin) * item;
      const std::size_t skew = valid(h, kHeaderMagic) ? this->skew(s.begin) : 0;
      if (skew + bytes > h.slot_bytes) continue;
      buffer.resize(bytes);
      if (os::read_at(old, buffer.data(), bytes, at + kBlock + skew, path) != bytes ||
          checksum(buffer.data(), bytes) != s.data_checksum)
        continue;  // torn while being saved: the kernel waited for the save, so never ran
      std::memcpy(data.data() + static_cast<std::size_t>(s.begin) * item, buffer.data(), bytes);
      detail::MappedArrayAccess::sync(*array, s.begin, s.end);
    }
  }

  // A header for this run of `command` on the array: which file, which command, how many
  // tiles (chunks); the caller adds the slot layout and the checksum.
  Header new_header(const std::string& command) const {
    const os::FileId id = os::file_id(detail::MappedArrayAccess::fd(*array), array->path());
    Header h{};
    std::memcpy(h.magic, kHeaderMagic, sizeof h.magic);
    h.device = id.device;
    h.inode = id.inode;
    h.elements = array->size();
    h.tiles = tiles;
    copy_text(h.command, command);
    copy_text(h.array, array_key(*array));
    return h;
  }

  // Writes a fresh journal under a temporary name and renames it into place, so that
  // the journal on disk is always a whole one: the old one, or this.
  void create(const std::string& command, std::int64_t tile_elements, std::size_t done_tiles,
              std::int64_t done_elements, std::uint64_t done_tile_checksum) {
    Header h = new_header(command);
    h.tile_elements = tile_elements;
    h.slots = slots;
    h.slot_bytes = slot_bytes;
    h.tail_begin = std::max<std::int64_t>(0, array->size() - static_cast<std::int64_t>(kTailBytes / item));
    h.tail_checksum = checksum_of(*array, h.tail_begin, array->size());
    h.checksum = record_checksum(h);

    std::filesystem::path temp;
    os::UniqueFd file;
    try {
      file = os::create_temp_beside(path, temp);
    } catch (const Error& e) {  // its words are an output's: "cannot create output: WHY"
      const std::size_t why = e.problem().find(": ");
      throw Error(path, "cannot create the in-place journal: " +
                            (why == std::string::npos ? e.problem() : e.problem().substr(why + 2)));
    }
    try {
      os::preallocate(file.get(), slot_offset(slots), path);
      os::write_at(file.get(), &h, sizeof h, 0, path);
      fd = std::move(file);
      write_progress(done_tiles, done_elements, done_tile_checksum, true);
      os::rename_file(temp, path);
    } catch (...) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      throw;
    }
    const std::string why = os::try_sync_directory_of(path);
    if (why.empty()) return;
    // No tile was written yet. A new journal holds nothing: it goes, so that nothing is
    // left. A resumed one replaced the old with the same progress: either resumes.
    std::string state;
    if (resumed) {
      state = "; " + finish_note();
    } else {
      fd = os::UniqueFd();
      ::unlink(path.c_str());
      os::try_sync_directory_of(path);
      state = "; the array is unchanged";
    }
    throw Error(array->path(), "cannot sync the directory of its in-place journal " + path + " (" + why + ")" + state);
  }

  // A Zarr array's run (chunks set): a fresh journal holding every chunk file's identity,
  // or the stopped run's, whose chunks with another file now are left as they are.
  void open_chunks(const std::string& command, bool found) {
    const os::FileId id = os::file_id(detail::MappedArrayAccess::fd(*array), array->path());
    tiles = static_cast<std::size_t>(chunks->chunks());
    if (found) {
      fd = os::open_existing(path, true);
      const auto h = read_record<Header>(fd.get(), 0, path);
      ProgressRecord p{};
      if (!valid_header(h) || !read_progress(fd.get(), path, p))
        throw Error(path, "the in-place journal is damaged; the array may be partly rewritten", ErrorKind::corrupt);
      if (h.device != id.device || h.inode != id.inode || text_of(h.array) != array_key(*array) || h.slots != 0 ||
          h.tiles != tiles)
        throw Error(array->path(), "the journal " + path + " belongs to another array (" + text_of(h.array) +
                                       "); if the array was replaced on purpose, remove the journal");
      for (std::size_t i = 0; i < 2; ++i)  // the record holding p is the durable one
        if (read_record<ProgressRecord>(fd.get(), kProgressAt + i * kProgressStride, path).sequence == p.sequence)
          durable_record = i;
      sequence = p.sequence;
      resumed = true;
      if (ooc::finished(h, p)) {  // only the journal's removal was cut short
        first_tile = tiles;
        chunks->start(std::vector<bool>(tiles, true));
        return;
      }
      const auto table = read_record<ChunkTable>(fd.get(), kSlotsAt, path);
      std::vector<std::uint64_t> before(tiles);
      if (!valid(table, kChunkTableMagic) || table.chunks != tiles ||
          os::read_at(fd.get(), before.data(), tiles * sizeof(std::uint64_t), kSlotsAt + kBlock, path) !=
              tiles * sizeof(std::uint64_t) ||
          checksum(before.data(), tiles * sizeof(std::uint64_t)) != table.identities_checksum)
        throw Error(path, "the in-place journal is damaged; the array may be partly rewritten", ErrorKind::corrupt);
      const std::vector<std::uint64_t> now = chunks->identities();
      std::vector<bool> done(tiles);
      for (std::size_t k = 0; k < tiles; ++k) {
        if (before[k] != 0 && now[k] == 0)
          throw Error(array->path(), "a chunk file was removed since its unfinished in-place run (journal " + path +
                                         "): it was written since; if it was made anew on purpose, remove the journal");
        done[k] = now[k] != before[k];
        first_tile += done[k] ? 1 : 0;
      }
      chunks->start(std::move(done));
      return;
    }
    const std::vector<std::uint64_t> ids = chunks->identities();
    Header h = new_header(command);
    h.tail_begin = -1;
    h.checksum = record_checksum(h);
    ChunkTable table{};
    std::memcpy(table.magic, kChunkTableMagic, sizeof table.magic);
    table.chunks = tiles;
    table.identities_checksum = checksum(ids.data(), ids.size() * sizeof(std::uint64_t));
    table.checksum = record_checksum(table);
    std::filesystem::path temp;
    os::UniqueFd file = os::create_temp_beside(path, temp);
    try {
      os::write_at(file.get(), &h, sizeof h, 0, path);
      os::write_at(file.get(), &table, sizeof table, kSlotsAt, path);
      os::write_at(file.get(), ids.data(), ids.size() * sizeof(std::uint64_t), kSlotsAt + kBlock, path);
      fd = std::move(file);
      write_progress(0, 0, 0, true);
      os::rename_file(temp, path);
    } catch (...) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      throw;
    }
    if (const std::string why = os::try_sync_directory_of(path); !why.empty()) {
      fd = os::UniqueFd();
      ::unlink(path.c_str());
      throw Error(array->path(), "cannot sync the directory of its in-place journal " + path + " (" + why +
                                     "); the array is unchanged");
    }
    chunks->start({});
  }

  // What a run stopped with this journal kept needs.
  std::string finish_note() const {
    return "run the same command again to finish it (progress is kept in " + path + ")";
  }

  // Sets the mark that finds this journal from every name of the array's file, durably
  // (an fsync of the array) before any tile is written. False where the file system
  // keeps no extended attributes.
  bool set_mark() {
    const int afd = detail::MappedArrayAccess::fd(*array);
    std::error_code ec;
    std::string value = std::filesystem::absolute(path, ec).lexically_normal().string();
    if (ec) value = path;
    if (::fsetxattr(afd, mark.c_str(), value.data(), value.size(), 0) != 0) {
      const int err = errno;
      if (no_extended_attributes(err)) return false;
      throw Error(array->path(), "cannot mark it as being rewritten in place (" + os::errno_text(err) + ")", kind_of_errno(err));
    }
    marked = true;
    os::sync_file(afd, array->path());
    return true;
  }

  // Removes the mark, durably: before the journal goes, so that a mark never names a
  // journal removed for good (a stale mark is ignored anyway).
  void clear_mark() {
    if (!marked) return;
    const int afd = detail::MappedArrayAccess::fd(*array);
    if (::fremovexattr(afd, mark.c_str()) != 0 && errno != ENODATA && !no_extended_attributes(errno))
      throw Error(array->path(), "cannot clear its in-place mark (" + os::errno_text(errno) + ")", kind_of_errno(errno));
    marked = false;
    os::sync_file(afd, array->path());
  }

  // Writes `head` (the journal's header and progress records, every tile recorded done)
  // as the journal again, after its removal could not be made durable: the same command
  // then finds a finished journal and applies nothing. False if that failed too.
  bool put_back_finished(const std::vector<std::byte>& head) noexcept {
    std::filesystem::path temp;
    try {
      os::UniqueFd file = os::create_temp_beside(path, temp);
      os::write_at(file.get(), head.data(), head.size(), 0, path);
      os::sync_data(file.get(), path);
      os::rename_file(temp, path);
      os::try_sync_directory_of(path);
      return true;
    } catch (...) {
      std::error_code ignored;
      if (!temp.empty()) std::filesystem::remove(temp, ignored);
      return false;
    }
  }

  // Writes a progress record into the record slot that does not hold the durable one, so
  // that a write torn by a power cut leaves the durable record whole. Not synced: the next
  // sync_data of the journal makes it durable (sync = true: at once).
  void write_progress(std::size_t done_tiles, std::int64_t done_elements, std::uint64_t done_tile_checksum,
                      bool sync) {
    ProgressRecord p{};
    std::memcpy(p.magic, kProgressMagic, sizeof p.magic);
    p.sequence = ++sequence;
    p.tiles_done = done_tiles;
    p.elements_done = done_elements;
    p.done_tile_checksum = done_tile_checksum;
    p.checksum = record_checksum(p);
    os::write_at(fd.get(), &p, sizeof p, kProgressAt + (1 - durable_record) * kProgressStride, path);
    record_pending = true;
    if (sync) sync_journal();
  }

  // fdatasync of the journal: slots and the record written since are durable.
  void sync_journal() {
    os::sync_data(fd.get(), path);
    if (record_pending) durable_record = 1 - durable_record;
    record_pending = false;
  }

  // O_DIRECT writes of `bytes` (whole blocks) at `at` of the journal, in pieces of 4 MiB
  // side by side: this virtio disk wrote 1.96-2.22 GB/s from one thread writing 16 MiB
  // at a time, 2.58-2.68 GB/s from 8 threads writing 4 MiB each. `meanwhile` runs on the
  // calling thread while the pieces are written (the disk reads the pages, no CPU does).
  template <class Meanwhile>
  void write_direct(const std::byte* data, std::size_t bytes, std::uint64_t at, Meanwhile meanwhile) {
    constexpr std::size_t kPiece = 4 << 20;
    std::vector<std::thread> pieces;
    std::vector<std::exception_ptr> errors(bytes / kPiece + 1);
    auto piece = [&](std::size_t k) {
      try {
        const std::size_t from = k * kPiece;
        os::write_at(direct->get(), data + from, std::min(kPiece, bytes - from), at + from, path);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    };
    try {
      for (std::size_t k = 0; k * kPiece < bytes; ++k) pieces.emplace_back(piece, k);
      meanwhile();
    } catch (...) {
      for (auto& t : pieces) t.join();
      throw;
    }
    for (auto& t : pieces) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  // Saver thread and its helpers: saves tile q's original bytes into its slot. With
  // O_DIRECT, the whole blocks around the tile go from the mapping straight to the disk
  // (the pages are pinned, nothing is copied; the bytes around the tile's ends are not
  // restored); where the mapping is not block-aligned like the file, through `buffer`.
  void save_one(std::size_t q, detail::AlignedBuffer& buffer) {
    const std::int64_t begin = tile_begin(q), end = tile_end(q);
    const std::size_t bytes = static_cast<std::size_t>(end - begin) * item;
    const std::size_t skew = this->skew(begin);
    const std::size_t whole = (skew + bytes + kBlock - 1) / kBlock * kBlock;
    if (whole > slot_bytes) throw std::logic_error("in-place journal: tile larger than its slot");
    const std::byte* original = array->bytes().data() + static_cast<std::size_t>(begin) * item;
    const std::uint64_t at = slot_offset(q % slots);
    SlotHeader s{};
    // The checksum of the bytes written (no kernel writes the tile before its save is
    // synced), computed while the disk writes them.
    auto sum = [&] { s.data_checksum = checksum(original, bytes); };
    if (direct) {
      if (reinterpret_cast<std::uintptr_t>(original - skew) % kBlock != 0) {
        buffer.ensure(whole);
        std::memcpy(buffer.data() + skew, original, bytes);
        original = buffer.data() + skew;
      }
      write_direct(original - skew, whole, at + kBlock, sum);
    } else {
      os::write_at(fd.get(), original, bytes, at + kBlock + skew, path);
      sum();
    }
    std::memcpy(s.magic, kSlotMagic, sizeof s.magic);
    s.tile = q;
    s.begin = begin;
    s.end = end;
    s.checksum = record_checksum(s);
    os::write_at(fd.get(), &s, sizeof s, at, path);
  }

  // Writer thread and its helpers: writes tiles [from, to) into their slots, the batch's
  // tiles side by side (one thread each: a single stream of O_DIRECT writes leaves the
  // disk idle between them). Not synced: the syncer's next fdatasync makes them durable.
  void write_slots(std::size_t from, std::size_t to) {
    if (buffers.size() < to - from) buffers.resize(to - from);
    std::vector<std::exception_ptr> errors(to - from);
    std::vector<std::thread> helpers;
    auto one = [&](std::size_t q) {
      try {
        save_one(q, buffers[q - from]);
      } catch (...) {
        errors[q - from] = std::current_exception();
      }
    };
    try {
      for (std::size_t q = from + 1; q < to; ++q) helpers.emplace_back(one, q);
    } catch (...) {
      for (auto& h : helpers) h.join();
      throw;
    }
    one(from);
    for (auto& h : helpers) h.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  // The wants that make the flusher or the syncer act before a whole batch is there: a
  // kernel waits for a slot, checkpoint() for a durable record, or no durable record says
  // a tile of this run is done yet (the first is made durable at once: until then only
  // the array's tail tells an array made anew from this one, see same_bytes_as_left).
  bool wanted() const {
    return needed_to > std::min(tiles, durable_to + slots) || want_durable > durable_to ||
           (durable_to == first_tile && committed_to > first_tile);
  }

  // Runs `body` on its own thread until stop; a failure is kept for the pipeline's
  // threads (before_write, after_commit, checkpoint, finish) to throw.
  template <class Body> void run_thread(Body body) {
    std::unique_lock lock(m);
    try {
      while (!stop)
        if (!body(lock)) changed.wait(lock);
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      if (!failure) failure = std::current_exception();
      changed.notify_all();
    }
  }

  static std::int64_t nanoseconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  }

  // Flusher thread, lock held: puts committed tiles on disk (msync) a batch at a time.
  // Only then may the syncer write the record that says so. False when it has nothing to do.
  bool flush_step(std::unique_lock<std::mutex>& lock) {
    if (committed_to <= flushed_to || (committed_to - flushed_to < flush_every && !wanted())) return false;
    const std::size_t from = flushed_to, to = committed_to;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    detail::MappedArrayAccess::sync(*array, tile_begin(from), tile_end(to - 1));
    const std::uint64_t done_checksum = sampled_checksum(*array, tile_begin(to - 1), tile_end(to - 1));
    stats.flush_ns += nanoseconds_since(start);
    lock.lock();
    flushed_to = to;
    flushed_checksum = done_checksum;
    ++stats.flushes;
    changed.notify_all();
    return true;
  }

  // Writer thread, lock held: writes the next tiles' original bytes into their slots, up
  // to `lookahead` tiles past the commit point, whole batches where it can, while the
  // syncer makes the batch before durable. A slot is written only when the tile it held
  // is recorded done by a durable record (q < durable_to + slots). The first batches grow
  // (1, 1, 2, 4 tiles), so that the kernels start after one tile's save rather than a
  // whole batch's. False when it has nothing to do.
  bool write_step(std::unique_lock<std::mutex>& lock) {
    const std::size_t room = std::min(tiles, durable_to + slots);  // tiles whose slot is free
    const std::size_t ahead = durable_to > first_tile ? lookahead : first_lookahead;
    const std::size_t limit = std::min(room, std::max(committed_to + ahead, needed_to));
    if (written_to < limit && (limit - written_to >= batch || limit == tiles || needed_to > written_to)) {
      const std::size_t ramp = std::max<std::size_t>(1, written_to - first_tile);
      const std::size_t from = written_to, to = std::min({limit, from + batch, from + ramp});
      lock.unlock();
      const auto start = std::chrono::steady_clock::now();
      write_slots(from, to);
      stats.write_ns += nanoseconds_since(start);
      lock.lock();
      written_to = to;
      ++stats.writes;
      changed.notify_all();
      return true;
    }
    if (needed_to > room && committed_to == durable_to)  // nothing left to record
      throw std::logic_error("in-place journal: tile " + std::to_string(needed_to - 1) +
                             " is in flight while tile " + std::to_string(durable_to) + " is not committed");
    return false;
  }

  // Syncer thread, lock held: the only thread that writes progress records and syncs the
  // journal. Each fdatasync makes durable the slots written before it began (kernels may
  // then write those tiles) and the record of the tiles flushed so far, written just
  // before it. A record is synced on its own only when something waits for it (wanted()).
  // False when it has nothing to do.
  bool sync_step(std::unique_lock<std::mutex>& lock) {
    const bool slots_written = written_to > saved_to;
    if (!slots_written && !(wanted() && flushed_to > durable_to)) return false;
    if (flushed_to > recorded_to) {
      const std::size_t to = flushed_to;
      const std::uint64_t done_checksum = flushed_checksum;
      lock.unlock();
      write_progress(to, tile_end(to - 1), done_checksum, false);
      lock.lock();
      recorded_to = to;
    }
    const std::size_t written = written_to, recorded = recorded_to;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    sync_journal();
    stats.sync_ns += nanoseconds_since(start);
    lock.lock();
    saved_to = written;
    durable_to = recorded;
    ++(slots_written ? stats.syncs : stats.record_syncs);
    changed.notify_all();
    return true;
  }

  void stop_threads() {
    {
      std::lock_guard lock(m);
      stop = true;
    }
    changed.notify_all();
    bool joined = false;
    for (std::thread* t : {&writer, &syncer, &flusher})
      if (t->joinable()) {
        t->join();
        joined = true;
      }
    if (joined && std::getenv("OOC_JOURNAL_STATS"))
      std::fprintf(stderr,
                   "journal: %zu slots, batch %zu, lookahead %zu: %zu flushes %.3f s, %zu writes %.3f s, "
                   "%zu syncs (+%zu of a record alone) %.3f s; kernels waited %.3f s\n",
                   slots, batch, lookahead, stats.flushes, stats.flush_ns * 1e-9, stats.writes, stats.write_ns * 1e-9,
                   stats.syncs, stats.record_syncs, stats.sync_ns * 1e-9, stats.wait_ns * 1e-9);
  }

  // Temporaries of journals whose creation was cut short; only the holder of the
  // array's exclusive lock makes them, so none of them is in use.
  void remove_stale_temporaries() const {
    const std::filesystem::path p(path);
    const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
    const std::string prefix = "." + p.filename().string() + ".ooc-";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (entry.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(entry.path(), ec);
  }
};

InPlaceJournal::InPlaceJournal(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<InPlaceJournal> InPlaceJournal::open(MappedArray& array, const std::string& command,
                                                     PipelineOptions& options) {
  if (!array.writable()) throw UsageError(array.path(), "an in-place run needs the array mapped read-write");
  auto impl = std::make_unique<Impl>();
  Impl& j = *impl;
  j.array = &array;
  j.mark = mark_name(array.path());
  j.item = static_cast<std::size_t>(array.dtype().itemsize());
  const int array_fd = detail::MappedArrayAccess::fd(array);
  if (!os::try_lock(array_fd, true, array.path())) throw Error(array.path(), kInUseByAnotherRun, ErrorKind::busy);
  // The journal of an unfinished run on this file, whichever name it was started under.
  std::string found = find_journal(array_fd, array.path());
  j.path = found.empty() ? journal_path(array.path()) : found;
  j.remove_stale_temporaries();
  j.chunks = dynamic_cast<zarr::ChunkReplacer*>(detail::MappedArrayAccess::writer(array));
  if (j.chunks != nullptr) {
    if (!found.empty()) {  // another command's finished journal is only left over
      const os::UniqueFd old = os::open_existing(j.path, false);
      const auto h = read_record<Header>(old.get(), 0, j.path);
      ProgressRecord p{};
      if (valid_header(h) && read_progress(old.get(), j.path, p) && text_of(h.command) != command) {
        if (!finished(h, p))
          throw Error(array.path(), "an in-place run on it did not finish (journal " + j.path + "): " +
                                        finish_hint(h, array.path()) + " before running another command on it",
                      ErrorKind::busy);
        os::remove_file(j.path);
        found.clear();
      }
    }
    j.open_chunks(command, !found.empty());
    if (j.first_tile == j.tiles) options.first_tile = TilePlan::for_array(array, options.tile_bytes).size();
    options.journal = nullptr;  // nothing to save before a tile's kernel writes: the chunk files change by renames
    return std::unique_ptr<InPlaceJournal>(new InPlaceJournal(std::move(impl)));
  }

  std::int64_t tile_elements = TilePlan::for_array(array, options.tile_bytes).tile_elements();
  std::size_t done_tiles = 0;
  std::int64_t done_elements = 0;
  std::uint64_t done_tile_checksum = 0;
  if (!found.empty()) {
    os::UniqueFd old = os::open_existing(j.path, false);
    const auto h = read_record<Header>(old.get(), 0, j.path);
    ProgressRecord p{};
    if (!valid_header(h) || !read_progress(old.get(), j.path, p))
      throw Error(j.path, "the in-place journal is damaged; the array may be partly rewritten", ErrorKind::corrupt);
    if (text_of(h.command) != command && finished(h, p)) {
      // Another command, after a run that finished: its journal is only left over.
      old = os::UniqueFd();
      os::remove_file(j.path);
      found.clear();
      j.path = journal_path(array.path());
      j.remove_stale_temporaries();
    }
  }
  if (!found.empty()) {
    const os::UniqueFd old = os::open_existing(j.path, false);
    const auto h = read_record<Header>(old.get(), 0, j.path);
    ProgressRecord p{};
    if (!valid_header(h) || !read_progress(old.get(), j.path, p))
      throw Error(j.path, "the in-place journal is damaged; the array may be partly rewritten", ErrorKind::corrupt);
    if (text_of(h.command) != command)
      throw Error(array.path(), "an in-place run on it did not finish (" + std::to_string(p.tiles_done) + " of " +
                                    std::to_string(h.tiles) + " tiles done, journal " + j.path + "): " +
                                    finish_hint(h, array.path()) + " before running another command on it",
                  ErrorKind::busy);
    const os::FileId id = os::file_id(array_fd, array.path());
    if (h.device != id.device || h.inode != id.inode || text_of(h.array) != array_key(array) ||
        h.elements != array.size() || h.tile_elements <= 0 || p.elements_done > array.size())
      throw Error(array.path(), "the journal " + j.path + " belongs to another file (" + text_of(h.array) +
                                    "); if the array was replaced on purpose, remove the journal");
    if (!same_bytes_as_left(array, h, p, touched_end(old.get(), j.path, h, p)))
      throw Error(array.path(), "its bytes are not the ones the unfinished in-place run left (" +
                                    std::to_string(p.tiles_done) + " of " + std::to_string(h.tiles) +
                                    " tiles done, journal " + j.path +
                                    "): it was written since; if it was made anew on purpose, remove the journal");
    j.restore(old.get(), h, p.elements_done);
    tile_elements = h.tile_elements;
    done_tiles = p.tiles_done;
    done_elements = p.elements_done;
    done_tile_checksum = p.done_tile_checksum;
    j.resumed = true;
  }
  options.tile_bytes = static_cast<std::uint64_t>(tile_elements) * j.item;
  const TilePlan plan = TilePlan::for_array(array, options.tile_bytes);
  if (plan.tile_elements() != tile_elements || done_tiles > plan.size() ||
      (done_tiles < plan.size() && plan[done_tiles].begin != done_elements))
    throw Error(j.path, "the in-place journal does not match the array's tiles; the array may be partly rewritten",
                ErrorKind::corrupt);
  j.tiles = plan.size();
  j.first_tile = done_tiles;
  // Group commit: the writer writes up to `batch` tiles' originals at a time while the
  // syncer makes the batch before durable with one fdatasync, and the flusher puts
  // committed tiles on disk a batch at a time. The ring holds the tiles that may be in
  // flight and 4 batches more: one being written, one being synced, one committed and
  // waiting for its msync, one on disk whose record waits for the next sync; so the writer
  // rarely waits for a free slot. No more slots than there are tiles left.
  const std::size_t tokens = detail::tokens_in_flight(options);
  j.batch = std::clamp<std::size_t>(kGroupBytes / std::max<std::uint64_t>(1, options.tile_bytes), 1, kGroupTiles);
  j.flush_every = j.batch;
  j.lookahead = tokens + 2 * j.batch;
  j.first_lookahead = tokens + j.batch;  // bounds the tiles saved into an array's tail, see same_bytes_as_left
  const std::size_t ring = tokens + 4 * j.batch;
  j.slots = std::clamp<std::size_t>(ring, 1, std::max<std::size_t>(1, plan.size() - done_tiles));
  // A slot's data: the tile's bytes from their skew on, in whole blocks.
  j.slot_bytes = (static_cast<std::uint64_t>(std::min<std::int64_t>(tile_elements, array.size())) * j.item + kBlock - 1) /
                     kBlock * kBlock + kBlock;
  j.tile_elements = tile_elements;
  j.create(command, tile_elements, done_tiles, done_elements, done_tile_checksum);
  j.direct = os::reopen_direct(j.fd.get(), true);  // nothing on tmpfs: written through the page cache
  j.written_to = j.saved_to = j.committed_to = j.flushed_to = j.recorded_to = j.durable_to = j.want_durable = j.needed_to = done_tiles;

  // From here its destructor removes a journal that saw no tile written.
  std::unique_ptr<InPlaceJournal> journal(new InPlaceJournal(std::move(impl)));
  try {
    if (!j.set_mark() && !j.resumed) {
      // No mark: only this name (and names in the same directory with a symbolic link)
      // find the journal. A file with other names could be resumed through none of them.
      struct stat st {};
      if (::fstat(array_fd, &st) == 0 && st.st_nlink > 1)
        throw Error(array.path(), "has " + std::to_string(st.st_nlink) +
                                      " names (hard links) and its file system keeps no extended attributes, so a "
                                      "stopped run could not be found from its other names: run on a copy, or "
                                      "without a journal",
                  ErrorKind::other, "without a journal");
    }
  } catch (const Error& e) {
    throw Error(e.path(), e.problem() + (j.resumed ? "; " + j.finish_note() : "; the array is unchanged"), e.kind(),
                e.option());
  }
  // Joined by finish() or the destructor (or here, when one cannot start).
  try {
    j.writer = std::thread([&j] { j.run_thread([&j](auto& lock) { return j.write_step(lock); }); });
    j.syncer = std::thread([&j] { j.run_thread([&j](auto& lock) { return j.sync_step(lock); }); });
    j.flusher = std::thread([&j] { j.run_thread([&j](auto& lock) { return j.flush_step(lock); }); });
  } catch (...) {
    j.stop_threads();
    throw;
  }
  options.first_tile = done_tiles;
  options.journal = journal.get();
  return journal;
}

InPlaceJournal::~InPlaceJournal() {
  if (impl_ == nullptr) return;
  impl_->stop_threads();
  if (impl_->finished || kept()) return;
  // Nothing was written: the array is as it was and the journal holds nothing to keep.
  impl_->fd = os::UniqueFd();
  if (impl_->marked) ::fremovexattr(detail::MappedArrayAccess::fd(*impl_->array), impl_->mark.c_str());
  std::error_code ignored;
  std::filesystem::remove(impl_->path, ignored);
}

const std::string& InPlaceJournal::path() const { return impl_->path; }
bool InPlaceJournal::resumed() const { return impl_->resumed; }
std::size_t InPlaceJournal::tiles_done_before() const { return impl_->first_tile; }
std::size_t InPlaceJournal::tiles() const { return impl_->tiles; }
const char* InPlaceJournal::unit() const { return impl_->chunks ? "chunks" : "tiles"; }
std::size_t InPlaceJournal::tiles_recorded() const {
  std::lock_guard lock(impl_->m);
  return impl_->durable_to;
}
bool InPlaceJournal::kept() const {
  return impl_->resumed || (impl_->chunks ? impl_->chunks->replaced() : impl_->touched.load());
}

void InPlaceJournal::before_write(const Tile& tile) {
  Impl& j = *impl_;
  if (j.chunks) return;
  j.touched = true;
  std::unique_lock lock(j.m);
  if (tile.index < j.committed_to || tile.index >= j.tiles)
    throw std::logic_error("in-place journal: tile " + std::to_string(tile.index) + " is not one still to write");
  // The writer saves tiles in order, as far as free slots allow; a tile in flight always
  // gets one (the slots outnumber the tiles in flight, and the writer records committed
  // tiles done when it runs out).
  if (j.saved_to <= tile.index) {
    const auto start = std::chrono::steady_clock::now();
    j.needed_to = std::max(j.needed_to, tile.index + 1);
    j.changed.notify_all();
    j.changed.wait(lock, [&] { return j.failure || j.saved_to > tile.index; });
    j.stats.wait_ns += Impl::nanoseconds_since(start);
  }
  if (j.failure) std::rethrow_exception(j.failure);
}

void InPlaceJournal::after_commit(const Tile& tile) {
  Impl& j = *impl_;
  if (j.chunks) return;
  {
    std::lock_guard lock(j.m);
    if (j.failure) std::rethrow_exception(j.failure);
    if (tile.index != j.committed_to || tile.index >= j.saved_to)
      throw std::logic_error("in-place journal: tile " + std::to_string(tile.index) + " committed out of order");
    j.committed_to = tile.index + 1;
  }
  j.changed.notify_all();
}

void InPlaceJournal::checkpoint() {
  Impl& j = *impl_;
  if (j.chunks) return;  // a replaced chunk is on disk before its rename
  std::unique_lock lock(j.m);
  j.want_durable = j.committed_to;
  j.changed.notify_all();
  j.changed.wait(lock, [&] { return j.failure || j.durable_to >= j.want_durable; });
  if (j.failure) std::rethrow_exception(j.failure);
}

void InPlaceJournal::finish() {
  Impl& j = *impl_;
  j.stop_threads();
  if (j.failure) std::rethrow_exception(j.failure);
  const std::string& array = j.array->path();
  // 1. Every committed tile (all of them: the array was committed) recorded done,
  // durably, so that a journal outliving this is a finished one, which the next run
  // removes, applying nothing.
  try {
    if (j.chunks) {
      j.write_progress(j.tiles, j.array->size(), 0, true);
    } else if (j.durable_to < j.committed_to) {
      const std::size_t last = j.committed_to - 1;
      j.write_progress(j.committed_to, j.tile_end(last),
                       sampled_checksum(*j.array, j.tile_begin(last), j.tile_end(last)), true);
      j.durable_to = j.recorded_to = j.committed_to;
    }
  } catch (const Error& e) {
    throw Error(e.path(), e.problem() + "; " + j.finish_note(), e.kind());
  }
  const std::string done = "; the array holds the result: running the same command again applies nothing and "
                           "removes its finished journal " + j.path;
  // 2. The mark cleared, durably, before the journal goes.
  try {
    j.clear_mark();
  } catch (const Error& e) {
    throw Error(array, e.problem() + done, e.kind());
  }
  // 3. The journal removed, durably. Its header and records are kept until then: if the
  // removal cannot be made durable, the journal is put back, finished, so that the same
  // command run again (which the removal, visible at once, would let apply a second
  // time) applies nothing.
  std::vector<std::byte> head(kSlotsAt);
  head.resize(os::read_at(j.fd.get(), head.data(), head.size(), 0, j.path));
  j.fd = os::UniqueFd();
  if (::unlink(j.path.c_str()) != 0 && errno != ENOENT)
    throw Error(array, "cannot remove its in-place journal (" + os::errno_text(errno) + ")" + done, kind_of_errno(errno));
  const std::string why = os::try_sync_directory_of(j.path);
  if (!why.empty()) {
    const bool back = j.put_back_finished(head);
    throw Error(array, "cannot sync the directory of its in-place journal " + j.path + " (" + why + ")" +
                           (back ? done : "; the array holds the result: do not run the command again"));
  }
  j.finished = true;
}

namespace {

// An unfinished in-place run's journal for `array`, whose file `fd` is open on (found by
// the file's mark from any of its names, or beside this name): refused, with the command
// that finishes it. A finished journal (only its removal was cut short) is not refused:
// the array is whole.
void refuse_unfinished_journal(const std::string& array, int fd) {
  const std::string path = find_journal(fd, array);
  if (path.empty()) return;
  std::string hint = "finish it by running the same in-place command again";
  try {
    const os::UniqueFd journal = os::open_existing(path, false);
    const auto h = read_record<Header>(journal.get(), 0, path);
    ProgressRecord p{};
    if (valid_header(h) && read_progress(journal.get(), path, p) && finished(h, p)) return;
    if (valid_header(h)) hint = finish_hint(h, array);
  } catch (const Error&) {
  }
  throw Error(array, "an in-place run on it did not finish, so its data is partly rewritten (journal " +
                                path + "): " + hint + " (or, if the array was made anew since, remove the journal)",
              ErrorKind::busy);
}

}  // namespace

void check_not_in_place(const MappedArray& array) {
  // A selection or an external link reads another array's bytes: that array is checked.
  const auto [path, fd] = detail::MappedArrayAccess::source(array);
  if (!os::try_lock(fd, false, path))
    throw Error(path, "is being rewritten in place by another run; try again when it has finished", ErrorKind::busy);
  refuse_unfinished_journal(path, fd);
}

void lock_for_in_place(const MappedArray& array) {
  if (!os::try_lock(detail::MappedArrayAccess::fd(array), true, array.path()))
    throw Error(array.path(), kInUseByAnotherRun, ErrorKind::busy);
  refuse_unfinished_journal(array.path(), detail::MappedArrayAccess::fd(array));
  if (auto* chunks = dynamic_cast<zarr::ChunkReplacer*>(detail::MappedArrayAccess::writer(array))) chunks->start({});
}

bool apply_in_place(MappedArray& array, const std::string& command, PipelineOptions options,
                    const std::function<void(MappedArray& array, const PipelineOptions& options)>& run,
                    bool journaled, const std::function<void(const InPlaceJournal& journal)>& on_start) {
  std::unique_ptr<InPlaceJournal> journal;
  if (journaled) {
    journal = InPlaceJournal::open(array, command, options);
    if (on_start) on_start(*journal);
  } else {
    lock_for_in_place(array);
  }
  try {
    run(array, options);
    array.commit();
  } catch (const Error& e) {
    // Said here, where the journal knows whether it was kept.
    const std::string state = !journal        ? "; the array may be partly rewritten (the run keeps no journal, "
                                                "so it cannot be resumed)"
                              : journal->kept() ? "; the same run again finishes it (progress is kept in " +
                                                      journal->path() + ")"
                                                : "; the array is unchanged";
    if (e.kind() == ErrorKind::cancelled) throw Cancelled(e.path(), e.problem() + state);
    if (e.kind() == ErrorKind::usage) throw UsageError(e.path(), e.problem() + state, e.option());
    throw Error(e.path(), e.problem() + state, e.kind(), e.option());
  }
  const bool resumed = journal && journal->resumed();
  if (journal) journal->finish();
  return resumed;
}

}  // namespace ooc
