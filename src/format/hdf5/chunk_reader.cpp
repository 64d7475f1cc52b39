// The chunk reader: any run of elements of a dataset that cannot be mapped (hdf5.hpp,
// open_reader): raw chunks looked up in the serial stage, decoded on the kernel threads.

#include "format/chunk_walk.hpp"
#include "format/hdf5/library.hpp"
#include "format/hdf5/filters.hpp"
#include "os/mapping.hpp"
#include "os/memory.hpp"

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


// A box of a dataspace: per axis, first index and count.
struct Box {
  std::vector<hsize_t> offset, count;
};


// The elements [begin, end) (flat, C order) of a dataspace of `dims`, as boxes in that
// order: a partial first slab, whole slabs, a partial last slab, recursively (at most
// 2 * ndim - 1 boxes).
void boxes_of_run(const std::vector<hsize_t>& dims, std::size_t axis, std::vector<hsize_t>& prefix,
                  std::int64_t begin, std::int64_t end, std::vector<Box>& out) {
  if (begin >= end) return;
  std::int64_t inner = 1;
  for (std::size_t k = axis + 1; k < dims.size(); ++k) inner *= static_cast<std::int64_t>(dims[k]);
  auto whole = [&](std::int64_t lo, std::int64_t hi) {  // slabs [lo, hi) of `axis`, complete
    Box box{prefix, std::vector<hsize_t>(dims.size(), 1)};
    box.offset.resize(dims.size(), 0);
    box.offset[axis] = static_cast<hsize_t>(lo);
    box.count[axis] = static_cast<hsize_t>(hi - lo);
    for (std::size_t k = axis + 1; k < dims.size(); ++k) box.count[k] = dims[k];
    out.push_back(std::move(box));
  };
  auto partial = [&](std::int64_t slab, std::int64_t from, std::int64_t to) {
    prefix.push_back(static_cast<hsize_t>(slab));
    boxes_of_run(dims, axis + 1, prefix, from, to, out);
    prefix.pop_back();
  };
  if (inner == 1) return whole(begin, end);
  const std::int64_t lo = begin / inner, hi = end / inner;
  if (lo == hi) return partial(lo, begin - lo * inner, end - lo * inner);
  std::int64_t whole_from = lo;
  if (begin % inner != 0) {
    partial(lo, begin % inner, inner);
    whole_from = lo + 1;
  }
  if (hi > whole_from) whole(whole_from, hi);
  if (end % inner != 0) partial(hi, 0, end % inner);
}


class DatasetReader final : public detail::TileReader, public Holder {
 public:
  DatasetReader(const std::string& file, const std::string& dataset)
      : label_(where(file, dataset)), file_name_(file), dataset_name_(dataset), identity_(identity(file)) {
    Session session(file_name_);
    probe_in_child(file, dataset);
    {
      Id f = open_file(file, false);
      Id probe = open_dataset(f.get(), file, dataset);
      // The dataset opened, so a failure to read what it is, is a damaged file.
      static constexpr const char* kCannot = "cannot read its type, shape or layout (damaged file)";
      constexpr ErrorKind kDamaged = ErrorKind::corrupt;
      Id dcpl(check(H5Dget_create_plist(probe.get()), label_, kCannot, kDamaged), H5Pclose);
      Id type(check(H5Dget_type(probe.get()), label_, kCannot, kDamaged), H5Tclose);
      item_ = H5Tget_size(type.get());
      if (item_ == 0) throw Error(label_, kCannot, kDamaged);  // its failure: no type has 0 bytes
      Id space(check(H5Dget_space(probe.get()), label_, kCannot, kDamaged), H5Sclose);
      const int ndims = check(H5Sget_simple_extent_ndims(space.get()), label_, kCannot, kDamaged);
      dims_.resize(static_cast<std::size_t>(ndims));
      check(H5Sget_simple_extent_dims(space.get(), dims_.data(), nullptr), label_, kCannot, kDamaged);
      // A filtered (compressed) dataset gets a chunk cache that holds a whole row of chunks
      // (the chunks a tile boundary may cut), so consecutive reads never decompress a
      // chunk twice; bounded at 1 GiB. An unfiltered one keeps HDF5's small default, under
      // which a chunk a read covers whole goes straight into ooc's buffer: through a
      // 64 MiB cache, a warm 1 GiB dataset of 4 MiB chunks took 0.48 s against 0.19-0.29 s.
      // An unfiltered one is staged too. Where it can, a staged dataset reads its chunks
      // from a mapping of the file on the kernel threads (plan_mapped): decoded, or for
      // unfiltered chunks copied or used in place.
      if (check(H5Pget_layout(dcpl.get()), label_, kCannot, kDamaged) == H5D_CHUNKED && !dims_.empty()) {
        std::vector<hsize_t> chunk(dims_.size());
        check(H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), label_, kCannot, kDamaged);
        std::size_t row_bytes = item_ * chunk[0];
        for (std::size_t k = 1; k < dims_.size(); ++k)
          row_bytes *= static_cast<std::size_t>((dims_[k] + chunk[k] - 1) / chunk[k] * chunk[k]);
        if (check(H5Pget_nfilters(dcpl.get()), label_, kCannot, kDamaged) > 0)
          cache_bytes_ = std::clamp<std::size_t>(2 * row_bytes, std::size_t{64} << 20, std::size_t{1} << 30);
        plan_staged(dcpl.get(), type.get(), chunk, row_bytes);
        if (staged_) plan_mapped(f.get(), probe.get());
      }
    }
    hold();
    holders().push_back(this);
  }

  ~DatasetReader() override {
    Session session(file_name_);  // identifiers are closed under the lock too
    std::erase(holders(), static_cast<Holder*>(this));
    let_go();
  }

  // Read-only: what the closes return is not checked (Id's destructor).
  void let_go() override {
    dataset_.reset();
    type_.reset();
    file_.reset();
  }

  bool concurrent() const override { return false; }  // HDF5 runs one call at a time

  // A compressed dataset's tiles are a row of chunks, at least 2 MiB: the kernel then
  // reads what decoding just wrote from the cache. Warm sums of 256 MiB of int16 in
  // chunks of 2 MiB, CPU seconds (medians of 3, a loaded 2-core VM), tiles of 16 MiB
  // against 2 MiB: blosc zstd 0.353 against 0.316, lz4 0.234 against 0.180, gzip 0.410
  // against 0.380.
  std::uint64_t tile_bytes_cap() const override {
    return staged_ && !pipeline_.empty() ? std::max<std::uint64_t>(std::uint64_t{2} << 20, row_bytes_) : 0;
  }
  bool staged() const override { return staged_; }
  bool shrank() const override { return mapping_.shrank(); }

  const std::byte* read(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) override {
    if (staged_) {
      std::unique_ptr<detail::Fetched> raw = fetch(begin, end, nullptr, buffer);
      return decode(begin, end, *raw, buffer);
    }
    Session session(file_name_);
    return read_locked(begin, end, buffer);
  }

  // Serial: the raw chunks that elements [begin, end) lie in, as stored (H5Dread_chunk),
  // or the tile itself through H5Dread when a chunk skipped a filter (its filter mask).
  std::unique_ptr<detail::Fetched> fetch(std::int64_t begin, std::int64_t end, std::unique_ptr<detail::Fetched> reuse,
                                         detail::AlignedBuffer& buffer) override {
    std::unique_ptr<detail::Fetched> owner = reuse ? std::move(reuse) : std::make_unique<RawChunks>();
    auto& raw = static_cast<RawChunks&>(*owner);
    raw.chunks.clear();
    raw.ready = nullptr;
    if (end <= begin) return owner;
    if (map_ != nullptr) {  // mapped: only where each chunk lies
      chunks_of_run(begin, end, raw.indices);
      look_up(raw.indices);
      for (std::uint64_t index : raw.indices) {
        const Where& w = where_[index];
        if (w.address == kFill) {
          raw.chunks.push_back({index, 0, 0, true, 0, nullptr});
          continue;
        }
        if (w.mask != 0 && library_decodes_) {  // stored without some filter: through H5Dread, as before
          raw.chunks.clear();
          Session session(file_name_);
          raw.ready = read_locked(begin, end, buffer);
          return owner;
        }
        raw.chunks.push_back({index, static_cast<std::size_t>(w.address), w.size, false, w.mask, nullptr});
      }
      if (!pipeline_.empty()) share_cut_chunks(begin, end, raw);
      return owner;
    }
    Session session(file_name_);
    hold();
    chunks_of_run(begin, end, raw.indices);
    std::size_t total = 0;
    std::vector<hsize_t> origin(dims_.size());
    for (std::uint64_t index : raw.indices) {
      const auto [mask, address, size] = stored_chunk(index, origin);
      if (address == HADDR_UNDEF) {  // never written: the fill value
        raw.chunks.push_back({index, 0, 0, true, 0, nullptr});
        continue;
      }
      if (mask != 0 && library_decodes_) {  // stored without some filter: through H5Dread, as before
        raw.chunks.clear();
        raw.ready = read_locked(begin, end, buffer);
        return owner;
      }
      raw.chunks.push_back({index, total, static_cast<std::size_t>(size), false, mask, nullptr});
      total += static_cast<std::size_t>(size);
    }
    raw.bytes.ensure(std::max<std::size_t>(1, total));
    for (const RawChunk& c : raw.chunks) {
      if (c.fill) continue;
      origin_of(c.index, origin);
      std::uint32_t mask = 0;
      if (H5Dread_chunk(dataset_->get(), H5P_DEFAULT, origin.data(), &mask, raw.bytes.data() + c.offset) < 0)
        throw Error(label_, "cannot read chunk " + chunk_text(c.index) + " (truncated or damaged file)",
                    ErrorKind::corrupt);
    }
    share_cut_chunks(begin, end, raw);
    return owner;
  }

  // Concurrent: each chunk decoded (on this thread) and its elements in [begin, end)
  // copied to the tile; a chunk the tile holds whole, in order, is decoded in place.
  const std::byte* decode(std::int64_t begin, std::int64_t end, detail::Fetched& fetched,
                          detail::AlignedBuffer& buffer) override {
    auto& raw = static_cast<RawChunks&>(fetched);
    if (raw.ready) return raw.ready;
    const bool plain = map_ != nullptr && pipeline_.empty();  // chunks are the elements, in the mapping
    if (plain) {
      if (const std::byte* in_file = mapped_run(begin, raw)) {
        // Its page table filled in one call, not a fault every 16 pages.
        os::advise(in_file, static_cast<std::size_t>(end - begin) * item_, os::Advice::populate_read);
        return in_file;
      }
    }
    buffer.ensure(static_cast<std::size_t>(std::max<std::int64_t>(1, end - begin)) * item_);
    std::byte* dst = buffer.data();
    thread_local filters::Scratch scratch;
    std::vector<hsize_t> origin(dims_.size()), extent(dims_.size());
    for (const RawChunk& c : raw.chunks) {
      origin_of(c.index, origin);
      for (std::size_t k = 0; k < dims_.size(); ++k) extent[k] = std::min(chunk_[k], dims_[k] - origin[k]);
      // Whole and in order in the tile: every axis after the first is whole in a chunk.
      const std::int64_t first = static_cast<std::int64_t>(origin[0] * strides_[0]);
      const std::int64_t last = first + static_cast<std::int64_t>(chunk_elements_);
      const bool in_place = merge_axis_ == 0 && extent[0] == chunk_[0] && first >= begin && last <= end;
      if (c.fill) {
        for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t, std::int64_t n) {
          fill(dst + static_cast<std::size_t>(to) * item_, static_cast<std::size_t>(n));
        });
        continue;
      }
      const std::byte* decoded;
      // The stored chunk: in the mapped file (c.offset is its address) or in the fetched bytes.
      const std::span<const std::byte> stored(map_ != nullptr ? map_ + c.offset : raw.bytes.data() + c.offset, c.size);
      if (plain) {
        decoded = stored.data();
      } else if (c.shared) try {  // cut by a tile boundary: decoded once, by whichever tile comes first
        std::lock_guard<std::mutex> once(c.shared->lock);
        if (!c.shared->done) {
          c.shared->bytes.resize(chunk_elements_ * item_);
          filters::decode(stored, pipeline_, item_, chunk_elements_ * item_, scratch, c.shared->bytes.data(), c.mask);
          c.shared->done = true;
        }
        decoded = c.shared->bytes.data();
      } catch (const filters::FilterError& e) {
        throw_chunk_error(c.index, e);
      } else try {
        decoded = filters::decode(stored, pipeline_, item_, chunk_elements_ * item_, scratch,
                                  in_place ? dst + static_cast<std::size_t>(first - begin) * item_ : nullptr, c.mask);
      } catch (const filters::FilterError& e) {
        throw_chunk_error(c.index, e);
      }
      if (in_place && !plain) continue;
      for_each_segment(origin, extent, begin, end, [&](std::int64_t to, std::int64_t from, std::int64_t n) {
        std::memcpy(dst + static_cast<std::size_t>(to) * item_, decoded + static_cast<std::size_t>(from) * item_,
                    static_cast<std::size_t>(n) * item_);
      });
    }
    return dst;
  }

  // Ahead of fetch(begin, end), in the serial stage: the chunks of a mapped dataset are
  // looked up and their pages asked for.
  void will_need(std::int64_t begin, std::int64_t end) override {
    if (map_ == nullptr || end <= begin) return;
    std::vector<std::uint64_t> indices;
    chunks_of_run(begin, end, indices);
    look_up(indices);
    for (std::uint64_t index : indices)
      if (where_[index].address != kFill) os::advise(map_ + where_[index].address, where_[index].size, os::Advice::will_need);
  }

  // In the commit stage: the pages of the mapped chunks no later tile reads are let go.
  void release(std::int64_t begin, std::int64_t end) override {
    if (map_ == nullptr || end <= begin) return;
    std::vector<std::uint64_t> indices;
    chunks_of_run(begin, end, indices);
    std::vector<hsize_t> origin(dims_.size());
    for (std::uint64_t index : indices) {
      const Where& w = where_[index];
      if (w.address == kFill || w.address == kUnknown) continue;
      origin_of(index, origin);
      std::int64_t last = 0;  // the chunk's last element, flat
      for (std::size_t k = 0; k < dims_.size(); ++k)
        last += static_cast<std::int64_t>((std::min(origin[k] + chunk_[k], dims_[k]) - 1) * strides_[k]);
      if (last < end) os::advise(map_ + w.address, w.size, os::Advice::dont_need);
    }
  }

 private:
  static constexpr std::uint64_t kUnknown = ~std::uint64_t{0}, kFill = ~std::uint64_t{0} - 1;
  // Where a chunk lies in the mapped file: its address (kUnknown until looked up; kFill:
  // never written), stored size and filter mask.
  struct Where {
    std::uint64_t address = kUnknown;
    std::uint32_t size = 0, mask = 0;
  };

  // A mapped dataset's tile that lies in the file as it is (whole-row chunks, stored one
  // after another in order): where its first element is in the mapping; else null.
  const std::byte* mapped_run(std::int64_t begin, const detail::Fetched& fetched) const {
    const auto& raw = static_cast<const RawChunks&>(fetched);
    if (merge_axis_ != 0 || raw.chunks.empty()) return nullptr;
    const std::size_t bytes = chunk_elements_ * item_;
    for (std::size_t i = 0; i < raw.chunks.size(); ++i) {
      const RawChunk& c = raw.chunks[i];
      if (c.fill) return nullptr;
      if (i > 0 && (c.index != raw.chunks[i - 1].index + 1 || c.offset != raw.chunks[i - 1].offset + bytes)) return nullptr;
    }
    const std::int64_t first = static_cast<std::int64_t>(raw.chunks[0].index * chunk_elements_);
    return map_ + raw.chunks[0].offset + static_cast<std::size_t>(begin - first) * item_;
  }

  // Serial, in tile order: a chunk the tile holds only part of shares its decoding with
  // the other tiles that hold parts of it (the one before, kept in cut_, and the ones
  // after). What cut_ keeps is bounded (kSharedBytes of decoded chunks); past that a cut
  // chunk is decoded by each tile that needs it, into the thread's scratch, as before.
  // Live shared chunks: those of cut_ and of the tiles in flight, about two rows of
  // chunks within that bound.
  void share_cut_chunks(std::int64_t begin, std::int64_t end, detail::Fetched& fetched) {
    auto& raw = static_cast<RawChunks&>(fetched);
    static constexpr std::size_t kSharedBytes = std::size_t{64} << 20;
    const std::size_t keep = std::max<std::size_t>(1, kSharedBytes / std::max<std::size_t>(1, chunk_elements_ * item_));
    std::vector<hsize_t> origin(dims_.size());
    std::unordered_map<std::uint64_t, std::shared_ptr<Decoded>> next;
    for (RawChunk& c : raw.chunks) {
      if (c.fill) continue;
      origin_of(c.index, origin);
      std::int64_t first = 0, last = 0;  // the chunk's first and last elements, flat
      for (std::size_t k = 0; k < dims_.size(); ++k) {
        first += static_cast<std::int64_t>(origin[k] * strides_[k]);
        last += static_cast<std::int64_t>((std::min(origin[k] + chunk_[k], dims_[k]) - 1) * strides_[k]);
      }
      if (first >= begin && last < end) continue;  // whole in this tile
      // Shared with the tile before, or kept for the tiles after (within the bound); else
      // decoded in the thread's scratch, as a chunk the tile holds whole.
      const auto found = cut_.find(c.index);
      const bool kept = last >= end && next.size() < keep;  // a later tile holds the rest
      if (found != cut_.end()) c.shared = found->second;
      else if (kept) c.shared = std::make_shared<Decoded>();
      if (kept) next.emplace(c.index, c.shared);
    }
    cut_ = std::move(next);
  }

  // Fills where_ for the chunks of `indices` not yet looked up (serial stages only).
  void look_up(const std::vector<std::uint64_t>& indices) {
    bool all = true;
    for (std::uint64_t index : indices) all = all && where_[index].address != kUnknown;
    if (all) return;
    Session session(file_name_);
    hold();
    std::vector<hsize_t> origin(dims_.size());
    const std::size_t bytes = chunk_elements_ * item_;
    for (std::uint64_t index : indices) {
      if (where_[index].address != kUnknown) continue;
      const auto [mask, address, size] = stored_chunk(index, origin);
      if (address == HADDR_UNDEF) {
        where_[index].address = kFill;
        continue;
      }
      if (pipeline_.empty() ? size != bytes : size > std::numeric_limits<std::uint32_t>::max())
        throw Error(label_, "chunk " + chunk_text(index) + " is stored in " + std::to_string(size) +
                                " bytes, not the " + std::to_string(bytes) + " of an unfiltered chunk (damaged file)",
                    ErrorKind::corrupt);
      if (address > map_size_ || map_size_ - address < size) {
        if (cut_short()) throw_shrank();
        throw Error(label_, "chunk " + chunk_text(index) + " lies past the end of the file (truncated file)",
                    ErrorKind::corrupt);
      }
      where_[index] = {static_cast<std::uint64_t>(address), static_cast<std::uint32_t>(size), mask};
    }
  }

  // A staged dataset in the file named (not behind an external link), with no user block
  // (chunk addresses are then file offsets), of at most 1M chunks: mapped, so the kernel
  // threads decode its chunks from the file (or copy unfiltered ones, or use them in
  // place) with no HDF5 call, and the serial stage only looks chunks up.
  // A failing query leaves the dataset unmapped: read through the library instead.
  void plan_mapped(hid_t file, hid_t dset) {
    if (!elsewhere(file, dset, label_).empty()) return;
    Id fcpl(H5Fget_create_plist(file), H5Pclose);
    hsize_t user_block = 1;
    if (!fcpl.valid() || H5Pget_userblock(fcpl.get(), &user_block) < 0 || user_block != 0) return;
    std::uint64_t count = 1;
    for (hsize_t g : grid_) {
      if (g == 0 || count > (std::uint64_t{1} << 20) / g) return;
      count *= g;
    }
    const int fd = ::open(file_name_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    // Watched as a mapped .npy is (os::Mapping): should another process truncate the file
    // while it is read, the decoder reads zeros instead of dying by SIGBUS, and shrank()
    // fails the run before anything is committed.
    try {
      if (::fstat(fd, &st) == 0 && st.st_size > 0 && std::pair<dev_t, ino_t>{st.st_dev, st.st_ino} == identity_)
        mapping_ = os::Mapping::map(fd, 0, static_cast<std::size_t>(st.st_size), false, file_name_);
    } catch (const Error&) {  // not mapped: read through the library instead
    }
    ::close(fd);
    if (mapping_.data() == nullptr) return;
    map_ = mapping_.data();
    map_size_ = mapping_.size();
    where_.assign(static_cast<std::size_t>(count), Where{});
  }

  // A chunk that tile boundaries cut, decoded once for the tiles that share it: the first
  // to take the lock decodes it (an error leaves it undone: the next tile meets it too).
  struct Decoded {
    std::mutex lock;
    bool done = false;
    std::vector<std::byte> bytes;
  };
  struct RawChunk {
    std::uint64_t index;  // in the grid of chunks, C order
    std::size_t offset, size;  // in the fetched bytes; in the file, for a mapped dataset
    bool fill;
    std::uint32_t mask;  // filters the chunk was stored without
    std::shared_ptr<Decoded> shared;  // set for a chunk the tile holds only part of
  };
  struct RawChunks final : detail::Fetched {
    std::vector<std::uint64_t> indices;
    std::vector<RawChunk> chunks;
    detail::AlignedBuffer bytes;
    const std::byte* ready = nullptr;  // the tile, when fetch() read it through H5Dread
  };

  // Whether this dataset is read staged, and what that needs: every filter one ooc
  // decodes, fill values it can reproduce, and rows of chunks of reasonable size (a tile
  // decodes every chunk it touches; tiles are rows of elements). A failing query leaves
  // the dataset to H5Dread.
  void plan_staged(hid_t dcpl, hid_t type, const std::vector<hsize_t>& chunk, std::size_t row_bytes) {
    if (row_bytes > (std::size_t{256} << 20)) return;
    unsigned options = 0;
    if (H5Pget_chunk_opts(dcpl, &options) < 0 || (options & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)) return;
    H5D_fill_value_t defined = H5D_FILL_VALUE_ERROR;
    H5D_fill_time_t when = H5D_FILL_TIME_ERROR;
    if (H5Pfill_value_defined(dcpl, &defined) < 0 || defined == H5D_FILL_VALUE_UNDEFINED ||
        defined == H5D_FILL_VALUE_ERROR)
      return;
    if (H5Pget_fill_time(dcpl, &when) < 0 || when == H5D_FILL_TIME_NEVER) return;
    std::vector<filters::Filter> pipeline;
    const int n = H5Pget_nfilters(dcpl);
    if (n < 0) return;
    for (int i = 0; i < n; ++i) {
      unsigned flags = 0, config = 0;
      std::size_t count = 32;
      std::vector<unsigned> values(count);
      const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &count, values.data(), 0, nullptr,
                                             &config);
      if (id < 0 || !filters::decodable(static_cast<unsigned>(id))) return;
      if (H5Zfilter_avail(id) <= 0) library_decodes_ = false;  // negative: its plugin did not load
      values.resize(std::min<std::size_t>(count, 32));
      pipeline.push_back({static_cast<unsigned>(id), std::move(values)});
    }
    fill_.assign(item_, std::byte{0});
    if (H5Pget_fill_value(dcpl, type, fill_.data()) < 0) return;
    fill_zero_ = std::all_of(fill_.begin(), fill_.end(), [](std::byte b) { return b == std::byte{0}; });
    chunk_ = chunk;
    row_bytes_ = row_bytes;
    pipeline_ = std::move(pipeline);
    grid_.resize(dims_.size());
    strides_.assign(dims_.size(), 1);
    chunk_strides_.assign(dims_.size(), 1);
    chunk_elements_ = 1;
    for (std::size_t k = dims_.size(); k-- > 0;) {
      grid_[k] = (dims_[k] + chunk_[k] - 1) / chunk_[k];
      if (k + 1 < dims_.size()) {
        strides_[k] = strides_[k + 1] * dims_[k + 1];
        chunk_strides_[k] = chunk_strides_[k + 1] * chunk_[k + 1];
      }
      chunk_elements_ *= chunk_[k];
    }
    merge_axis_ = dims_.size() - 1;
    while (merge_axis_ > 0 && chunk_[merge_axis_] == dims_[merge_axis_]) --merge_axis_;
    staged_ = true;
  }

  // A chunk that did not decode: the file shrank under its mapping (the decoder met the
  // zeros that stand past the new end), or the chunk is damaged.
  [[noreturn]] void throw_chunk_error(std::uint64_t index, const filters::FilterError& e) const {
    if (cut_short()) throw_shrank();  // the flag, or the file's size: another thread's fault may be setting it
    throw Error(label_, "chunk " + chunk_text(index) + ": " + e.what(), ErrorKind::corrupt);
  }
  // The words a mapped .npy that shrank fails with (MappedArray::check_intact).
  [[noreturn]] void throw_shrank() const {
    throw Error(label_, "file shrank while being read (truncated by another process)");
  }
  // True if the mapped file is shorter than when it was mapped, or a read found it so.
  bool cut_short() const {
    if (mapping_.shrank()) return true;
    struct stat st {};
    return mapping_.size() > 0 && ::stat(file_name_.c_str(), &st) == 0 &&
           static_cast<std::uint64_t>(st.st_size) < mapping_.size();
  }

  // The element coordinates a chunk starts at, from its index in the grid.
  struct StoredChunk {
    unsigned mask = 0;              // filters skipped for this chunk
    haddr_t address = HADDR_UNDEF;  // HADDR_UNDEF: never written (the fill value)
    hsize_t size = 0;               // stored bytes
  };
  // Where chunk `index` lies in the file (the caller holds the HDF5 session); `origin` is
  // scratch for its coordinates.
  StoredChunk stored_chunk(std::uint64_t index, std::vector<hsize_t>& origin) const {
    origin_of(index, origin);
    StoredChunk chunk;
    if (H5Dget_chunk_info_by_coord(dataset_->get(), origin.data(), &chunk.mask, &chunk.address, &chunk.size) < 0) {
      if (cut_short()) throw_shrank();  // the library read zeros where its index was
      throw Error(label_, "cannot look up chunk " + chunk_text(index));
    }
    return chunk;
  }

  void origin_of(std::uint64_t index, std::vector<hsize_t>& origin) const {
    for (std::size_t k = dims_.size(); k-- > 0;) {
      origin[k] = (index % grid_[k]) * chunk_[k];
      index /= grid_[k];
    }
  }

  std::string chunk_text(std::uint64_t index) const {
    std::vector<hsize_t> origin(dims_.size());
    origin_of(index, origin);
    std::string text = "(";
    for (std::size_t k = 0; k < origin.size(); ++k) text += (k ? ", " : "") + std::to_string(origin[k] / chunk_[k]);
    text += origin.size() == 1 ? ",)" : ")";
    text += " at element (";
    for (std::size_t k = 0; k < origin.size(); ++k) text += (k ? ", " : "") + std::to_string(origin[k]);
    return text + (origin.size() == 1 ? ",)" : ")");
  }

  // The chunks elements [begin, end) lie in, by index in C order, each once.
  void chunks_of_run(std::int64_t begin, std::int64_t end, std::vector<std::uint64_t>& out) const {
    out.clear();
    std::vector<Box> boxes;
    std::vector<hsize_t> prefix;
    boxes_of_run(dims_, 0, prefix, begin, end, boxes);
    const std::size_t n = dims_.size();
    std::vector<hsize_t> lo(n), hi(n), at(n);
    for (const Box& box : boxes) {
      for (std::size_t k = 0; k < n; ++k) {
        lo[k] = box.offset[k] / chunk_[k];
        hi[k] = (box.offset[k] + box.count[k] - 1) / chunk_[k];
      }
      at = lo;
      while (true) {
        std::uint64_t index = 0;
        for (std::size_t k = 0; k < n; ++k) index = index * grid_[k] + at[k];
        out.push_back(index);
        std::size_t k = n;
        while (k-- > 0) {
          if (at[k] < hi[k]) {
            ++at[k];
            break;
          }
          at[k] = lo[k];
        }
        if (k == static_cast<std::size_t>(-1)) break;
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }

  template <class Fn>
  void for_each_segment(const std::vector<hsize_t>& origin, const std::vector<hsize_t>& extent, std::int64_t begin,
                        std::int64_t end, Fn&& fn) const {
    chunk_walk::for_each_segment(origin, extent, strides_, chunk_strides_, merge_axis_, begin, end, fn);
  }

  void fill(std::byte* at, std::size_t count) const { chunk_walk::fill(at, count, item_, fill_zero_, fill_); }

  // Elements [begin, end) through H5Dread; the caller holds the library lock.
  const std::byte* read_locked(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) {
    buffer.ensure(static_cast<std::size_t>(std::max<std::int64_t>(1, end - begin)) * item_);
    std::byte* dst = buffer.data();
    if (end <= begin) return dst;
    hold();
    std::vector<Box> boxes;
    if (dims_.empty()) {
      boxes.push_back({});
    } else {
      std::vector<hsize_t> prefix;
      boxes_of_run(dims_, 0, prefix, begin, end, boxes);
    }
    // One read per box, the memory space shaped as the box: HDF5 maps chunks to memory
    // quickly only when both selections have the same shape (else it goes element by
    // element). The file's own type as memory type: raw bytes, converted later by ooc.
    std::byte* at = dst;
    const std::string failed = "reading elements " + std::to_string(begin) + ".." + std::to_string(end) + " failed";
    for (const Box& box : boxes) {
      Id file_space(check(H5Dget_space(dataset_->get()), label_, failed.c_str()), H5Sclose);
      Id memory_space(
          check(box.count.empty() ? H5Screate(H5S_SCALAR)
                                  : H5Screate_simple(static_cast<int>(box.count.size()), box.count.data(), nullptr),
                label_, failed.c_str()),
          H5Sclose);
      if (!box.count.empty())
        check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, box.offset.data(), nullptr, box.count.data(),
                                  nullptr),
              label_, failed.c_str());
      if (H5Dread(dataset_->get(), type_->get(), memory_space.get(), file_space.get(), H5P_DEFAULT, at) < 0)
        throw Error(label_, failed);
      hsize_t elements = 1;
      for (hsize_t c : box.count) elements *= c;
      at += elements * item_;
    }
    return dst;
  }

  // (device, inode) of a file by name, to tell that a name still means the file it did.
  static std::pair<dev_t, ino_t> identity(const std::string& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) return {0, 0};
    return {st.st_dev, st.st_ino};
  }

  // Opens the dataset, again after let_go(): the same file, or an error.
  void hold() {
    if (dataset_) return;
    if (identity(file_name_) != identity_) throw Error(file_name_, "was replaced while being read");
    file_ = std::make_unique<Id>(open_file(file_name_, false));
    static constexpr const char* kCannot = "cannot open the dataset for reading";
    Id dapl(check(H5Pcreate(H5P_DATASET_ACCESS), label_, kCannot), H5Pclose);
    if (cache_bytes_ > 0) check(H5Pset_chunk_cache(dapl.get(), 100003, cache_bytes_, 1.0), label_, kCannot);
    Id dataset(check(H5Dopen2(file_->get(), dataset_name_.c_str(), dapl.get()), label_, kCannot), H5Dclose);
    Id type(check(H5Dget_type(dataset.get()), label_, kCannot), H5Tclose);
    dataset_ = std::make_unique<Id>(std::move(dataset));  // held only with its type
    type_ = std::make_unique<Id>(std::move(type));
  }

  std::string label_, file_name_, dataset_name_;
  std::pair<dev_t, ino_t> identity_;
  std::unique_ptr<Id> file_, type_, dataset_;
  std::vector<hsize_t> dims_;
  std::size_t item_ = 1;
  std::size_t cache_bytes_ = 0;  // 0: HDF5's default chunk cache
  // Staged reading (plan_staged).
  bool staged_ = false;
  std::vector<filters::Filter> pipeline_;
  std::vector<hsize_t> chunk_, grid_, strides_, chunk_strides_;
  std::size_t chunk_elements_ = 1;
  std::size_t row_bytes_ = 0;  // a row of chunks (along the first axis), decoded
  std::size_t merge_axis_ = 0;  // axes after it are whole in every chunk
  std::vector<std::byte> fill_;
  bool fill_zero_ = true;
  // The library has every filter too: a chunk stored without some of its filters (its
  // filter mask) is read through H5Dread; else ooc decodes it, skipping those filters.
  bool library_decodes_ = true;
  // A staged dataset read from a mapping of its file (plan_mapped): the mapping, and where
  // each chunk lies once looked up. Entries are written in the serial stages, read after,
  // by the tiles that fetched them.
  // Chunks the last tile fetched holds only part of, and their shared decoding.
  std::unordered_map<std::uint64_t, std::shared_ptr<Decoded>> cut_;
  os::Mapping mapping_;
  const std::byte* map_ = nullptr;  // mapping_.data(), or null when not mapped
  std::size_t map_size_ = 0;
  std::vector<Where> where_;
};

}  // namespace

std::unique_ptr<detail::TileReader> open_reader(const std::string& file, const std::string& dataset) {
  return std::make_unique<DatasetReader>(file, dataset);
}

}  // namespace ooc::hdf5
