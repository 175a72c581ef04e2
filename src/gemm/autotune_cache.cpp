#include "gemm/autotune_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace quack::detail {

namespace {

bool read_file(const std::string& path, std::map<std::string, std::string>* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::string line;
  while (std::getline(f, line)) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) continue;  // skip malformed lines
    (*out)[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return true;
}

// mkdir -p of the file's folder.
bool make_parent(const std::string& path) {
  for (size_t pos = 1; (pos = path.find('/', pos)) != std::string::npos; ++pos) {
    const std::string dir = path.substr(0, pos);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

long long pow2_ceil(long long v) {
  long long p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

AutotuneCache::AutotuneCache(std::string path) : path_(std::move(path)) {}

std::string AutotuneCache::default_path() {
  if (const char* d = std::getenv("QUACK_CACHE_DIR"); d && *d)
    return std::string(d) + "/gemm_autotune.tsv";
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) base = x;
  else if (const char* h = std::getenv("HOME"); h && *h) base = std::string(h) + "/.cache";
  else base = "/tmp";
  return base + "/quack_cpp/gemm_autotune.tsv";
}

void AutotuneCache::load_locked() {
  if (loaded_) return;
  loaded_ = true;
  read_file(path_, &entries_);  // a missing file is an empty cache
}

std::optional<std::string> AutotuneCache::lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  load_locked();
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void AutotuneCache::store(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  load_locked();
  entries_[key] = value;
  if (!make_parent(path_)) {
    error_ = "cannot create the folder of " + path_ + ": " + std::strerror(errno);
    return;
  }
  const std::string lock_path = path_ + ".lock";
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    error_ = "cannot lock " + lock_path + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return;
  }
  // The file as it is now (other processes' entries; lines deleted by hand stay deleted) plus
  // this one entry: the rest of this process's map is not written back.
  std::map<std::string, std::string> merged;
  read_file(path_, &merged);
  merged[key] = value;
  const std::string tmp = path_ + ".tmp." + std::to_string(getpid());
  bool wrote = false;
  {
    std::ofstream f(tmp, std::ios::trunc);
    for (const auto& [k, v] : merged) f << k << '\t' << v << '\n';
    f.flush();
    wrote = static_cast<bool>(f);
  }
  if (!wrote) {
    error_ = "cannot write " + tmp;
    std::remove(tmp.c_str());
  } else if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    error_ = "cannot rename " + tmp + " to " + path_ + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
  } else {
    // Other processes' entries join this process's map; none of this map's is dropped (one
    // whose earlier write failed would be tuned again).
    for (auto& [k, v] : merged) entries_[k] = std::move(v);
  }
  flock(fd, LOCK_UN);
  close(fd);
}

std::string AutotuneCache::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::string autotune_key(int cc, int sms, long long M, long long N, long long K, long long L,
                         const std::string& dtypes, const std::string& majors,
                         const std::string& epilogue) {
  return "sm" + std::to_string(cc) + " sms" + std::to_string(sms) + " m" + std::to_string(pow2_ceil(M)) + " n" + std::to_string(pow2_ceil(N)) + " k" +
         std::to_string(pow2_ceil(K)) + " l" + std::to_string(L) + " " + dtypes + " " + majors +
         " epi:" + epilogue;
}

}  // namespace quack::detail
