#include "relay/shm/copy.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace omnirt::relay::shm {
namespace {

constexpr std::size_t kParallelThreshold = std::size_t{8} << 20;
constexpr std::size_t kChunkBytes = std::size_t{2} << 20;
constexpr unsigned kMaxHelpers = 7;

// One large copy: helpers and the caller take chunks until none are left.
struct CopyJob {
    std::byte* destination;
    const std::byte* source;
    std::size_t nbytes;
    std::size_t chunks;
    std::atomic<std::size_t> next{0};
    std::atomic<std::uint32_t> done{0};

    // Copies chunks until none remain; returns after its last one.
    void work() {
        while (true) {
            std::size_t chunk = next.fetch_add(1);
            if (chunk >= chunks) return;
            std::size_t begin = chunk * kChunkBytes;
            std::size_t length = std::min(kChunkBytes, nbytes - begin);
            std::memcpy(destination + begin, source + begin, length);
            if (done.fetch_add(1) + 1 == chunks) done.notify_all();
        }
    }
};

class CopyPool {
  public:
    static CopyPool& instance() {
        // Leaked on purpose: helpers may still be parked when static destructors run.
        static CopyPool* pool = new CopyPool();
        return *pool;
    }

    [[nodiscard]] unsigned helpers() const { return helpers_; }

    void offer(const std::shared_ptr<CopyJob>& job, unsigned tickets) {
        {
            std::lock_guard lock(mutex_);
            for (unsigned i = 0; i < tickets; ++i) queue_.push_back(job);
        }
        if (tickets == 1) {
            ready_.notify_one();
        } else {
            ready_.notify_all();
        }
    }

  private:
    CopyPool() : helpers_(helper_count()) {
        for (unsigned i = 0; i < helpers_; ++i) std::thread([this] { run(); }).detach();
    }

    // OMNIRT_SHM_COPY_THREADS helpers when set (0 turns parallel copies off); otherwise a
    // quarter of the cores, and none on small machines, where a second copying thread mostly
    // competes with the first for the same memory bandwidth.
    static unsigned helper_count() {
        if (const char* configured = std::getenv("OMNIRT_SHM_COPY_THREADS")) {
            return std::min(kMaxHelpers,
                            static_cast<unsigned>(std::strtoul(configured, nullptr, 10)));
        }
        unsigned cores = std::thread::hardware_concurrency();
        return cores >= 8 ? std::min(kMaxHelpers, cores / 4) : 0;
    }

    void run() {
        while (true) {
            std::shared_ptr<CopyJob> job;
            {
                std::unique_lock lock(mutex_);
                ready_.wait(lock, [&] { return !queue_.empty(); });
                job = std::move(queue_.front());
                queue_.pop_front();
            }
            job->work();
        }
    }

    const unsigned helpers_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::shared_ptr<CopyJob>> queue_;
};

}  // namespace

bool copy_runs_in_parallel(std::size_t nbytes) {
    return nbytes >= kParallelThreshold && CopyPool::instance().helpers() > 0;
}

void copy_bytes(std::byte* destination, const std::byte* source, std::size_t nbytes) {
    if (!copy_runs_in_parallel(nbytes)) {
        if (nbytes != 0) std::memcpy(destination, source, nbytes);
        return;
    }
    CopyPool& pool = CopyPool::instance();
    auto job = std::make_shared<CopyJob>();
    job->destination = destination;
    job->source = source;
    job->nbytes = nbytes;
    job->chunks = (nbytes + kChunkBytes - 1) / kChunkBytes;
    pool.offer(job, static_cast<unsigned>(std::min<std::size_t>(pool.helpers(), job->chunks - 1)));
    job->work();
    for (std::uint32_t done = job->done.load(); done != job->chunks; done = job->done.load()) {
        job->done.wait(done);
    }
}

}  // namespace omnirt::relay::shm
