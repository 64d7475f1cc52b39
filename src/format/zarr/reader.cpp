// The Zarr reader: any run of elements of an array whose chunks are files of their own.
// The serial stage only names the chunks a tile needs (and asks the kernel for their
// pages ahead); each chunk is read and decoded on a kernel thread, straight into the
// tile where the tile holds it whole, with no lock: chunks share no file.

#include "format/chunk_walk.hpp"
#include "format/zarr.hpp"
#include "format/zarr/chunk_codec.hpp"
#include "format/zarr/zarray.hpp"
#include "ooc/error.hpp"
#include "os/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace ooc::zarr {
namespace {

// An open chunk file, closed on every way out.
struct ChunkFile {
  int fd = -1;
  ~ChunkFile() {
    if (fd >= 0) ::close(fd);
  }
};

class ArrayReader final : public detail::TileReader {
 public:
  ArrayReader(const std::string& directory, const Metadata& metadata, const std::string& shown)
      : directory_(directory), label_(shown), m_(metadata), item_(static_cast<std::size_t>(metadata.dtype.itemsize())) {
    // Fortran order: the array's memory order is C order over the axes reversed, and so
    // is each chunk's; the reader works in that C order throughout.
    dims_ = m_.shape;
    chunk_ = m_.chunks;
    if (m_.order == Order::fortran) {
      std::reverse(dims_.begin(), dims_.end());
      std::reverse(chunk_.begin(), chunk_.end());
    }
    if (dims_.empty()) {  // 0-d: one chunk of one element
      dims_ = {1};
      chunk_ = {1};
    }
    const std::size_t n = dims_.size();
    grid_.resize(n);
    strides_.assign(n, 1);
    chunk_strides_.assign(n, 1);
    for (std::size_t k = n; k-- > 0;) {
      grid_[k] = (dims_[k] + chunk_[k] - 1) / chunk_[k];
      if (k + 1 < n) {
        strides_[k] = strides_[k + 1] * dims_[k + 1];
        chunk_strides_[k] = chunk_strides_[k + 1] * chunk_[k + 1];
      }
      chunk_elements_ *= static_cast<std::size_t>(chunk_[k]);
    }
    merge_axis_ = n - 1;
    while (merge_axis_ > 0 && chunk_[merge_axis_] == dims_[merge_axis_]) --merge_axis_;
    row_bytes_ = item_ * static_cast<std::size_t>(chunk_[0]);
    for (std::size_t k = 1; k < n; ++k) row_bytes_ *= static_cast<std::size_t>(grid_[k] * chunk_[k]);
    plain_ = !m_.compressor && m_.filters.empty();
    if (!m_.fill.empty()) fill_ = m_.fill;
    else fill_.assign(item_, std::byte{0});  // no fill value: what zarr-python leaves is unset; zeros here
    fill_zero_ = std::all_of(fill_.begin(), fill_.end(), [](std::byte b) { return b == std::byte{0}; });
    metadata_stamp_ = stamp();
  }

  bool concurrent() const override { return false; }
  bool staged() const override { return true; }
  // As a compressed HDF5 dataset's: a row of chunks, at least 2 MiB, so that the kernel
  // reads a tile while it is still in the cache that decoding it filled.
  std::uint64_t tile_bytes_cap() const override {
    if (row_bytes_ > (std::size_t{256} << 20)) return 0;
    return std::max<std::uint64_t>(std::uint64_t{2} << 20, row_bytes_);
  }

  const std::byte* read(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) override {
    std::unique_ptr<detail::Fetched> chunks = fetch(begin, end, nullptr, buffer);
    return decode(begin, end, *chunks, buffer);
  }

  // Serial: which chunks the tile needs, and which of them it shares with its neighbours.
  std::unique_ptr<detail::Fetched> fetch(std::int64_t begin, std::int64_t end, std::unique_ptr<detail::Fetched> reuse,
                                         detail::AlignedBuffer&) override {
    std::unique_ptr<detail::Fetched> owner = reuse ? std::move(reuse) : std::make_unique<Chunks>();
    auto& chunks = static_cast<Chunks&>(*owner);
    chunks.list.clear();
    if (end <= begin) return owner;
    chunks_of_run(begin, end, chunks.indices);
    for (std::uint64_t index : chunks.indices) chunks.list.push_back({index, nullptr});
    share_cut_chunks(begin, end, chunks);
    return owner;
  }

  // Concurrent: each chunk read and decoded on this thread, and its elements in
  // [begin, end) put in the tile; a chunk the tile holds whole, in order, is decoded there.
  const std::byte* decode(std::int64_t begin, std::int64_t end, detail::Fetched& fetched,
                          detail::AlignedBuffer& buffer) override {
    auto& chunks = static_cast<Chunks&>(fetched);
    buffer.ensure(static_cast<std::size_t>(std::max<std::int64_t>(1, end - begin)) * item_);
    std::byte* dst = buffer.data();
    const std::size_t chunk_bytes = chunk_elements_ * item_;
    thread_local ChunkScratch scratch;
    thread_local std::vector<std::byte> stored, whole;
    std::vector<std::int64_t> origin(dims_.size()), extent(dims_.size());
    for (const Chunk& c : chunks.list) {
      origin_of(c.index, origin);
      for (std::size_t k = 0; k < dims_.size(); ++k) extent[k] = std::min(chunk_[k], dims_[k] - origin[k]);
      const std::int64_t first = origin[0] * strides_[0];
      const bool in_place = merge_axis_ == 0 && extent[0] == chunk_[0] && first >= begin &&
                            first + static_cast<std::int64_t>(chunk_elements_) <= end;
      std::byte* const place = in_place ? dst + static_cast<std::size_t>(first - begin) * item_ : nullptr;
      const std::byte* decoded = nullptr;
      bool missing = false;
      auto load = [&](std::byte* into) {  // the chunk, decoded into `into`; false when it has no file
        const std::string key = key_of(c.index);
        ChunkFile file;
        file.fd = ::open((directory_ + "/" + key).c_str(), O_RDONLY | O_CLOEXEC);
        if (file.fd < 0) {
          if (errno == ENOENT) return false;  // never written: the fill value, as zarr-python reads it
          throw Error(directory_ + "/" + key, "cannot open chunk " + key + " of Zarr array " + label_ + ": " +
                                                  os::errno_text(errno));
        }
        struct stat st {};
        if (::fstat(file.fd, &st) != 0)
          throw Error(directory_ + "/" + key, "cannot read chunk " + key + ": " + os::errno_text(errno));
        const auto size = static_cast<std::size_t>(st.st_size);
        if (plain_) {
          if (size != chunk_bytes) bad_chunk(key, "uncompressed chunk of " + std::to_string(size) + " bytes, not the " +
                                                      std::to_string(chunk_bytes) + " of a chunk (truncated or corrupt)");
          read_all(file.fd, into, size, key);
          return true;
        }
        if (stored.size() < size) stored.resize(size);
        read_all(file.fd, stored.data(), size, key);
        try {
          decode_chunk(std::span<const std::byte>(stored.data(), size), m_, chunk_bytes, into, scratch);
        } catch (const codecs::CodecError& e) {
          bad_chunk(key, e.what());
        }
        return true;
      };
      if (c.shared) {  // cut by a tile boundary: decoded once, by whichever tile comes first
        std::lock_guard<std::mutex> once(c.shared->lock);
        if (!c.shared->done) {
          c.shared->bytes.resize(chunk_bytes);
          c.shared->missing = !load(c.shared->bytes.data());
          c.shared->done = true;
        }
        missing = c.shared->missing;
        decoded = c.shared->bytes.data();
      } else if (place) {
        missing = !load(place);
        decoded = place;
      } else {
        if (whole.size() < chunk_bytes) whole.resize(chunk_bytes);
        missing = !load(whole.data());
        decoded = whole.data();
      }
      if (missing) {
        for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t, std::int64_t n) {
          fill(dst + static_cast<std::size_t>(to) * item_, static_cast<std::size_t>(n));
        });
        continue;
      }
      if (decoded == place) continue;
      for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t from, std::int64_t n) {
        std::memcpy(dst + static_cast<std::size_t>(to) * item_, decoded + static_cast<std::size_t>(from) * item_,
                    static_cast<std::size_t>(n) * item_);
      });
    }
    return dst;
  }

  // In the commit stage, once a tile is done: an array rewritten meanwhile (its .zarray
  // replaced or changed, as zarr.open(mode="w") does) fails the run before it commits,
  // rather than hand on a mix of two arrays.
  void release(std::int64_t, std::int64_t) override {
    if (stamp() != metadata_stamp_)
      throw Error(label_, "changed while being read (its .zarray was rewritten by another process); run again");
  }

  // Ahead of the tile, in the serial stage: the kernel reads its chunk files in.
  void will_need(std::int64_t begin, std::int64_t end) override {
    if (end <= begin) return;
    std::vector<std::uint64_t> indices;
    chunks_of_run(begin, end, indices);
    for (std::uint64_t index : indices) {
      ChunkFile file;
      file.fd = ::open((directory_ + "/" + key_of(index)).c_str(), O_RDONLY | O_CLOEXEC);
      if (file.fd >= 0) ::posix_fadvise(file.fd, 0, 0, POSIX_FADV_WILLNEED);  // a hint: errors come at the read
    }
  }

 private:
  struct Decoded {
    std::mutex lock;
    bool done = false, missing = false;
    std::vector<std::byte> bytes;
  };
  struct Chunk {
    std::uint64_t index;  // in the grid of chunks, C order (of the reader's axes)
    std::shared_ptr<Decoded> shared;  // set for a chunk the tile holds only part of
  };
  struct Chunks final : detail::Fetched {
    std::vector<std::uint64_t> indices;
    std::vector<Chunk> list;
  };

  // What tells one .zarray from another: its inode, size and modification time.
  std::array<std::int64_t, 5> stamp() const {
    struct stat st {};
    if (::stat((directory_ + "/.zarray").c_str(), &st) != 0) return {};
    return {static_cast<std::int64_t>(st.st_dev), static_cast<std::int64_t>(st.st_ino), st.st_size, st.st_mtim.tv_sec,
            st.st_mtim.tv_nsec};
  }

  [[noreturn]] void bad_chunk(const std::string& key, const std::string& problem) const {
    throw Error(directory_ + "/" + key, "chunk " + key + " of Zarr array " + label_ + ": " + problem,
                ErrorKind::corrupt);
  }

  void read_all(int fd, std::byte* into, std::size_t size, const std::string& key) const {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd, into + done, size - done, static_cast<off_t>(done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw Error(directory_ + "/" + key, "cannot read chunk " + key + ": " + os::errno_text(errno));
      if (got == 0) bad_chunk(key, "the file shrank while being read");
      done += static_cast<std::size_t>(got);
    }
  }

  // The chunk's file name: its grid position in the array's own axis order.
  std::string key_of(std::uint64_t index) const {
    if (m_.shape.empty()) return "0";
    std::vector<std::int64_t> at(dims_.size());
    for (std::size_t k = dims_.size(); k-- > 0;) {
      at[k] = static_cast<std::int64_t>(index % static_cast<std::uint64_t>(grid_[k]));
      index /= static_cast<std::uint64_t>(grid_[k]);
    }
    if (m_.order == Order::fortran) std::reverse(at.begin(), at.end());
    return chunk_key(at, m_.separator);
  }

  void origin_of(std::uint64_t index, std::vector<std::int64_t>& origin) const {
    for (std::size_t k = dims_.size(); k-- > 0;) {
      origin[k] = static_cast<std::int64_t>(index % static_cast<std::uint64_t>(grid_[k])) * chunk_[k];
      index /= static_cast<std::uint64_t>(grid_[k]);
    }
  }

  // Serial, in tile order: a chunk the tile holds only part of shares its decoding with
  // the other tiles that hold parts of it (as the HDF5 chunk reader does). What cut_
  // keeps is bounded (64 MiB of decoded chunks); past that each tile decodes its own.
  void share_cut_chunks(std::int64_t begin, std::int64_t end, Chunks& chunks) {
    static constexpr std::size_t kSharedBytes = std::size_t{64} << 20;
    const std::size_t keep = std::max<std::size_t>(1, kSharedBytes / std::max<std::size_t>(1, chunk_elements_ * item_));
    std::vector<std::int64_t> origin(dims_.size());
    std::unordered_map<std::uint64_t, std::shared_ptr<Decoded>> next;
    for (Chunk& c : chunks.list) {
      origin_of(c.index, origin);
      std::int64_t first = 0, last = 0;  // the chunk's first and last elements, flat
      for (std::size_t k = 0; k < dims_.size(); ++k) {
        first += origin[k] * strides_[k];
        last += (std::min(origin[k] + chunk_[k], dims_[k]) - 1) * strides_[k];
      }
      if (first >= begin && last < end) continue;  // whole in this tile
      const auto found = cut_.find(c.index);
      const bool kept = last >= end && next.size() < keep;  // a later tile holds the rest
      if (found != cut_.end()) c.shared = found->second;
      else if (kept) c.shared = std::make_shared<Decoded>();
      if (kept) next.emplace(c.index, c.shared);
    }
    cut_ = std::move(next);
  }

  // The elements [begin, end) (flat, C order) as boxes: a partial first slab, whole
  // slabs, a partial last slab, recursively; the chunks each box touches, each once.
  void chunks_of_run(std::int64_t begin, std::int64_t end, std::vector<std::uint64_t>& out) const {
    out.clear();
    std::vector<std::int64_t> lo(dims_.size()), hi(dims_.size());
    boxes(0, lo, hi, begin, end, out);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  // lo/hi: the box's first and last index on the axes before `axis` (fixed by the caller).
  void boxes(std::size_t axis, std::vector<std::int64_t>& lo, std::vector<std::int64_t>& hi, std::int64_t begin,
             std::int64_t end, std::vector<std::uint64_t>& out) const {
    if (begin >= end) return;
    const std::int64_t inner = strides_[axis];
    auto whole = [&](std::int64_t from, std::int64_t to) {  // slabs [from, to) of `axis`, complete
      lo[axis] = from;
      hi[axis] = to - 1;
      for (std::size_t k = axis + 1; k < dims_.size(); ++k) {
        lo[k] = 0;
        hi[k] = dims_[k] - 1;
      }
      add_box(lo, hi, out);
    };
    auto partial = [&](std::int64_t slab, std::int64_t from, std::int64_t to) {
      lo[axis] = hi[axis] = slab;
      boxes(axis + 1, lo, hi, from, to, out);
    };
    if (inner == 1) return whole(begin, end);
    const std::int64_t first = begin / inner, last = end / inner;
    if (first == last) return partial(first, begin - first * inner, end - first * inner);
    std::int64_t whole_from = first;
    if (begin % inner != 0) {
      partial(first, begin % inner, inner);
      whole_from = first + 1;
    }
    if (last > whole_from) whole(whole_from, last);
    if (end % inner != 0) partial(last, 0, end % inner);
  }
  void add_box(const std::vector<std::int64_t>& lo, const std::vector<std::int64_t>& hi,
               std::vector<std::uint64_t>& out) const {
    const std::size_t n = dims_.size();
    std::vector<std::int64_t> from(n), to(n), at(n);
    for (std::size_t k = 0; k < n; ++k) {
      from[k] = lo[k] / chunk_[k];
      to[k] = hi[k] / chunk_[k];
    }
    at = from;
    while (true) {
      std::uint64_t index = 0;
      for (std::size_t k = 0; k < n; ++k) index = index * static_cast<std::uint64_t>(grid_[k]) + static_cast<std::uint64_t>(at[k]);
      out.push_back(index);
      std::size_t k = n;
      while (k-- > 0) {
        if (at[k] < to[k]) {
          ++at[k];
          break;
        }
        at[k] = from[k];
      }
      if (k == static_cast<std::size_t>(-1)) return;
    }
  }

  template <class Fn>
  void for_each_segment(const std::vector<std::int64_t>& origin, const std::vector<std::int64_t>& extent, std::int64_t begin,
                        std::int64_t end, Fn&& fn) const {
    chunk_walk::for_each_segment(origin, extent, strides_, chunk_strides_, merge_axis_, begin, end, fn);
  }

  void fill(std::byte* at, std::size_t count) const { chunk_walk::fill(at, count, item_, fill_zero_, fill_); }

  std::string directory_, label_;
  Metadata m_;
  std::size_t item_;
  std::vector<std::int64_t> dims_, chunk_, grid_, strides_, chunk_strides_;
  std::size_t chunk_elements_ = 1;
  std::size_t merge_axis_ = 0;  // axes after it are whole in every chunk
  std::size_t row_bytes_ = 0;   // a row of chunks (along the first axis), decoded
  bool plain_ = false;          // no compressor, no filter: a chunk file is the chunk's bytes
  std::vector<std::byte> fill_;
  bool fill_zero_ = true;
  std::unordered_map<std::uint64_t, std::shared_ptr<Decoded>> cut_;
  std::array<std::int64_t, 5> metadata_stamp_{};
};

}  // namespace

std::unique_ptr<detail::TileReader> open_reader(const std::string& array, const Metadata& metadata,
                                                const std::string& shown) {
  return std::make_unique<ArrayReader>(array, metadata, shown);
}

std::uint64_t stored_bytes(const std::string& array) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(array, ec); !ec && it != decltype(it)(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file(ec) && !name.starts_with(".")) total += it->file_size(ec);
  }
  return total;
}

}  // namespace ooc::zarr
