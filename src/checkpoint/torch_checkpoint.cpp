#include "checkpoint/torch_checkpoint.h"

#include <bit>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "checkpoint/mapped_file.h"
#include "checkpoint/zip_archive.h"

namespace omnirt::checkpoint {
namespace {

constexpr std::size_t kMaxMemo = 1u << 22;
constexpr std::size_t kMaxStack = 1u << 22;

struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

// A storage named by a persistent id: its element type and where its bytes are in the file.
struct PyStorage {
    DType dtype = DType::f32;
    std::int64_t numel = 0;
    std::size_t file_offset = 0;
};

// The plain data the pickle builds. Lists and dicts are shared by reference, as in Python
// (APPEND / SETITEM change the object the memo holds too).
struct PyValue {
    enum class Kind : std::uint8_t {
        none,
        boolean,
        integer,
        floating,
        string,
        tuple,
        list,
        dict,
        global,
        storage,
        tensor
    };
    Kind kind = Kind::none;
    bool boolean = false;
    std::int64_t integer = 0;
    double floating = 0;
    std::string text;                              // string; global: "module.name"
    std::vector<PyRef> items;                      // tuple, list
    std::vector<std::pair<PyRef, PyRef>> entries;  // dict, in insertion order
    PyStorage storage;
    Tensor tensor;
};

PyRef make(PyValue::Kind kind) {
    auto value = std::make_shared<PyValue>();
    value->kind = kind;
    return value;
}

// Element types by torch storage class name (torch.FloatStorage, ...).
std::optional<DType> storage_dtype(std::string_view name) {
    static const std::unordered_map<std::string_view, DType> kTypes{
        {"torch.FloatStorage", DType::f32}, {"torch.DoubleStorage", DType::f64},
        {"torch.HalfStorage", DType::f16},  {"torch.BFloat16Storage", DType::bf16},
        {"torch.LongStorage", DType::i64},  {"torch.IntStorage", DType::i32},
        {"torch.ShortStorage", DType::i16}, {"torch.CharStorage", DType::i8},
        {"torch.ByteStorage", DType::u8},   {"torch.BoolStorage", DType::boolean}};
    auto it = kTypes.find(name);
    if (it == kTypes.end()) return std::nullopt;
    return it->second;
}

class Unpickler {
  public:
    Unpickler(std::span<const std::byte> pickle, const StoredZip& zip, std::string prefix,
              std::shared_ptr<Storage> file_storage, std::string where)
        : pickle_(pickle),
          zip_(zip),
          prefix_(std::move(prefix)),
          file_storage_(std::move(file_storage)),
          where_(std::move(where)) {}

    Result<PyRef> run() {
        while (true) {
            if (at_ >= pickle_.size()) {
                return fail(ErrorCode::invalid_argument, where_ + ": pickle byte " +
                                                             std::to_string(at_) +
                                                             ": the pickle ends before its STOP");
            }
            const std::size_t op_at = at_;
            OMNI_TRY(std::uint8_t op, byte());
            auto done = step(op);
            if (!done) {
                return fail(ErrorCode::invalid_argument, where_ + ": pickle byte " +
                                                             std::to_string(op_at) + ": " +
                                                             done.error().message);
            }
            if (*done) break;
        }
        if (!result_) return bad("no value");
        return result_;
    }

    // A pickle can build cycles (a list that holds itself through the memo): the containers are
    // emptied here so that no shared_ptr cycle outlives the machine.
    ~Unpickler() {
        for (const PyRef& value : containers_) {
            value->items.clear();
            value->entries.clear();
        }
    }
    Unpickler(const Unpickler&) = delete;
    Unpickler& operator=(const Unpickler&) = delete;

  private:
    PyRef container(PyValue::Kind kind) {
        PyRef value = make(kind);
        containers_.push_back(value);
        return value;
    }

    unexpected<Error> bad(const std::string& what) const {
        return fail(ErrorCode::invalid_argument, what);
    }

    Result<std::span<const std::byte>> take(std::uint64_t length) {
        if (length > pickle_.size() - at_) return bad("the pickle ends early");
        auto out = pickle_.subspan(at_, static_cast<std::size_t>(length));
        at_ += static_cast<std::size_t>(length);
        return out;
    }
    Result<std::uint8_t> byte() {
        OMNI_TRY(auto bytes, take(1));
        return static_cast<std::uint8_t>(bytes[0]);
    }
    Result<std::uint64_t> unsigned_le(std::size_t width) {
        OMNI_TRY(auto bytes, take(width));
        std::uint64_t value = 0;
        for (std::size_t i = 0; i < width; ++i) {
            value |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
        }
        return value;
    }
    Result<std::string> line() {
        const std::size_t start = at_;
        while (at_ < pickle_.size() && pickle_[at_] != std::byte{'\n'}) ++at_;
        if (at_ >= pickle_.size()) return bad("a GLOBAL line without its end");
        std::string out(reinterpret_cast<const char*>(pickle_.data() + start), at_ - start);
        ++at_;
        return out;
    }

    Status push(PyRef value) {
        if (stack_.size() >= kMaxStack) return bad("the stack is too deep");
        stack_.push_back(std::move(value));
        return ok_status();
    }
    Result<PyRef> pop() {
        if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
            return bad("pop from an empty stack");
        }
        PyRef top = std::move(stack_.back());
        stack_.pop_back();
        return top;
    }
    Result<PyRef> top() const {
        if (stack_.empty()) return bad("an empty stack");
        return stack_.back();
    }
    // The values above the last mark, which is removed.
    Result<std::vector<PyRef>> pop_to_mark() {
        if (marks_.empty()) return bad("no MARK");
        const std::size_t mark = marks_.back();
        marks_.pop_back();
        std::vector<PyRef> out(std::make_move_iterator(stack_.begin() + mark),
                               std::make_move_iterator(stack_.end()));
        stack_.resize(mark);
        return out;
    }
    Status memo_put(std::uint64_t key) {
        OMNI_TRY(PyRef value, top());
        if (key >= kMaxMemo) return bad("a memo index past 2^22");
        memo_[static_cast<std::uint32_t>(key)] = std::move(value);
        return ok_status();
    }
    Status memo_get(std::uint64_t key) {
        auto it = memo_.find(key);
        if (it == memo_.end()) return bad("a memo index never stored");
        return push(it->second);
    }
    Status push_string(std::uint64_t length) {
        OMNI_TRY(auto bytes, take(length));
        auto value = make(PyValue::Kind::string);
        value->text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        return push(std::move(value));
    }
    Status push_int(std::int64_t v) {
        auto value = make(PyValue::Kind::integer);
        value->integer = v;
        return push(std::move(value));
    }
    Status push_global(std::string module, std::string name) {
        auto value = make(PyValue::Kind::global);
        value->text = module + "." + name;
        return push(std::move(value));
    }
    Status push_tuple(std::vector<PyRef> items) {
        auto value = container(PyValue::Kind::tuple);
        value->items = std::move(items);
        return push(std::move(value));
    }

    // One opcode; true at STOP.
    Result<bool> step(std::uint8_t op) {
        switch (op) {
            case 0x80: {  // PROTO
                OMNI_TRY(std::uint8_t version, byte());
                if (version < 2 || version > 5) {
                    return bad("pickle protocol " + std::to_string(version) + " (2..5 are read)");
                }
                return false;
            }
            case 0x95: {  // FRAME: a length hint
                OMNI_TRY(auto skipped, take(8));
                (void)skipped;
                return false;
            }
            case '}':
                OMNI_RETURN_IF_ERROR(push(container(PyValue::Kind::dict)));
                return false;
            case ']':
                OMNI_RETURN_IF_ERROR(push(container(PyValue::Kind::list)));
                return false;
            case ')':
                OMNI_RETURN_IF_ERROR(push_tuple({}));
                return false;
            case '(':
                if (marks_.size() >= kMaxStack) return bad("too many marks");
                marks_.push_back(stack_.size());
                return false;
            case 'q': {
                OMNI_TRY(std::uint64_t key, unsigned_le(1));
                OMNI_RETURN_IF_ERROR(memo_put(key));
                return false;
            }
            case 'r': {
                OMNI_TRY(std::uint64_t key, unsigned_le(4));
                OMNI_RETURN_IF_ERROR(memo_put(key));
                return false;
            }
            case 0x94:  // MEMOIZE
                OMNI_RETURN_IF_ERROR(memo_put(memo_.size()));
                return false;
            case 'h': {
                OMNI_TRY(std::uint64_t key, unsigned_le(1));
                OMNI_RETURN_IF_ERROR(memo_get(key));
                return false;
            }
            case 'j': {
                OMNI_TRY(std::uint64_t key, unsigned_le(4));
                OMNI_RETURN_IF_ERROR(memo_get(key));
                return false;
            }
            case 'c': {  // GLOBAL
                OMNI_TRY(std::string module, line());
                OMNI_TRY(std::string name, line());
                OMNI_RETURN_IF_ERROR(push_global(std::move(module), std::move(name)));
                return false;
            }
            case 0x93: {  // STACK_GLOBAL
                OMNI_TRY(PyRef name, pop());
                OMNI_TRY(PyRef module, pop());
                if (name->kind != PyValue::Kind::string || module->kind != PyValue::Kind::string) {
                    return bad("STACK_GLOBAL of non-strings");
                }
                OMNI_RETURN_IF_ERROR(push_global(module->text, name->text));
                return false;
            }
            case 'X': {
                OMNI_TRY(std::uint64_t length, unsigned_le(4));
                OMNI_RETURN_IF_ERROR(push_string(length));
                return false;
            }
            case 0x8c: {
                OMNI_TRY(std::uint64_t length, unsigned_le(1));
                OMNI_RETURN_IF_ERROR(push_string(length));
                return false;
            }
            case 0x8d: {
                OMNI_TRY(std::uint64_t length, unsigned_le(8));
                OMNI_RETURN_IF_ERROR(push_string(length));
                return false;
            }
            case 'J': {
                OMNI_TRY(std::uint64_t v, unsigned_le(4));
                OMNI_RETURN_IF_ERROR(push_int(static_cast<std::int32_t>(v)));
                return false;
            }
            case 'K': {
                OMNI_TRY(std::uint64_t v, unsigned_le(1));
                OMNI_RETURN_IF_ERROR(push_int(static_cast<std::int64_t>(v)));
                return false;
            }
            case 'M': {
                OMNI_TRY(std::uint64_t v, unsigned_le(2));
                OMNI_RETURN_IF_ERROR(push_int(static_cast<std::int64_t>(v)));
                return false;
            }
            case 0x8a: {  // LONG1: little-endian two's complement
                OMNI_TRY(std::uint64_t length, unsigned_le(1));
                if (length > 8) return bad("an integer wider than 64 bits");
                OMNI_TRY(std::uint64_t v, unsigned_le(static_cast<std::size_t>(length)));
                if (length > 0 && length < 8 && (v >> (8 * length - 1)) != 0) {
                    v |= ~std::uint64_t{0} << (8 * length);  // sign-extend
                }
                OMNI_RETURN_IF_ERROR(push_int(static_cast<std::int64_t>(v)));
                return false;
            }
            case 'G': {  // BINFLOAT: big-endian double
                OMNI_TRY(auto bytes, take(8));
                std::uint64_t bits = 0;
                for (std::size_t i = 0; i < 8; ++i) {
                    bits = (bits << 8) | static_cast<std::uint64_t>(bytes[i]);
                }
                auto value = make(PyValue::Kind::floating);
                value->floating = std::bit_cast<double>(bits);
                OMNI_RETURN_IF_ERROR(push(std::move(value)));
                return false;
            }
            case 'N':
                OMNI_RETURN_IF_ERROR(push(make(PyValue::Kind::none)));
                return false;
            case 0x88:
            case 0x89: {
                auto value = make(PyValue::Kind::boolean);
                value->boolean = op == 0x88;
                OMNI_RETURN_IF_ERROR(push(std::move(value)));
                return false;
            }
            case 't': {
                OMNI_TRY(std::vector<PyRef> items, pop_to_mark());
                OMNI_RETURN_IF_ERROR(push_tuple(std::move(items)));
                return false;
            }
            case 0x85:
            case 0x86:
            case 0x87: {
                std::vector<PyRef> items(static_cast<std::size_t>(op - 0x84));
                for (std::size_t i = items.size(); i-- > 0;) {
                    OMNI_TRY(items[i], pop());
                }
                OMNI_RETURN_IF_ERROR(push_tuple(std::move(items)));
                return false;
            }
            case 'Q': {  // BINPERSID
                OMNI_TRY(PyRef pid, pop());
                OMNI_TRY(PyRef storage, persistent_load(*pid));
                OMNI_RETURN_IF_ERROR(push(std::move(storage)));
                return false;
            }
            case 'R': {  // REDUCE
                OMNI_TRY(PyRef args, pop());
                OMNI_TRY(PyRef callable, pop());
                OMNI_TRY(PyRef value, reduce(*callable, *args));
                OMNI_RETURN_IF_ERROR(push(std::move(value)));
                return false;
            }
            case 's': {
                OMNI_TRY(PyRef value, pop());
                OMNI_TRY(PyRef key, pop());
                OMNI_TRY(PyRef dict, top());
                if (dict->kind != PyValue::Kind::dict) return bad("SETITEM on a non-dict");
                dict->entries.emplace_back(std::move(key), std::move(value));
                return false;
            }
            case 'u': {
                OMNI_TRY(std::vector<PyRef> items, pop_to_mark());
                OMNI_TRY(PyRef dict, top());
                if (dict->kind != PyValue::Kind::dict || items.size() % 2 != 0) {
                    return bad("SETITEMS on a non-dict or with an odd count");
                }
                for (std::size_t i = 0; i < items.size(); i += 2) {
                    dict->entries.emplace_back(std::move(items[i]), std::move(items[i + 1]));
                }
                return false;
            }
            case 'a': {
                OMNI_TRY(PyRef value, pop());
                OMNI_TRY(PyRef list, top());
                if (list->kind != PyValue::Kind::list) return bad("APPEND on a non-list");
                list->items.push_back(std::move(value));
                return false;
            }
            case 'e': {
                OMNI_TRY(std::vector<PyRef> items, pop_to_mark());
                OMNI_TRY(PyRef list, top());
                if (list->kind != PyValue::Kind::list) return bad("APPENDS on a non-list");
                for (PyRef& item : items) list->items.push_back(std::move(item));
                return false;
            }
            case 'b': {  // BUILD: an OrderedDict's attributes (_metadata) or a tensor's state
                OMNI_TRY(PyRef state, pop());
                OMNI_TRY(PyRef object, top());
                if (object->kind != PyValue::Kind::dict && object->kind != PyValue::Kind::tensor) {
                    return bad("BUILD of something that is not a dict or a tensor");
                }
                return false;
            }
            case '.': {
                OMNI_TRY(result_, pop());
                return true;
            }
            default: {
                static constexpr char kHex[] = "0123456789abcdef";
                return bad(std::string("unsupported pickle opcode 0x") + kHex[op >> 4] +
                           kHex[op & 15] + " (only a torch.save state dict is read)");
            }
        }
    }

    // ('storage', storage type, key, location, numel): the bytes of <prefix>data/<key>.
    Result<PyRef> persistent_load(const PyValue& pid) {
        if (pid.kind != PyValue::Kind::tuple || pid.items.size() != 5 ||
            pid.items[0]->kind != PyValue::Kind::string || pid.items[0]->text != "storage" ||
            pid.items[1]->kind != PyValue::Kind::global ||
            pid.items[2]->kind != PyValue::Kind::string ||
            pid.items[4]->kind != PyValue::Kind::integer) {
            return bad("a persistent id that is not ('storage', type, key, location, numel)");
        }
        const std::string& key = pid.items[2]->text;
        auto cached = storages_.find(key);
        if (cached != storages_.end()) return cached->second;
        std::optional<DType> dtype = storage_dtype(pid.items[1]->text);
        if (!dtype) return bad("an unknown storage type " + pid.items[1]->text);
        const std::int64_t numel = pid.items[4]->integer;
        const std::string record = prefix_ + "data/" + key;
        auto offset = zip_.member_offset(record);
        if (!offset) return bad(offset.error().message);
        OMNI_TRY(auto bytes, zip_.member(record));
        if (numel < 0 || static_cast<std::uint64_t>(numel) > bytes.size() / element_size(*dtype)) {
            return bad("storage '" + key + "' holds " + std::to_string(bytes.size()) +
                       " bytes, not " + std::to_string(numel) + " elements");
        }
        auto value = make(PyValue::Kind::storage);
        value->storage = PyStorage{.dtype = *dtype, .numel = numel, .file_offset = *offset};
        storages_.emplace(key, value);
        return value;
    }

    Result<PyRef> reduce(const PyValue& callable, const PyValue& args) {
        if (callable.kind != PyValue::Kind::global || args.kind != PyValue::Kind::tuple) {
            return bad("REDUCE of something that is not a global with a tuple");
        }
        const std::string& name = callable.text;
        if (name == "collections.OrderedDict") {
            if (!args.items.empty()) return bad("OrderedDict with arguments");
            return container(PyValue::Kind::dict);
        }
        if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
            return rebuild_tensor(args);
        }
        if (name == "torch._utils._rebuild_parameter" ||
            name == "torch._utils._rebuild_parameter_with_state") {
            if (args.items.empty() || args.items[0]->kind != PyValue::Kind::tensor) {
                return bad(name + " without a tensor");
            }
            return args.items[0];
        }
        return bad("the callable " + name +
                   " is not part of a state dict (only tensors are read; nothing is executed)");
    }

    Result<std::vector<std::int64_t>> int_tuple(const PyValue& value, const char* what) {
        if (value.kind != PyValue::Kind::tuple || value.items.size() > kMaxTensorDims) {
            return bad(std::string("a tensor's ") + what + " is not a tuple of at most 16 ints");
        }
        std::vector<std::int64_t> out;
        for (const PyRef& item : value.items) {
            if (item->kind != PyValue::Kind::integer || item->integer < 0) {
                return bad(std::string("a tensor's ") + what + " holds a negative or non-int");
            }
            out.push_back(item->integer);
        }
        return out;
    }

    // (storage, storage_offset, size, stride, ...): a view of the storage's bytes.
    Result<PyRef> rebuild_tensor(const PyValue& args) {
        if (args.items.size() < 4 || args.items[0]->kind != PyValue::Kind::storage ||
            args.items[1]->kind != PyValue::Kind::integer) {
            return bad("_rebuild_tensor_v2 without (storage, offset, size, stride)");
        }
        const PyStorage& storage = args.items[0]->storage;
        const std::int64_t offset = args.items[1]->integer;
        OMNI_TRY(Shape shape, int_tuple(*args.items[2], "size"));
        OMNI_TRY(std::vector<std::int64_t> strides, int_tuple(*args.items[3], "stride"));
        if (strides.size() != shape.size()) return bad("a tensor's size and stride differ");
        // The last element reached must lie inside the storage (no overflow on the way).
        std::int64_t last = offset;
        bool empty = false;
        for (std::size_t i = 0; i < shape.size(); ++i) {
            if (shape[i] == 0) empty = true;
            if (shape[i] > 0 && strides[i] > (std::int64_t{1} << 40) / shape[i]) {
                return bad("a tensor's strides overflow");
            }
            if (shape[i] > 0) last += (shape[i] - 1) * strides[i];
        }
        if (offset < 0 || (!empty && last >= storage.numel) || last > (std::int64_t{1} << 50)) {
            return bad("a tensor reaches past its storage");
        }
        const std::size_t element = element_size(storage.dtype);
        const std::size_t byte_offset =
            storage.file_offset + static_cast<std::size_t>(offset) * element;
        OMNI_TRY(Tensor view, Tensor::from_storage(file_storage_, storage.dtype, std::move(shape),
                                                   std::move(strides), byte_offset));
        if (byte_offset % element != 0) {
            OMNI_TRY(view, view.clone());  // torch aligns records; other writers may not
        }
        auto value = make(PyValue::Kind::tensor);
        value->tensor = std::move(view);
        return value;
    }

    std::span<const std::byte> pickle_;
    std::size_t at_ = 0;
    const StoredZip& zip_;
    std::string prefix_;
    std::shared_ptr<Storage> file_storage_;
    std::string where_;
    std::vector<PyRef> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, PyRef> memo_;
    std::unordered_map<std::string, PyRef> storages_;
    std::vector<PyRef> containers_;  // every tuple, list and dict made
    PyRef result_;
};

}  // namespace

Result<std::unique_ptr<TorchStateDict>> TorchStateDict::open(const std::filesystem::path& path) {
    const std::string where = path.string();
    OMNI_TRY(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
    auto zip = StoredZip::open(file);
    if (!zip) {
        return fail(ErrorCode::invalid_argument,
                    zip.error().message +
                        " (only torch.save's zip format is read, not the legacy tar / raw pickle)");
    }
    // The pickle is <archive>/data.pkl, the only member of that name.
    std::string prefix;
    int found = 0;
    for (const std::string& name : (*zip)->names()) {
        if (name.ends_with("data.pkl") && (name.size() == 8 || name[name.size() - 9] == '/') &&
            name.find('/') == name.rfind('/')) {
            prefix = name.substr(0, name.size() - 8);
            ++found;
        }
    }
    if (found != 1) {
        return fail(ErrorCode::invalid_argument,
                    where + ": not a torch.save checkpoint (no single <archive>/data.pkl)");
    }
    if ((*zip)->contains(prefix + "byteorder")) {
        OMNI_TRY(auto order, (*zip)->member(prefix + "byteorder"));
        if (std::string_view(reinterpret_cast<const char*>(order.data()), order.size()) !=
            "little") {
            return fail(ErrorCode::invalid_argument,
                        where + ": a big-endian checkpoint (only little-endian is read)");
        }
    }
    OMNI_TRY(auto pickle, (*zip)->member(prefix + "data.pkl"));
    auto* data = const_cast<std::byte*>(file->bytes().data());
    auto storage = Storage::wrap(
        data, file->size(), Device::cpu(), [mapping = file](std::byte*) {}, /*read_only=*/true);
    Unpickler unpickler(pickle, **zip, prefix, storage, where);
    OMNI_TRY(PyRef root, unpickler.run());
    // Lightning-style checkpoints keep the weights under "state_dict".
    if (root->kind == PyValue::Kind::dict) {
        for (const auto& [key, value] : root->entries) {
            if (key->kind == PyValue::Kind::string && key->text == "state_dict" &&
                value->kind == PyValue::Kind::dict) {
                root = value;
                break;
            }
        }
    }
    if (root->kind != PyValue::Kind::dict) {
        return fail(ErrorCode::invalid_argument, where + ": the checkpoint is not a dict");
    }
    auto out = std::unique_ptr<TorchStateDict>(new TorchStateDict());
    out->path_ = path;
    for (const auto& [key, value] : root->entries) {
        if (value->kind != PyValue::Kind::tensor) continue;
        if (key->kind != PyValue::Kind::string) {
            return fail(ErrorCode::invalid_argument,
                        where + ": a tensor under a key that is not a string");
        }
        if (!out->tensors_.emplace(key->text, value->tensor).second) {
            return fail(ErrorCode::invalid_argument,
                        where + ": the tensor '" + key->text + "' twice");
        }
        out->names_.push_back(key->text);
    }
    return out;
}

const Tensor* TorchStateDict::find(std::string_view name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

Result<Tensor> TorchStateDict::tensor(std::string_view name) const {
    const Tensor* found = find(name);
    if (found == nullptr) {
        return fail(ErrorCode::not_found,
                    path_.string() + ": no tensor named '" + std::string(name) + "'");
    }
    return *found;
}

}  // namespace omnirt::checkpoint
