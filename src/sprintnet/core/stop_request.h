#pragma once
// A request to end training early and resumably: Trainer::fit() checks it after every epoch and, when it is set,
// writes that epoch's checkpoint (due or not), finishes its writes and returns, the summary saying why
// (TrainSummary::stop_signal). `sprintnet train --resume` continues the run from there, as from any checkpoint.
//
// The CLI's train and sweep commands stop on signals, so Ctrl-C (SIGINT), a scheduler's SIGTERM (Slurm's before a
// preemption or a time limit) or SIGHUP (the terminal or ssh session closed) ends a run after its epoch instead of
// mid-write. A signal that arrives before training starts ends the process at once (nothing is written yet); one
// during the last epoch lets the run finish, as it would have (then `train` ends by it too). A second signal ends
// the process at once: the run's last checkpoint stays valid (docs/CHECKPOINTS.md). A program embedding the library may call
// request_stop() from any thread. A data-parallel job's ranks do not take requests: all of them would have to stop
// after the same epoch (their launcher stops them).
#include <signal.h>

#include <optional>

namespace sprintnet {

// Call first in main(), before any thread starts. SIGINT, SIGTERM and SIGHUP (those not ignored at start: `nohup`,
// a script's `cmd &`) are then blocked in every thread and taken by one thread of their own, so no signal frame is
// ever written on a computing thread's stack: oneDNN 2.x's JIT GEMM kernels point rsp into the heap while they
// run, and a signal landing there corrupts it (oneDNN issue #4845, fixed in 3.11; Debian ships 2.6). Until
// stop_on_signals(), each signal ends the process as by default.
void take_signals_in_their_own_thread();

// From now on the first SIGINT, SIGTERM or SIGHUP requests a stop and says so on stderr; the next one ends the
// process. Needs take_signals_in_their_own_thread() first.
void stop_on_signals();

// Ends the process by `signal`'s default action, after flushing stdout and stderr: how a command whose run a
// signal stopped ends, once its checkpoint is written. Its parent sees a death by the signal, not an exit, so a
// shell's `for` loop or a make stops too, as for any Ctrl-C (the shell's $? is 128 + the signal).
[[noreturn]] void end_by_signal(int signal);

// The signal mask a child process should exec with: the one this process started with, before the signals were
// blocked (posix_spawnattr_setsigmask, or pthread_sigmask in a forked child).
sigset_t signal_mask_for_children();

// The CLI ignores SIGPIPE (a reader of its output gone: `sprintnet train | head -3`) and SIGXFSZ (a file size
// limit, `ulimit -f`): their default action killed the process mid-run, silently, leaving a run without a
// checkpoint. Ignored, the write fails with EPIPE or EFBIG and the code's error path reports it; training itself
// goes on when only the terminal output is lost. Before any thread starts, as take_signals_in_their_own_thread().
void ignore_write_signals();

// The signals a child process should exec with at their default action (posix_spawnattr_setsigdefault, or signal()
// in a forked child): an ignored signal stays ignored across exec.
sigset_t signals_to_default_in_children();

// Requests a stop, as a signal does (`signal`), or from the program (0). The request stays until cleared:
// Trainer::fit does not clear it, so a program that trains again after a stop calls clear_stop_request().
void request_stop(int signal = 0);

// The pending request: the signal that made it, or 0 from the program; nullopt when none.
std::optional<int> stop_requested();

// Withdraws a request (a program that goes on to train again; the tests).
void clear_stop_request();

// "SIGINT", "SIGTERM", "SIGHUP", or "a stop request" for 0 (messages).
const char* stop_cause_name(int signal);

}  // namespace sprintnet
