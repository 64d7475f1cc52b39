#pragma once
// A selection's boolean mask (ooc::BoolMask), streamed: the number of its true elements
// per block, counted in one pass, and cursors that walk its true elements through the
// mapped mask. Nothing of it is kept but one count per block (at most 64Ki of them).

#include "core/layer.hpp"

#include "ooc/mapped_array.hpp"
#include "ooc/selection.hpp"
#include "os/tile_reader.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ooc::detail {

class MaskIndex {
 public:
  /// Counts the true (nonzero) elements of `mask`, a bool array, block by block in C
  /// order, letting go of each block's pages behind the count. Throws UsageError unless
  /// its dtype is bool and it has at least one dimension; ooc::Error if its file shrank
  /// while it was counted.
  explicit MaskIndex(MappedArray mask);

  const std::string& path() const { return mask_.path(); }
  const Shape& shape() const { return mask_.shape(); }
  std::int64_t elements() const { return elements_; }
  std::int64_t count() const { return before_.back(); }
  bool shrank() const { return mask_.shrank(); }
  /// Throws ooc::Error naming the mask's file if it shrank while it was read.
  void check_intact() const { mask_.check_intact(); }

  /// Walks the mask's true elements in C order, reading one block of the mask at a time
  /// and letting go of its pages when it moves on. One per thread. A block whose true
  /// elements no longer number what the count found (the file changed under the
  /// selection) is an ooc::Error naming the mask.
  class Cursor {
   public:
    explicit Cursor(const MaskIndex& index) : index_(index) {}
    ~Cursor();
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;

    /// Moves to true element `i` (0 <= i < count()).
    void seek(std::int64_t i);
    /// The C-order position in the mask of the current true element.
    std::int64_t position() {
      resolve();
      return block_ * index_.block_ + at_;
    }
    /// The true elements at consecutive positions from the current one on, at most
    /// `limit` (at least 1): moves past them, to the true element after them.
    std::int64_t take_run(std::int64_t limit);
    void next() { take_run(1); }

   private:
    void enter(std::int64_t block);
    void resolve();
    [[noreturn]] void changed() const;

    const MaskIndex& index_;
    std::int64_t block_ = -1;
    const std::uint8_t* bytes_ = nullptr;  // block_'s elements in C order
    std::int64_t length_ = 0;              // and how many
    std::int64_t scan_ = 0;                // the current true element is the first at or after scan_
    std::int64_t seen_ = 0;                // true elements of the block before scan_
    std::int64_t skip_ = 0;                // ... after skipping this many (seek)
    bool resolved_ = false;
    std::int64_t at_ = 0;                  // where it is in the block, once resolved
    AlignedBuffer buffer_;                 // a block gathered or read through a reader
  };

 private:
  std::int64_t block_length(std::int64_t block) const;
  // Block `block`'s elements in C order: in the mapping, or gathered into `buffer`.
  const std::uint8_t* bytes(std::int64_t block, AlignedBuffer& buffer) const;
  // Done with block `block`: its pages leave the resident set.
  void let_go(std::int64_t block) const;

  MappedArray mask_;
  std::int64_t elements_ = 0;
  std::int64_t block_ = 0;                // elements per block
  std::vector<std::int64_t> before_;      // true elements before each block; back() is count()
  bool in_place_ = false;                 // C-order bytes in a mapping: blocks are read where they are
  mutable std::mutex reader_mutex_;       // a mask read through a reader: one read at a time
  mutable std::atomic<std::int64_t> gathered_{0};  // blocks gathered since the mapping was last let go
};

/// Drops the pages that hold any byte of [from, to) of a file mapping (read-only, or
/// shared: nothing written is lost) from the resident set; a neighbour's bytes on the
/// edge pages are read back from the page cache when next touched.
void drop_pages_holding(const std::byte* from, const std::byte* to);

struct MaskAccess {
  static const std::shared_ptr<const MaskIndex>& index(const BoolMask& mask) { return mask.index_; }
};

}  // namespace ooc::detail
