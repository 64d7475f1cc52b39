// Limit probes: what this machine can do at most, measured without ooc, so the bench can
// say how close ooc gets. Prints one JSON object per line:
//   {"probe": "memory_read", "threads": 2, "bytes": ..., "seconds": ..., "gbps": ...}
// Usage: ooc_probe memory [MiB]        read bandwidth of resident memory, 1..N threads
//        ooc_probe mapped FILE         sum of a freshly mapped file, 1..N threads
//        ooc_probe inplace FILE        add 1 to every float64 of FILE through a shared
//                                      mapping with 1..N threads, then msync
//        ooc_probe read FILE           sequential O_DIRECT read of FILE
//        ooc_probe write FILE BYTES    sequential O_DIRECT write of a new FILE, then fsync

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void print(const char* probe, int threads, std::uint64_t bytes, double seconds) {
  std::printf("{\"probe\": \"%s\", \"threads\": %d, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.3f}\n", probe,
              threads, static_cast<unsigned long long>(bytes), seconds, bytes / seconds / 1e9);
  std::fflush(stdout);
}

// Eight independent accumulators, as a vectorised reduction needs.
double sum_doubles(const double* p, std::size_t n) {
  double r[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) r[k] += p[i + k];
  for (; i < n; ++i) r[0] += p[i];
  return ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
}

double parallel_sum(const double* p, std::size_t n, int threads) {
  std::vector<double> partial(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  const std::size_t per = n / static_cast<std::size_t>(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const std::size_t begin = per * static_cast<std::size_t>(t);
      const std::size_t end = t + 1 == threads ? n : begin + per;
      partial[static_cast<std::size_t>(t)] = sum_doubles(p + begin, end - begin);
    });
  for (auto& th : pool) th.join();
  double total = 0;
  for (double x : partial) total += x;
  return total;
}

int max_threads() { return static_cast<int>(std::thread::hardware_concurrency()); }

int memory(std::size_t mib) {
  const std::size_t n = (mib << 20) / sizeof(double);
  std::vector<double> data(n, 1.0);  // touched: resident before timing
  volatile double sink = 0;
  for (int threads = 1; threads <= max_threads(); ++threads) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const auto start = Clock::now();
      sink = sink + parallel_sum(data.data(), n, threads);
      best = std::min(best, seconds_since(start));
    }
    print("memory_read", threads, n * sizeof(double), best);
  }
  return 0;
}

int mapped(const char* path) {
  const int fd = ::open(path, O_RDONLY);
  if (fd < 0) return std::perror(path), 1;
  struct stat st {};
  ::fstat(fd, &st);
  const std::size_t bytes = static_cast<std::size_t>(st.st_size) / 8 * 8;
  volatile double sink = 0;
  for (int threads = 1; threads <= max_threads(); ++threads) {
    // A fresh mapping each time: the page faults are part of the cost, as for any reader.
    const auto start = Clock::now();
    void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return std::perror("mmap"), 1;
    sink = sink + parallel_sum(static_cast<const double*>(p), bytes / 8, threads);
    ::munmap(p, bytes);
    print("mapped_sum", threads, bytes, seconds_since(start));
  }
  ::close(fd);
  return 0;
}

int mapped_add(const char* path) {
  const int fd = ::open(path, O_RDWR);
  if (fd < 0) return std::perror(path), 1;
  struct stat st {};
  ::fstat(fd, &st);
  // Whole pages after the first one, so the header stays intact.
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t bytes = static_cast<std::size_t>(st.st_size) / page * page - page;
  for (int threads = 1; threads <= max_threads(); ++threads) {
    const auto start = Clock::now();
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(page));
    if (p == MAP_FAILED) return std::perror("mmap"), 1;
    auto* d = static_cast<double*>(p);
    const std::size_t n = bytes / 8, per = n / static_cast<std::size_t>(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const std::size_t begin = per * static_cast<std::size_t>(t);
        const std::size_t end = t + 1 == threads ? n : begin + per;
        for (std::size_t i = begin; i < end; ++i) d[i] += 1.0;
      });
    for (auto& th : pool) th.join();
    ::msync(p, bytes, MS_SYNC);
    ::munmap(p, bytes);
    print("mapped_add", threads, bytes, seconds_since(start));
  }
  ::close(fd);
  return 0;
}

constexpr std::size_t kDirectBlock = 8 << 20;

int direct_read(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECT);
  if (fd < 0) return std::perror(path), 1;
  void* buffer = nullptr;
  if (posix_memalign(&buffer, 4096, kDirectBlock) != 0) return 1;
  std::uint64_t total = 0;
  const auto start = Clock::now();
  while (true) {
    const ssize_t n = ::read(fd, buffer, kDirectBlock);
    if (n <= 0) break;
    total += static_cast<std::uint64_t>(n);
  }
  print("direct_read", 1, total, seconds_since(start));
  std::free(buffer);
  ::close(fd);
  return 0;
}

int direct_write(const char* path, std::uint64_t bytes) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0) return std::perror(path), 1;
  void* buffer = nullptr;
  if (posix_memalign(&buffer, 4096, kDirectBlock) != 0) return 1;
  std::memset(buffer, 1, kDirectBlock);
  const auto start = Clock::now();
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd, buffer, kDirectBlock);
    if (n <= 0) return std::perror("write"), 1;
    done += static_cast<std::uint64_t>(n);
  }
  ::fsync(fd);
  print("direct_write", 1, done, seconds_since(start));
  std::free(buffer);
  ::close(fd);
  ::unlink(path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "memory") return memory(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024);
  if (what == "mapped" && argc > 2) return mapped(argv[2]);
  if (what == "inplace" && argc > 2) return mapped_add(argv[2]);
  if (what == "read" && argc > 2) return direct_read(argv[2]);
  if (what == "write" && argc > 3) return direct_write(argv[2], std::strtoull(argv[3], nullptr, 10));
  std::fprintf(stderr, "usage: ooc_probe memory [MiB] | mapped FILE | inplace FILE | read FILE | write FILE BYTES\n");
  return 2;
}
