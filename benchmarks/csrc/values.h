// values.h -- the C++ data of the "values" benchmark family: one struct A
// holding the same members as zsharp_py's ValueActor (benchmarks/values.py),
// in plain C++/STL, bound by nb_values.cpp (nanobind) and pb_values.cpp
// (pybind11).
//
// Every binding module is compiled twice (benchmarks/_build.py): with
// -DBENCH_OPAQUE=1 the containers are opaque bound classes (bind_vector,
// bind_map, a hand-bound set class), with -DBENCH_OPAQUE=0 they go through
// the STL casters. Each build puts these types in its own namespace
// (-DBENCH_NS=...), so two builds loaded in one process never register the
// same C++ type twice.
//
// zsharp_py's member          C++ here
// V pos (zs.Struct)           V pos (x, y doubles)
// zs.String label             std::string
// zs.Set[zs.Name] tags        std::unordered_set<std::string> (no FName: same type as stags)
// zs.Set[zs.String] stags     std::unordered_set<std::string>
// zs.Array["A"] kids          std::vector<A *> (non-owning: the kids live in Python)
// zs.Array[zs.Float64]        std::vector<double>
// zs.Array[zs.Int32]          std::vector<int32_t>
// zs.Map[zs.Name, zs.Int32]   std::unordered_map<std::string, int32_t>
// zs.Optional[zs.Float64]     std::optional<double>
// zs.Delegate                 Delegate: one std::function<void()>
// zs.MulticastDelegate        Multicast: a vector of (handle, std::function<void()>);
//                             add returns a handle, remove takes it (Unreal's
//                             FDelegateHandle: std::function cannot be compared)
// zs.WeakObjectPtr["A"]       WeakPtr: index + serial into a registry of live A
//                             (what FWeakObjectPtr and zsharp_py do; std::weak_ptr
//                             would need every A owned by a shared_ptr)
// zs.SoftObjectPtr["A"]       SoftPtr: a path, looked up in a hash map path -> A *
// zs.FieldPath                FieldPath: a "pos.x" path resolved once, by name,
//                             to a byte offset and a kind (the generic
//                             pointer-to-member), then read and written by offset
#ifndef BENCH_VALUES_H
#define BENCH_VALUES_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#ifndef BENCH_NS
#error "define BENCH_NS (one namespace per build)"
#endif

namespace BENCH_NS {

struct V {
    double x = 0.0, y = 0.0;
    V() = default;
    V(double x_, double y_) : x(x_), y(y_) {}
};

using StringSet = std::unordered_set<std::string>;
using FloatVec = std::vector<double>;
using IntVec = std::vector<int32_t>;
using ScoreMap = std::unordered_map<std::string, int32_t>;

struct A;
using KidVec = std::vector<A *>;

// The single delegate: one binding, executed from C++.
struct Delegate {
    std::function<void()> fn;
    void bind(std::function<void()> f) { fn = std::move(f); }
    void unbind() { fn = nullptr; }
    bool is_bound() const { return static_cast<bool>(fn); }
    void execute() const {
        if (!fn) throw std::runtime_error("Delegate.execute: nothing bound");
        fn();
    }
};

// The multicast delegate: ordered bindings, called on a snapshot (as
// zsharp_py's broadcast does, so listeners may add or remove bindings).
struct Multicast {
    uint64_t next = 1;
    std::vector<std::pair<uint64_t, std::function<void()>>> listeners;
    uint64_t add(std::function<void()> f) {
        listeners.emplace_back(next, std::move(f));
        return next++;
    }
    bool remove(uint64_t handle) {
        for (auto it = listeners.begin(); it != listeners.end(); ++it) {
            if (it->first == handle) {
                listeners.erase(it);
                return true;
            }
        }
        return false;
    }
    void clear() { listeners.clear(); }
    size_t size() const { return listeners.size(); }
    void broadcast() const {
        auto snapshot = listeners;
        for (auto &listener : snapshot) listener.second();
    }
};

// The registry of live A: slots (pointer + serial) for weak pointers, and
// paths for soft pointers. A destroyed A bumps its slot's serial, so an old
// WeakPtr never resolves to an A reusing the slot.
struct Slot {
    A *object = nullptr;
    uint32_t serial = 1;
};

inline std::vector<Slot> &slots() {
    static std::vector<Slot> table;
    return table;
}

inline std::vector<uint32_t> &free_slots() {
    static std::vector<uint32_t> list;
    return list;
}

inline std::unordered_map<std::string, A *> &by_path() {
    static std::unordered_map<std::string, A *> map;
    return map;
}

struct WeakPtr {
    uint32_t index = UINT32_MAX;
    uint32_t serial = 0;
    WeakPtr() = default;
    explicit WeakPtr(const A &object);
    A *get() const {
        const auto &table = slots();
        if (index < table.size() && table[index].serial == serial) return table[index].object;
        return nullptr;
    }
};

struct SoftPtr {
    std::string path;
    SoftPtr() = default;
    explicit SoftPtr(std::string p) : path(std::move(p)) {}
    A *get() const {
        const auto &map = by_path();
        auto found = map.find(path);
        return found == map.end() ? nullptr : found->second;
    }
};

struct A {
    int32_t hp = 0; // first: &a.pos never equals &a (one instance per address)
    V pos;
    std::string label;
    StringSet tags;
    StringSet stags;
    KidVec kids;
    FloatVec floats;
    IntVec ints;
    ScoreMap scores;
    std::optional<double> opt;
    Delegate on_hit;
    Multicast on_event;
    WeakPtr weak;
    SoftPtr soft;
    std::string path;
    uint32_t slot = 0;

    explicit A(int32_t hp_ = 0, std::string label_ = std::string(),
               std::string path_ = std::string())
        : hp(hp_), label(std::move(label_)), path(std::move(path_)) {
        auto &table = slots();
        auto &free = free_slots();
        if (!free.empty()) {
            slot = free.back();
            free.pop_back();
        } else {
            slot = static_cast<uint32_t>(table.size());
            table.emplace_back();
        }
        table[slot].object = this;
        if (!path.empty()) by_path()[path] = this;
    }
    A(const A &) = delete;
    A &operator=(const A &) = delete;
    ~A() {
        auto &entry = slots()[slot];
        entry.object = nullptr;
        ++entry.serial;
        free_slots().push_back(slot);
        if (!path.empty()) {
            auto found = by_path().find(path);
            if (found != by_path().end() && found->second == this) by_path().erase(found);
        }
    }
};

inline WeakPtr::WeakPtr(const A &object)
    : index(object.slot), serial(slots()[object.slot].serial) {}

// A field path resolved by name once (as zs.FieldPath resolves against the
// class), then applied by offset: the generic form of a pointer-to-member
// chain (C++ cannot compose &A::pos and &V::x into one member pointer).
enum class FieldKind { Int32, Float64 };

struct FieldPath {
    size_t offset = 0;
    FieldKind kind = FieldKind::Float64;

    explicit FieldPath(const std::string &spec) {
        // The member tables of A and V (name -> offset, kind or struct).
        // offsetof on A (not standard-layout: it holds std::string) is
        // conditionally supported; GCC and Clang support it.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
#endif
        struct Field {
            const char *name;
            size_t offset;
            int what;
        }; // what: 0 int32, 1 double, 2 V
        static const Field a_fields[] = {{"hp", offsetof(A, hp), 0}, {"pos", offsetof(A, pos), 2}};
        static const Field v_fields[] = {{"x", offsetof(V, x), 1}, {"y", offsetof(V, y), 1}};
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
        const Field *table = a_fields;
        size_t count = 2;
        size_t start = 0;
        offset = 0;
        while (true) {
            size_t dot = spec.find('.', start);
            std::string part = spec.substr(start, dot == std::string::npos ? std::string::npos
                                                                           : dot - start);
            const Field *found = nullptr;
            for (size_t i = 0; i < count; ++i)
                if (part == table[i].name) found = &table[i];
            if (found == nullptr)
                throw std::invalid_argument("FieldPath: no field '" + part + "' in '" + spec + "'");
            offset += found->offset;
            if (found->what == 2) {
                if (dot == std::string::npos)
                    throw std::invalid_argument("FieldPath: '" + spec + "' ends at a struct");
                table = v_fields;
                count = 2;
                start = dot + 1;
                continue;
            }
            if (dot != std::string::npos)
                throw std::invalid_argument("FieldPath: '" + part + "' is not a struct");
            kind = found->what == 0 ? FieldKind::Int32 : FieldKind::Float64;
            return;
        }
    }

    template <typename T> T *at(A &object) const {
        return reinterpret_cast<T *>(reinterpret_cast<char *>(&object) + offset);
    }
};

} // namespace BENCH_NS

#endif
