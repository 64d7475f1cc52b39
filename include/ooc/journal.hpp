#pragma once
/// InPlaceJournal: a run that rewrites an array in place, made restartable after a
/// crash, a kill -9 or a power cut, so that every tile is applied exactly once.

#include "ooc/mapped_array.hpp"
#include "ooc/pipeline.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ooc {

/// A journal beside an array being rewritten in place, ARRAY.ooc-journal. Before a
/// tile's kernel may write, the tile's original bytes are saved in the journal and
/// fsynced; once the tile is committed and flushed to disk, the journal records that
/// tiles up to it are done. Opening the journal again for the same command puts back the
/// original bytes of the tiles that may have been partly written (those saved but not
/// recorded done) and resumes after the last done tile, so a non-idempotent operation
/// (add-one) is applied to every element exactly once however often the run is stopped.
///
///   MappedArray a = map_file(path, Access::read_write);
///   auto journal = InPlaceJournal::open(a, "oocrun apply add-one --in-place", options);
///   transform(a, a, fn, options);   // options resume where a stopped run left off
///   a.commit();
///   journal->finish();              // removes the journal
class InPlaceJournal final : public TileJournal {
 public:
  /// Starts, or resumes, the run `command` on `array` (mapped read-write) and points
  /// `options` at the journal: options.journal, options.first_tile, and the tile size of
  /// the run that started it. Takes an exclusive lock on the array for as long as it is
  /// mapped. Throws ooc::Error when another run holds the array, when the disk has no room
  /// for the journal, or when the array has a journal for another command (the message
  /// says which command finishes that one).
  static std::unique_ptr<InPlaceJournal> open(MappedArray& array, const std::string& command,
                                              PipelineOptions& options);
  InPlaceJournal(const InPlaceJournal&) = delete;
  InPlaceJournal& operator=(const InPlaceJournal&) = delete;
  /// Removes the journal if no tile was written yet (the array is as it was); otherwise
  /// leaves it for the next run of the same command.
  ~InPlaceJournal() override;

  /// ARRAY.ooc-journal.
  const std::string& path() const;
  /// True when a journal from an earlier run was found and its partly written tiles put back.
  bool resumed() const;
  /// Tiles done by earlier runs, of tiles() in all (for a Zarr array: chunks, see unit()).
  std::size_t tiles_done_before() const;
  std::size_t tiles() const;
  /// What tiles() counts: "tiles", or "chunks" for a Zarr array, whose chunk files are
  /// replaced whole (each written beside its file, synced, renamed over it) and told done
  /// by their files' identities, which the journal keeps from before the run.
  const char* unit() const;
  /// Tiles recorded done by a durable record so far (done before included).
  std::size_t tiles_recorded() const;
  /// True when the journal stays after this object: tiles were written, or done before.
  bool kept() const;

  /// Waits until the tile's original bytes are durable in the journal (a writer thread
  /// saves tiles ahead, a batch per fdatasync).
  void before_write(const Tile& tile) override;
  /// Records the tile committed; the writer puts committed tiles on disk and records them
  /// done a batch at a time, so a stop may lose the record of the last few: a resumed run
  /// puts those back from the journal and applies them again, once.
  void after_commit(const Tile& tile) override;
  /// Puts every committed tile on disk and records it done, durably, before it returns.
  void checkpoint();
  /// Records every tile done (durably), clears the array's mark and removes the journal,
  /// then syncs its directory; call it after array.commit(). If that last sync fails, the
  /// journal is put back, finished, and the Error says the array holds the result: the
  /// same command then applies nothing and removes it.
  void finish();

 private:
  struct Impl;
  explicit InPlaceJournal(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Refuses to read an array that has an unfinished in-place run's journal, found through
/// the mark on its file from any of the file's names, or beside this name (its data is
/// partly rewritten; a finished journal is not refused) or that a run is rewriting in place right now: throws
/// ooc::Error saying which command finishes it. Otherwise takes a shared lock on the
/// file for as long as `array` is mapped, so that no in-place run starts under the reader.
void check_not_in_place(const MappedArray& array);

/// For an in-place run that keeps no journal (`oocrun apply --in-place --no-journal`): takes
/// the exclusive lock an in-place run holds, for as long as `array` is mapped, and refuses
/// an array that another run uses or that has an unfinished journaled run's journal beside
/// it (ooc::Error, naming the command that finishes it). A run without a journal that is
/// stopped half way leaves the array partly rewritten, as numpy's `a += 1` would.
void lock_for_in_place(const MappedArray& array);

/// Runs `run(array, options)` in place on `array` (mapped read-write) as the command
/// `command`, and commits the array. With `journaled` (the default) through an
/// InPlaceJournal: a run stopped half way is finished, exactly once per element, by the
/// same call (or command) again; `on_start`, when given, is told what the journal found
/// before the run starts. Without, under lock_for_in_place: each tile is written once, as
/// numpy's `a += 1`, and a stopped run leaves the array partly rewritten. An error or a
/// cancel is rethrown with the same kind, its problem saying what state the array is in
/// ("; the same run again finishes it (progress is kept in J)", "; the array is
/// unchanged", "; the array may be partly rewritten (the run keeps no journal, so it
/// cannot be resumed)"). Returns true when it resumed an interrupted run.
bool apply_in_place(MappedArray& array, const std::string& command, PipelineOptions options,
                    const std::function<void(MappedArray& array, const PipelineOptions& options)>& run,
                    bool journaled = true, const std::function<void(const InPlaceJournal& journal)>& on_start = {});

/// The journal's path for a new run on the array at `array_path`: ARRAY.ooc-journal, or
/// for an HDF5 dataset FILE%group%name.ooc-journal beside its file; beside the file a
/// symbolic link names, not beside the link. An existing journal is found first through
/// the mark on the array's file (the extended attribute user.ooc.journal, naming it while
/// it exists), so from every hard link of the file, wherever the run put it.
std::string journal_path(const std::string& array_path);

}  // namespace ooc
