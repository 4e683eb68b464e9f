#include "evaluators/cuda/worker/device_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kf::cuda {

device_lock::device_lock(const std::string& device_key) {
  std::string name = "kforge-gpu-";
  for (char c : device_key)
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  const char* dir = std::getenv("KFORGE_LOCK_DIR");
  std::error_code ec;
  path_ = (dir && *dir ? std::filesystem::path(dir) : std::filesystem::temp_directory_path(ec)) /
          (name + ".lock");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0)
    std::fprintf(stderr,
                 "kforge-worker: cannot open the device lock %s (%s): measurements are not isolated "
                 "from other processes on this GPU\n",
                 path_.c_str(), std::strerror(errno));
}

device_lock::~device_lock() {
  if (fd_ >= 0) ::close(fd_);
}

device_lock::guard::guard(device_lock& l, bool exclusive) : lock_(l) {
  if (lock_.fd_ < 0) return;
  while (::flock(lock_.fd_, exclusive ? LOCK_EX : LOCK_SH) != 0 && errno == EINTR) {
  }
}

device_lock::guard::~guard() {
  if (lock_.fd_ >= 0) ::flock(lock_.fd_, LOCK_UN);
}

}  // namespace kf::cuda
