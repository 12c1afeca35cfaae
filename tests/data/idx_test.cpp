// The IDX reader: round trips through write_idx, and one test per way a file
// can be broken, each checking that the message names the file and the fault.
#include "sprintnet/data/idx.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string_view>
#include <thread>

#include "data/idx_files.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using test::error_message;
using test::idx_header;
using test::ScratchDir;

constexpr std::array kAllTypes = {IdxType::kU8, IdxType::kI8, IdxType::kI16, IdxType::kI32, IdxType::kF32, IdxType::kF64};

TEST(Idx, RoundTripsEveryTypeRawAndGzip) {
  ScratchDir dir("idx-roundtrip");
  Generator gen(test::test_seed());
  for (const IdxType type : kAllTypes) {
    for (const bool gzip : {false, true}) {
      // 1 to 4 dims with extents >= 2, so the payload has at least 2 random elements.
      std::vector<std::int64_t> dims(1 + gen.below(4));
      std::int64_t numel = 1;
      for (auto& d : dims) numel *= (d = static_cast<std::int64_t>(2 + gen.below(5)));
      const auto bytes = test::random_bytes(static_cast<std::size_t>(numel) * idx_element_size(type), gen);
      ASSERT_NE(bytes, std::vector<std::uint8_t>(bytes.size(), 0)) << "random payload came out all zero";
      const auto path = dir / fmt::format("{}-{}.idx", idx_type_name(type), gzip);

      write_idx(path, type, dims, bytes, gzip);
      const auto file = test::read_bytes(path);
      ASSERT_GE(file.size(), 2u);
      if (gzip) {
        EXPECT_EQ(file[0], 0x1f) << "gzip=true must write a gzip stream";
        EXPECT_EQ(file[1], 0x8b);
      } else {
        EXPECT_EQ(file.size(), 4 + 4 * dims.size() + bytes.size());
      }

      const IdxArray back = read_idx(path);
      EXPECT_EQ(back.type, type);
      EXPECT_EQ(back.dims, dims);
      EXPECT_EQ(back.numel(), numel);
      EXPECT_EQ(back.bytes, bytes) << idx_type_name(type) << " gzip=" << gzip;
    }
  }
  // Written through a temporary file that is renamed: nothing else is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 2 * std::ssize(kAllTypes));
}

TEST(Idx, DetectsGzipByContentNotByName) {
  ScratchDir dir("idx-detect");
  Generator gen(test::test_seed());
  const auto bytes = test::random_bytes(6, gen, 1);  // nonzero, so a mix-up cannot read as zeros
  write_idx(dir / "raw.gz", IdxType::kU8, {2, 3}, bytes, /*gzip=*/false);
  write_idx(dir / "compressed.idx", IdxType::kU8, {2, 3}, bytes, /*gzip=*/true);
  EXPECT_EQ(read_idx(dir / "raw.gz").bytes, bytes);
  EXPECT_EQ(read_idx(dir / "compressed.idx").bytes, bytes);
}

TEST(Idx, BigEndianHeaderAndPayloadAreKeptAsStored) {
  ScratchDir dir("idx-endian");
  // One int32 element 0x01020304 in a [1] array, written by hand.
  test::write_bytes(dir / "a", test::concat(idx_header(0x0C, {1}), {1, 2, 3, 4}));
  const IdxArray a = read_idx(dir / "a");
  EXPECT_EQ(a.type, IdxType::kI32);
  EXPECT_EQ(a.dims, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(a.bytes, (std::vector<std::uint8_t>{1, 2, 3, 4}));
  // Extents above 2^31 are unsigned in the format.
  test::write_bytes(dir / "b", test::concat(idx_header(0x08, {0x80000000u}), {}));
  EXPECT_THAT(error_message([&] { read_idx(dir / "b"); }), HasSubstr("header says 2147483648 = 2147483648 bytes"));
}

TEST(Idx, MissingFileSaysToFetchTheData) {
  ScratchDir dir("idx-missing");
  const auto path = dir / "nope-idx3-ubyte";
  EXPECT_THAT(error_message([&] { read_idx(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("no such file"), HasSubstr("scripts/get-data")));
  EXPECT_THAT(error_message([&] { read_idx(dir.path()); }), HasSubstr("is a directory"));
}

TEST(Idx, RejectsWrongMagic) {
  ScratchDir dir("idx-magic");
  const auto path = dir / "html";
  test::write_bytes(path, {'<', '!', 'D', 'O', 'C', 'T', 'Y', 'P', 'E'});
  EXPECT_THAT(error_message([&] { read_idx(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("not an IDX file"), HasSubstr("3c 21"),
                    HasSubstr("re-run scripts/get-data")));
}

TEST(Idx, RejectsFileShorterThanTheMagic) {
  ScratchDir dir("idx-short");
  const auto path = dir / "short";
  test::write_bytes(path, {0, 0});
  EXPECT_THAT(error_message([&] { read_idx(path); }), AllOf(HasSubstr(path.string()), HasSubstr("only 2 bytes")));
}

TEST(Idx, RejectsUnknownElementType) {
  ScratchDir dir("idx-type");
  const auto path = dir / "type";
  test::write_bytes(path, test::concat(idx_header(0x07, {2}), {1, 2}));
  EXPECT_THAT(error_message([&] { read_idx(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("unknown element type code 0x07")));
}

TEST(Idx, RejectsDimensionCountOutsideOneToFour) {
  ScratchDir dir("idx-ndims");
  const auto none = dir / "none";
  test::write_bytes(none, idx_header(0x08, {}));
  EXPECT_THAT(error_message([&] { read_idx(none); }),
              AllOf(HasSubstr(none.string()), HasSubstr("declares 0 dimensions"), HasSubstr("1 to 4")));
  const auto five = dir / "five";
  test::write_bytes(five, test::concat(idx_header(0x08, {1, 1, 1, 1, 1}), {7}));
  EXPECT_THAT(error_message([&] { read_idx(five); }),
              AllOf(HasSubstr(five.string()), HasSubstr("declares 5 dimensions")));
}

TEST(Idx, RejectsZeroExtent) {
  ScratchDir dir("idx-zero");
  const auto path = dir / "zero";
  test::write_bytes(path, idx_header(0x08, {3, 0, 2}));
  EXPECT_THAT(error_message([&] { read_idx(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("dimension 1 is zero"), HasSubstr("3×0×2")));
}

TEST(Idx, RejectsHeaderShorterThanItsDimensions) {
  ScratchDir dir("idx-header");
  const auto path = dir / "header";
  auto bytes = idx_header(0x08, {2, 3, 4});
  bytes.resize(8);  // magic + the first of three extents
  test::write_bytes(path, bytes);
  EXPECT_THAT(error_message([&] { read_idx(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("header is truncated"), HasSubstr("declares 3 dimensions"),
                    HasSubstr("only 4 bytes follow")));
}

TEST(Idx, RejectsTruncatedPayload) {
  ScratchDir dir("idx-truncated");
  Generator gen(test::test_seed());
  const auto path = dir / "train-images-idx3-ubyte";
  test::write_bytes(path, test::concat(idx_header(0x08, {60000, 28, 28}), test::random_bytes(1234, gen)));
  EXPECT_THAT(error_message([&] { read_idx(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("truncated: header says 60000×28×28 = 47040000 bytes"),
                    HasSubstr("the file has 1234"), HasSubstr("re-run scripts/get-data")));
  // Wider elements: the byte count includes the element size.
  const auto floats = dir / "floats";
  test::write_bytes(floats, test::concat(idx_header(0x0D, {2, 3}), test::random_bytes(23, gen)));
  EXPECT_THAT(error_message([&] { read_idx(floats); }),
              AllOf(HasSubstr("2×3 × 4 bytes (float32) = 24 bytes"), HasSubstr("the file has 23")));
}

TEST(Idx, RejectsTrailingBytes) {
  ScratchDir dir("idx-trailing");
  Generator gen(test::test_seed());
  const auto raw = dir / "raw";
  test::write_bytes(raw, test::concat(idx_header(0x08, {2, 3}), test::random_bytes(6 + 3, gen)));
  EXPECT_THAT(error_message([&] { read_idx(raw); }),
              AllOf(HasSubstr(raw.string()), HasSubstr("3 trailing bytes"), HasSubstr("2×3 = 6 bytes")));
  // Same inside a gzip stream: the decompressed payload is what counts.
  const auto gz = dir / "gz";
  test::write_gzip_bytes(gz, test::concat(idx_header(0x08, {2, 3}), test::random_bytes(6 + 5, gen)));
  EXPECT_THAT(error_message([&] { read_idx(gz); }),
              AllOf(HasSubstr(gz.string()), HasSubstr("5 trailing bytes"), HasSubstr("once decompressed")));
}

TEST(Idx, RejectsCorruptAndTruncatedGzip) {
  ScratchDir dir("idx-gzip");
  Generator gen(test::test_seed());
  const auto good = dir / "good.gz";
  // Random bytes do not compress: the deflate stream is as long as the data, so its middle is payload.
  write_idx(good, IdxType::kU8, {64, 64}, test::random_bytes(64 * 64, gen), /*gzip=*/true);
  const auto bytes = test::read_bytes(good);
  ASSERT_GT(bytes.size(), 4000u);

  auto flipped = bytes;
  flipped[flipped.size() / 2] ^= 0xFF;
  const auto corrupt = dir / "corrupt.gz";
  test::write_bytes(corrupt, flipped);
  EXPECT_THAT(error_message([&] { read_idx(corrupt); }),
              AllOf(HasSubstr(corrupt.string()), HasSubstr("corrupt or truncated gzip stream")));

  const auto cut = dir / "cut.gz";
  test::write_bytes(cut, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + std::ssize(bytes) / 2));
  EXPECT_THAT(error_message([&] { read_idx(cut); }),
              AllOf(HasSubstr(cut.string()), HasSubstr("corrupt or truncated gzip stream")));

  // A bad deflate header right after the gzip magic.
  const auto garbage = dir / "garbage.gz";
  test::write_bytes(garbage, test::concat({0x1f, 0x8b, 0x08, 0x00}, test::random_bytes(64, gen)));
  EXPECT_THAT(error_message([&] { read_idx(garbage); }), HasSubstr(garbage.string()));
}

std::vector<std::uint8_t> bytes_of(std::string_view text) { return {text.begin(), text.end()}; }

// zlib's gzread ends a gzip file at its last member and ignores bytes after it that do not start
// another member: "garbage!" appended to a valid .gz trained with exit 0, where trailing bytes of a
// raw file were refused. Payloads of 4 bytes and of 360 kB (random, so the compressed stream is
// longer than the reader's 256 KiB input buffer and the end of the member comes in a later read).
TEST(Idx, RejectsBytesAfterTheGzipStream) {
  ScratchDir dir("idx-gzip-trailing");
  Generator gen(test::test_seed());
  for (const std::int64_t side : {2, 600}) {
    const auto payload = test::random_bytes(static_cast<std::size_t>(side * side), gen, 1);
    const auto good = dir / fmt::format("good-{}.gz", side);
    write_idx(good, IdxType::kU8, {side, side}, payload, /*gzip=*/true);
    EXPECT_TRUE(read_idx(good).bytes == payload) << "a valid .gz must still load";
    const auto bad = dir / fmt::format("bad-{}.gz", side);
    test::write_bytes(bad, test::concat(test::read_bytes(good), bytes_of("garbage!")));
    EXPECT_THAT(error_message([&] { read_idx(bad); }),
                AllOf(HasSubstr(bad.string()), HasSubstr("8 trailing bytes after the gzip stream"),
                      HasSubstr("re-run scripts/get-data")));
    // One byte, even the first byte of the gzip magic, cannot start another member.
    test::write_bytes(bad, test::concat(test::read_bytes(good), {0x1f}));
    EXPECT_THAT(error_message([&] { read_idx(bad); }), HasSubstr("1 trailing bytes after the gzip stream"));
  }
}

// Concatenated members are one gzip stream (RFC 1952, 2.2), as gzread reads them: an IDX file split
// between two members loads, and bytes after the last member are refused as after the first.
TEST(Idx, ReadsAGzipStreamOfSeveralMembers) {
  ScratchDir dir("idx-gzip-members");
  Generator gen(test::test_seed());
  const auto payload = test::random_bytes(6, gen, 1);
  const auto head = dir / "head.gz", tail = dir / "tail.gz", joined = dir / "joined.gz";
  test::write_gzip_bytes(head, test::concat(idx_header(0x08, {2, 3}), {payload.begin(), payload.begin() + 2}));
  test::write_gzip_bytes(tail, {payload.begin() + 2, payload.end()});
  const auto members = test::concat(test::read_bytes(head), test::read_bytes(tail));
  test::write_bytes(joined, members);
  EXPECT_EQ(read_idx(joined).bytes, payload);
  test::write_bytes(joined, test::concat(members, bytes_of("garbage!")));
  EXPECT_THAT(error_message([&] { read_idx(joined); }),
              AllOf(HasSubstr(joined.string()), HasSubstr("8 trailing bytes after the gzip stream")));
}

// Writes `bytes` into the FIFO `path` from a thread of its own (its open waits for the reader's).
std::thread feed_fifo(const std::filesystem::path& path, std::vector<std::uint8_t> bytes) {
  return std::thread([path, bytes = std::move(bytes)] {
    // A reader that stops early makes write() fail with EPIPE, rather than SIGPIPE ending the test.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    for (std::size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  });
}

// A FIFO has no size to compare with: the end of the gzip stream is found in the bytes themselves. 360 kB of
// random payload is more than the pipe holds (64 KiB) and the reader's input buffer (256 KiB).
TEST(Idx, ReadsAGzipFifoAndRefusesBytesAfterItsStream) {
  ScratchDir dir("idx-gzip-fifo");
  Generator gen(test::test_seed());
  const auto payload = test::random_bytes(600 * 600, gen, 1);
  const auto file = dir / "images.gz";
  write_idx(file, IdxType::kU8, {600, 600}, payload, /*gzip=*/true);
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::thread writer = feed_fifo(fifo, test::read_bytes(file));
  std::string error;
  std::vector<std::uint8_t> read_back;
  try {
    read_back = read_idx(fifo).bytes;
  } catch (const Error& e) {
    error = e.what();
  }
  writer.join();
  EXPECT_EQ(error, "") << "a valid .gz through a FIFO must load";
  EXPECT_TRUE(read_back == payload);
  writer = feed_fifo(fifo, test::concat(test::read_bytes(file), bytes_of("garbage!")));
  const std::string bad = error_message([&] { read_idx(fifo); });
  writer.join();
  EXPECT_THAT(bad, AllOf(HasSubstr(fifo.string()), HasSubstr("8 trailing bytes after the gzip stream")));
}

// parse_idx is read_idx's parser fed from memory (predict reads each input once: a pipe cannot be opened again):
// the same array for a good file, raw or gzipped, and the same message for each broken one, the origin in it.
TEST(Idx, ParsesBytesInMemoryAsItReadsTheFile) {
  ScratchDir dir("idx-parse");
  Generator gen(test::test_seed());
  const auto payload = test::random_bytes(600 * 600, gen, 1);  // gzipped, longer than the 256 KiB input buffer
  const auto good = dir / "good.gz";
  write_idx(good, IdxType::kU8, {600, 600}, payload, /*gzip=*/true);
  const auto gz = test::read_bytes(good);
  const auto raw = test::concat(idx_header(0x08, {600, 600}), payload);
  for (const auto& bytes : {raw, gz}) {
    const IdxArray parsed = parse_idx(bytes, "<memory>");
    EXPECT_EQ(parsed.type, IdxType::kU8);
    EXPECT_EQ(parsed.dims, (std::vector<std::int64_t>{600, 600}));
    EXPECT_TRUE(parsed.bytes == payload);
  }
  const std::vector<std::vector<std::uint8_t>> broken = {
      {},                                                                      // shorter than the magic
      test::concat({0x1f, 0x8b, 0x08, 0x00}, test::random_bytes(64, gen)),     // not a deflate stream
      std::vector<std::uint8_t>(gz.begin(), gz.begin() + std::ssize(gz) / 2),  // gzip cut
      test::concat(gz, bytes_of("garbage!")),                                  // after the gzip stream
      test::concat(idx_header(0x08, {2, 3}), test::random_bytes(5, gen)),      // payload short
      test::concat(idx_header(0x08, {2, 3}), test::random_bytes(9, gen)),      // payload long
      idx_header(0x0E, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}),  // overflowing dimensions
  };
  const auto file = dir / "broken";
  for (std::size_t i = 0; i < broken.size(); ++i) {
    test::write_bytes(file, broken[i]);
    const std::string from_file = error_message([&] { read_idx(file); });
    ASSERT_THAT(from_file, HasSubstr(file.string())) << i;
    EXPECT_EQ(error_message([&] { parse_idx(broken[i], file.string()); }), from_file) << i;
  }
}

TEST(Idx, RejectsDimensionsWhoseSizeOverflows) {
  ScratchDir dir("idx-overflow");
  const auto path = dir / "huge";
  // 4 × (2^32 - 1)^4 × 8 bytes does not fit in 64 bits: an error, not a failed allocation.
  test::write_bytes(path, idx_header(0x0E, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}));
  EXPECT_THAT(error_message([&] { read_idx(path); }), AllOf(HasSubstr(path.string()), HasSubstr("overflow")));
  // Huge but representable: fails as truncated without allocating terabytes first.
  const auto big = dir / "big";
  test::write_bytes(big, idx_header(0x0E, {0xFFFFFFFFu, 0xFFFFu}));
  EXPECT_THAT(error_message([&] { read_idx(big); }), AllOf(HasSubstr("truncated"), HasSubstr("the file has 0")));
}

TEST(Idx, WriteChecksItsArguments) {
  ScratchDir dir("idx-write");
  const auto path = dir / "out";
  EXPECT_THAT(error_message([&] { write_idx(path, IdxType::kU8, {2, 3}, std::vector<std::uint8_t>(5)); }),
              AllOf(HasSubstr(path.string()), HasSubstr("5 payload bytes given"), HasSubstr("need 6")));
  EXPECT_THAT(error_message([&] { write_idx(path, IdxType::kU8, {2, 0}, {}); }), HasSubstr("outside [1, 2^32)"));
  EXPECT_THAT(error_message([&] { write_idx(path, IdxType::kU8, {}, {}); }), HasSubstr("0 dimensions given"));
  EXPECT_THAT(error_message([&] { write_idx(path, static_cast<IdxType>(0x42), {1}, {0}); }),
              HasSubstr("unknown element type code 0x42"));
  EXPECT_THAT(error_message([&] { write_idx(dir / "no-such-folder" / "out", IdxType::kU8, {1}, {0}); }),
              HasSubstr("cannot create"));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a failed write left a temporary file";
}

}  // namespace
}  // namespace sprintnet
