#include "sprintnet/core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include "sprintnet/core/half.h"
#include "sprintnet/memory/allocator.h"
#include "sprintnet/ops/backend.h"

namespace sprintnet {

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return out + "]";
}

std::int64_t shape_numel(const Shape& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;  // whatever the other extents
  std::int64_t numel = 1;
  for (const auto extent : shape) {
    SN_CHECK(!__builtin_mul_overflow(numel, extent, &numel), "shape {} has more than 2^63 elements",
             shape_str(shape));
  }
  return numel;
}

Storage::Storage(std::size_t bytes, Allocator& allocator)
    : data_(allocator.allocate(bytes)), bytes_(bytes), allocator_(&allocator) {}

Storage::~Storage() { allocator_->deallocate(data_, bytes_); }

Device Storage::device() const { return allocator_->device(); }

Tensor::Tensor(std::shared_ptr<Storage> storage, std::size_t offset, Shape shape, DType dtype)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)), dtype_(dtype) {}

namespace {

// The first negative extent of `shape`, 0 when there is none. Negative extents are refused wherever a shape is
// given: two of them multiply to a real element count ([6] viewed as [-2, -3]).
std::int64_t first_negative_extent(const Shape& shape) {
  const auto it = std::find_if(shape.begin(), shape.end(), [](std::int64_t extent) { return extent < 0; });
  return it == shape.end() ? 0 : *it;
}

}  // namespace

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  const std::int64_t negative = first_negative_extent(shape);
  SN_CHECK(negative == 0, "negative extent {} in shape {}", negative, shape_str(shape));
  // shape_numel refuses more than 2^63 elements; a byte count that wraps around would allocate a small
  // buffer for a huge shape.
  std::size_t bytes = 0;
  SN_CHECK(!__builtin_mul_overflow(static_cast<std::size_t>(shape_numel(shape)), dtype_size(dtype), &bytes),
           "a {} tensor of shape {} needs more than 2^64 bytes", dtype_name(dtype), shape_str(shape));
  auto storage = std::make_shared<Storage>(bytes, backend_for(device).allocator());
  return Tensor(std::move(storage), 0, std::move(shape), dtype);
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) { return full(std::move(shape), 0.0, dtype, device); }

Tensor Tensor::full(Shape shape, double value, DType dtype, Device device) {
  check_fill_value(dtype, value, "Tensor::full");
  Tensor t = empty(std::move(shape), dtype, device);
  backend_for(device).fill(t, value);
  return t;
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape, Device device) {
  SN_CHECK(shape_numel(shape) == static_cast<std::int64_t>(values.size()), "{} values do not fill shape {}",
           values.size(), shape_str(shape));
  Tensor host = empty(shape, DTypeOf<T>::value, Device::cpu());
  if (!values.empty()) std::memcpy(host.raw_data(), values.data(), values.size() * sizeof(T));
  return device.is_cpu() ? host : host.to(device);
}
template Tensor Tensor::from_vector(const std::vector<float>&, Shape, Device);
template Tensor Tensor::from_vector(const std::vector<double>&, Shape, Device);
template Tensor Tensor::from_vector(const std::vector<std::int32_t>&, Shape, Device);
template Tensor Tensor::from_vector(const std::vector<std::uint8_t>&, Shape, Device);

std::int64_t Tensor::size(std::int64_t axis) const {
  const std::int64_t d = dim();
  const std::int64_t index = axis < 0 ? axis + d : axis;
  SN_CHECK(index >= 0 && index < d, "axis {} out of range for shape {}", axis, shape_str(shape_));
  return shape_[static_cast<std::size_t>(index)];
}

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

void* Tensor::raw_data() const {
  SN_CHECK(defined(), "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_;
}

Tensor Tensor::view(Shape shape) const {
  const std::int64_t negative = first_negative_extent(shape);
  SN_CHECK(negative == 0, "cannot view {} as {}: extent {} is negative (view infers no extent from -1: give each one)",
           shape_str(shape_), shape_str(shape), negative);
  SN_CHECK(shape_numel(shape) == numel(), "cannot view {} as {}", shape_str(shape_), shape_str(shape));
  return Tensor(storage_, offset_, std::move(shape), dtype_);
}

Tensor Tensor::slice_rows(std::int64_t begin, std::int64_t end) const {
  SN_CHECK(dim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "rows [{}, {}) out of range for shape {}",
           begin, end, shape_str(shape_));
  Shape shape = shape_;
  shape[0] = end - begin;
  const std::size_t row_bytes = static_cast<std::size_t>(numel() / std::max<std::int64_t>(shape_[0], 1)) * dtype_size(dtype_);
  return Tensor(storage_, offset_ + static_cast<std::size_t>(begin) * row_bytes, std::move(shape), dtype_);
}

bool Tensor::overlaps(const Tensor& other) const {
  // Every Storage is an allocation of its own: tensors of two storages never share a byte.
  if (storage_ == nullptr || storage_ != other.storage_ || nbytes() == 0 || other.nbytes() == 0) return false;
  return offset_ < other.offset_ + other.nbytes() && other.offset_ < offset_ + nbytes();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_, device());
  backend_for(device()).copy(out, *this);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor out = empty(shape_, dtype_, target);
  // The device side's backend knows how to move bytes across.
  backend_for(target.is_cpu() ? device() : target).copy(out, *this);
  return out;
}

namespace {

double load_as_double(const void* base, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kF64: return static_cast<const double*>(base)[i];
    case DType::kBF16: return bf16_bits_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::kF16: return fp16_bits_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::kI32: return static_cast<const std::int32_t*>(base)[i];
    case DType::kU8: return static_cast<const std::uint8_t*>(base)[i];
  }
  return 0.0;
}

// Whether integer type I holds `v` (false for NaN), and its range as the messages name it.
template <typename I>
constexpr std::int64_t kLowest = static_cast<std::int64_t>(std::numeric_limits<I>::min());
template <typename I>
constexpr std::int64_t kHighest = static_cast<std::int64_t>(std::numeric_limits<I>::max());
template <typename I>
bool holds(double v) {
  return v >= static_cast<double>(kLowest<I>) && v <= static_cast<double>(kHighest<I>);
}

// An integer element from a double: out of the type's range (or NaN) is an error naming the value, not the
// undefined behaviour of a plain cast (which wraps 300 to 44 as uint8).
// The value is truncated toward zero first, as torch converts (-0.5 is 0 in uint8, 2.7 is 2); what is out of
// range after that is refused (torch wraps it: -1 would be 255).
template <typename I>
I checked_integer(double v, std::size_t i) {
  SN_CHECK(holds<I>(std::trunc(v)), "element {} is {}, outside the range of {} ([{}, {}])", i, v,
           dtype_name(DTypeOf<I>::value), kLowest<I>, kHighest<I>);
  return static_cast<I>(v);
}

// The same for a fill value, named by the op that takes it.
template <typename I>
void check_fill(double v, std::string_view op) {
  SN_CHECK(holds<I>(std::trunc(v)), "{}: {} is outside the range of {} ([{}, {}])", op, v, dtype_name(DTypeOf<I>::value),
           kLowest<I>, kHighest<I>);
}

void store_from_double(void* base, DType dtype, std::size_t i, double v) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case DType::kF64: static_cast<double*>(base)[i] = v; return;
    case DType::kBF16: static_cast<std::uint16_t*>(base)[i] = float_to_bf16_bits(static_cast<float>(v)); return;
    case DType::kF16: static_cast<std::uint16_t*>(base)[i] = float_to_fp16_bits(static_cast<float>(v)); return;
    case DType::kI32: static_cast<std::int32_t*>(base)[i] = checked_integer<std::int32_t>(v, i); return;
    case DType::kU8: static_cast<std::uint8_t*>(base)[i] = checked_integer<std::uint8_t>(v, i); return;
  }
}

}  // namespace

Tensor Tensor::to(DType target) const {
  if (target == dtype_) return *this;
  SN_CHECK(defined(), "to({}): the tensor is undefined", dtype_name(target));
  const Tensor host = to(Device::cpu());
  Tensor out = empty(shape_, target, Device::cpu());
  const auto n = static_cast<std::size_t>(numel());
  for (std::size_t i = 0; i < n; ++i) store_from_double(out.raw_data(), target, i, load_as_double(host.raw_data(), dtype_, i));
  return out.to(device());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  SN_CHECK(defined(), "to_vector: the tensor is undefined");
  const Tensor host = to(Device::cpu());
  std::vector<T> out(static_cast<std::size_t>(numel()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double v = load_as_double(host.raw_data(), dtype_, i);
    if constexpr (std::is_integral_v<T>) {
      out[i] = checked_integer<T>(v, i);
    } else {
      out[i] = static_cast<T>(v);
    }
  }
  return out;
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<std::int32_t> Tensor::to_vector() const;
template std::vector<std::uint8_t> Tensor::to_vector() const;

double Tensor::item() const {
  SN_CHECK(defined(), "item() of an undefined tensor");
  SN_CHECK(numel() == 1, "item() needs one element, the tensor has shape {}", shape_str(shape_));
  return to_vector<double>()[0];
}

void check_fill_value(DType dtype, double value, std::string_view op) {
  if (dtype == DType::kI32) check_fill<std::int32_t>(value, op);
  if (dtype == DType::kU8) check_fill<std::uint8_t>(value, op);
}

void check_shape(const Tensor& t, const Shape& expected, std::string_view what) {
  SN_CHECK(t.defined(), "{} is undefined, expected shape {}", what, shape_str(expected));
  SN_CHECK(t.shape() == expected, "{} has shape {}, expected {}", what, shape_str(t.shape()), shape_str(expected));
}

}  // namespace sprintnet
