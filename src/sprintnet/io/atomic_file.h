#pragma once
// Writing a file so that readers see either the old contents or the new, never
// a half-written file: a crash mid-write leaves the previous version intact.
#include <filesystem>
#include <string_view>

namespace sprintnet {

// Writes `contents` to a temporary file beside `path`, fsyncs it, renames it
// over `path` and fsyncs the directory. The directory must exist. Throws
// sprintnet::Error naming the path on any failure, and leaves no temporary behind.
// A symbolic link is followed (the file it names is replaced, the link stays); a
// path that is neither a file nor a directory (a FIFO, /dev/stdout, a terminal)
// is written in place, since there is no file to replace.
void write_text_file_atomically(const std::filesystem::path& path, std::string_view contents);

// Removes from `dir` the temporaries write_text_file_atomically left when its process was killed mid-write
// (".<name>.tmp.<pid>.<n>"). Only safe where no other process is writing into `dir` (its lock held).
void remove_unfinished_atomic_writes(const std::filesystem::path& dir);

// A file a command will write at its end, checked before the work: not a directory, in a folder that exists.
// The errors begin with `what` ("plot", "eval --csv") and name the path, instead of a temporary file's name
// after the work is done.
void check_output_file(const std::filesystem::path& path, std::string_view what);

}  // namespace sprintnet
