#include "os/direct_io.hpp"

#include "ooc/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ooc::os {
namespace {

constexpr std::uint64_t kBlock = detail::AlignedBuffer::kAlignment;

std::uint64_t down(std::uint64_t x) { return x / kBlock * kBlock; }
std::uint64_t up(std::uint64_t x) { return (x + kBlock - 1) / kBlock * kBlock; }

}  // namespace

std::optional<UniqueFd> reopen_direct(int fd, bool writable) {
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const int direct = ::open(self.c_str(), (writable ? O_WRONLY : O_RDONLY) | O_DIRECT | O_CLOEXEC);
  if (direct < 0) return std::nullopt;
  return UniqueFd(direct);
}

DirectReader::DirectReader(UniqueFd fd, std::uint64_t data_offset, int itemsize, std::string path)
    : fd_(std::move(fd)), data_offset_(data_offset), item_(static_cast<std::uint64_t>(itemsize)),
      path_(std::move(path)) {}

const std::byte* DirectReader::read(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) {
  const std::uint64_t first = data_offset_ + static_cast<std::uint64_t>(begin) * item_;
  const std::uint64_t last = data_offset_ + static_cast<std::uint64_t>(end) * item_;
  const std::uint64_t from = down(first), to = up(last);
  buffer.ensure(std::max<std::uint64_t>(to - from, kBlock));
  std::uint64_t done = 0;
  while (from + done < last) {
    const ssize_t n = ::pread(fd_.get(), buffer.data() + done, to - from - done, static_cast<off_t>(from + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(path_, "read failed: " + errno_text(errno), kind_of_errno(errno));
    }
    if (n == 0) throw Error(path_, "file shrank while being read");
    done += static_cast<std::uint64_t>(n);
  }
  return buffer.data() + (first - from);
}

DirectWriter::DirectWriter(UniqueFd direct, int plain_fd, std::uint64_t data_offset, int itemsize, std::string path)
    : direct_(std::move(direct)), plain_fd_(plain_fd), data_offset_(data_offset),
      item_(static_cast<std::uint64_t>(itemsize)), path_(std::move(path)) {
  // The block holding the array's first byte starts with bytes that are not ours (the
  // .npy header, HDF5 metadata): carry them in front of the first tile unchanged.
  carry_.ensure(kBlock);
  carry_offset_ = down(data_offset_);
  carry_bytes_ = static_cast<std::size_t>(data_offset_ - carry_offset_);
  if (carry_bytes_ > 0 && read_at(plain_fd_, carry_.data(), carry_bytes_, carry_offset_, path_) != carry_bytes_)
    throw Error(path_, "cannot read the bytes before the array");
  thread_ = std::thread([this] { run(); });
}

DirectWriter::~DirectWriter() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  queued_.notify_all();
  thread_.join();
}

std::byte* DirectWriter::place(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) const {
  const std::uint64_t first = data_offset_ + static_cast<std::uint64_t>(begin) * item_;
  const std::uint64_t head = first - down(first);
  buffer.ensure(head + static_cast<std::uint64_t>(end - begin) * item_);
  return buffer.data() + head;
}

std::uint64_t DirectWriter::write(std::int64_t begin, std::int64_t end, detail::AlignedBuffer& buffer) {
  const std::uint64_t first = data_offset_ + static_cast<std::uint64_t>(begin) * item_;
  const std::uint64_t last = data_offset_ + static_cast<std::uint64_t>(end) * item_;
  const std::uint64_t from = down(first);
  if (from != carry_offset_ || first - from != carry_bytes_) throw std::logic_error("tiles written out of order");
  std::memcpy(buffer.data(), carry_.data(), carry_bytes_);
  const std::uint64_t whole = down(last) - from;
  carry_bytes_ = static_cast<std::size_t>(last - from - whole);
  std::memcpy(carry_.data(), buffer.data() + whole, carry_bytes_);
  carry_offset_ = from + whole;
  std::lock_guard lock(mutex_);
  if (!error_.empty()) throw Error(path_, error_);
  queue_.push_back(Request{buffer.data(), whole, from});
  queued_.notify_one();
  return ++issued_;
}

void DirectWriter::wait(std::uint64_t ticket) {
  std::unique_lock lock(mutex_);
  written_.wait(lock, [&] { return done_ >= ticket || !error_.empty(); });
  if (!error_.empty()) throw Error(path_, error_);
}

void DirectWriter::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    queued_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;  // a run that ends early: what is queued is not wanted
    const Request request = queue_.front();
    lock.unlock();
    std::string failure;
    for (std::uint64_t done = 0; done < request.bytes;) {
      const ssize_t n = ::pwrite(direct_.get(), request.data + done, request.bytes - done,
                                 static_cast<off_t>(request.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failure = "write failed: " + errno_text(n < 0 ? errno : ENOSPC);
        break;
      }
      done += static_cast<std::uint64_t>(n);
    }
    lock.lock();
    queue_.pop_front();
    if (!failure.empty() && error_.empty()) error_ = failure;
    ++done_;
    written_.notify_all();
  }
}

void DirectWriter::finish() {
  wait(issued_);
  if (carry_bytes_ > 0 && carry_offset_ + carry_bytes_ > data_offset_)
    write_at(plain_fd_, carry_.data(), carry_bytes_, carry_offset_, path_);
  carry_bytes_ = 0;
}

}  // namespace ooc::os
