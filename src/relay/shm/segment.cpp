#include "relay/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <random>
#include <vector>

#include <spdlog/spdlog.h>

namespace omnirt::relay::shm {
namespace {

constexpr std::string_view kPrefix = "omnirt.";
constexpr std::size_t kMaxNamePart = 48;

class UniqueFd {
  public:
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() {
        if (fd_ >= 0) ::close(fd_);
    }
    [[nodiscard]] int get() const { return fd_; }

  private:
    int fd_;
};

std::string errno_text(int error) { return std::strerror(error); }

Result<std::byte*> map_fd(int fd, std::size_t bytes, bool populate, const std::string& name) {
    int flags = MAP_SHARED | (populate ? MAP_POPULATE : 0);
    void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
    if (address == MAP_FAILED) {
        return fail(ErrorCode::resource_exhausted, "cannot map shared-memory segment '" + name +
                                                       "' (" + std::to_string(bytes) +
                                                       " bytes): " + errno_text(errno));
    }
    return static_cast<std::byte*>(address);
}

bool parse_u64(std::string_view text, std::uint64_t& out) {
    if (text.empty()) return false;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
    return error == std::errc{} && end == text.data() + text.size();
}

// Every entry of /dev/shm that parses as an omnirt segment name.
Result<std::vector<std::pair<std::string, SegmentName>>> list_segments() {
    DIR* directory = ::opendir(std::string(kShmDirectory).c_str());
    if (directory == nullptr) {
        return fail(ErrorCode::unavailable,
                    "cannot list " + std::string(kShmDirectory) + ": " + errno_text(errno));
    }
    std::vector<std::pair<std::string, SegmentName>> segments;
    while (dirent* entry = ::readdir(directory)) {
        std::string_view file = entry->d_name;
        if (!file.starts_with(kPrefix)) continue;
        if (auto parsed = parse_segment_name(file)) {
            segments.emplace_back("/" + std::string(file), std::move(*parsed));
        }
    }
    ::closedir(directory);
    return segments;
}

void unlink_stale(const std::string& name) {
    if (::shm_unlink(name.c_str()) == 0) {
        spdlog::info("shm relay: removed segment '{}' left by a dead process", name);
    } else if (errno != ENOENT) {
        spdlog::warn("shm relay: cannot remove stale segment '{}': {}", name, errno_text(errno));
    }
}

}  // namespace

std::string sanitize_name_part(std::string_view text, std::string_view fallback) {
    std::string out;
    for (char c : text.substr(0, kMaxNamePart)) {
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
        out.push_back(keep ? c : '_');
    }
    return out.empty() ? std::string(fallback) : out;
}

std::string instance_tag(std::string_view runtime_dir) {
    while (runtime_dir.size() > 1 && runtime_dir.ends_with('/')) runtime_dir.remove_suffix(1);
    auto slash = runtime_dir.rfind('/');
    std::string_view base =
        slash == std::string_view::npos ? runtime_dir : runtime_dir.substr(slash + 1);
    return sanitize_name_part(base, "default");
}

std::string format_segment_name(const SegmentName& name) {
    return "/" + std::string(kPrefix) + name.instance + "." + std::to_string(name.pid) + "." +
           name.relay + "." + std::to_string(name.serial);
}

std::optional<SegmentName> parse_segment_name(std::string_view name) {
    if (name.starts_with('/')) name.remove_prefix(1);
    if (!name.starts_with(kPrefix)) return std::nullopt;
    name.remove_prefix(kPrefix.size());
    std::vector<std::string_view> fields;
    while (true) {
        auto dot = name.find('.');
        fields.push_back(name.substr(0, dot));
        if (dot == std::string_view::npos) break;
        name.remove_prefix(dot + 1);
    }
    if (fields.size() != 4 || fields[0].empty() || fields[2].empty()) return std::nullopt;
    for (std::string_view field : {fields[0], fields[2]}) {
        if (sanitize_name_part(field, "") != field) return std::nullopt;
    }
    std::uint64_t pid = 0;
    SegmentName parsed{.instance = std::string(fields[0]), .relay = std::string(fields[2])};
    if (!parse_u64(fields[1], pid) || pid == 0 || pid > 0x7fffffff) return std::nullopt;
    if (!parse_u64(fields[3], parsed.serial)) return std::nullopt;
    parsed.pid = static_cast<pid_t>(pid);
    return parsed;
}

std::uint64_t next_segment_serial() {
    static std::atomic<std::uint64_t> serial{0};
    return serial.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t random_id() {
    std::random_device device;
    std::uint64_t id = (std::uint64_t{device()} << 32) | device();
    return id & 0x3fffffffffffffffULL;
}

namespace {
std::atomic<pid_t> cached_pid{0};
void forget_cached_pid() { cached_pid.store(0, std::memory_order_relaxed); }
}  // namespace

pid_t current_pid() {
    pid_t pid = cached_pid.load(std::memory_order_relaxed);
    if (pid != 0) return pid;
    static const bool forget_in_child = ::pthread_atfork(nullptr, nullptr, forget_cached_pid) == 0;
    (void)forget_in_child;
    pid = ::getpid();
    cached_pid.store(pid, std::memory_order_relaxed);
    return pid;
}

bool process_alive(pid_t pid) {
    if (pid <= 0) return false;
    return ::kill(pid, 0) == 0 || errno != ESRCH;
}

Status remove_stale_segments(std::string_view instance_or_empty) {
    OMNI_TRY(auto segments, list_segments());
    for (const auto& [name, parsed] : segments) {
        if (!instance_or_empty.empty() && parsed.instance != instance_or_empty) continue;
        if (!process_alive(parsed.pid)) unlink_stale(name);
    }
    return {};
}

void remove_segments_of_dead_process(pid_t pid) {
    if (process_alive(pid)) return;
    auto segments = list_segments();
    if (!segments) return;
    for (const auto& [name, parsed] : *segments) {
        if (parsed.pid == pid) unlink_stale(name);
    }
}

Result<std::shared_ptr<Segment>> Segment::create(const std::string& name, std::size_t bytes,
                                                 bool populate) {
    UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) {
        ErrorCode code = errno == EEXIST ? ErrorCode::already_exists : ErrorCode::unavailable;
        return fail(code,
                    "cannot create shared-memory segment '" + name + "': " + errno_text(errno));
    }
    auto remove = [&](ErrorCode code, const std::string& what, const std::string& hint = "") {
        int error = errno;
        ::shm_unlink(name.c_str());
        return fail(code, "cannot " + what + " shared-memory segment '" + name + "' (" +
                              std::to_string(bytes) + " bytes): " + errno_text(error) + hint);
    };
    if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
        return remove(ErrorCode::resource_exhausted, "size");
    }
    // Reserve the pages now: tmpfs is sparse, and touching a page it cannot back is a SIGBUS.
    int reserve = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
    if (reserve != 0) {
        errno = reserve;
        return remove(ErrorCode::resource_exhausted, "reserve the memory of",
                      reserve == ENOSPC ? " (is " + std::string(kShmDirectory) + " full?)" : "");
    }
    auto data = map_fd(fd.get(), bytes, populate, name);
    if (!data) {
        ::shm_unlink(name.c_str());
        return fail(data.error());
    }
    return std::shared_ptr<Segment>(new Segment(name, *data, bytes, true));
}

Result<std::shared_ptr<Segment>> Segment::open(const std::string& name, bool populate) {
    UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
    if (fd.get() < 0) {
        ErrorCode code = errno == ENOENT ? ErrorCode::not_found : ErrorCode::unavailable;
        return fail(code, "cannot open shared-memory segment '" + name + "': " + errno_text(errno));
    }
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) {
        return fail(ErrorCode::unavailable,
                    "cannot stat shared-memory segment '" + name + "': " + errno_text(errno));
    }
    if (info.st_size <= 0) {
        return fail(ErrorCode::data_loss, "shared-memory segment '" + name + "' is empty");
    }
    auto bytes = static_cast<std::size_t>(info.st_size);
    OMNI_TRY(std::byte * data, map_fd(fd.get(), bytes, populate, name));
    return std::shared_ptr<Segment>(new Segment(name, data, bytes, false));
}

Segment::~Segment() {
    ::munmap(data_, size_);
    if (owned_) unlink();
}

void Segment::unlink() {
    if (unlinked_.exchange(true)) return;
    if (::shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
        spdlog::warn("shm relay: cannot remove segment '{}': {}", name_, errno_text(errno));
    }
}

}  // namespace omnirt::relay::shm
