// convert.cu's launch_convert_from_f32: the bf16/fp16 copy of the fp32 master weights that the compiled
// step makes when it loads or resumes (cuda_train_plan.cpp, load; fused_train_plan.cpp). Its CPU twin
// is the host conversion (core/half.h, which Tensor::to(DType) uses): round to nearest, ties to even.
// Every finite input must give the host's bits exactly: ties both ways, subnormal inputs and results,
// values that round past the largest finite value to infinity, underflow to ±0. ±infinity stays
// itself. NaN must stay NaN, but only NaN-ness is compared: the GPU returns its canonical NaN, the
// host keeps the payload.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sprintnet/core/half.h"
#include "sprintnet/core/random.h"
#include "step_kernel_util.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::gpu;

// The host twin of one 16-bit type.
struct Format {
  DType type;
  std::uint16_t (*to_bits)(float);
  float (*from_bits)(std::uint16_t);
  std::uint16_t infinity;  // its bits; above it (ignoring the sign) NaN
  int min_exponent, max_exponent;  // fp32 biased exponents of the values that do not simply over- or underflow
};
const Format kBf16{DType::kBF16, float_to_bf16_bits, bf16_bits_to_float, 0x7F80, 0, 254};
const Format kFp16{DType::kF16, float_to_fp16_bits, fp16_bits_to_float, 0x7C00, 127 - 26, 127 + 16};

bool is_nan(std::uint16_t bits, const Format& f) { return (bits & 0x7FFFu) > f.infinity; }
float from_u32(std::uint32_t bits) { return std::bit_cast<float>(bits); }

// Inputs whose result is written out by hand (the sign bit added for the negative twin).
struct Special {
  float value;
  std::uint16_t bits;
  bool nan = false;
};
std::vector<Special> specials(const Format& f) {
  const float nan_patterns[] = {from_u32(0x7FC00000u), from_u32(0x7F800001u), from_u32(0x7FFFFFFFu),
                                from_u32(0x7F80FFFFu), from_u32(0x7F810000u)};  // quiet, signalling, payloads
  std::vector<Special> s;
  for (const float nan : nan_patterns) s.push_back({nan, 0, true});
  s.push_back({0.0f, 0x0000});
  s.push_back({std::numeric_limits<float>::infinity(), f.infinity});
  s.push_back({std::numeric_limits<float>::max(), f.infinity});  // far out of range: rounds to infinity
  s.push_back({std::numeric_limits<float>::denorm_min(), 0x0000});  // far below: rounds to zero
  if (f.type == DType::kBF16) {
    s.push_back({from_u32(0x7F7F7FFFu), 0x7F7F});  // just below the tie with infinity: the largest finite
    s.push_back({from_u32(0x7F7F8000u), 0x7F80});  // the tie: 0x7F7F is odd, so up, to infinity
    s.push_back({from_u32(0x7F7E8000u), 0x7F7E});  // a tie below an even: down
    s.push_back({from_u32(0x00008000u), 0x0000});  // fp32 subnormals: a tie between 0 and the smallest bf16
    s.push_back({from_u32(0x00008001u), 0x0001});
    s.push_back({from_u32(0x00018000u), 0x0002});  // the tie between 1 and 2: up, to the even
    s.push_back({from_u32(0x007FFFFFu), 0x0080});  // the largest subnormal rounds up to the smallest normal
    s.push_back({1.0f + 0x1p-8f, 0x3F80});         // 1 + half a step: down, to the even
    s.push_back({1.0f + 0x3p-8f, 0x3F82});         // 1 + a step and a half: up, to the even
  } else {
    s.push_back({65504.0f, 0x7BFF});                               // the largest finite
    s.push_back({std::nextafter(65520.0f, 0.0f), 0x7BFF});         // just below the tie with infinity
    s.push_back({65520.0f, 0x7C00});                               // the tie: 0x7BFF is odd, so up, to infinity
    s.push_back({0x1p-24f, 0x0001});                               // the smallest subnormal
    s.push_back({0x1p-25f, 0x0000});                               // half of it: a tie, down to the even 0
    s.push_back({std::nextafter(0x1p-25f, 1.0f), 0x0001});         // just above the tie
    s.push_back({0x3p-25f, 0x0002});                               // between 1 and 2: up, to the even
    s.push_back({0x1p-26f, 0x0000});
    s.push_back({0x1p-14f - 0x1p-25f, 0x0400});                    // the tie below the smallest normal: up
    s.push_back({1.0f + 0x1p-11f, 0x3C00});
    s.push_back({1.0f + 0x3p-11f, 0x3C02});
    s.push_back({2049.0f, 0x6800});                                // steps of 2 from 2048: a tie, down
    s.push_back({2051.0f, 0x6802});                                // a tie, up
  }
  return s;
}

// Fresh inputs: the specials at both ends (the far end past 2^24 elements, so in the grid-stride loop's
// second pass), and between them in turn: random bit patterns; random values in the range where the
// type has its steps; ties between two neighbours of the type, and the fp32 values either side of a tie.
// tie_results holds, for each tie, the neighbour it must round to (the even one), the host twin included.
struct Inputs {
  std::vector<float> values;
  std::vector<std::pair<std::size_t, std::uint16_t>> tie_results;
  int ties_down = 0, ties_up = 0;
};
Inputs make_inputs(const Format& f, std::size_t count, Generator& gen) {
  Inputs in;
  in.values.resize(count);
  const std::vector<Special> s = specials(f);
  const std::size_t reserved = 2 * s.size();  // at each end: each special and its negative
  for (std::size_t k = 0; k < reserved; ++k) {
    const float value = k % 2 == 0 ? s[k / 2].value : -s[k / 2].value;
    in.values[k] = value;
    in.values[count - 1 - k] = value;
  }
  for (std::size_t i = reserved; i < count - reserved; ++i) {
    const std::uint32_t sign = gen.below(2) == 0 ? 0u : 0x80000000u;
    switch (i % 4) {
      case 0: in.values[i] = from_u32(gen.next_u32()); break;
      case 1: {
        const auto exponent = static_cast<std::uint32_t>(f.min_exponent) +
                              static_cast<std::uint32_t>(gen.below(static_cast<std::uint64_t>(f.max_exponent - f.min_exponent + 1)));
        in.values[i] = from_u32(sign | exponent << 23 | (gen.next_u32() & 0x7FFFFFu));
        break;
      }
      default: {
        // Neighbours h and h + 1 (both finite, h + 1 possibly the smallest subnormal above 0), and their
        // midpoint: one bit more than the type holds, so exact in fp32.
        const auto h = static_cast<std::uint16_t>(gen.below(f.infinity - 1u));
        const double low = f.from_bits(h), high = f.from_bits(static_cast<std::uint16_t>(h + 1));
        const float tie = static_cast<float>((low + high) / 2.0);
        const auto sign16 = static_cast<std::uint16_t>(sign >> 16);
        if (i % 4 == 2) {
          in.values[i] = from_u32(std::bit_cast<std::uint32_t>(tie) | sign);
          const bool down = (h & 1u) == 0;
          (down ? in.ties_down : in.ties_up) += 1;
          in.tie_results.emplace_back(i, static_cast<std::uint16_t>((down ? h : h + 1) | sign16));
        } else {  // an fp32 step either side of the tie: to the nearer neighbour
          const bool above = gen.below(2) == 1;
          const float near = std::nextafter(tie, above ? 2.0f * static_cast<float>(high) : 0.0f);
          in.values[i] = from_u32(std::bit_cast<std::uint32_t>(near) | sign);
          in.tie_results.emplace_back(i, static_cast<std::uint16_t>((above ? h + 1 : h) | sign16));
        }
        break;
      }
    }
  }
  return in;
}

std::vector<std::uint16_t> bits_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(host.numel()));
  std::memcpy(bits.data(), host.raw_data(), bits.size() * sizeof(std::uint16_t));
  return bits;
}

// A buffer of count + 8 elements of `type` on the GPU with every byte 0x5A: the other poison, beside NaN.
Tensor bytes_5a(std::int64_t count, DType type) {
  Tensor t = Tensor::empty({count + 8}, type, gpu());
  SN_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0x5A, t.nbytes(), test::gpu_stream()));
  SN_CUDA_CHECK(cudaStreamSynchronize(test::gpu_stream()));
  return t;
}

TEST(ConvertFromF32, RoundsToNearestEvenAsTheHostDoes) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 301);
  const std::int64_t count = (std::int64_t{1} << 24) + 4099;  // past the capped grid's 2^24 threads
  for (const Format& f : {kBf16, kFp16}) {
    const std::string what(dtype_name(f.type));
    const Inputs in = make_inputs(f, static_cast<std::size_t>(count), gen);
    std::vector<std::uint16_t> want(in.values.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = f.to_bits(in.values[i]);

    // The oracle itself first: the hand-written results and the ties' even neighbours.
    for (const Special& sp : specials(f)) {
      for (const float value : {sp.value, -sp.value}) {
        const std::uint16_t host = f.to_bits(value);
        const auto sign = static_cast<std::uint16_t>(std::signbit(value) ? 0x8000u : 0u);
        if (sp.nan) {
          ASSERT_TRUE(is_nan(host, f)) << what << ": the host twin turns NaN " << std::bit_cast<std::uint32_t>(value);
        } else {
          ASSERT_EQ(host, sp.bits | sign) << what << ": the host twin on " << value;
        }
      }
    }
    for (const auto& [i, bits] : in.tie_results) {
      ASSERT_EQ(want[i], bits) << what << ": the host twin on " << in.values[i];
    }
    // Ties that round down and ties that round up: truncation and rounding half away would each fail half of them.
    EXPECT_GT(in.ties_down, 1000) << what;
    EXPECT_GT(in.ties_up, 1000) << what;

    const Tensor src = Tensor::from_vector(in.values, {count}, gpu());
    // Two poisons: an element left unwritten shows in one of them whatever its expected value.
    for (const bool nan_poison : {true, false}) {
      const Tensor dst = nan_poison ? test::poisoned({count + 8}, f.type).to(gpu()) : bytes_5a(count, f.type);
      const std::string run = what + (nan_poison ? ", NaN poison" : ", 0x5A poison");
      SN_CUDA_CHECK(cuda::launch_convert_from_f32(src.data<float>(), dst.raw_data(), test::element_type(f.type), count,
                                                  test::gpu_stream()));
      const std::vector<std::uint16_t> got = bits_of(dst);
      std::int64_t wrong = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        const bool same = is_nan(want[i], f) ? is_nan(got[i], f) : got[i] == want[i];
        if (!same && ++wrong <= 5) {
          ADD_FAILURE() << run << ": element " << i << ", fp32 bits " << std::hex
                        << std::bit_cast<std::uint32_t>(in.values[i]) << " gave " << got[i] << ", the host "
                        << want[i] << std::dec;
        }
      }
      EXPECT_EQ(wrong, 0) << run << ": elements that differ from the host conversion";
      for (std::size_t i = want.size(); i < got.size(); ++i) {
        EXPECT_TRUE(nan_poison ? is_nan(got[i], f) : got[i] == 0x5A5A) << run << ": element " << i
                                                                        << ", past the count, was written";
      }
    }
  }
}

}  // namespace
}  // namespace sprintnet
