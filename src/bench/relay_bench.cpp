#include "bench/relay_bench.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bench/relay_peer.h"
#include "config/runtime_dir.h"
#include "relay/registry.h"

namespace omnirt::bench {
namespace {

constexpr Duration kCallTimeout(120000);

int default_iterations(std::size_t size) {
    if (size <= (std::size_t{1} << 20)) return 2000;
    if (size <= (std::size_t{16} << 20)) return 200;
    if (size <= (std::size_t{64} << 20)) return 40;
    return 15;
}

std::string size_name(std::size_t size) {
    if (size >= (std::size_t{1} << 30) && size % (std::size_t{1} << 30) == 0)
        return std::to_string(size >> 30) + "G";
    if (size >= (std::size_t{1} << 20) && size % (std::size_t{1} << 20) == 0)
        return std::to_string(size >> 20) + "M";
    if (size >= 1024 && size % 1024 == 0) return std::to_string(size >> 10) + "K";
    return std::to_string(size);
}

}  // namespace

std::string cpu_model() {
    std::ifstream file("/proc/cpuinfo");
    std::string line;
    while (std::getline(file, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    }
    return "unknown";
}

double percentile(std::vector<double> samples, double p) {
    if (samples.empty()) return 0;
    std::sort(samples.begin(), samples.end());
    double rank = p / 100.0 * static_cast<double>(samples.size() - 1);
    auto lo = static_cast<std::size_t>(std::floor(rank));
    auto hi = static_cast<std::size_t>(std::ceil(rank));
    return samples[lo] + (samples[hi] - samples[lo]) * (rank - static_cast<double>(lo));
}

double measure_memcpy_gbps(std::size_t size) {
    if (size == 0) return 0;
    std::vector<std::byte> a(size, std::byte{1}), b(size, std::byte{2});  // both pre-faulted
    int rounds = static_cast<int>(std::clamp<std::size_t>((std::size_t{1} << 30) / size, 3, 2000));
    std::vector<double> seconds;
    for (int i = 0; i < rounds; ++i) {
        std::int64_t start = monotonic_ns();
        std::memcpy(b.data(), a.data(), size);
        std::int64_t end = monotonic_ns();
        seconds.push_back(static_cast<double>(end - start) / 1e9);
        std::swap(a, b);
    }
    double median = percentile(seconds, 50);
    return median > 0 ? static_cast<double>(size) / median / 1e9 : 0;
}

Result<std::vector<std::size_t>> parse_sizes(const std::string& text) {
    std::vector<std::size_t> sizes;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item.empty()) return fail(ErrorCode::invalid_argument, "empty size in '" + text + "'");
        std::size_t multiplier = 1;
        char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(item.back())));
        if (unit == 'K' || unit == 'M' || unit == 'G') {
            multiplier = unit == 'K' ? 1024 : unit == 'M' ? (1 << 20) : (1 << 30);
            item.pop_back();
        }
        std::size_t value = 0;
        for (char c : item) {
            if (c < '0' || c > '9' || value > (std::size_t{1} << 40)) {
                return fail(ErrorCode::invalid_argument, "invalid size '" + item + "'");
            }
            value = value * 10 + static_cast<std::size_t>(c - '0');
        }
        if (item.empty())
            return fail(ErrorCode::invalid_argument, "invalid size in '" + text + "'");
        sizes.push_back(value * multiplier);
    }
    if (sizes.empty()) return fail(ErrorCode::invalid_argument, "no sizes given");
    return sizes;
}

Result<RelayBenchReport> run_relay_bench(const RelayBenchOptions& options) {
    OMNI_TRY(auto dir, config::RuntimeDirectory::create("/tmp"));
    relay::RelayOptions receiver_options{.backend = options.backend,
                                         .name = "bench-receiver",
                                         .runtime_dir = dir->path(),
                                         .slot_bytes = options.slot_bytes,
                                         .credits = options.credits,
                                         .rank = 0,
                                         .world_size = 2,
                                         .rendezvous = "file://" + dir->path() + "/bench.store",
                                         .zero_copy = options.zero_copy};
    relay::RelayOptions sender_options = receiver_options;
    sender_options.name = "bench-sender";
    sender_options.rank = 1;
    // Collective backends need both ranks to join: start the sender, then create ours.
    OMNI_TRY(auto sender, PeerProcess::start(options.omnirt_binary, sender_options));
    OMNI_TRY(auto receiver, relay::create_relay(receiver_options));
    OMNI_RETURN_IF_ERROR(sender->wait_ready(kCallTimeout));

    RelayBenchReport report{.backend = options.backend, .zero_copy = options.zero_copy};
    std::uint64_t seed = 1;
    for (std::size_t size : options.sizes) {
        int iterations = options.iterations > 0 ? options.iterations : default_iterations(size);
        Tensor dest;
        if (!options.zero_copy) {
            OMNI_TRY(dest, Tensor::empty({static_cast<std::int64_t>(size)}, DType::u8));
        }
        std::vector<double> latencies_us;
        for (int i = -2; i < iterations; ++i) {  // two warm-up rounds, the first verified
            std::string id = "bench-" + std::to_string(seed);
            // The buffer is allocated and filled first, so the timed put is the relay hop alone.
            OMNI_RETURN_IF_ERROR(sender->call(Map{{"op", "prepare"},
                                                  {"nbytes", static_cast<std::int64_t>(size)},
                                                  {"seed", static_cast<std::int64_t>(seed)},
                                                  {"send_buffer", true}},
                                              kCallTimeout));
            OMNI_TRY(
                Value put,
                sender->call(
                    Map{{"op", "put"}, {"request_id", id}, {"prepared", true}, {"dst_rank", 0}},
                    kCallTimeout));
            OMNI_TRY(auto get, receiver->get_async(*put.find("metadata"), dest, id));
            OMNI_RETURN_IF_ERROR(get->wait_for_completion(kCallTimeout));
            std::int64_t end = monotonic_ns();
            Tensor got = get->tensor();
            if (i == -2) {
                std::int64_t bad = check_pattern({got.data(), got.nbytes()}, seed);
                if (bad >= 0 || got.nbytes() != size) {
                    return fail(ErrorCode::data_loss,
                                "relay delivered wrong bytes at size " + std::to_string(size));
                }
            }
            got = Tensor();
            get.reset();  // releases a zero-copy view and with it the sender's credit
            receiver->cleanup(id);
            OMNI_TRY(Value waited,
                     sender->call(Map{{"op", "wait"}, {"request_id", id}}, kCallTimeout));
            if (i >= 0)
                latencies_us.push_back(static_cast<double>(end - put.find("start_ns")->as_int()) /
                                       1e3);
            ++seed;
        }
        double p50 = percentile(latencies_us, 50);
        report.rows.push_back(RelayBenchRow{
            .size = size,
            .iterations = iterations,
            .p50_us = p50,
            .p99_us = percentile(latencies_us, 99),
            .gbps = p50 > 0 ? static_cast<double>(size) / (p50 * 1e3) : 0,
            .memcpy_gbps = measure_memcpy_gbps(size),
        });
    }
    OMNI_RETURN_IF_ERROR(sender->close(kCallTimeout));
    receiver->close();
    return report;
}

std::string format_relay_table(const RelayBenchReport& report) {
    std::ostringstream out;
    out << "relay " << report.backend << (report.zero_copy ? " (zero-copy)" : " (copy)") << "\n";
    out << "  size   iters    p50 us    p99 us    GB/s  memcpy GB/s  of memcpy\n";
    char line[160];
    for (const auto& row : report.rows) {
        double share = row.memcpy_gbps > 0 ? row.gbps / row.memcpy_gbps * 100 : 0;
        std::snprintf(line, sizeof line, "%6s %7d %9.1f %9.1f %7.2f %12.2f %9.0f%%\n",
                      size_name(row.size).c_str(), row.iterations, row.p50_us, row.p99_us, row.gbps,
                      row.memcpy_gbps, share);
        out << line;
    }
    return out.str();
}

std::string relay_report_json(const RelayBenchReport& report) {
    std::ostringstream out;
    out << "{\"benchmark\": \"relay\", \"backend\": \"" << report.backend
        << "\", \"zero_copy\": " << (report.zero_copy ? "true" : "false") << ", \"rows\": [";
    for (std::size_t i = 0; i < report.rows.size(); ++i) {
        const auto& r = report.rows[i];
        out << (i ? ", " : "") << "{\"size\": " << r.size << ", \"iterations\": " << r.iterations
            << ", \"p50_us\": " << r.p50_us << ", \"p99_us\": " << r.p99_us
            << ", \"gbps\": " << r.gbps << ", \"memcpy_gbps\": " << r.memcpy_gbps << "}";
    }
    out << "]}\n";
    return out.str();
}

}  // namespace omnirt::bench
