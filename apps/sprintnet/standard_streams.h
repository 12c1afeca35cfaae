#pragma once
// The CLI's standard streams: present at the start, written in full at the end.

namespace sprintnet::cli {

// Opens /dev/null on fd 0, 1 or 2 where the process was started with it closed (a daemon's way, or `>&-`).
// Otherwise the first files a run opens would take those numbers, and its progress lines would be written into
// metrics.jsonl. Before anything opens a file.
void open_missing_standard_streams();

// Whether everything printed to stdout reached it (a full disk, a closed pipe); when not, says so on stderr.
// A command whose output was lost must not exit 0: `predict --json > out.json` would leave a truncated file.
bool standard_output_written();

}  // namespace sprintnet::cli
