#pragma once
// Writing a file so that readers see either the old contents or the new, never
// a half-written file: a crash mid-write leaves the previous version intact.
#include <filesystem>
#include <optional>
#include <string_view>

namespace sprintnet {

// Writes `contents` to a temporary file beside `path`, fsyncs it, renames it
// over `path` and fsyncs the directory. The directory must exist. Throws
// sprintnet::Error naming the path on any failure, and leaves no temporary behind.
// A symbolic link is followed (the file it names is replaced, the link stays); a
// path that is neither a file nor a directory (a FIFO, a terminal, /dev/null)
// is written in place, since there is no file to replace; and one that names a
// descriptor of this process (/dev/stdout, /dev/fd/N, /proc/self/fd/N) is written
// to that descriptor, where it stands (a shell's `>> file` appends, `| cat` reads),
// after stdio's buffers are flushed (what printf printed before comes first).
void write_text_file_atomically(const std::filesystem::path& path, std::string_view contents);

// The descriptor of this process that `path` names, after its symbolic links (/dev/stdout: 1), or nullopt.
std::optional<int> own_descriptor(const std::filesystem::path& path);

// Removes from `dir` the temporaries write_text_file_atomically left when its process was killed mid-write
// (".<name>.tmp.<pid>.<n>"). Only safe where no other process is writing into `dir` (its lock held).
void remove_unfinished_atomic_writes(const std::filesystem::path& dir);

// A file a command will write at its end, checked before the work: not a directory, in a folder that exists, not
// behind a loop of links or a folder that may not be searched (the system's reason), and, naming a descriptor of this
// process (/dev/fd/3), one open for writing. The errors begin with `what` ("plot", "eval --csv") and name the path,
// instead of a temporary file's name or "Bad file descriptor" after the work is done.
void check_output_file(const std::filesystem::path& path, std::string_view what);

}  // namespace sprintnet
