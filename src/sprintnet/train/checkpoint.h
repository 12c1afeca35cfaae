#pragma once
// Checkpoints: everything `sprintnet train --resume` needs to continue a run
// bit-exactly, laid out so that PyTorch loads the weights unchanged
// (docs/CHECKPOINTS.md):
//   <run>/checkpoints/epoch-0003/model.safetensors  weights by torch.nn.Sequential names; only them,
//                                                    so load_state_dict(strict=True) accepts the file
//                                state.safetensors  optimizer tensors (Optimizer::state() names) and, as
//                                                    metadata, epoch, step, optimizer type and counters,
//                                                    the resolved config and the sprintnet version
//                                config.toml        the same resolved config, for people and for resuming
//   <run>/checkpoints/latest                        "epoch-0003": the newest complete checkpoint
// No random state is saved: the batch order is a pure function of (seed, epoch)
// and nothing else in a step draws random numbers.
//
// A checkpoint is written as a unit: into a hidden temporary directory, each
// file fsynced, the directory renamed into place, and only then `latest`
// replaced atomically. A run killed at any moment leaves the previous
// checkpoint intact and `latest` naming it; a leftover temporary is ignored.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sprintnet/data/dataset.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/safetensors.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/loss_scaling.h"

namespace sprintnet::train {

inline constexpr std::string_view kCheckpointsDirName = "checkpoints";
inline constexpr std::string_view kLatestFileName = "latest";
inline constexpr std::string_view kCheckpointModelFileName = "model.safetensors";
inline constexpr std::string_view kCheckpointStateFileName = "state.safetensors";
inline constexpr std::string_view kCheckpointConfigFileName = "config.toml";
// The "format" metadata of state.safetensors, and its version: bump it when the layout changes.
inline constexpr std::string_view kCheckpointStateFormat = "sprintnet-checkpoint-state";
inline constexpr std::string_view kCheckpointFormatVersion = "1";

// What a checkpoint holds. Tensors read back are on the CPU.
struct Checkpoint {
  std::filesystem::path dir;   // set by read_checkpoint(); ignored by write_checkpoint()
  std::int64_t epoch = 0;      // epochs completed, from 1
  std::int64_t step = 0;       // optimizer steps taken
  Config config;               // the resolved config of the run
  TensorList weights;          // model_weights()
  Metadata weights_metadata;   // of model.safetensors; "format" = "pt" and "producer" are always written
  std::string optimizer_type;  // optim.type of the optimizer that wrote the state
  optim::NamedTensors optimizer_state;
  optim::Counters optimizer_counters;
  // training_data_fingerprint() of the data the run trained on; empty in checkpoints written before it was kept.
  std::string train_data;
  // An fp16 run's dynamic loss scaling after the checkpoint's step; nothing in other precisions and in fp16
  // checkpoints written before it was kept (their resume starts from the initial scale).
  std::optional<LossScaling> loss_scaling;
};

// What a resume compares to tell the training data it finds from the data the run trained on, when only the
// paths to it may change: its sample count, a CRC-32 of its labels and the normalization its pixels gave, as
// "60000 samples, labels crc32 1a2b3c4d, normalization scale 0.0128 shift -0.424". Cheap: no pass over the images.
std::string training_data_fingerprint(const Dataset& train, const Normalization& norm);

// "epoch-0003": the directory name of epoch 3's checkpoint.
std::string checkpoint_dir_name(std::int64_t epoch);

// Writes <run_dir>/checkpoints/epoch-NNNN as a unit, points `latest` at it, then deletes the
// checkpoints beyond the newest `keep_last` (0 = keep all) and any left by an earlier life of
// the run after this epoch. Returns the checkpoint's directory.
std::filesystem::path write_checkpoint(const std::filesystem::path& run_dir, const Checkpoint& checkpoint,
                                       std::int64_t keep_last);

// The complete checkpoint directories of a run, oldest first (temporaries of unfinished writes excluded).
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& run_dir);

// The checkpoint `latest` names. Throws naming the run directory when it does not exist or has no
// complete checkpoint.
std::filesystem::path latest_checkpoint(const std::filesystem::path& run_dir);
// The name `latest` holds ("epoch-0003"), or "" where the run has none yet or it cannot be read: for messages.
std::string latest_checkpoint_name(const std::filesystem::path& run_dir);

// Reads and validates a checkpoint directory: both safetensors files (names, shapes, dtypes,
// offsets), the metadata (format, epoch, step, optimizer type and counters), and that
// config.toml is the config the state was saved with. Errors name the file and what is wrong.
// Weights and optimizer state are matched against the model and optimizer when loaded into them.
Checkpoint read_checkpoint(const std::filesystem::path& dir);

}  // namespace sprintnet::train
