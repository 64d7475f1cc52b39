#include "core/pending_output.hpp"

#include "format/hdf5.hpp"
#include "format/hdf5/rollback.hpp"
#include "format/zarr.hpp"
#include "ooc/error.hpp"
#include "os/file.hpp"

#include <utility>

namespace ooc::detail {

PendingOutput::PendingOutput(std::filesystem::path temp_file, std::function<void()> publish,
                             std::function<void()> discard)
    : temp_file_(std::move(temp_file)), publish_(std::move(publish)), discard_(std::move(discard)) {}

PendingOutput PendingOutput::new_file(std::filesystem::path temp, std::string final_path) {
  return PendingOutput(
      temp,
      [temp, final_path] { os::publish_file(temp, final_path, final_path); },
      [temp] { std::filesystem::remove(temp); });
}

PendingOutput PendingOutput::new_directory(std::filesystem::path temp, std::filesystem::path final_path,
                                            std::string shown) {
  return PendingOutput(
      {},
      [temp, final_path, shown] { zarr::publish_directory(temp, final_path, shown); },
      [temp] { zarr::remove_tree(temp); });
}

PendingOutput PendingOutput::hidden_dataset(std::string file, std::string temp, std::string final_name,
                                            bool overwrite, std::shared_ptr<hdf5::Rollback> transaction) {
  return PendingOutput(
      {},
      [file, temp, final_name, overwrite, transaction] {
        try {
          hdf5::move_dataset(file, temp, final_name, overwrite);
        } catch (const Error& e) {
          transaction->roll_back();
          throw Error(e.path(), e.problem() + "; the file was put back as it was, nothing was written", e.kind());
        }
        transaction->commit();  // fsync, then the journal's removal, durable: the commit point
      },
      [transaction] { transaction->roll_back(); });
}

PendingOutput::PendingOutput(PendingOutput&& other) noexcept
    : temp_file_(std::exchange(other.temp_file_, {})),
      publish_(std::exchange(other.publish_, nullptr)),
      discard_(std::exchange(other.discard_, nullptr)) {}

PendingOutput& PendingOutput::operator=(PendingOutput&& other) noexcept {
  if (this != &other) {
    discard();
    temp_file_ = std::exchange(other.temp_file_, {});
    publish_ = std::exchange(other.publish_, nullptr);
    discard_ = std::exchange(other.discard_, nullptr);
  }
  return *this;
}

void PendingOutput::publish() {
  if (!publish_) return;
  publish_();
  publish_ = nullptr;  // published: nothing left to discard
  discard_ = nullptr;
  temp_file_.clear();
}

void PendingOutput::discard() noexcept {
  if (!discard_) return;
  const std::function<void()> remove = std::exchange(discard_, nullptr);
  publish_ = nullptr;
  temp_file_.clear();
  try {
    remove();
  } catch (...) {
    // A destructor cannot report; what is left is a hidden temporary at worst.
  }
}

}  // namespace ooc::detail
