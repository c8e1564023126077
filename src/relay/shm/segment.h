#pragma once
// POSIX shared-memory segments of the shm relay: an RAII mapping, the naming scheme that tags
// every segment with its instance and owner pid, and removal of segments whose owner died.
//
// Names: "/omnirt.<instance>.<pid>.<relay>.<serial>", where <instance> is the basename of the
// runtime directory (or "default"), <pid> the creating process, <relay> the sanitized relay
// name and <serial> a per-process counter. Fields never contain '.', so a name parses back.
//
// Thread safety: free functions may be called from any thread. A Segment may be shared between
// threads; unlink() is idempotent and thread-safe.
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace omnirt::relay::shm {

inline constexpr std::string_view kShmDirectory = "/dev/shm";
inline constexpr std::size_t kPageBytes = 4096;

struct SegmentName {
    std::string instance;
    pid_t pid = 0;
    std::string relay;
    std::uint64_t serial = 0;
};

// Characters outside [A-Za-z0-9_-] become '_'; at most 48 characters; `fallback` when empty.
[[nodiscard]] std::string sanitize_name_part(std::string_view text, std::string_view fallback);
// The instance tag of `runtime_dir`: its sanitized basename, or "default" when empty.
[[nodiscard]] std::string instance_tag(std::string_view runtime_dir);
// "/omnirt.<instance>.<pid>.<relay>.<serial>" (fields must already be sanitized).
[[nodiscard]] std::string format_segment_name(const SegmentName& name);
// Parses a name with or without the leading '/'; nullopt for names not in the scheme.
[[nodiscard]] std::optional<SegmentName> parse_segment_name(std::string_view name);
// A process-wide unique serial for the next segment name.
[[nodiscard]] std::uint64_t next_segment_serial();
// 62 random bits (so that it fits a non-negative int64 in metadata): pool and segment ids.
[[nodiscard]] std::uint64_t random_id();

// getpid() without a system call after the first: cached, and forgotten in a forked child. The
// hot path uses it (a system call right after a large memory sweep costs microseconds).
[[nodiscard]] pid_t current_pid();

// False only when no process with `pid` exists (kill(pid, 0) fails with ESRCH). Processes of
// other users count as alive.
[[nodiscard]] bool process_alive(pid_t pid);

// Unlinks every omnirt segment in /dev/shm whose owner pid no longer exists, restricted to
// `instance` unless it is empty. Segments of live processes are never touched. Mappings that
// other processes still hold stay valid. unavailable when /dev/shm cannot be listed.
[[nodiscard]] Status remove_stale_segments(std::string_view instance_or_empty);
// Unlinks the segments of `pid` (any instance) if that process is dead; a no-op otherwise.
void remove_segments_of_dead_process(pid_t pid);

// A mapped shared-memory segment. The mapping lives as long as the object; the name is
// removed by unlink() or, for segments this process created, by the destructor.
class Segment {
  public:
    // Creates `name` exclusively (mode 0600), reserves `bytes` of memory up front (so that a
    // full /dev/shm is resource_exhausted here, not a SIGBUS on first write) and maps it
    // read-write. `populate` pre-faults the page tables.
    [[nodiscard]] static Result<std::shared_ptr<Segment>> create(const std::string& name,
                                                                 std::size_t bytes, bool populate);
    // Maps an existing segment read-write, all of it (the size comes from fstat, never from
    // the caller). not_found when it does not exist.
    [[nodiscard]] static Result<std::shared_ptr<Segment>> open(const std::string& name,
                                                               bool populate);

    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;
    ~Segment();

    [[nodiscard]] std::byte* data() const { return data_; }
    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] const std::string& name() const { return name_; }
    // Removes the name from /dev/shm once; the mapping stays valid.
    void unlink();

  private:
    Segment(std::string name, std::byte* data, std::size_t size, bool owned)
        : name_(std::move(name)), data_(data), size_(size), owned_(owned) {}

    std::string name_;
    std::byte* data_;
    std::size_t size_;
    bool owned_;
    std::atomic<bool> unlinked_{false};
};

}  // namespace omnirt::relay::shm
