#include "sprintnet/data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sprintnet/core/error.h"

namespace sprintnet {
namespace {

inline constexpr std::size_t kIdxMagicBytes = 4;
inline constexpr std::size_t kIdxDimBytes = 4;
// Payload is read in slices so that memory grows only as data actually
// arrives: a corrupt header promising terabytes fails with "truncated"
// instead of an allocation failure.
inline constexpr std::size_t kReadChunkBytes = std::size_t{4} << 20;
inline constexpr unsigned kZlibBufferBytes = 256u << 10;
inline constexpr const char* kRefetchHint = "re-run scripts/get-data (or replace the file)";

bool is_known_type(std::uint8_t code) {
  switch (static_cast<IdxType>(code)) {
    case IdxType::kU8:
    case IdxType::kI8:
    case IdxType::kI16:
    case IdxType::kI32:
    case IdxType::kF32:
    case IdxType::kF64: return true;
  }
  return false;
}

// "60000×28×28", the way the header's dimensions read to a person.
std::string dims_str(const std::vector<std::int64_t>& dims) {
  std::string out;
  for (std::size_t i = 0; i < dims.size(); ++i) out += fmt::format("{}{}", i ? "×" : "", dims[i]);
  return out;
}

// Bytes the payload must have, or an error when the product overflows int64.
std::uint64_t payload_bytes(const std::vector<std::int64_t>& dims, IdxType type, const std::string& what) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t total = idx_element_size(type);
  for (auto extent : dims) {
    const auto e = static_cast<std::uint64_t>(extent);
    SN_CHECK(total <= kMax / e, "{}: dimensions {} of {} overflow a 64-bit byte count; the header is corrupt", what,
             dims_str(dims), idx_type_name(type));
    total *= e;
  }
  return total;
}

// Reads a file, inflating it when it starts with the gzip magic (1f 8b) and passing it through
// unchanged otherwise, as zlib's gzread does. It inflates by itself, not through gzread: gzread
// ignores whatever follows a gzip member when that is not another member, and such bytes are an
// error here, as trailing bytes of a raw file are. Concatenated members read as one stream (RFC
// 1952), as gzread reads them. The file is read with read(2), so a pipe or a FIFO works too; or its
// bytes are already in memory (read once by a caller that sniffed them first: a pipe reads once).
class InputFile {
 public:
  explicit InputFile(const std::filesystem::path& path) : path_(path.string()), buffer_(kZlibBufferBytes) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    SN_CHECK(std::filesystem::exists(status), "IDX file {}: no such file (run scripts/get-data to fetch the datasets)",
             path_);
    SN_CHECK(!std::filesystem::is_directory(status), "IDX file {}: is a directory, not a file", path_);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    SN_CHECK(fd_ >= 0, "IDX file {}: cannot open: {}", path_, std::strerror(errno));
    try {
      struct stat file_status {};
      if (::fstat(fd_, &file_status) == 0 && S_ISREG(file_status.st_mode)) {
        raw_size_ = static_cast<std::uint64_t>(file_status.st_size);
      }
      start();
    } catch (...) {
      ::close(fd_);  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  InputFile(std::span<const std::uint8_t> bytes, std::string_view origin)
      : path_(origin), memory_(bytes), raw_size_(bytes.size()), buffer_(kZlibBufferBytes) {
    start();
  }
  ~InputFile() {
    if (gzip_) inflateEnd(&stream_);
    if (fd_ >= 0) ::close(fd_);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Up to `n` bytes; fewer only at the end of the data.
  std::size_t read(std::uint8_t* dst, std::size_t n) { return gzip_ ? inflate_into(dst, n) : copy_into(dst, n); }

  // Bytes left until the end of the data (consumes them).
  std::uint64_t count_remaining() {
    std::array<std::uint8_t, 1 << 16> sink{};
    std::uint64_t total = 0;
    while (const std::size_t got = read(sink.data(), sink.size())) total += got;
    return total;
  }

  bool compressed() const { return gzip_; }
  // The bytes of the file as stored (before inflating), where known: a regular file's size, or the bytes in memory.
  std::optional<std::uint64_t> raw_size() const { return raw_size_; }

 private:
  void start() {
    stream_.next_in = buffer_.data();
    stream_.avail_in = 0;
    const bool gzip = has_gzip_magic();
    // 16 + 15: a gzip wrapper (its header parsed, its CRC-32 and length checked) around a 32 KiB window.
    SN_CHECK(!gzip || inflateInit2(&stream_, 16 + MAX_WBITS) == Z_OK, "IDX file {}: zlib could not start", path_);
    gzip_ = gzip;
  }

  // read(2) into `dst` until `n` bytes or the end of the file (from memory, for bytes in memory).
  std::size_t read_file(std::uint8_t* dst, std::size_t n) {
    if (fd_ < 0) {
      const std::size_t got = std::min(n, memory_.size());
      if (got > 0) std::memcpy(dst, memory_.data(), got);
      memory_ = memory_.subspan(got);
      return got;
    }
    std::size_t total = 0;
    while (total < n) {
      const ssize_t got = ::read(fd_, dst + total, std::min(n - total, kReadChunkBytes));
      if (got < 0 && errno == EINTR) continue;
      SN_CHECK(got >= 0, "IDX file {}: cannot read: {}", path_, std::strerror(errno));
      if (got == 0) break;
      total += static_cast<std::size_t>(got);
    }
    return total;
  }

  // Tops the unread input up to `want` bytes where the file has them (want <= the buffer's size);
  // returns the bytes now unread.
  std::size_t buffer_input(std::size_t want) {
    if (stream_.avail_in >= want) return stream_.avail_in;
    std::memmove(buffer_.data(), stream_.next_in, stream_.avail_in);
    stream_.next_in = buffer_.data();
    stream_.avail_in += static_cast<unsigned>(read_file(buffer_.data() + stream_.avail_in, want - stream_.avail_in));
    return stream_.avail_in;
  }

  bool has_gzip_magic() {
    return buffer_input(2) >= 2 && stream_.next_in[0] == 0x1f && stream_.next_in[1] == 0x8b;
  }

  std::size_t copy_into(std::uint8_t* dst, std::size_t n) {
    const std::size_t buffered = std::min<std::size_t>(n, stream_.avail_in);
    std::memcpy(dst, stream_.next_in, buffered);
    stream_.next_in += buffered;
    stream_.avail_in -= static_cast<unsigned>(buffered);
    return buffered + read_file(dst + buffered, n - buffered);
  }

  std::size_t inflate_into(std::uint8_t* dst, std::size_t n) {
    std::size_t total = 0;
    while (total < n) {
      if (member_ended_) {
        // What follows a member: nothing, another member, or bytes that are no part of the stream.
        if (buffer_input(2) == 0) break;
        if (!has_gzip_magic()) fail_trailing();
        SN_CHECK(inflateReset(&stream_) == Z_OK, "IDX file {}: zlib could not restart", path_);
        member_ended_ = false;
      }
      if (stream_.avail_in == 0 && buffer_input(buffer_.size()) == 0) {
        fail_corrupt("unexpected end of file");
      }
      stream_.next_out = dst + total;
      stream_.avail_out = static_cast<unsigned>(std::min(n - total, kReadChunkBytes));
      const unsigned before = stream_.avail_out;
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      total += before - stream_.avail_out;
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
      } else if (rc != Z_OK) {
        // Z_BUF_ERROR (no progress) cannot happen with input and room for output: like the others it is damage.
        fail_corrupt(stream_.msg != nullptr ? stream_.msg : fmt::format("zlib error {}", rc));
      }
    }
    return total;
  }

  [[noreturn]] void fail_corrupt(std::string_view why) const {
    SN_FAIL("IDX file {}: corrupt or truncated gzip stream ({}); {}", path_, why, kRefetchHint);
  }

  [[noreturn]] void fail_trailing() {
    std::uint64_t trailing = stream_.avail_in;
    stream_.avail_in = 0;
    while (const std::size_t got = read_file(buffer_.data(), buffer_.size())) trailing += got;
    SN_FAIL("IDX file {}: {} trailing bytes after the gzip stream (they do not start another gzip member); {}", path_,
            trailing, kRefetchHint);
  }

  std::string path_;
  int fd_ = -1;                                // -1: the bytes are in memory_
  std::span<const std::uint8_t> memory_;       // the bytes in memory not read yet
  std::optional<std::uint64_t> raw_size_;
  std::vector<std::uint8_t> buffer_;  // raw bytes read; [stream_.next_in, + avail_in) not used yet
  z_stream stream_{};
  bool gzip_ = false;
  bool member_ended_ = false;  // inflate reached the end of a gzip member
};

std::uint32_t load_u32_big_endian(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

void append_u32_big_endian(std::uint32_t v, std::vector<std::uint8_t>& out) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

// Sibling temporary name: same folder, so the final rename stays on one filesystem.
std::filesystem::path temporary_sibling(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter{0};
  return path.parent_path() / fmt::format(".{}.tmp-{}-{}", path.filename().string(), ::getpid(), counter++);
}

void write_raw(const std::filesystem::path& tmp, std::span<const std::uint8_t> header,
               std::span<const std::uint8_t> bytes) {
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  SN_CHECK(out.is_open(), "cannot create {}: {}", tmp.string(), std::strerror(errno));
  out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  SN_CHECK(!out.fail(), "cannot write {}: {}", tmp.string(), std::strerror(errno));
}

void write_gzip(const std::filesystem::path& tmp, std::span<const std::uint8_t> header,
                std::span<const std::uint8_t> bytes) {
  gzFile out = gzopen(tmp.c_str(), "wb");
  SN_CHECK(out != nullptr, "cannot create {}: {}", tmp.string(), std::strerror(errno));
  bool ok = true;
  for (const auto part : {header, bytes}) {
    for (std::size_t done = 0; ok && done < part.size();) {
      const auto n = static_cast<unsigned>(std::min(part.size() - done, kReadChunkBytes));
      ok = gzwrite(out, part.data() + done, n) == static_cast<int>(n);
      done += n;
    }
  }
  ok = (gzclose(out) == Z_OK) && ok;
  SN_CHECK(ok, "cannot write gzip file {}", tmp.string());
}

}  // namespace

std::size_t idx_element_size(IdxType type) {
  switch (type) {
    case IdxType::kU8:
    case IdxType::kI8: return 1;
    case IdxType::kI16: return 2;
    case IdxType::kI32:
    case IdxType::kF32: return 4;
    case IdxType::kF64: return 8;
  }
  SN_FAIL("unknown IDX element type code 0x{:02x}", static_cast<unsigned>(type));
}

std::string_view idx_type_name(IdxType type) {
  switch (type) {
    case IdxType::kU8: return "uint8";
    case IdxType::kI8: return "int8";
    case IdxType::kI16: return "int16";
    case IdxType::kI32: return "int32";
    case IdxType::kF32: return "float32";
    case IdxType::kF64: return "float64";
  }
  SN_FAIL("unknown IDX element type code 0x{:02x}", static_cast<unsigned>(type));
}

std::int64_t IdxArray::numel() const {
  std::int64_t n = 1;
  for (auto extent : dims) n *= extent;
  return n;
}

namespace {

// The one parser of IDX files, whether they are read from a path or from memory.
IdxArray parse(InputFile& in, const std::string& what) {
  std::array<std::uint8_t, kIdxMagicBytes> magic{};
  const std::size_t magic_read = in.read(magic.data(), magic.size());
  SN_CHECK(magic_read == magic.size(), "{}: only {} bytes, too short for the 4-byte IDX header; {}", what, magic_read,
           kRefetchHint);
  SN_CHECK(magic[0] == 0 && magic[1] == 0,
           "{}: not an IDX file: it starts with bytes {:02x} {:02x}, an IDX file starts with 00 00; {}", what, magic[0],
           magic[1], kRefetchHint);
  SN_CHECK(is_known_type(magic[2]),
           "{}: unknown element type code 0x{:02x} (known: 08 uint8, 09 int8, 0b int16, 0c int32, 0d float32, "
           "0e float64)",
           what, magic[2]);
  const std::size_t num_dims = magic[3];
  SN_CHECK(num_dims >= 1 && num_dims <= kIdxMaxDims, "{}: header declares {} dimensions; 1 to {} are supported", what,
           num_dims, kIdxMaxDims);

  IdxArray array;
  array.type = static_cast<IdxType>(magic[2]);
  std::array<std::uint8_t, kIdxMaxDims * kIdxDimBytes> dim_bytes{};
  const std::size_t dims_read = in.read(dim_bytes.data(), num_dims * kIdxDimBytes);
  SN_CHECK(dims_read == num_dims * kIdxDimBytes,
           "{}: header is truncated: it declares {} dimensions ({} bytes of sizes) but only {} bytes follow; {}", what,
           num_dims, num_dims * kIdxDimBytes, dims_read, kRefetchHint);
  for (std::size_t i = 0; i < num_dims; ++i) {
    array.dims.push_back(load_u32_big_endian(dim_bytes.data() + i * kIdxDimBytes));
  }
  for (std::size_t i = 0; i < num_dims; ++i) {
    SN_CHECK(array.dims[i] > 0, "{}: dimension {} is zero (dims {}); an empty array is not a data set", what, i,
             dims_str(array.dims));
  }

  const std::uint64_t expected = payload_bytes(array.dims, array.type, what);
  // Reserve one slice only: a 19-byte file claiming 4 GB must not cost more than what arrives. An
  // uncompressed file that holds the whole payload gets it all at once: growing slice by slice
  // reallocates and copies it ~log2(size / slice) times (MNIST's training images: 46 -> 24 ms).
  const std::uint64_t header_bytes = kIdxMagicBytes + num_dims * kIdxDimBytes;
  const std::optional<std::uint64_t> file_bytes = in.raw_size();
  const bool whole = !in.compressed() && file_bytes && *file_bytes >= header_bytes + expected;
  array.bytes.reserve(static_cast<std::size_t>(whole ? expected : std::min<std::uint64_t>(expected, kReadChunkBytes)));
  while (array.bytes.size() < expected) {
    const std::size_t old_size = array.bytes.size();
    const auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(expected - old_size, kReadChunkBytes));
    array.bytes.resize(old_size + chunk);
    const std::size_t got = in.read(array.bytes.data() + old_size, chunk);
    array.bytes.resize(old_size + got);
    if (got < chunk) break;
  }
  const std::size_t element_size = idx_element_size(array.type);
  const std::string size_formula =
      element_size == 1 ? fmt::format("{}", dims_str(array.dims))
                        : fmt::format("{} × {} bytes ({})", dims_str(array.dims), element_size, idx_type_name(array.type));
  const char* where = in.compressed() ? " once decompressed" : "";
  SN_CHECK(array.bytes.size() == expected,
           "{}: truncated: header says {} = {} bytes of data, the file has {} after its {}-byte header{}; {}", what,
           size_formula, expected, array.bytes.size(), kIdxMagicBytes + num_dims * kIdxDimBytes, where, kRefetchHint);
  const std::uint64_t trailing = in.count_remaining();
  SN_CHECK(trailing == 0, "{}: {} trailing bytes after the data: header says {} = {} bytes{}; {}", what, trailing,
           size_formula, expected, where, kRefetchHint);
  return array;
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& path) {
  InputFile in(path);
  return parse(in, fmt::format("IDX file {}", path.string()));
}

IdxArray parse_idx(std::span<const std::uint8_t> bytes, std::string_view origin) {
  InputFile in(bytes, origin);
  return parse(in, fmt::format("IDX file {}", origin));
}

void write_idx(const std::filesystem::path& path, IdxType type, const std::vector<std::int64_t>& dims,
               const std::vector<std::uint8_t>& bytes, bool gzip) {
  const std::string what = fmt::format("write_idx({})", path.string());
  SN_CHECK(is_known_type(static_cast<std::uint8_t>(type)), "{}: unknown element type code 0x{:02x}", what,
           static_cast<unsigned>(type));
  SN_CHECK(!dims.empty() && dims.size() <= kIdxMaxDims, "{}: {} dimensions given; 1 to {} are supported", what,
           dims.size(), kIdxMaxDims);
  for (auto extent : dims) {
    SN_CHECK(extent > 0 && extent <= std::numeric_limits<std::uint32_t>::max(),
             "{}: dimension {} (dims {}) is outside [1, 2^32)", what, extent, dims_str(dims));
  }
  const std::uint64_t expected = payload_bytes(dims, type, what);
  SN_CHECK(bytes.size() == expected, "{}: {} payload bytes given, dims {} of {} need {}", what, bytes.size(),
           dims_str(dims), idx_type_name(type), expected);

  std::vector<std::uint8_t> header = {0, 0, static_cast<std::uint8_t>(type), static_cast<std::uint8_t>(dims.size())};
  for (auto extent : dims) append_u32_big_endian(static_cast<std::uint32_t>(extent), header);

  const auto tmp = temporary_sibling(path);
  try {
    if (gzip) {
      write_gzip(tmp, header, bytes);
    } else {
      write_raw(tmp, header, bytes);
    }
    std::filesystem::rename(tmp, path);
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    SN_FAIL("{}: {}", what, e.what());
  }
}

}  // namespace sprintnet
