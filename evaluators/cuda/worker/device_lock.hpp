// kf::cuda::device_lock: keeps measurements on one GPU from overlapping across processes.
//
// Several workers may share a GPU (workers_per_device > 1, or two kforge runs on one machine). Their
// correctness checks may overlap one another, but a timed or profiled shape must have the GPU to itself:
// a concurrent kernel would inflate its time or pollute its counters. Each worker therefore holds an
// advisory file lock (flock) on a file named after the device's PCI bus id: shared while it checks,
// exclusive while it times or profiles. The kernel drops the lock when a worker dies or is killed, so a
// crashed or hung worker never blocks the others for longer than it occupies the GPU.
//
// Lock files live in $KFORGE_LOCK_DIR, else the system temporary folder. A lock that cannot be opened
// (a read-only folder) turns the guard into a no-op and says so once on stderr: measurement continues,
// as it did before locks existed, rather than failing.
#pragma once

#include <filesystem>
#include <string>

namespace kf::cuda {

class device_lock {
 public:
  /// `device_key`: a stable name of the physical device (its PCI bus id).
  explicit device_lock(const std::string& device_key);
  ~device_lock();
  device_lock(const device_lock&) = delete;
  device_lock& operator=(const device_lock&) = delete;

  /// Holds the lock (exclusive or shared) until destroyed. Blocks until granted.
  class guard {
   public:
    guard(device_lock& l, bool exclusive);
    ~guard();
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;

   private:
    device_lock& lock_;
  };

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace kf::cuda
