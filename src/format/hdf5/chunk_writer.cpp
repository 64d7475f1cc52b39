// The chunk writer: a chunked, compressed dataset, chunks encoded on the kernel threads
// and written in order (hdf5.hpp, create_compressed), and the text of a compression.

#include "format/hdf5/library.hpp"
#include "format/hdf5/filters.hpp"
#include "format/hdf5/rollback.hpp"

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


// Chunks of whole rows (every axis but the first whole), compressed on the kernel
// threads; written in order in the commit stage. A chunk that a tile boundary cuts is
// gathered in `pending_` and compressed there (serially: one chunk per tile at most).
class ChunkWriter final : public detail::TileWriter {
 public:
  // `shown`: what errors name (the output as the user named it, not its hidden dataset).
  ChunkWriter(const std::string& file, const std::string& dataset, DType dtype, const Shape& shape,
              const Compression& how, const std::string& shown)
      : label_(shown), item_(static_cast<std::size_t>(dtype.itemsize())) {
    if (shape.empty())
      throw UsageError(label_, "a scalar cannot be stored in chunks (drop chunks/compression)", "chunks/compression");
    total_ = element_count(shape).value_or(0);
    std::int64_t row = 1;
    for (std::size_t k = 1; k < shape.size(); ++k) row *= shape[k];
    if (total_ == 0 || row == 0)
      throw UsageError(label_, "an empty array cannot be stored in chunks (drop chunks/compression)",
                       "chunks/compression");
    std::int64_t rows = how.chunk_rows;
    if (rows <= 0) rows = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / (row * static_cast<std::int64_t>(item_)));
    rows = std::min(rows, shape[0]);
    rows_ = rows;
    chunk_elements_ = rows * row;
    if (static_cast<std::uint64_t>(chunk_elements_) * item_ >= (std::uint64_t{1} << 32))
      throw UsageError(label_, "chunks of " + std::to_string(rows) + " rows would exceed HDF5's 4 GiB a chunk");
    Session session(file);
    file_ = std::make_unique<Id>(open_or_create(file));
    Id type = make_type(dtype, label_);
    // These fail only when the library does (out of memory): never for the file's sake.
    static constexpr const char* kCannot = "cannot make the dataset's shape and properties (HDF5 library error)";
    std::vector<hsize_t> dims(shape.begin(), shape.end()), chunk(dims);
    chunk[0] = static_cast<hsize_t>(rows);
    Id space(check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), label_, kCannot), H5Sclose);
    Id dcpl(check(H5Pcreate(H5P_DATASET_CREATE), label_, kCannot), H5Pclose);
    check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), label_, kCannot);
    const bool blosc = how.codec == "blosc";
    if (how.shuffle && !blosc) {
      check(H5Pset_shuffle(dcpl.get()), label_, kCannot);
      pipeline_.push_back({filters::kShuffle, {static_cast<unsigned>(item_)}});
    }
    auto plugin = [&](unsigned id, const char* what) {
      // Negative: the plugin is there but did not load, which serves no better.
      if (H5Zfilter_avail(static_cast<H5Z_filter_t>(id)) <= 0)
        throw Error(label_, std::string("this HDF5 library has no ") + what + " filter (" + std::to_string(id) +
                                "; Debian: hdf5-filter-plugin" + (id == filters::kBlosc ? "-blosc-serial" : "") +
                                "), so h5py could not read the dataset either");
    };
    if (how.codec == "zstd")  // Zarr's codec; an HDF5 dataset has it through its blosc filter
      throw UsageError(label_, "compression zstd is a Zarr compressor: an HDF5 dataset takes blosc:zstd", "compression");
    if (how.codec == "gzip" || how.codec == "zlib") {  // HDF5's deflate filter writes a zlib stream
      const unsigned level = static_cast<unsigned>(how.level < 0 ? 4 : how.level);
      check(H5Pset_deflate(dcpl.get(), level), label_, kCannot);
      pipeline_.push_back({filters::kDeflate, {level}});
    } else if (how.codec == "lz4") {
      plugin(filters::kLz4, "lz4");
      const unsigned values[1] = {0};
      check(H5Pset_filter(dcpl.get(), filters::kLz4, H5Z_FLAG_MANDATORY, 1, values), label_, kCannot);
      pipeline_.push_back({filters::kLz4, {0}});
    } else if (blosc) {
      plugin(filters::kBlosc, "blosc");
      const std::vector<unsigned> values{2, 2, static_cast<unsigned>(item_),
                                         static_cast<unsigned>(chunk_elements_ * static_cast<std::int64_t>(item_)),
                                         static_cast<unsigned>(how.level < 0 ? 5 : how.level), how.shuffle ? 1u : 0u,
                                         static_cast<unsigned>(filters::blosc_codec_number(how.blosc_codec.c_str()))};
      check(H5Pset_filter(dcpl.get(), filters::kBlosc, H5Z_FLAG_MANDATORY, values.size(), values.data()), label_,
            kCannot);
      pipeline_.push_back({filters::kBlosc, values});
    }
    Id lcpl = intermediate_groups(label_);
    dataset_ = std::make_unique<Id>(
        H5Dcreate2(file_->get(), dataset.c_str(), type.get(), space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT), H5Dclose);
    if (!dataset_->valid()) throw Error(label_, "cannot create the dataset");
  }

  // An output never finished is discarded: what the closes return is not checked (Id's
  // destructor); finish() closes a finished one, checked.
  ~ChunkWriter() override {
    Session session(label_);
    dataset_.reset();
    file_.reset();
  }

  std::uint64_t tile_bytes_cap() const override {
    return detail::output_tile_cap(static_cast<std::uint64_t>(chunk_elements_) * item_);
  }

  std::unique_ptr<detail::Fetched> encode(std::int64_t begin, std::int64_t end, const std::byte* tile,
                                          std::unique_ptr<detail::Fetched> reuse) override {
    std::unique_ptr<detail::Fetched> owner = reuse ? std::move(reuse) : std::make_unique<Encoded>();
    auto& e = static_cast<Encoded&>(*owner);
    e.count = 0;
    thread_local filters::Scratch scratch;
    thread_local std::vector<std::byte> padded;
    for (std::int64_t k = (begin + chunk_elements_ - 1) / chunk_elements_;; ++k) {
      const std::int64_t lo = k * chunk_elements_, hi = std::min(lo + chunk_elements_, total_);
      if (lo >= total_ || hi > end) break;
      if (e.chunks.size() <= e.count) e.chunks.emplace_back();
      encode_chunk(tile + static_cast<std::size_t>(lo - begin) * item_, hi - lo, scratch, padded, e.chunks[e.count]);
      ++e.count;
    }
    return owner;
  }

  void write(std::int64_t begin, std::int64_t end, const std::byte* tile, detail::Fetched* encoded) override {
    auto* e = static_cast<Encoded*>(encoded);
    std::size_t next = 0;  // of e's chunks
    for (std::int64_t k = begin / chunk_elements_; k * chunk_elements_ < end; ++k) {
      const std::int64_t lo = k * chunk_elements_, hi = std::min(lo + chunk_elements_, total_);
      if (lo >= begin && hi <= end) {  // encoded on a kernel thread
        if (e == nullptr || next >= e->count) throw std::logic_error("chunk writer: a whole chunk was not encoded");
        put(k, e->chunks[next++]);
        continue;
      }
      const std::int64_t from = std::max(lo, begin), to = std::min(hi, end);
      if (pending_filled_ == 0) pending_index_ = k;
      if (pending_index_ != k || pending_filled_ != from - lo) throw std::logic_error("chunk writer: tiles out of order");
      pending_.resize(static_cast<std::size_t>(hi - lo) * item_);
      std::memcpy(pending_.data() + static_cast<std::size_t>(from - lo) * item_,
                  tile + static_cast<std::size_t>(from - begin) * item_, static_cast<std::size_t>(to - from) * item_);
      pending_filled_ = to - lo;
      if (to == hi) {  // complete: compressed here, in the serial stage
        thread_local filters::Scratch scratch;
        thread_local std::vector<std::byte> padded;
        std::vector<std::byte> bytes;
        encode_chunk(pending_.data(), hi - lo, scratch, padded, bytes);
        put(k, bytes);
        pending_filled_ = 0;
      }
    }
  }

  void finish() override {
    Session session(label_);
    if (!dataset_) return;
    if (pending_filled_ != 0) throw std::logic_error("chunk writer: a chunk was left unwritten");
    if (space_) space_->close(label_, "cannot close the dataset's dataspace");
    space_.reset();
    dataset_->close(label_, "cannot close the dataset (disk full?)");
    dataset_.reset();
    if (H5Fflush(file_->get(), H5F_SCOPE_GLOBAL) < 0) throw Error(label_, "cannot flush the HDF5 file");
    file_->close(label_, "cannot close the HDF5 file (disk full?)");
    file_.reset();
  }

 private:
  struct Encoded final : detail::Fetched {
    std::vector<std::vector<std::byte>> chunks;
    std::size_t count = 0;
  };

  // A chunk of `n` elements (the last one may be short: padded with zeros to a whole chunk,
  // which HDF5 stores and h5py reads only in part).
  void encode_chunk(const std::byte* data, std::int64_t n, filters::Scratch& scratch, std::vector<std::byte>& padded,
                    std::vector<std::byte>& out) const {
    const std::size_t bytes = static_cast<std::size_t>(chunk_elements_) * item_;
    std::span<const std::byte> elements(data, bytes);
    if (n < chunk_elements_) {
      padded.assign(bytes, std::byte{0});
      std::memcpy(padded.data(), data, static_cast<std::size_t>(n) * item_);
      elements = std::span<const std::byte>(padded.data(), bytes);
    }
    try {
      filters::encode(elements, pipeline_, item_, scratch, out);
    } catch (const filters::FilterError& err) {
      throw Error(label_, err.what());
    }
  }

  void put(std::int64_t k, const std::vector<std::byte>& bytes) {
    Session session(label_);
    const int ndims = check(H5Sget_simple_extent_ndims(space()), label_, "cannot read the dataset's shape");
    std::vector<hsize_t> offset(static_cast<std::size_t>(std::max(1, ndims)), 0);
    offset[0] = static_cast<hsize_t>(k * rows_);
    if (H5Dwrite_chunk(dataset_->get(), H5P_DEFAULT, 0, offset.data(), bytes.size(), bytes.data()) < 0)
      throw Error(label_, "writing chunk " + std::to_string(k) + " failed (disk full?)");
    start_writeback(bytes.size());
  }

  // The output is fsynced once, when it is committed; without a push the kernel writes
  // nothing back until then, and that fsync waits for every byte (a quarter of a run that
  // compresses on two cores). So every kWriteback bytes the file's dirty pages are sent
  // to the disk, without waiting (sync_file_range's WRITE), while compression goes on.
  static constexpr std::size_t kWriteback = std::size_t{8} << 20;
  void start_writeback(std::size_t bytes) {
    unsent_ += bytes;
    if (unsent_ < kWriteback) return;
    unsent_ = 0;
    void* handle = nullptr;
    if (H5Fget_vfd_handle(file_->get(), H5P_DEFAULT, &handle) < 0 || handle == nullptr) return;  // not sec2: skip
    ::sync_file_range(*static_cast<int*>(handle), 0, 0, SYNC_FILE_RANGE_WRITE);  // a hint: errors come at fsync
  }

  hid_t space() {
    if (!space_)
      space_ = std::make_unique<Id>(check(H5Dget_space(dataset_->get()), label_, "cannot read the dataset's shape"),
                                    H5Sclose);
    return space_->get();
  }

  std::string label_;
  std::size_t item_;
  std::int64_t total_ = 0, rows_ = 1, chunk_elements_ = 1;
  std::vector<filters::Filter> pipeline_;
  std::unique_ptr<Id> file_, dataset_, space_;
  std::vector<std::byte> pending_;
  std::int64_t pending_index_ = 0, pending_filled_ = 0;
  std::size_t unsent_ = 0;  // bytes written since the last writeback push
};

}  // namespace

std::unique_ptr<detail::TileWriter> create_compressed(const std::string& file, const std::string& dataset, DType dtype,
                                                      const Shape& shape, const Compression& how,
                                                      const std::string& shown) {
  return std::make_unique<ChunkWriter>(file, dataset, dtype, shape, how, shown);
}

}  // namespace ooc::hdf5

namespace ooc {

void Compression::parse_codec(const std::string& text) {
  Compression& into = *this;
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t colon = text.find(':', at);
    parts.push_back(text.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  auto level = [&](const std::string& t) {
    if (t.size() != 1 || t[0] < '0' || t[0] > '9')
      throw UsageError("compression " + text + ": the level is a digit, 0 to 9");
    return t[0] - '0';
  };
  into.codec = parts[0];
  if ((parts[0] == "gzip" || parts[0] == "zlib" || parts[0] == "zstd") && parts.size() <= 2) {
    if (parts.size() == 2) into.level = level(parts[1]);
  } else if ((parts[0] == "lz4" || parts[0] == "none") && parts.size() == 1) {
  } else if (parts[0] == "blosc" && parts.size() <= 3) {
    if (parts.size() >= 2) into.blosc_codec = parts[1];
    if (hdf5::filters::blosc_codec_number(into.blosc_codec.c_str()) < 0)
      throw UsageError("compression " + text + ": blosc's codecs are blosclz, lz4, lz4hc, zlib, zstd");
    if (parts.size() == 3) into.level = level(parts[2]);
  } else {
    throw UsageError("compression " + text + ": give gzip[:LEVEL], zlib[:LEVEL], zstd[:LEVEL], lz4, blosc[:CODEC[:LEVEL]] "
                     "or none");
  }
}

}  // namespace ooc
