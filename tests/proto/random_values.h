#pragma once
// Deterministic random Value trees for the proto round-trip tests: every kind, ints at the
// int64 and msgpack format edges, floats incl. inf/nan/-0, strings incl. empty, non-ASCII and
// embedded NUL, bytes, tensors of every dtype incl. 0-element and non-contiguous views.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "core/request.h"
#include "core/tensor.h"
#include "core/value.h"

namespace omnirt::proto::testing {

class RandomValues {
  public:
    explicit RandomValues(std::uint64_t seed) : rng_(seed) {}

    std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
    bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

    std::int64_t integer() {
        static constexpr std::int64_t kEdges[] = {0,
                                                  1,
                                                  -1,
                                                  127,
                                                  128,
                                                  -32,
                                                  -33,
                                                  255,
                                                  256,
                                                  -128,
                                                  -129,
                                                  65535,
                                                  65536,
                                                  -32768,
                                                  -32769,
                                                  4294967295LL,
                                                  4294967296LL,
                                                  -2147483648LL,
                                                  -2147483649LL,
                                                  std::numeric_limits<std::int64_t>::max(),
                                                  std::numeric_limits<std::int64_t>::min()};
        if (chance(0.5)) return kEdges[below(std::size(kEdges))];
        return static_cast<std::int64_t>(rng_());
    }

    double floating() {
        static constexpr double kEdges[] = {0.0,
                                            -0.0,
                                            1.5,
                                            -2.25,
                                            std::numeric_limits<double>::infinity(),
                                            -std::numeric_limits<double>::infinity(),
                                            std::numeric_limits<double>::quiet_NaN(),
                                            std::numeric_limits<double>::denorm_min(),
                                            std::numeric_limits<double>::max(),
                                            std::numeric_limits<double>::lowest()};
        if (chance(0.4)) return kEdges[below(std::size(kEdges))];
        std::uint64_t bits = rng_();
        double out;
        std::memcpy(&out, &bits, sizeof out);
        return out;
    }

    std::string string() {
        static const char* kPieces[] = {"a", "key", "héllo", "日本語", "\xF0\x9F\x98\x80",
                                        "",  " ",   "\"q\"", "x.y",    "[0]"};
        std::string out;
        std::size_t pieces = below(5);
        for (std::size_t i = 0; i < pieces; ++i) out += kPieces[below(std::size(kPieces))];
        if (chance(0.1)) out.push_back('\0');
        if (chance(0.03)) out += std::string(300 + below(200), 'z');  // str16
        if (chance(0.002)) out += std::string(70000, 'w');            // str32
        return out;
    }

    Bytes bytes() {
        std::size_t size = chance(0.05) ? 256 + below(300) : below(20);
        Bytes out;
        out.data.resize(size);
        for (auto& b : out.data) b = static_cast<std::uint8_t>(rng_());
        return out;
    }

    DType dtype() { return static_cast<DType>(below(kDTypeCount)); }

    // A random tensor; sometimes 0-element, sometimes a non-contiguous view.
    Tensor tensor() { return tensor_of(dtype()); }

    Tensor tensor_of(DType dtype) {
        Shape shape(below(4));
        for (auto& d : shape) d = static_cast<std::int64_t>(below(5));
        if (chance(0.1) && !shape.empty()) shape[0] = 0;
        if (chance(0.4) && shape.size() >= 2) return strided_view(dtype, shape);
        Tensor t = Tensor::empty(shape, dtype).value();
        fill(t);
        return t;
    }

    // A view that skips every other element of its innermost dimension, or a transpose.
    Tensor strided_view(DType dtype, Shape shape) {
        Shape base_shape = shape;
        base_shape.back() *= 2;
        Tensor base = Tensor::empty(base_shape, dtype).value();
        fill(base);
        std::vector<std::int64_t> strides = contiguous_strides(base_shape);
        strides.back() = 2;
        if (chance(0.5)) {
            // transpose of a contiguous [b, a] tensor
            Shape swapped = {shape[1], shape[0]};
            for (std::size_t i = 2; i < shape.size(); ++i) swapped.push_back(shape[i]);
            Tensor other = Tensor::empty(swapped, dtype).value();
            fill(other);
            std::vector<std::int64_t> s = contiguous_strides(swapped);
            std::swap(s[0], s[1]);
            return Tensor::from_storage(other.storage(), dtype, shape, s).value();
        }
        return Tensor::from_storage(base.storage(), dtype, shape, strides).value();
    }

    void fill(const Tensor& t) {
        std::byte* p = t.storage()->data();
        for (std::size_t i = 0; i < t.storage()->nbytes(); ++i) {
            p[i] = static_cast<std::byte>(dtype_byte(t.dtype()));
        }
    }

    // A random tree of at most `depth` levels of containers.
    Value value(int depth, bool tensors = true) {
        int kinds = depth > 0 ? 9 : 7;
        switch (below(kinds)) {
            case 0:
                return Value();
            case 1:
                return Value(chance(0.5));
            case 2:
                return Value(integer());
            case 3:
                return Value(floating());
            case 4:
                return Value(string());
            case 5:
                return Value(bytes());
            case 6:
                return tensors && chance(0.5) ? Value(tensor()) : Value(integer());
            case 7: {
                List list;
                std::size_t n = chance(0.02) ? 20 + below(10) : below(5);
                for (std::size_t i = 0; i < n; ++i) list.push_back(value(depth - 1, tensors));
                return Value(std::move(list));
            }
            default: {
                Map map;
                std::size_t n = chance(0.02) ? 20 + below(10) : below(5);
                for (std::size_t i = 0; i < n; ++i) map[string()] = value(depth - 1, tensors);
                return Value(std::move(map));
            }
        }
    }

    StagePayload payload(bool tensors = true) {
        StagePayload p;
        p.request_id = "req-" + std::to_string(rng_());
        p.request.inputs = value(3, tensors);
        p.request.params = value(2, tensors);
        p.request.metadata = value(2, tensors);
        p.data = value(4, tensors);
        if (tensors && chance(0.5)) p.data = Map{{"hidden", tensor()}, {"rest", std::move(p.data)}};
        return p;
    }

    std::mt19937_64& rng() { return rng_; }

  private:
    std::uint8_t dtype_byte(DType dtype) {
        auto b = static_cast<std::uint8_t>(rng_());
        return dtype == DType::boolean ? (b & 1) : b;
    }

    std::mt19937_64 rng_;
};

// Every dtype, for tests that must cover them all.
inline std::vector<DType> all_dtypes() {
    std::vector<DType> out;
    for (int i = 0; i < kDTypeCount; ++i) out.push_back(static_cast<DType>(i));
    return out;
}

}  // namespace omnirt::proto::testing
