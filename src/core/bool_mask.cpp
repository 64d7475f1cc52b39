#include "core/bool_mask.hpp"

#include "core/mapped_array_access.hpp"
#include "ooc/error.hpp"
#include "os/memory.hpp"

#include <algorithm>
#include <cstring>

namespace ooc {

namespace detail {

namespace {

// Blocks of at least 64Ki elements (a count per 64 KiB of mask: a block is scanned in
// microseconds) and at most 64Ki of them (the counts take at most 512 KiB).
constexpr std::int64_t kMinBlock = std::int64_t{1} << 16;
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 16;
// A Fortran-order mask's blocks are gathered from pages all over its mapping, which is
// let go of whole after this many blocks.
constexpr std::int64_t kGatheredBeforeLettingGo = 64;

std::int64_t count_true(const std::uint8_t* p, std::int64_t n) {
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += p[i] != 0;
  return count;
}

// The first nonzero byte of p[from, n), or n; eight zeros at a time.
std::int64_t next_true(const std::uint8_t* p, std::int64_t from, std::int64_t n) {
  std::int64_t i = from;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, p + i, sizeof word);
    if (word != 0) break;
  }
  for (; i < n; ++i)
    if (p[i] != 0) return i;
  return n;
}

// Its elements' C order is their order in memory.
bool c_layout(const MappedArray& a) {
  const Shape& shape = a.shape();
  return a.order() == Order::c || std::count_if(shape.begin(), shape.end(), [](std::int64_t n) { return n > 1; }) <= 1;
}

}  // namespace

void drop_pages_holding(const std::byte* from, const std::byte* to) {
  const std::uintptr_t page = os::page_size();
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(from) / page * page;
  const std::uintptr_t last = (reinterpret_cast<std::uintptr_t>(to) + page - 1) / page * page;
  if (last > first) os::advise(reinterpret_cast<const void*>(first), last - first, os::Advice::dont_need);
}

MaskIndex::MaskIndex(MappedArray mask) : mask_(std::move(mask)) {
  if (mask_.dtype().kind() != Kind::boolean)
    throw UsageError(path(), "holds " + mask_.dtype().name() + ", not bool: a boolean mask is a bool array");
  if (mask_.ndim() == 0) throw UsageError(path(), "a 0-d boolean index adds an axis, which ooc selections do not");
  if (!mask_.mapped() && !c_layout(mask_))
    throw UsageError(path(), "a mask read tile by tile (a chunked HDF5 dataset, a selection) must be in C order");
  in_place_ = mask_.mapped() && c_layout(mask_);
  elements_ = mask_.size();
  const std::int64_t wanted = std::max(kMinBlock, (elements_ + kMaxBlocks - 1) / kMaxBlocks);
  block_ = (wanted + 4095) / 4096 * 4096;
  const std::int64_t blocks = (elements_ + block_ - 1) / block_;
  before_.reserve(static_cast<std::size_t>(blocks) + 1);
  before_.push_back(0);
  if (in_place_ && elements_ > 0) os::advise(mask_.bytes().data(), mask_.bytes().size(), os::Advice::sequential);
  AlignedBuffer buffer;
  for (std::int64_t b = 0; b < blocks; ++b) {
    before_.push_back(before_.back() + count_true(bytes(b, buffer), block_length(b)));
    let_go(b);
  }
  if (!in_place_ && mask_.mapped() && elements_ > 0)
    drop_pages_holding(mask_.bytes().data(), mask_.bytes().data() + elements_);
  check_intact();
}

std::int64_t MaskIndex::block_length(std::int64_t block) const {
  return std::min(block_, elements_ - block * block_);
}

const std::uint8_t* MaskIndex::bytes(std::int64_t block, AlignedBuffer& buffer) const {
  const std::int64_t from = block * block_, n = block_length(block);
  if (in_place_) return reinterpret_cast<const std::uint8_t*>(mask_.bytes().data()) + from;
  if (!mask_.mapped()) {
    std::lock_guard lock(reader_mutex_);
    return reinterpret_cast<const std::uint8_t*>(MappedArrayAccess::reader(mask_)->read(from, from + n, buffer));
  }
  // Fortran order: C-order element `from` and on, gathered with an odometer over the shape.
  buffer.ensure(static_cast<std::size_t>(n));
  const Shape& shape = mask_.shape();
  const std::size_t k = shape.size();
  std::vector<std::int64_t> digit(k), stride(k);
  for (std::size_t j = 0; j < k; ++j) stride[j] = j == 0 ? 1 : stride[j - 1] * shape[j - 1];
  std::int64_t rest = from, offset = 0;
  for (std::size_t j = k; j-- > 0;) {
    digit[j] = rest % shape[j];
    rest /= shape[j];
    offset += digit[j] * stride[j];
  }
  const auto* data = reinterpret_cast<const std::uint8_t*>(mask_.bytes().data());
  auto* out = reinterpret_cast<std::uint8_t*>(buffer.data());
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = data[offset];
    for (std::size_t j = k; j-- > 0;) {
      offset += stride[j];
      if (++digit[j] < shape[j]) break;
      offset -= shape[j] * stride[j];
      digit[j] = 0;
    }
  }
  return out;
}

void MaskIndex::let_go(std::int64_t block) const {
  if (!mask_.mapped() || elements_ == 0) return;
  const std::byte* data = mask_.bytes().data();
  if (in_place_) {
    drop_pages_holding(data + block * block_, data + block * block_ + block_length(block));
  } else if (gathered_.fetch_add(1) + 1 >= kGatheredBeforeLettingGo) {
    gathered_ = 0;
    drop_pages_holding(data, data + elements_);
  }
}

MaskIndex::Cursor::~Cursor() {
  if (block_ >= 0) index_.let_go(block_);
}

void MaskIndex::Cursor::enter(std::int64_t block) {
  if (block != block_) {
    if (block_ >= 0) index_.let_go(block_);
    block_ = block;
    bytes_ = index_.bytes(block, buffer_);
    length_ = index_.block_length(block);
  }
  scan_ = 0;
  seen_ = 0;
}

void MaskIndex::Cursor::seek(std::int64_t i) {
  const auto& before = index_.before_;
  const std::int64_t block = std::upper_bound(before.begin(), before.end(), i) - before.begin() - 1;
  enter(block);
  skip_ = i - before[static_cast<std::size_t>(block)];
  resolved_ = false;
}

void MaskIndex::Cursor::resolve() {
  if (resolved_) return;
  const auto& before = index_.before_;
  const std::int64_t blocks = static_cast<std::int64_t>(before.size()) - 1;
  for (;;) {
    const std::int64_t expected = before[static_cast<std::size_t>(block_ + 1)] - before[static_cast<std::size_t>(block_)];
    for (std::int64_t i = scan_;; ++i) {
      i = next_true(bytes_, i, length_);
      if (i == length_) break;
      if (seen_ >= expected) changed();  // more true elements than counted
      if (skip_ == 0) {
        scan_ = at_ = i;
        resolved_ = true;
        return;
      }
      --skip_;
      ++seen_;
    }
    if (seen_ != expected || block_ + 1 >= blocks) changed();  // fewer
    enter(block_ + 1);
  }
}

std::int64_t MaskIndex::Cursor::take_run(std::int64_t limit) {
  resolve();
  std::int64_t run = 1;
  while (run < limit && at_ + run < length_ && bytes_[at_ + run] != 0) ++run;
  seen_ += run;
  scan_ = at_ + run;
  resolved_ = false;
  const auto& before = index_.before_;
  if (seen_ > before[static_cast<std::size_t>(block_ + 1)] - before[static_cast<std::size_t>(block_)]) changed();
  return run;
}

void MaskIndex::Cursor::changed() const {
  index_.check_intact();  // a file that shrank says so
  throw Error(index_.path(), "changed while being read: its true elements no longer number what was counted when "
                             "the selection was made");
}

}  // namespace detail

BoolMask BoolMask::open(const std::string& path) { return BoolMask(map_file(path)); }

BoolMask::BoolMask(MappedArray mask) : index_(std::make_shared<const detail::MaskIndex>(std::move(mask))) {}

const std::string& BoolMask::path() const { return index_->path(); }
const Shape& BoolMask::shape() const { return index_->shape(); }
std::int64_t BoolMask::count() const { return index_->count(); }

}  // namespace ooc
