#pragma once
// TorchStateDict: the tensors of a PyTorch checkpoint written by torch.save(state_dict) in its
// zip format (the default since PyTorch 1.6), e.g. Fish Audio S2-Pro's codec.pth, read without
// Python and without running any of the pickle: a small pickle machine builds plain data (dicts,
// lists, tuples, numbers, strings) and knows only the callables torch.save writes for a state
// dict (collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_tensor /
// _rebuild_parameter / _rebuild_parameter_with_state) and torch's storage types as persistent
// ids. Any other callable is an error naming it: nothing is imported, nothing executed.
//
// Layout read (torch/serialization.py's writer, learned from its format, not its code):
//   <archive>/data.pkl    the pickle (protocol 2 by default; 2..5 accepted)
//   <archive>/data/<key>  the raw bytes of storage <key>, little-endian
//   <archive>/byteorder   "little" when present (big-endian files are refused)
// Tensors are zero-copy views into the mapped file (a misaligned one is copied), each keeping
// the mapping alive. A top-level {"state_dict": {...}} (Lightning-style) is unwrapped.
// Non-tensor values of the dict (e.g. ints, None) are skipped.
//
// Every count, size, offset and stride is checked against the file: a truncated, hostile or
// non-torch file is an invalid_argument error naming the file (and the pickle byte where it
// broke), never a crash or a read outside the mapping.
//
// Thread safety: immutable after open(); any thread may read.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace omnirt::checkpoint {

class TorchStateDict {
  public:
    [[nodiscard]] static Result<std::unique_ptr<TorchStateDict>> open(
        const std::filesystem::path& path);

    // Tensor names in the pickle's order.
    [[nodiscard]] const std::vector<std::string>& names() const { return names_; }
    // Null when there is no such tensor.
    [[nodiscard]] const Tensor* find(std::string_view name) const;
    // not_found naming the file for an unknown name.
    [[nodiscard]] Result<Tensor> tensor(std::string_view name) const;
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }

  private:
    TorchStateDict() = default;

    std::filesystem::path path_;
    std::vector<std::string> names_;
    std::map<std::string, Tensor, std::less<>> tensors_;
};

}  // namespace omnirt::checkpoint
