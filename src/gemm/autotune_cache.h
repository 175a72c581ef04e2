// Disk cache of autotuning choices: key -> config name, one "key<TAB>value" line each.
//
// Safe under concurrent processes: a writer takes an exclusive flock on "<path>.lock",
// re-reads the file, adds its one new entry, writes "<path>.tmp.<pid>" and renames it over the
// file (atomic on POSIX), so readers see either the old or the new whole file and no entry of
// another process is lost. Lookups are served from memory after the first read (and each
// store's re-read); a line deleted from the file by hand is not written back by a process that
// had read it, though that process may still use it. The path
// comes from the constructor, else $QUACK_CACHE_DIR/gemm_autotune.tsv, else
// $XDG_CACHE_HOME or ~/.cache + /quack_cpp/gemm_autotune.tsv. I/O failures never fail a GEMM:
// the cache then stays in memory and `last_error()` says why.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace quack::detail {

class AutotuneCache {
 public:
  explicit AutotuneCache(std::string path = default_path());

  /// The stored choice for key, if any (reads the file on first use).
  std::optional<std::string> lookup(const std::string& key);
  /// Stores key -> value in memory and on disk (added to the file's entries as they are now).
  void store(const std::string& key, const std::string& value);

  const std::string& path() const { return path_; }
  std::string last_error() const;

  static std::string default_path();

 private:
  void load_locked();
  std::string path_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> entries_;
  bool loaded_ = false;
  std::string error_;
};

/// Autotuning key: the device (compute capability cc = major · 10 + minor, SM count), shape
/// rounded up to powers of two, dtypes, majors with C's dtype ("-": C not read) and epilogue
/// (with output 1's dtype), as gemm_tune_key writes it, e.g.
/// "sm90 sms132 m8192 n8192 k4096 l1 bf16.bf16>bf16 A:k B:m C:- epi:lincomb"; majors end in
/// " io:plain" where C, D or D1 is out of TMA's reach (the epilogue's plain loads and stores).
/// Keys without the SM count or C's dtype (an older key format) are never matched, so those
/// problems are tuned again (both lines stay in the file; delete it to drop the stale ones).
std::string autotune_key(int cc, int sms, long long M, long long N, long long K, long long L,
                         const std::string& dtypes, const std::string& majors,
                         const std::string& epilogue);

}  // namespace quack::detail
