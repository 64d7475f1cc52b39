#pragma once
/// Reduction states as bytes, so that a state can travel to another process running the
/// same program on the same kind of machine: ooc::mpi hands the running state of a
/// reduction from rank to rank this way.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace ooc {

/// Appends values to a byte buffer, as they are in memory (no byte swapping: both ends
/// run the same binary).
class StateWriter {
 public:
  template <class T> void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "put() copies bytes; use put_vector or save()");
    append(&value, sizeof(T));
  }
  /// The element count, then the elements.
  template <class T> void put_vector(const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    put(static_cast<std::uint64_t>(values.size()));
    append(values.data(), values.size() * sizeof(T));
  }
  std::vector<std::byte> take() && { return std::move(bytes_); }

 private:
  void append(const void* data, std::size_t n) {
    const auto* first = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), first, first + n);
  }

  std::vector<std::byte> bytes_;
};

/// Reads back, in the same order, what a StateWriter wrote; throws std::runtime_error
/// rather than read past the end.
class StateReader {
 public:
  explicit StateReader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  template <class T> T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(static_cast<void*>(&value), take(sizeof(T)), sizeof(T));
    return value;
  }
  template <class T> std::vector<T> get_vector() {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto count = get<std::uint64_t>();
    if (count > (bytes_.size() - at_) / sizeof(T)) throw std::runtime_error("reduction state is truncated");
    std::vector<T> values(static_cast<std::size_t>(count));
    if (count > 0) std::memcpy(static_cast<void*>(values.data()), take(values.size() * sizeof(T)), values.size() * sizeof(T));
    return values;
  }
  /// True once every byte has been read.
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::byte* take(std::size_t n) {
    if (n > bytes_.size() - at_) throw std::runtime_error("reduction state is truncated");
    const std::byte* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

template <class S>
concept SavesItself = requires(const S& state, S& target, StateWriter& out, StateReader& in) {
  state.save(out);
  target.load(in);
};

/// A reduction state that can travel between processes: one with members
/// `void save(StateWriter&) const` and `void load(StateReader&)`, or any trivially
/// copyable one (sent as its bytes). A state holding pointers or containers must have
/// save/load.
template <class S>
concept TransferableState = SavesItself<S> || std::is_trivially_copyable_v<S>;

template <TransferableState S>
void save_state(const S& state, StateWriter& out) {
  if constexpr (SavesItself<S>) state.save(out);
  else out.put(state);
}

template <TransferableState S>
void load_state(S& state, StateReader& in) {
  if constexpr (SavesItself<S>) state.load(in);
  else state = in.get<S>();
}

}  // namespace ooc
