// src/journal: an in-place run survives being stopped at any moment, and every tile is
// applied exactly once when it is run again.

#include "ooc/internal/pipeline.hpp"
#include "ooc/ooc.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <numeric>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

using ooc::testing::ScratchDir;

namespace {

constexpr std::int64_t kTile = ooc::kBlockElements;  // elements per tile in these tests
const std::string kCommand = "oocrun apply add-one --in-place";

void write_iota(const std::string& path, std::int64_t n) {
  ooc::MappedArray out = ooc::create_npy(path, ooc::dtype_of<double>, {n});
  auto v = out.writable_values<double>();
  std::iota(v.begin(), v.end(), 0.0);
  out.commit();
}

ooc::PipelineOptions options(int threads) {
  ooc::PipelineOptions o;
  o.threads = threads;
  o.tile_bytes = kTile * sizeof(double);
  return o;
}

std::vector<double> values(const std::string& path) {
  const ooc::MappedArray a = ooc::map_file(path);
  const auto v = a.values<double>();
  return {v.begin(), v.end()};
}

// Writes tile `t` of `a` as the add-one kernel would, `fraction` of it.
void add_one_to_tile(ooc::MappedArray& a, std::int64_t t, double fraction = 1.0) {
  auto v = a.writable_values<double>();
  const std::int64_t end = t * kTile + static_cast<std::int64_t>(fraction * kTile);
  for (std::int64_t i = t * kTile; i < end; ++i) v(i) += 1;
}

ooc::Tile tile(std::size_t t) {
  const auto i = static_cast<std::int64_t>(t);
  return {t, i * kTile, (i + 1) * kTile};
}

// An in-place run on the array at `path` with its journal open (resumed if there was one).
struct InPlace {
  InPlace(const std::string& path, int threads)
      : a(ooc::map_file(path, ooc::Access::read_write)), o(options(threads)),
        journal(ooc::InPlaceJournal::open(a, kCommand, o)) {}
  InPlace(const InPlace&) = delete;
  ooc::MappedArray a;  // the journal keeps its address: never moved
  ooc::PipelineOptions o;
  std::unique_ptr<ooc::InPlaceJournal> journal;
};

// A run stopped after tile 0 was committed and recorded done, with tile 1 half written
// and tile 2 written but not committed, as a kill -9 leaves it.
void stopped_run(const std::string& path) {
  InPlace run(path, 2);
  auto& [a, o, journal] = run;
  CHECK_FALSE(journal->resumed());
  CHECK(o.first_tile == 0);
  CHECK(o.journal == journal.get());
  journal->before_write(tile(0));
  add_one_to_tile(a, 0);
  journal->after_commit(tile(0));
  journal->checkpoint();  // its record durable (the writer records a batch at a time)
  journal->before_write(tile(1));
  journal->before_write(tile(2));
  add_one_to_tile(a, 2);
  add_one_to_tile(a, 1, 0.5);
  CHECK(journal->kept());
}  // the journal stays, as after a kill

// A run on one thread stopped before any tile was done: tile 0's bytes saved and
// `fraction` of it written, as a kill -9 leaves it.
void stopped_in_tile_0(const std::string& path, double fraction) {
  InPlace run(path, 1);
  auto& [a, o, journal] = run;
  journal->before_write(tile(0));
  add_one_to_tile(a, 0, fraction);
}

// Adds one to every element not done yet, commits, and removes the journal.
void add_one_to_the_end(ooc::MappedArray& a, ooc::InPlaceJournal& journal, const ooc::PipelineOptions& o) {
  ooc::transform_as<double>(a, a, [](const auto& x) { return x + 1; }, o);
  a.commit();
  journal.finish();
}

// A scratch directory holding a.npy = 0, 1, 2, ... of `n` float64.
struct Scratch {
  explicit Scratch(std::int64_t n) : path(dir.file("a.npy")) { write_iota(path, n); }
  ScratchDir dir;
  std::string path;
};

// Opening a journal for `command` on the array at `path` fails, saying `words`.
void check_open_refused(const std::string& path, const std::string& command, const std::string& words) {
  ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
  auto o = options(1);
  CHECK_THROWS_WITH_AS(ooc::InPlaceJournal::open(a, command, o), doctest::Contains(words.c_str()), ooc::Error);
}

}  // namespace

TEST_CASE("a run that finishes removes its journal and leaves nothing beside the array") {
  const Scratch scratch(5 * kTile + 3);
  const std::string& path = scratch.path;
  {
    InPlace run(path, 3);
    auto& [a, o, journal] = run;
    CHECK(std::filesystem::exists(journal->path()));
    CHECK(journal->path() == path + ".ooc-journal");
    CHECK(journal->tiles() == 6);
    add_one_to_the_end(a, *journal, o);
  }
  CHECK(scratch.dir.entries() == 1);
  const auto v = values(path);
  for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == static_cast<double>(i) + 1);
}

TEST_CASE("a journal that saw no tile written is removed when dropped: the array is as it was") {
  const Scratch scratch(3 * kTile);
  const std::string& path = scratch.path;
  {
    InPlace run(path, 1);
    auto& [a, o, journal] = run;
    CHECK_FALSE(journal->kept());
  }
  CHECK(scratch.dir.entries() == 1);
}

TEST_CASE("a stopped run resumes after its last committed tile, with partly written tiles put back") {
  const Scratch scratch(4 * kTile);
  const std::string& path = scratch.path;
  stopped_run(path);
  ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
  auto o = options(7);  // another thread count than the stopped run's: allowed
  o.tile_bytes = 1 << 20;  // and a different tile size is ignored: the plan is the journal's
  auto journal = ooc::InPlaceJournal::open(a, kCommand, o);
  CHECK(journal->resumed());
  CHECK(journal->tiles_done_before() == 1);
  CHECK(o.first_tile == 1);
  CHECK(o.tile_bytes == kTile * sizeof(double));
  const auto v = a.values<double>();
  CHECK(v(0) == 1);                              // committed: kept
  CHECK(v(kTile) == kTile);                      // half written: put back
  CHECK(v(2 * kTile + 5) == 2 * kTile + 5);      // written, not committed: put back
  add_one_to_the_end(a, *journal, o);
  for (std::int64_t i = 0; i < 4 * kTile; ++i) REQUIRE(v(i) == static_cast<double>(i) + 1);
  CHECK_FALSE(std::filesystem::exists(path + ".ooc-journal"));
}

TEST_CASE("committed tiles whose record was not yet written are put back and applied again, once") {
  // Group commit: the writer records committed tiles a batch at a time (4 tiles here),
  // so a stop can come after tiles were committed (and even put on disk) but before a
  // record says so. Their slots still hold their original bytes: a slot is reused only
  // once its tile is recorded done by a durable record.
  const Scratch scratch(8 * kTile);
  const std::string& path = scratch.path;
  {
    InPlace run(path, 1);
    auto& [a, o, journal] = run;
    for (std::size_t t = 0; t < 4; ++t) {
      journal->before_write(tile(t));
      add_one_to_tile(a, static_cast<std::int64_t>(t));
      journal->after_commit(tile(t));
      if (t == 0) journal->checkpoint();  // the first record (the writer makes it durable at once anyway)
    }
    a.commit();  // on disk, tiles 1 to 3 not recorded
    journal->before_write(tile(4));
    add_one_to_tile(a, 4, 0.25);
  }
  InPlace run(path, 2);
  auto& [a, o, journal] = run;
  CHECK(journal->resumed());
  CHECK(journal->tiles_done_before() == 1);
  const auto v = a.values<double>();
  CHECK(v(0) == 1);  // recorded: kept
  for (std::int64_t i = kTile; i < 8 * kTile; ++i) REQUIRE(v(i) == static_cast<double>(i));  // the rest put back
  add_one_to_the_end(a, *journal, o);
  for (std::int64_t i = 0; i < 8 * kTile; ++i) REQUIRE(v(i) == static_cast<double>(i) + 1);
}

TEST_CASE("the first committed tile is recorded done durably without a checkpoint") {
  // Until a durable record says a tile is done, only the tail tells an array made anew
  // from the stopped one; the writer makes the first record durable at once.
  const Scratch scratch(40 * kTile);
  const std::string& path = scratch.path;
  {
    InPlace run(path, 1);
    auto& [a, o, journal] = run;
    journal->before_write(tile(0));
    add_one_to_tile(a, 0);
    journal->after_commit(tile(0));
    for (int i = 0; i < 2000 && journal->tiles_recorded() == 0; ++i)  // the writer threads take a moment
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(journal->tiles_recorded() == 1);
  }
  ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
  auto o = options(1);
  auto journal = ooc::InPlaceJournal::open(a, kCommand, o);
  CHECK(journal->tiles_done_before() == 1);
}

TEST_CASE("a checkpoint records every committed tile done: a resumed run starts after them") {
  const Scratch scratch(6 * kTile);
  const std::string& path = scratch.path;
  {
    InPlace run(path, 1);
    auto& [a, o, journal] = run;
    for (std::size_t t = 0; t < 3; ++t) {
      journal->before_write(tile(t));
      add_one_to_tile(a, static_cast<std::int64_t>(t));
      journal->after_commit(tile(t));
    }
    journal->checkpoint();
    journal->before_write(tile(3));
    add_one_to_tile(a, 3, 0.25);
  }
  InPlace run(path, 2);
  auto& [a, o, journal] = run;
  CHECK(journal->tiles_done_before() == 3);
  const auto v = a.values<double>();
  CHECK(v(2 * kTile) == 2 * kTile + 1);  // done: kept
  CHECK(v(3 * kTile) == 3 * kTile);      // partly written: put back
  add_one_to_the_end(a, *journal, o);
  for (std::int64_t i = 0; i < 6 * kTile; ++i) REQUIRE(v(i) == static_cast<double>(i) + 1);
}

TEST_CASE("a tile whose save was torn is left alone: its kernel never ran") {
  const Scratch scratch(3 * kTile);
  const std::string& path = scratch.path;
  stopped_in_tile_0(path, 0.0);
  // Scribble over the saved bytes of tile 0 (slot 0's data starts at 8192 + 4096, the
  // tile's bytes at their offset within a 4 KiB block of the array's file).
  const auto skew = static_cast<off_t>(ooc::map_file(path).info().data_offset % 4096);
  const int fd = ::open((path + ".ooc-journal").c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  const char junk[16] = "not the tile";
  REQUIRE(::pwrite(fd, junk, sizeof junk, 8192 + 4096 + skew + 64) == sizeof junk);
  ::close(fd);
  InPlace run(path, 1);
  auto& [a, o, journal] = run;
  CHECK(journal->resumed());
  const auto v = a.values<double>();
  for (std::int64_t i = 0; i < 3 * kTile; ++i) REQUIRE(v(i) == static_cast<double>(i));
}

TEST_CASE("a stop in the middle of a pipeline run is finished exactly once by the next") {
  ScratchDir dir;
  const std::string path = dir.file("a.npy");
  const std::int64_t n = 40 * kTile + 17;
  write_iota(path, n);
  // Each run stops half way through tile `stop_at`, with tiles around it in flight;
  // the next resumes where it left off.
  for (std::size_t stop_at : {0, 1, 13, 39, 40}) {
    CAPTURE(stop_at);
    InPlace run(path, 7);
    auto& [a, o, journal] = run;
    auto* data = a.writable_values<double>().data();
    ooc::TilePlan plan = ooc::TilePlan::for_array(a, o.tile_bytes);
    ooc::detail::Streams streams(plan, o);
    streams.add_output(a);
    CHECK_THROWS_WITH(ooc::detail::run_pipeline(
                          plan, streams, o,
                          [&](const ooc::Tile& t) {
                            const std::int64_t end = t.index == stop_at ? t.begin + t.size() / 2 : t.end;
                            for (std::int64_t i = t.begin; i < end; ++i) data[i] += 1;
                            if (t.index == stop_at) throw std::runtime_error("stopped");
                            return 0;
                          },
                          [](const ooc::Tile&, int&&) {}),
                      "stopped");
  }
  {
    InPlace run(path, 2);
    auto& [a, o, journal] = run;
    CHECK(journal->resumed());
    add_one_to_the_end(a, *journal, o);
  }
  const auto v = values(path);
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(v[static_cast<std::size_t>(i)] == static_cast<double>(i) + 1);
}

TEST_CASE("another command on a journalled array is refused, naming the command that finishes it") {
  const Scratch scratch(4 * kTile);
  const std::string& path = scratch.path;
  stopped_run(path);
  const auto before = values(path);
  check_open_refused(path, "oocrun apply add:2 --in-place",
                     "finish it by running `oocrun apply add-one --in-place " + path + "` again");
  {
    const ooc::MappedArray a = ooc::map_file(path);
    CHECK_THROWS_WITH_AS(ooc::check_not_in_place(a), doctest::Contains("did not finish"), ooc::Error);
    CHECK_THROWS_WITH_AS(ooc::check_not_in_place(a), doctest::Contains(("oocrun apply add-one --in-place " + path).c_str()),
                         ooc::Error);
  }
  CHECK(values(path) == before);  // refusing touched nothing
}

TEST_CASE("a journal for another file is refused: an array replaced since is not resumed") {
  const Scratch scratch(4 * kTile);
  const std::string& path = scratch.path;
  stopped_run(path);
  write_iota(scratch.dir.file("b.npy"), 4 * kTile);
  std::filesystem::rename(scratch.dir.file("b.npy"), path);  // a fresh copy, a new inode
  check_open_refused(path, kCommand, "belongs to another file");
}

namespace {

// Every element of the array at `path` set to `value`, in the same file (as np.save over
// an existing file does: the inode stays).
void make_anew(const std::string& path, double value) {
  ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
  for (double& x : a.writable_values<double>()) x = value;
  a.commit();
}

}  // namespace

TEST_CASE("an array made anew in the same file since the run stopped is not resumed") {
  const Scratch scratch(40 * kTile);
  const std::string& path = scratch.path;
  SUBCASE("after a done tile: its bytes are not the ones committed") {
    stopped_run(path);
  }
  SUBCASE("after a done tile of 1 MiB, which is checked in pieces, near the end: no tail to check") {
    ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
    auto o = options(1);
    o.tile_bytes = 16 * kTile * sizeof(double);
    auto journal = ooc::InPlaceJournal::open(a, kCommand, o);
    const ooc::TilePlan plan = ooc::TilePlan::for_array(a, o.tile_bytes);
    REQUIRE(plan.size() == 3);
    journal->before_write(plan[0]);
    for (std::int64_t i = plan[0].begin; i < plan[0].end; ++i) a.writable_values<double>()(i) += 1;
    journal->after_commit(plan[0]);
    journal->checkpoint();
    journal->before_write(plan[1]);
  }
  SUBCASE("before any tile was done: the tail the run had not reached is not the one it found") {
    stopped_in_tile_0(path, 0.5);
  }
  make_anew(path, 100.0);
  check_open_refused(path, kCommand, "are not the ones the unfinished in-place run left");
  for (double x : values(path)) REQUIRE(x == 100.0);  // refusing touched nothing
  CHECK(std::filesystem::exists(path + ".ooc-journal"));
  {
    const ooc::MappedArray a = ooc::map_file(path);
    CHECK_THROWS_WITH_AS(ooc::check_not_in_place(a), doctest::Contains("made anew since, remove the journal"), ooc::Error);
  }
  std::filesystem::remove(path + ".ooc-journal");  // what the message asks for
  InPlace run(path, 2);
  auto& [a, o, journal] = run;
  CHECK_FALSE(journal->resumed());
  add_one_to_the_end(a, *journal, o);
  for (double x : values(path)) REQUIRE(x == 101.0);
}

TEST_CASE("until a tile is recorded done, tiles are saved no further ahead than the tiles in flight and a batch") {
  // Before a durable record says a tile is done, the array's tail is all that tells an
  // array made anew from the stopped one, and it is checked only where no saved tile
  // (whose kernel may have run) reaches it. Later the writer saves two batches ahead.
  // 24 tiles: the tail (the last 1 MiB, 16 tiles) starts at tile 8; 2 threads: 4 tiles
  // in flight and a batch of 4 reach it, 4 more would.
  const Scratch scratch(24 * kTile);
  const std::string& path = scratch.path;
  {
    InPlace run(path, 2);
    auto& [a, o, journal] = run;
    journal->before_write(tile(0));
    add_one_to_tile(a, 0, 0.5);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the writer saves what it will
  }
  make_anew(path, 100.0);
  check_open_refused(path, kCommand, "are not the ones the unfinished in-place run left");
  for (double x : values(path)) REQUIRE(x == 100.0);
}

TEST_CASE("the same array made again with the same bytes is resumed: the saved tiles are its own") {
  const Scratch scratch(40 * kTile);
  const std::string& path = scratch.path;
  stopped_in_tile_0(path, 0.5);
  {  // the same values again, into the same inode
    ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
    auto v = a.writable_values<double>();
    std::iota(v.begin(), v.end(), 0.0);
    a.commit();
  }
  InPlace run(path, 2);
  auto& [a, o, journal] = run;
  CHECK(journal->resumed());
  add_one_to_the_end(a, *journal, o);
  const auto v = values(path);
  for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == static_cast<double>(i) + 1);
}

TEST_CASE("a journal has a slot per tile that may be in flight and 4 batches more, no more than the array has tiles") {
  {
    const Scratch scratch(kTile);  // one tile
    InPlace run(scratch.path, 8);
    auto& [a, o, journal] = run;
    // the header block, the progress block, and one slot: a header block and the tile
    // (from its offset within a 4 KiB block of the array's file on: a block more)
    CHECK(std::filesystem::file_size(journal->path()) == 3 * 4096 + kTile * sizeof(double) + 4096);
  }
  {
    const Scratch scratch(40 * kTile);
    InPlace run(scratch.path, 2);  // 4 tiles in flight; batches of 4 tiles (64 KiB tiles)
    auto& [a, o, journal] = run;
    CHECK(std::filesystem::file_size(journal->path()) == 2 * 4096 + 20 * (2 * 4096 + kTile * sizeof(double)));
  }
}

TEST_CASE("an array held by one run is refused to another: in place against in place, and against readers") {
  const Scratch scratch(2 * kTile);
  const std::string& path = scratch.path;
  {
    const InPlace holder(path, 1);
    check_open_refused(path, kCommand, "in use by another run");
    const ooc::MappedArray reader = ooc::map_file(path);
    CHECK_THROWS_WITH_AS(ooc::check_not_in_place(reader), doctest::Contains("being rewritten in place"), ooc::Error);
  }
  const ooc::MappedArray reader = ooc::map_file(path);
  ooc::check_not_in_place(reader);  // now free, and held shared by the reader
  check_open_refused(path, kCommand, "in use by another run");
}

TEST_CASE("an in-place run without a journal locks the array as one with a journal does") {
  const Scratch scratch(2 * kTile);
  const std::string& path = scratch.path;
  {
    const ooc::MappedArray holder = ooc::map_file(path, ooc::Access::read_write);
    ooc::lock_for_in_place(holder);
    check_open_refused(path, kCommand, "in use by another run");
    const ooc::MappedArray reader = ooc::map_file(path);
    CHECK_THROWS_WITH_AS(ooc::check_not_in_place(reader), doctest::Contains("being rewritten in place"), ooc::Error);
  }
  const ooc::MappedArray reader = ooc::map_file(path);
  ooc::check_not_in_place(reader);
  const ooc::MappedArray writer = ooc::map_file(path, ooc::Access::read_write);
  CHECK_THROWS_WITH_AS(ooc::lock_for_in_place(writer), doctest::Contains("in use by another run"), ooc::Error);
}

TEST_CASE("an in-place run without a journal is refused on an array with an unfinished journal") {
  const Scratch scratch(4 * kTile);
  const std::string& path = scratch.path;
  stopped_run(path);
  const ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
  CHECK_THROWS_WITH_AS(ooc::lock_for_in_place(a), doctest::Contains(("oocrun apply add-one --in-place " + path).c_str()),
                       ooc::Error);
}

TEST_CASE("stale temporaries of a journal cut short while being created are removed") {
  const Scratch scratch(kTile);
  const std::string& path = scratch.path;
  std::ofstream(scratch.dir.file(".a.npy.ooc-journal.ooc-0123456789abcdef")) << "half a journal";
  std::ofstream(scratch.dir.file(".a.npy.ooc-0123456789abcdef")) << "another run's output: not ours";
  const InPlace run(path, 1);
  CHECK_FALSE(std::filesystem::exists(scratch.dir.file(".a.npy.ooc-journal.ooc-0123456789abcdef")));
  CHECK(std::filesystem::exists(scratch.dir.file(".a.npy.ooc-0123456789abcdef")));
}

TEST_CASE("a damaged journal is an error, not a guess") {
  const Scratch scratch(kTile);
  const std::string& path = scratch.path;
  std::ofstream(path + ".ooc-journal") << "garbage";
  check_open_refused(path, kCommand, "journal is damaged");
}

TEST_CASE("a run started through a symbolic link is resumed through the file's own name, and the other way") {
  const Scratch scratch(4 * kTile);
  const std::string link = scratch.dir.file("link.npy");
  std::filesystem::create_symlink(scratch.path, link);
  stopped_run(link);
  CHECK(std::filesystem::exists(scratch.path + ".ooc-journal"));  // beside the file, not the link
  CHECK(ooc::journal_path(link) == ooc::journal_path(scratch.path));
  {
    const ooc::MappedArray reader = ooc::map_file(link);
    CHECK_THROWS_WITH_AS(ooc::check_not_in_place(reader), doctest::Contains("did not finish"), ooc::Error);
  }
  {
    InPlace run(scratch.path, 2);
    auto& [a, o, journal] = run;
    CHECK(journal->resumed());
    add_one_to_the_end(a, *journal, o);
  }
  const auto v = values(scratch.path);
  for (std::int64_t i = 0; i < 4 * kTile; ++i) REQUIRE(v[static_cast<std::size_t>(i)] == static_cast<double>(i) + 1);
}

namespace {

// Whether the file at `path` carries the mark of an unfinished in-place run (an extended
// attribute naming its journal).
bool marked(const std::string& path) { return ::getxattr(path.c_str(), "user.ooc.journal", nullptr, 0) > 0; }

}  // namespace

TEST_CASE("a stopped run is found from every hard link of its file, in another directory too, and resumed once") {
  const Scratch scratch(4 * kTile);
  ScratchDir elsewhere;
  const std::string same_dir = scratch.dir.file("b.npy");
  const std::string other_dir = elsewhere.file("c.npy");
  stopped_run(scratch.path);
  CHECK(marked(scratch.path));
  std::filesystem::create_hard_link(scratch.path, same_dir);  // links made after the stop
  std::filesystem::create_hard_link(scratch.path, other_dir);
  for (const std::string& name : {same_dir, other_dir}) {
    {
      const ooc::MappedArray reader = ooc::map_file(name);
      CHECK_THROWS_WITH_AS(ooc::check_not_in_place(reader), doctest::Contains("did not finish"), ooc::Error);
    }
    {
      const ooc::MappedArray writer = ooc::map_file(name, ooc::Access::read_write);
      CHECK_THROWS_WITH_AS(ooc::lock_for_in_place(writer), doctest::Contains("did not finish"), ooc::Error);
    }
    check_open_refused(name, "oocrun apply add:2 --in-place", "did not finish");
  }
  {
    InPlace run(other_dir, 2);
    auto& [a, o, journal] = run;
    CHECK(journal->resumed());
    CHECK(journal->tiles_done_before() == 1);
    CHECK(std::filesystem::equivalent(journal->path(), scratch.path + ".ooc-journal"));
    add_one_to_the_end(a, *journal, o);
  }
  CHECK_FALSE(marked(scratch.path));
  CHECK_FALSE(std::filesystem::exists(scratch.path + ".ooc-journal"));
  const auto v = values(same_dir);
  for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == static_cast<double>(i) + 1);
}

TEST_CASE("the mark lives as long as the journal: set before a tile is written, cleared before it goes") {
  const Scratch scratch(2 * kTile);
  {
    InPlace run(scratch.path, 1);
    CHECK(marked(scratch.path));
  }  // no tile written: the journal and the mark go
  CHECK_FALSE(marked(scratch.path));
  CHECK(scratch.dir.entries() == 1);
  {
    InPlace run(scratch.path, 1);
    auto& [a, o, journal] = run;
    add_one_to_the_end(a, *journal, o);
    CHECK_FALSE(marked(scratch.path));
  }
  // A mark whose journal is gone (removed by hand, as messages allow) is stale: ignored.
  std::filesystem::remove(scratch.path + ".ooc-journal");
  const std::string stale = scratch.dir.file("gone.ooc-journal");
  REQUIRE(::setxattr(scratch.path.c_str(), "user.ooc.journal", stale.data(), stale.size(), 0) == 0);
  const ooc::MappedArray reader = ooc::map_file(scratch.path);
  ooc::check_not_in_place(reader);
}

TEST_CASE("a finished journal whose removal was lost applies nothing: the same command removes it, readers read") {
  // Every tile committed and recorded done, the journal not removed: what a crash (or a
  // failed sync of the directory) after the last record leaves.
  const Scratch scratch(3 * kTile);
  const std::string& path = scratch.path;
  auto finished_but_kept = [&] {
    InPlace run(path, 2);
    auto& [a, o, journal] = run;
    ooc::transform_as<double>(a, a, [](const auto& x) { return x + 1; }, o);
    a.commit();
    journal->checkpoint();
    CHECK(journal->tiles_recorded() == 3);
  };  // dropped without finish(): the journal stays
  finished_but_kept();
  REQUIRE(std::filesystem::exists(path + ".ooc-journal"));
  {
    const ooc::MappedArray reader = ooc::map_file(path);
    ooc::check_not_in_place(reader);  // the array is whole
  }
  SUBCASE("the same command") {
    {
      InPlace run(path, 1);
      auto& [a, o, journal] = run;
      CHECK(journal->resumed());
      CHECK(journal->tiles_done_before() == 3);
      add_one_to_the_end(a, *journal, o);
    }
    const auto v = values(path);
    for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == static_cast<double>(i) + 1);
  }
  SUBCASE("another command starts afresh") {
    {
      ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
      auto o = options(1);
      auto journal = ooc::InPlaceJournal::open(a, "oocrun apply add:2 --in-place", o);
      CHECK_FALSE(journal->resumed());
      ooc::transform_as<double>(a, a, [](const auto& x) { return x + 2; }, o);
      a.commit();
      journal->finish();
    }
    const auto v = values(path);
    for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == static_cast<double>(i) + 3);
  }
  CHECK(scratch.dir.entries() == 1);
}

// An apply_in_place run of add-one that cancels itself once `stop` elements are done.
auto add_one_until(std::int64_t stop) {
  return [stop](ooc::MappedArray& a, const ooc::PipelineOptions& o) {
    ooc::PipelineOptions until = o;
    std::atomic<bool> cancel{false};
    until.cancel = &cancel;
    until.on_progress = [&](const ooc::Progress& p) {
      if (static_cast<std::int64_t>(p.elements_done) >= stop) cancel = true;
    };
    ooc::transform_as<double>(a, a, [](const auto& x) { return x + 1.0; }, until);
  };
}

TEST_CASE("apply_in_place: a stopped run says the journal keeps its progress; the same call resumes it once") {
  ScratchDir dir;
  const std::string path = dir.file("a.npy");
  const std::int64_t n = 20 * kTile + 3;
  write_iota(path, n);
  {
    ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
    CHECK_THROWS_WITH_AS(ooc::apply_in_place(a, kCommand, options(3), add_one_until(5 * kTile)),
                         doctest::Contains("the same run again finishes it (progress is kept in "),
                         ooc::Cancelled);
  }
  bool told = false;
  {
    ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
    const bool resumed = ooc::apply_in_place(a, kCommand, options(2), add_one_until(n + 1), true,
                                             [&](const ooc::InPlaceJournal& journal) {
                                               told = true;
                                               CHECK(journal.tiles_done_before() > 0);
                                             });
    CHECK(resumed);
  }
  CHECK(told);
  const auto v = values(path);
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(v[static_cast<std::size_t>(i)] == static_cast<double>(i) + 1);
  CHECK_FALSE(std::filesystem::exists(path + ".ooc-journal"));
}

TEST_CASE("apply_in_place on an uncompressed Zarr array: chunks replaced whole, a stopped run resumed once") {
  ScratchDir dir;
  const std::string source = dir.file("a.npy"), path = dir.file("a.zarr");
  const std::int64_t n = 20 * kTile + 3;
  write_iota(source, n);
  {
    ooc::Compression none;
    none.codec = "none";
    none.chunk_rows = 3000;  // tiles of kTile elements cut chunks: gathered, then replaced
    const ooc::MappedArray in = ooc::map_file(source);
    ooc::MappedArray out = ooc::create_zarr(path, ooc::dtype_of<double>, {n}, ooc::Order::c, none);
    ooc::transform_as<double>(in, out, [](const auto& x) { return x; }, options(2));
    out.commit();
  }
  {
    ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
    CHECK_THROWS_WITH_AS(ooc::apply_in_place(a, kCommand, options(2), add_one_until(8 * kTile)),
                         doctest::Contains("the same run again finishes it (progress is kept in "), ooc::Cancelled);
  }
  CHECK_THROWS_WITH_AS(ooc::check_not_in_place(ooc::map_file(path)),
                       doctest::Contains(("finish it by running `" + kCommand + " " + path + "` again").c_str()), ooc::Error);
  {
    ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
    const bool resumed = ooc::apply_in_place(a, kCommand, options(3), add_one_until(n + 1), true,
                                             [](const ooc::InPlaceJournal& journal) {
                                               CHECK(std::string(journal.unit()) == "chunks");
                                               CHECK(journal.tiles() == 55);  // chunks of 3000 elements
                                               CHECK(journal.tiles_done_before() > 0);
                                               CHECK(journal.tiles_done_before() < 55);
                                             });
    CHECK(resumed);
  }
  std::vector<double> v(static_cast<std::size_t>(n));
  {
    const ooc::MappedArray back = ooc::map_file(path);
    ooc::check_not_in_place(back);
    ooc::read(back, {0, n}, std::as_writable_bytes(std::span(v)));
  }
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(v[static_cast<std::size_t>(i)] == static_cast<double>(i) + 1);
  CHECK_FALSE(std::filesystem::exists(path + ".ooc-journal"));
}

TEST_CASE("apply_in_place without a journal says the array may be partly rewritten") {
  ScratchDir dir;
  const std::string path = dir.file("a.npy");
  write_iota(path, 4 * kTile);
  ooc::MappedArray a = ooc::map_file(path, ooc::Access::read_write);
  CHECK_THROWS_WITH_AS(ooc::apply_in_place(
                           a, kCommand, options(1),
                           [](ooc::MappedArray&, const ooc::PipelineOptions&) { throw ooc::Error("x.npy", "disk gone"); },
                           false),
                       "x.npy: disk gone; the array may be partly rewritten (the run keeps no journal, so it cannot "
                       "be resumed)",
                       ooc::Error);
}

TEST_CASE("ooc::read copies any element range; for_each_block commits results in tile order") {
  ScratchDir dir;
  const std::string path = dir.file("a.npy");
  const std::int64_t n = 10 * kTile + 5;
  write_iota(path, n);
  const ooc::MappedArray a = ooc::map_file(path);
  for (const auto& range : {std::pair<std::int64_t, std::int64_t>{0, n}, {3, 4}, {kTile - 1, 3 * kTile + 2}, {n, n}}) {
    // Plain variables, not a structured binding: clang refuses to capture one in CAPTURE's lambda.
    const std::int64_t begin = range.first, end = range.second;
    CAPTURE(begin);
    std::vector<double> into(static_cast<std::size_t>(end - begin));
    ooc::read(a, {begin, end}, std::as_writable_bytes(std::span(into)), options(3));
    for (std::int64_t i = begin; i < end; ++i) REQUIRE(into[static_cast<std::size_t>(i - begin)] == double(i));
  }
  std::vector<double> small(2);
  CHECK_THROWS_AS(ooc::read(a, {0, 3}, std::as_writable_bytes(std::span(small))), ooc::UsageError);

  const ooc::MappedArray* inputs[] = {&a};
  std::vector<std::size_t> order;
  double total = 0;
  ooc::for_each_block(
      inputs, nullptr, ooc::TilePlan::for_array(a, kTile * sizeof(double)), options(4),
      [](const ooc::Block& block) {
        const auto* x = reinterpret_cast<const double*>(block.inputs[0]);
        return std::accumulate(x, x + block.tile.size(), 0.0);
      },
      [&](const ooc::Tile& tile, double&& sum) {
        order.push_back(tile.index);
        total += sum;
      });
  CHECK(order.size() == 11);
  CHECK(std::is_sorted(order.begin(), order.end()));
  CHECK(total == static_cast<double>(n) * static_cast<double>(n - 1) / 2);
}
