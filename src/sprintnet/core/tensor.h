#pragma once
// Tensor: a dense, contiguous, row-major n-d array with a dtype and a device.
// Copies of a Tensor share storage (like torch.Tensor); clone() copies data.
// Storage is RAII: the bytes go back to their allocator with the last owner.
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sprintnet/core/device.h"
#include "sprintnet/core/dtype.h"
#include "sprintnet/core/error.h"

namespace sprintnet {

class Allocator;
using Shape = std::vector<std::int64_t>;
std::string shape_str(const Shape& shape);
std::int64_t shape_numel(const Shape& shape);

// Owns one allocation. Move-only: a copy would mean two frees.
class Storage {
 public:
  Storage(std::size_t bytes, Allocator& allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const;
  // Writes into these bytes by ops so far (torch's version counter): what a module's saved tensors are checked
  // against in backward. Atomic: runs on several threads (a sweep) may read one storage's count.
  std::uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Allocator* allocator_ = nullptr;
  std::atomic<std::uint64_t> version_{0};
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());
  static Tensor full(Shape shape, double value, DType dtype, Device device = Device::cpu());
  // Host data copied into a new tensor on `device`.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape, Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t size(std::int64_t axis) const;
  // 0 when undefined (its shape [] would otherwise count as one scalar element).
  std::int64_t numel() const { return defined() ? shape_numel(shape_) : 0; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const;

  void* raw_data() const;
  template <typename T>
  T* data() const {
    SN_CHECK(DTypeOf<T>::value == dtype_, "tensor holds {}, accessed as {}", dtype_name(dtype_),
             dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(raw_data());
  }
  // A host-side view of a CPU tensor's elements.
  template <typename T>
  std::span<T> span() const {
    SN_CHECK(device().is_cpu(), "span() needs a CPU tensor, this one is on {}", device().str());
    return {data<T>(), static_cast<std::size_t>(numel())};
  }

  // Same storage, new shape with the same number of elements. Every extent is given: none is negative, and
  // none is inferred (torch's view(-1) is not supported).
  Tensor view(Shape shape) const;
  // Rows [begin, end) along the first axis, sharing storage.
  Tensor slice_rows(std::int64_t begin, std::int64_t end) const;
  // Whether the two share any byte of storage (an empty or undefined tensor shares none): ops refuse an output
  // that overlaps an input, optimizers a parameter that overlaps another.
  bool overlaps(const Tensor& other) const;
  // Writes into this tensor's storage by ops so far, shared by every tensor viewing it (torch's _version); 0 when
  // undefined. Writes through data() or span() are not counted (as torch's through data_ptr()).
  std::uint64_t version() const { return defined() ? storage_->version() : 0; }
  // Counts a write into this tensor's storage: each op calls it for the tensors it writes.
  void mark_modified() const {
    if (defined()) storage_->bump_version();
  }
  Tensor clone() const;
  Tensor to(Device device) const;
  // Element type conversion (on the CPU); returns *this when already of that type.
  Tensor to(DType dtype) const;
  // Copy of the elements to a host vector, converting to T.
  template <typename T>
  std::vector<T> to_vector() const;
  // Single value of a one-element tensor, as double.
  double item() const;

 private:
  Tensor(std::shared_ptr<Storage> storage, std::size_t offset, Shape shape, DType dtype);

  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;  // bytes into storage_
  Shape shape_;
  DType dtype_ = DType::kF32;
};

// Throws a message naming `what` when the tensor's shape is not `expected`.
void check_shape(const Tensor& t, const Shape& expected, std::string_view what);
// A fill value an integer dtype cannot hold (NaN, or outside its range) is an error naming `op`, not the
// undefined behaviour of a plain cast. Floating dtypes take any value (out of range rounds to inf, as a cast).
void check_fill_value(DType dtype, double value, std::string_view op);

}  // namespace sprintnet
