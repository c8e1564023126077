#include "bench/memory_bandwidth.h"

#include <sched.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OMNIRT_READ_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#pragma GCC diagnostic ignored "-Wpsabi"
#else
#define OMNIRT_READ_CLONES
#endif

namespace omnirt::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Words = std::uint64_t __attribute__((vector_size(64)));

// XOR of every 64-byte line of [begin, begin + bytes); bytes is a multiple of 256. Four
// accumulators keep four loads in flight per iteration.
OMNIRT_READ_CLONES std::uint64_t read_slice(const std::byte* begin, std::size_t bytes) {
    Words a = {}, b = {}, c = {}, d = {};
    for (const std::byte* p = begin; p < begin + bytes; p += 256) {
        Words w, x, y, z;
        std::memcpy(&w, p, 64);
        std::memcpy(&x, p + 64, 64);
        std::memcpy(&y, p + 128, 64);
        std::memcpy(&z, p + 192, 64);
        a ^= w;
        b ^= x;
        c ^= y;
        d ^= z;
    }
    const Words all = a ^ b ^ c ^ d;
    std::uint64_t out = 0;
    for (int i = 0; i < 8; ++i) out ^= all[i];
    return out;
}

struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
};

}  // namespace

int default_compute_threads() {
    if (const char* text = std::getenv("OMP_NUM_THREADS")) {
        const int value = std::atoi(text);
        if (value > 0) return value;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Result<ReadBandwidth> measure_read_bandwidth(const ReadBandwidthOptions& options) {
    if (options.bytes < (std::size_t{1} << 20) || options.threads < 1 || options.passes < 1) {
        return fail(ErrorCode::invalid_argument,
                    "read bandwidth: at least 1 MiB, one thread and one pass");
    }
    constexpr std::size_t kAlign = std::size_t{2} << 20;  // huge-page friendly
    const auto threads = static_cast<std::size_t>(options.threads);
    // Equal slices of whole 256-byte groups.
    const std::size_t slice = options.bytes / threads / 256 * 256;
    const std::size_t bytes = (slice * threads + kAlign - 1) / kAlign * kAlign;
    std::unique_ptr<std::byte, FreeDeleter> buffer(
        static_cast<std::byte*>(std::aligned_alloc(kAlign, bytes)));
    if (!buffer) {
        return fail(ErrorCode::resource_exhausted,
                    "read bandwidth: cannot allocate " + std::to_string(bytes) + " bytes");
    }

    struct Times {
        Clock::time_point start, end;
    };
    const auto passes = static_cast<std::size_t>(options.passes);
    std::vector<std::vector<Times>> times(threads, std::vector<Times>(passes));
    std::vector<std::uint64_t> sinks(threads);
    std::barrier sync(static_cast<std::ptrdiff_t>(threads));
    auto work = [&](std::size_t index) {
        std::byte* mine = buffer.get() + index * slice;
        std::memset(mine, static_cast<int>(index + 1), slice);
        std::uint64_t sink = 0;
        for (std::size_t pass = 0; pass < passes; ++pass) {
            sync.arrive_and_wait();
            times[index][pass].start = Clock::now();
            sink ^= read_slice(mine, slice);
            times[index][pass].end = Clock::now();
        }
        sinks[index] = sink;
    };
    std::vector<std::thread> workers;
    for (std::size_t i = 1; i < threads; ++i) workers.emplace_back(work, i);
    work(0);
    for (std::thread& worker : workers) worker.join();

    std::vector<double> gbps;
    for (std::size_t pass = 0; pass < passes; ++pass) {
        Clock::time_point start = times[0][pass].start;
        Clock::time_point end = times[0][pass].end;
        for (std::size_t i = 1; i < threads; ++i) {
            start = std::min(start, times[i][pass].start);
            end = std::max(end, times[i][pass].end);
        }
        const double seconds = std::chrono::duration<double>(end - start).count();
        gbps.push_back(static_cast<double>(slice * threads) / seconds / 1e9);
    }
    std::sort(gbps.begin(), gbps.end());
    std::uint64_t sink = 0;
    for (std::uint64_t value : sinks) sink ^= value;
    // Keeps the reads observable.
    asm volatile("" : : "r"(sink));
    return ReadBandwidth{.best_gbps = gbps.back(),
                         .median_gbps = gbps[gbps.size() / 2],
                         .threads = options.threads,
                         .bytes = slice * threads};
}

}  // namespace omnirt::bench
