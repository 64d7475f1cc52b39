// Limit probes: what this machine can do at most, measured without ooc, so the bench can
// say how close ooc gets. A limit that a bench row beats is a wrong limit, so every probe
// is the best of several ways of doing the same work (page faults, MADV_POPULATE_*,
// pread/pwrite through small reused buffers, O_DIRECT with one or several requests in
// flight), each with 1..N threads. Prints one JSON object per line, one per way and
// thread count, then the fastest again with "best": true (the line bench.py times when
// the probe takes turns with the peers in a row):
//   {"probe": "mapped_sum", "strategy": "pread", "threads": 2, "bytes": ..., "seconds": ..., "gbps": ...}
// Usage: ooc_probe memory [MiB]        read bandwidth of resident memory
//        ooc_probe mapped FILE         sum of FILE's float64 values (warm: FILE cached)
//        ooc_probe select FILE NCOLS STEP COL...
//                                      sum of columns COL... of every STEP-th row of a
//                                      C-ordered (N, NCOLS) float64 .npy (warm)
//        ooc_probe fold FILE           the 8 columns of a C-ordered (N, 8) float64 .npy
//                                      each summed in row order, as numpy's mean over axis
//                                      0 adds them (warm)
//        ooc_probe inplace FILE        add 1 to every float64 of FILE after its first page,
//                                      durable (msync or fdatasync) at the end
//        ooc_probe read FILE           read of FILE from the disk: FILE's cached pages are
//                                      dropped (POSIX_FADV_DONTNEED) before each way
//        ooc_probe write FILE BYTES    write of a new FILE of BYTES (not constant bytes),
//                                      fsynced; FILE is removed afterwards

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Result {
  std::string probe, strategy;
  int threads = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

void print(const Result& r, bool best = false) {
  std::printf("{\"probe\": \"%s\", \"strategy\": \"%s\", \"threads\": %d, \"bytes\": %llu, \"seconds\": %.6f, "
              "\"gbps\": %.3f%s}\n",
              r.probe.c_str(), r.strategy.c_str(), r.threads, static_cast<unsigned long long>(r.bytes), r.seconds,
              static_cast<double>(r.bytes) / r.seconds / 1e9, best ? ", \"best\": true" : "");
  std::fflush(stdout);
}

// Collects a probe's measurements and prints the fastest last.
class Probe {
 public:
  explicit Probe(std::string name) : name_(std::move(name)) {}
  void add(const std::string& strategy, int threads, std::uint64_t bytes, double seconds) {
    Result r{name_, strategy, threads, bytes, seconds};
    print(r);
    if (best_.threads == 0 || seconds < best_.seconds) best_ = r;
  }
  int finish() {
    if (best_.threads == 0) return 1;
    print(best_, true);
    return 0;
  }

 private:
  std::string name_;
  Result best_;
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

int max_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

// 1..N threads for the probes that cost little; 1, 2, 4, ... and N for those that read or
// write the whole file from the disk once per way.
std::vector<int> all_threads() {
  std::vector<int> t;
  for (int i = 1; i <= max_threads(); ++i) t.push_back(i);
  return t;
}
std::vector<int> some_threads() {
  std::vector<int> t;
  for (int i = 1; i < max_threads(); i *= 2) t.push_back(i);
  t.push_back(max_threads());
  return t;
}

// Runs body(t, begin, end) on `threads` threads over [0, units) split in equal parts.
void in_parallel(int threads, std::size_t units, const std::function<void(int, std::size_t, std::size_t)>& body) {
  std::vector<std::thread> pool;
  const std::size_t per = units / static_cast<std::size_t>(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const std::size_t begin = per * static_cast<std::size_t>(t);
      const std::size_t end = t + 1 == threads ? units : begin + per;
      body(t, begin, end);
    });
  for (auto& th : pool) th.join();
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

void add_one(double* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] += 1.0;
}

struct File {
  int fd = -1;
  std::uint64_t size = 0;
  File(const char* path, int flags) {
    fd = ::open(path, flags, 0644);
    if (fd < 0) die(path);
    struct stat st {};
    ::fstat(fd, &st);
    size = static_cast<std::uint64_t>(st.st_size);
  }
  ~File() { ::close(fd); }
  void drop_cache() const { ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); }
};

// madvise of [address, address + bytes), widened to whole pages.
void advise(const void* address, std::size_t bytes, int advice) {
  const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(address) / page * page;
  ::madvise(reinterpret_cast<void*>(begin), reinterpret_cast<std::uintptr_t>(address) + bytes - begin, advice);
}

void* map(int fd, std::size_t bytes, int prot, off_t offset = 0) {
  void* p = ::mmap(nullptr, bytes, prot, MAP_SHARED, fd, offset);
  if (p == MAP_FAILED) die("mmap");
  return p;
}

struct Aligned {
  std::unique_ptr<std::byte, decltype(&std::free)> data{nullptr, &std::free};
  explicit Aligned(std::size_t bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) die("posix_memalign");
    data.reset(static_cast<std::byte*>(p));
  }
  std::byte* get() const { return data.get(); }
};

std::size_t pread_all(int fd, std::byte* buffer, std::size_t bytes, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, buffer + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) die("pread");
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

void pwrite_all(int fd, const std::byte* buffer, std::size_t bytes, std::uint64_t offset) {
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd, buffer + done, bytes - done, static_cast<off_t>(offset + done));
    if (n <= 0) die("pwrite");
    done += static_cast<std::size_t>(n);
  }
}

constexpr std::size_t kSmallBuffer = 256 << 10;  // fits a core's L2: pread, then sum from cache
constexpr std::size_t kPiece = 8 << 20;          // populate / write-back / O_DIRECT request size

int memory(std::size_t mib) {
  const std::size_t n = (mib << 20) / sizeof(double);
  std::vector<double> data(n, 1.0);  // touched: resident before timing
  volatile double sink = 0;
  Probe probe("memory_read");
  for (int threads : all_threads()) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      std::vector<double> partial(static_cast<std::size_t>(threads));
      const auto start = Clock::now();
      in_parallel(threads, n, [&](int t, std::size_t b, std::size_t e) { partial[t] = sum_doubles(data.data() + b, e - b); });
      best = std::min(best, seconds_since(start));
      for (double x : partial) sink = sink + x;
    }
    probe.add("resident", threads, n * sizeof(double), best);
  }
  return probe.finish();
}

// A warm file's float64 values summed: by page faults on a fresh mapping, by
// MADV_POPULATE_READ of each piece of a fresh mapping, or by pread into a small buffer
// per thread.
int mapped(const char* path) {
  const File file(path, O_RDONLY);
  const std::size_t bytes = file.size / 8 * 8, n = bytes / 8;
  volatile double sink = 0;
  Probe probe("mapped_sum");
  for (int threads : all_threads()) {
    std::vector<double> partial(static_cast<std::size_t>(threads));
    for (const char* strategy : {"faults", "populate", "pread"}) {
      const auto start = Clock::now();
      if (std::strcmp(strategy, "pread") == 0) {
        in_parallel(threads, n, [&](int t, std::size_t b, std::size_t e) {
          Aligned buffer(kSmallBuffer);
          double s = 0;
          for (std::size_t i = b; i < e; i += kSmallBuffer / 8) {
            const std::size_t count = std::min(kSmallBuffer / 8, e - i);
            pread_all(file.fd, buffer.get(), count * 8, i * 8);
            s += sum_doubles(reinterpret_cast<const double*>(buffer.get()), count);
          }
          partial[t] = s;
        });
      } else {
        // A fresh mapping each time: its page faults are part of the cost, as for any reader.
        const bool populate = std::strcmp(strategy, "populate") == 0;
        auto* p = static_cast<const double*>(map(file.fd, bytes, PROT_READ));
        in_parallel(threads, n, [&](int t, std::size_t b, std::size_t e) {
          double s = 0;
          for (std::size_t i = b; i < e; i += kPiece / 8) {
            const std::size_t count = std::min(kPiece / 8, e - i);
            if (populate) advise(p + i, count * 8, MADV_POPULATE_READ);
            s += sum_doubles(p + i, count);
          }
          partial[t] = s;
        });
        ::munmap(const_cast<double*>(p), bytes);
      }
      probe.add(strategy, threads, bytes, seconds_since(start));
      for (double x : partial) sink = sink + x;
    }
  }
  return probe.finish();
}

// The axis-0 mean's limit, of the same work: each of the 8 columns of a C-ordered (N, 8)
// float64 .npy summed row after row, numpy's order (one dependent chain per column, so one
// thread adds, whatever the core count). Ways: the adding thread's own page faults on a
// fresh mapping, asking for the row 32 rows ahead; or with 1..N-1 helper threads, which
// fill the page tables ahead of it (MADV_POPULATE_READ, 8 MiB at a time) or pread the
// pieces ahead into a ring of small buffers that it sums from.
int fold(const char* path) {
  const File file(path, O_RDONLY);
  unsigned char preamble[10] = {};
  if (::pread(file.fd, preamble, sizeof preamble, 0) != sizeof preamble) die(path);
  const std::size_t header = 10 + (preamble[8] | (preamble[9] << 8));  // a version 1.0 .npy header
  constexpr std::size_t kRow = 8;
  const std::size_t rows = (file.size - header) / (kRow * 8);
  constexpr std::size_t kFoldPiece = 256 << 10;  // a core's L2 holds a few
  constexpr std::size_t kPieceRows = kFoldPiece / (kRow * 8);
  const std::size_t pieces = (rows + kPieceRows - 1) / kPieceRows;
  constexpr std::size_t kPopulateEvery = kPiece / kFoldPiece;  // populate helpers: kPiece at a time
  auto piece_rows = [&](std::size_t k) { return std::min(kPieceRows, rows - k * kPieceRows); };
  auto add_rows = [](double* acc, const double* p, std::size_t n) {
    double local[kRow];  // in registers: acc could alias p
    std::copy(acc, acc + kRow, local);
    for (std::size_t r = 0; r < n; ++r, p += kRow) {
      __builtin_prefetch(p + 32 * kRow);
      for (std::size_t k = 0; k < kRow; ++k) local[k] += p[k];
    }
    std::copy(local, local + kRow, acc);
  };
  volatile double sink = 0;
  Probe probe("fold");
  const std::size_t bytes = rows * kRow * 8;
  for (int threads : all_threads()) {
    for (const char* strategy : {"faults", "populate", "pread"}) {
      const bool alone = std::strcmp(strategy, "faults") == 0;
      if (alone != (threads == 1)) continue;  // faults: the adder alone; the others: with helpers
      const int helpers = threads - 1;
      const bool by_pread = std::strcmp(strategy, "pread") == 0;
      // pread: a ring of buffers, piece k in buffer k % ring; filled[k % ring] = k + 1 when ready.
      const std::size_t ring = by_pread ? 4 * static_cast<std::size_t>(helpers) : 0;
      std::vector<Aligned> buffers;
      for (std::size_t i = 0; i < ring; ++i) buffers.emplace_back(kFoldPiece);
      std::unique_ptr<std::atomic<std::size_t>[]> filled(new std::atomic<std::size_t>[std::max<std::size_t>(ring, 1)]);
      for (std::size_t i = 0; i < ring; ++i) filled[i] = 0;
      std::atomic<std::size_t> added{0};  // pieces the adder is done with
      const auto start = Clock::now();
      const int fd = file.fd;
      const std::byte* map_base = nullptr;
      std::size_t map_bytes = header + bytes;
      if (!by_pread) map_base = static_cast<const std::byte*>(map(fd, map_bytes, PROT_READ));
      const auto* data = map_base != nullptr ? reinterpret_cast<const double*>(map_base + header) : nullptr;
      std::vector<std::thread> pool;
      for (int h = 0; h < helpers; ++h)
        pool.emplace_back([&, h] {
          // Helper h takes pieces h, h + helpers, ..., staying at most `ahead` pieces in front.
          const std::size_t ahead = by_pread ? ring : 4 * kPopulateEvery * static_cast<std::size_t>(helpers);
          double touched = 0;
          const std::size_t step = by_pread ? static_cast<std::size_t>(helpers) : kPopulateEvery * static_cast<std::size_t>(helpers);
          const std::size_t first = by_pread ? static_cast<std::size_t>(h) : kPopulateEvery * static_cast<std::size_t>(h);
          for (std::size_t k = first; k < pieces; k += step) {
            while (k >= added.load(std::memory_order_acquire) + ahead) std::this_thread::yield();
            if (by_pread) {
              pread_all(fd, buffers[k % ring].get(), piece_rows(k) * kRow * 8, header + k * kFoldPiece);
              filled[k % ring].store(k + 1, std::memory_order_release);
            } else if (k % kPopulateEvery == 0) {  // the page tables of the next few MiB
              const std::size_t n = std::min(kPopulateEvery, pieces - k);
              advise(data + k * kPieceRows * kRow, (n - 1) * kFoldPiece + piece_rows(k + n - 1) * kRow * 8,
                     MADV_POPULATE_READ);
            }
          }
          sink = sink + touched;
        });
      double acc[kRow] = {};
      for (std::size_t k = 0; k < pieces; ++k) {
        if (by_pread) {
          while (filled[k % ring].load(std::memory_order_acquire) != k + 1) std::this_thread::yield();
          add_rows(acc, reinterpret_cast<const double*>(buffers[k % ring].get()), piece_rows(k));
        } else {
          add_rows(acc, data + k * kPieceRows * kRow, piece_rows(k));
        }
        added.store(k + 1, std::memory_order_release);
      }
      for (auto& th : pool) th.join();
      if (map_base != nullptr) ::munmap(const_cast<std::byte*>(map_base), map_bytes);
      probe.add(strategy, threads, bytes, seconds_since(start));
      for (double x : acc) sink = sink + x;
    }
  }
  return probe.finish();
}

// A selection's limit, of the same work: the sum of columns `cols` of every `step`-th row
// of a C-ordered (N, ncols) float64 .npy that the page cache holds, by page faults on a
// fresh mapping, MADV_POPULATE_READ per piece, or pread of whole rows into a small buffer.
int select(const char* path, std::size_t ncols, std::size_t step, const std::vector<std::size_t>& cols) {
  const File file(path, O_RDONLY);
  unsigned char preamble[10] = {};
  if (::pread(file.fd, preamble, sizeof preamble, 0) != sizeof preamble) die(path);
  const std::size_t header = 10 + (preamble[8] | (preamble[9] << 8));  // a version 1.0 .npy header
  const std::size_t row = ncols * 8, rows = (file.size - header) / row;
  const std::size_t selected = (rows + step - 1) / step;  // rows 0, step, 2 step, ...
  auto sum_rows = [&](const std::byte* base, std::size_t count) {  // rows 0, step, ... of the count from base
    double s[8] = {};
    for (std::size_t r = 0; r < count; r += step)
      for (std::size_t k = 0; k < cols.size(); ++k) {
        double v;
        std::memcpy(&v, base + r * row + cols[k] * 8, 8);
        s[k % 8] += v;
      }
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
  };
  volatile double sink = 0;
  Probe probe("select_sum");
  for (int threads : all_threads()) {
    std::vector<double> partial(static_cast<std::size_t>(threads));
    for (const char* strategy : {"faults", "populate", "pread"}) {
      const auto start = Clock::now();
      if (std::strcmp(strategy, "pread") == 0) {
        const std::size_t rows_at_once = std::max<std::size_t>(step, kSmallBuffer / row / step * step);
        in_parallel(threads, selected, [&](int t, std::size_t b, std::size_t e) {
          Aligned buffer(rows_at_once * row);
          double s = 0;
          for (std::size_t r = b * step; r < std::min(rows, e * step); r += rows_at_once) {
            const std::size_t count = std::min(rows_at_once, std::min(rows, e * step) - r);
            pread_all(file.fd, buffer.get(), count * row, header + r * row);
            s += sum_rows(buffer.get(), count);
          }
          partial[t] = s;
        });
      } else {
        const bool populate = std::strcmp(strategy, "populate") == 0;
        auto* p = static_cast<const std::byte*>(map(file.fd, file.size, PROT_READ));
        const std::size_t rows_per_piece = std::max<std::size_t>(step, kPiece / row / step * step);
        in_parallel(threads, selected, [&](int t, std::size_t b, std::size_t e) {
          double s = 0;
          for (std::size_t r = b * step; r < std::min(rows, e * step); r += rows_per_piece) {
            const std::size_t count = std::min(rows_per_piece, std::min(rows, e * step) - r);
            if (populate) advise(p + header + r * row, count * row, MADV_POPULATE_READ);
            s += sum_rows(p + header + r * row, count);
          }
          partial[t] = s;
        });
        ::munmap(const_cast<std::byte*>(p), file.size);
      }
      probe.add(strategy, threads, file.size - header, seconds_since(start));
      for (double x : partial) sink = sink + x;
    }
  }
  return probe.finish();
}

// Add 1 to every float64 after the first page, durable at the end: through a shared
// mapping (page faults, or MADV_POPULATE_WRITE per piece), or pread + pwrite through a
// small buffer per thread; each piece's write-back is started as soon as it is done
// (sync_file_range), then msync / fdatasync waits for the rest.
int mapped_add(const char* path) {
  const File file(path, O_RDWR);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t bytes = file.size / page * page - page, n = bytes / 8;
  Probe probe("mapped_add");
  for (int threads : all_threads()) {
    for (const char* strategy : {"faults", "populate", "pwrite"}) {
      const auto start = Clock::now();
      if (std::strcmp(strategy, "pwrite") == 0) {
        in_parallel(threads, n, [&](int, std::size_t b, std::size_t e) {
          Aligned buffer(kSmallBuffer);
          std::uint64_t started = b * 8;
          for (std::size_t i = b; i < e; i += kSmallBuffer / 8) {
            const std::size_t count = std::min(kSmallBuffer / 8, e - i);
            const std::uint64_t at = page + i * 8;
            pread_all(file.fd, buffer.get(), count * 8, at);
            add_one(reinterpret_cast<double*>(buffer.get()), count);
            pwrite_all(file.fd, buffer.get(), count * 8, at);
            if ((i + count) * 8 - started >= kPiece || i + count == e) {
              ::sync_file_range(file.fd, static_cast<off_t>(page + started), static_cast<off_t>((i + count) * 8 - started),
                                SYNC_FILE_RANGE_WRITE);
              started = (i + count) * 8;
            }
          }
        });
        ::fdatasync(file.fd);
      } else {
        const bool populate = std::strcmp(strategy, "populate") == 0;
        auto* p = static_cast<double*>(map(file.fd, bytes, PROT_READ | PROT_WRITE, static_cast<off_t>(page)));
        in_parallel(threads, n, [&](int, std::size_t b, std::size_t e) {
          for (std::size_t i = b; i < e; i += kPiece / 8) {
            const std::size_t count = std::min(kPiece / 8, e - i);
            if (populate) advise(p + i, count * 8, MADV_POPULATE_WRITE);
            add_one(p + i, count);
            ::sync_file_range(file.fd, static_cast<off_t>(page + i * 8), static_cast<off_t>(count * 8),
                              SYNC_FILE_RANGE_WRITE);
          }
        });
        ::msync(p, bytes, MS_SYNC);
        ::munmap(p, bytes);
      }
      probe.add(strategy, threads, bytes, seconds_since(start));
    }
  }
  return probe.finish();
}

// Reads FILE from the disk: O_DIRECT in 8 MiB requests (one in flight per thread, up to
// 8 in flight), read() through the page cache with sequential readahead, page faults on a
// fresh mapping with MADV_SEQUENTIAL (numpy's way), or page faults on pieces in order
// with the next ones asked for ahead (MADV_WILLNEED, ooc's way). The file's cached pages are dropped before each.
int direct_read(const char* path) {
  const File plain(path, O_RDONLY);
  const std::uint64_t size = plain.size;
  Probe probe("direct_read");
  volatile double sink = 0;
  // Requests in flight: 1..cores, and more (a disk serves several at once whatever the cores).
  std::vector<int> in_flight = some_threads();
  for (int more : {4, 8})
    if (more > in_flight.back()) in_flight.push_back(more);
  for (int threads : in_flight) {
    plain.drop_cache();
    const File direct(path, O_RDONLY | O_DIRECT);
    const std::size_t blocks = (size + kPiece - 1) / kPiece;
    const auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        Aligned buffer(kPiece);
        for (std::size_t k = static_cast<std::size_t>(t); k < blocks; k += static_cast<std::size_t>(threads))
          pread_all(direct.fd, buffer.get(), kPiece, k * kPiece);
      });
    for (auto& th : pool) th.join();
    probe.add("o_direct", threads, size, seconds_since(start));
  }
  {
    plain.drop_cache();
    ::posix_fadvise(plain.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    Aligned buffer(1 << 20);
    const auto start = Clock::now();
    for (std::uint64_t at = 0; pread_all(plain.fd, buffer.get(), 1 << 20, at) > 0; at += 1 << 20) {
    }
    probe.add("read", 1, size, seconds_since(start));
  }
  const std::size_t bytes = size / 8 * 8;
  for (int threads : some_threads()) {
    plain.drop_cache();
    const auto start = Clock::now();
    auto* p = static_cast<const double*>(map(plain.fd, bytes, PROT_READ));
    ::madvise(const_cast<double*>(p), bytes, MADV_SEQUENTIAL);
    std::vector<double> partial(static_cast<std::size_t>(threads));
    in_parallel(threads, bytes / 8, [&](int t, std::size_t b, std::size_t e) { partial[t] = sum_doubles(p + b, e - b); });
    ::munmap(const_cast<double*>(p), bytes);
    probe.add("faults", threads, size, seconds_since(start));
    for (double x : partial) sink = sink + x;
  }
  // Page faults on pieces taken in order (thread t: pieces t, t + threads, ...), each
  // thread asking for the pieces two rounds ahead (MADV_WILLNEED): how ooc reads a cold file.
  const std::size_t pieces = (bytes + kPiece - 1) / kPiece;
  for (int threads : some_threads()) {
    plain.drop_cache();
    const auto start = Clock::now();
    auto* p = static_cast<const std::byte*>(map(plain.fd, bytes, PROT_READ));
    std::vector<double> partial(static_cast<std::size_t>(threads));
    const auto piece_bytes = [&](std::size_t k) { return std::min<std::size_t>(kPiece, bytes - k * kPiece); };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const auto step = static_cast<std::size_t>(threads);
        for (std::size_t k = static_cast<std::size_t>(t); k < pieces; k += step) {
          for (std::size_t ahead = k + step; ahead <= k + 2 * step && ahead < pieces; ahead += step)
            ::madvise(const_cast<std::byte*>(p + ahead * kPiece), piece_bytes(ahead), MADV_WILLNEED);
          partial[t] += sum_doubles(reinterpret_cast<const double*>(p + k * kPiece), piece_bytes(k) / 8);
        }
      });
    for (auto& th : pool) th.join();
    ::munmap(const_cast<std::byte*>(p), bytes);
    probe.add("willneed", threads, size, seconds_since(start));
    for (double x : partial) sink = sink + x;
  }
  return probe.finish();
}

// Writes a new FILE of `bytes` and fsyncs it: O_DIRECT in 8 MiB requests (one in flight
// per thread), or write() through the page cache with each 8 MiB's write-back started at
// once. The bytes are not constant (a disk or its host may compress or deduplicate those).
int direct_write(const char* path, std::uint64_t bytes) {
  Aligned data(kPiece);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = 0; i < kPiece / 8; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    reinterpret_cast<std::uint64_t*>(data.get())[i] = x;
  }
  const std::size_t blocks = (bytes + kPiece - 1) / kPiece;
  Probe probe("direct_write");
  for (int threads : some_threads()) {
    ::unlink(path);
    const auto start = Clock::now();
    {
      const File file(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT);
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          for (std::size_t k = static_cast<std::size_t>(t); k < blocks; k += static_cast<std::size_t>(threads))
            pwrite_all(file.fd, data.get(), kPiece, k * kPiece);
        });
      for (auto& th : pool) th.join();
      ::fsync(file.fd);
    }
    probe.add("o_direct", threads, blocks * kPiece, seconds_since(start));
  }
  {
    ::unlink(path);
    const auto start = Clock::now();
    {
      const File file(path, O_WRONLY | O_CREAT | O_TRUNC);
      for (std::size_t k = 0; k < blocks; ++k) {
        pwrite_all(file.fd, data.get(), kPiece, k * kPiece);
        ::sync_file_range(file.fd, static_cast<off_t>(k * kPiece), kPiece, SYNC_FILE_RANGE_WRITE);
      }
      ::fsync(file.fd);
    }
    probe.add("write", 1, blocks * kPiece, seconds_since(start));
  }
  ::unlink(path);
  return probe.finish();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "memory") return memory(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024);
  if (what == "mapped" && argc > 2) return mapped(argv[2]);
  if (what == "inplace" && argc > 2) return mapped_add(argv[2]);
  if (what == "fold" && argc > 2) return fold(argv[2]);
  if (what == "select" && argc > 5) {
    std::vector<std::size_t> cols;
    for (int i = 5; i < argc; ++i) cols.push_back(std::strtoull(argv[i], nullptr, 10));
    return select(argv[2], std::strtoull(argv[3], nullptr, 10), std::strtoull(argv[4], nullptr, 10), cols);
  }
  if (what == "read" && argc > 2) return direct_read(argv[2]);
  if (what == "write" && argc > 3) return direct_write(argv[2], std::strtoull(argv[3], nullptr, 10));
  std::fprintf(stderr,
               "usage: ooc_probe memory [MiB] | mapped FILE | fold FILE | select FILE NCOLS STEP COL... | inplace FILE | read FILE "
               "| write FILE BYTES\n");
  return 2;
}
