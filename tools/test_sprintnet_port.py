#!/usr/bin/env python3
"""Checks tools/'s Python port of sprintnet against sprintnet's own values
(tests/parity/golden/port_known_answers.json, written by the C++ parity_test,
which also checks that the file still matches the C++).

    python3 tools/test_sprintnet_port.py        (numpy; the training-run checks also need torch)
"""

import importlib.util
import json
import math
import os
import sys
import tempfile
import unittest

import numpy as np

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import safetensors_np  # noqa: E402
import sprintnet_config  # noqa: E402
import sprintnet_data  # noqa: E402
import sprintnet_model  # noqa: E402
import sprintnet_random  # noqa: E402
from sprintnet_schedule import LrSchedule  # noqa: E402

KNOWN_ANSWERS = os.path.join(TOOLS, "..", "tests", "parity", "golden", "port_known_answers.json")
HAS_TORCH = importlib.util.find_spec("torch") is not None


def load_known_answers():
    with open(KNOWN_ANSWERS) as f:
        return json.load(f)


class PhiloxTest(unittest.TestCase):
    # Random123's kat_vectors for philox4x32-10: zeros, all ones, digits of pi.
    KAT = [
        ((0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((2**64 - 1, 2**64 - 1, 2**64 - 1), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x299F31D0A4093822, 0x85A308D3243F6A88, 0x0370734413198A2E),
         (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ]

    def test_published_answers(self):
        for args, words in self.KAT:
            self.assertEqual(sprintnet_random.philox4x32_10_scalar(*args), words)
            self.assertEqual(tuple(int(w) for w in sprintnet_random.philox4x32_10(*args)), words)

    def test_vectorised_equals_scalar(self):
        rng = np.random.default_rng()
        key, lo, hi = (rng.integers(0, 2**64 - 1, size=64, dtype=np.uint64, endpoint=True) for _ in range(3))
        blocks = sprintnet_random.philox4x32_10(key, lo, hi)
        for i in range(64):
            self.assertEqual(tuple(int(w) for w in blocks[i]),
                             sprintnet_random.philox4x32_10_scalar(int(key[i]), int(lo[i]), int(hi[i])))

    def test_sprintnets_blocks(self):
        for case in load_known_answers()["philox"]:
            words = sprintnet_random.philox4x32_10(case["key"], case["counter_lo"], case["counter_hi"])
            self.assertEqual([int(w) for w in words], case["words"])


class GeneratorTest(unittest.TestCase):
    def test_draws_match_sprintnet(self):
        answers = load_known_answers()["generator"]
        gen = sprintnet_random.Generator(answers["seed"], answers["stream"])
        self.assertEqual([int(v) for v in gen.u32(len(answers["u32"]))], answers["u32"])
        self.assertEqual(list(gen.uniform_double(len(answers["uniform_double"]))), answers["uniform_double"])
        # numpy's log/cos against the C library's: equal to an ulp or two.
        np.testing.assert_allclose(gen.normal(len(answers["normal"])), answers["normal"], rtol=1e-14)
        self.assertEqual(gen.offset, len(answers["u32"]) + 2 * len(answers["uniform_double"])
                         + 4 * len(answers["normal"]))

    def test_permutations_match_sprintnet(self):
        for case in load_known_answers()["permutation"]:
            order = sprintnet_random.epoch_permutation(case["seed"], case["epoch"], case["n"])
            self.assertEqual(sorted(order.tolist()), list(range(case["n"])))
            self.assertEqual(order[:len(case["first"])].tolist(), case["first"])
            weighted = int(np.sum((np.arange(case["n"], dtype=np.uint64) + np.uint64(1)) * order.astype(np.uint64)))
            self.assertEqual(weighted, case["weighted_sum"])


class DataAndScheduleTest(unittest.TestCase):
    def test_normalization_matches_sprintnet(self):
        answers = load_known_answers()["normalization"]
        pixels = np.array(answers["pixels"], dtype=np.uint8).reshape(6, 7)
        for mode in ("unit", "standard"):
            scale, shift = sprintnet_data.make_normalization(pixels, mode)
            self.assertAlmostEqual(scale, answers[mode]["scale"], delta=1e-14 * abs(answers[mode]["scale"]))
            self.assertAlmostEqual(shift, answers[mode]["shift"], delta=1e-14 * abs(answers[mode]["shift"]))

    def test_schedules_match_sprintnet(self):
        for case in load_known_answers()["schedule"]:
            config = dict(sprintnet_config.DEFAULTS["schedule"], **case["schedule"])
            schedule = LrSchedule(config, case["base_lr"], case["steps_per_epoch"], case["total_steps"])
            lrs = [schedule.lr_at(s) for s in range(case["total_steps"])]
            np.testing.assert_allclose(lrs, case["lr"], rtol=1e-14, atol=0, err_msg=json.dumps(case["schedule"]))

    def test_schedule_refuses_a_cosine_warmup_to_the_end(self):
        # A cosine needs a step after the warm-up: a warm-up of every step left it unused.
        config = dict(sprintnet_config.DEFAULTS["schedule"], type="cosine", warmup_steps=6, min_lr=0.01)
        with self.assertRaisesRegex(ValueError, r"schedule.warmup_steps: 6 is not in \[0, 5\]"):
            LrSchedule(config, 0.05, 2, 6)
        LrSchedule(dict(config, type="constant"), 0.05, 2, 6)  # a ramp to the end, allowed

    def test_model_classes_fixes_the_class_count(self):
        # model.classes was dropped by the config reader and the class count taken from the labels: a 10-class
        # reference for a 12-class sprintnet model.
        self.assertEqual(sprintnet_config.config_from_toml("[model]\nclasses = 12\n")["model"]["classes"], 12)
        self.assertEqual(sprintnet_config.DEFAULTS["model"]["classes"], 0)
        with tempfile.TemporaryDirectory() as tmp:
            def idx(name, header, payload):
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(bytes(header) + bytes(payload))
                return os.path.join(tmp, name)
            data = dict(sprintnet_config.DEFAULTS["data"], dataset="idx",
                        train_images=idx("tri", [0, 0, 8, 2, 0, 0, 0, 3, 0, 0, 0, 2], range(6)),
                        train_labels=idx("trl", [0, 0, 8, 1, 0, 0, 0, 3], [0, 2, 1]),
                        test_images=idx("tei", [0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 2], range(4)),
                        test_labels=idx("tel", [0, 0, 8, 1, 0, 0, 0, 2], [2, 0]))
            self.assertEqual(sprintnet_data.load_train_test(data)[2], 3)
            self.assertEqual(sprintnet_data.load_train_test(data, classes=12)[2], 12)
            with self.assertRaisesRegex(ValueError, r"label 2 is outside \[0, 2\) \(model.classes"):
                sprintnet_data.load_train_test(data, classes=2)
            # Every label of the file, as sprintnet checks them: one past the limit too.
            with self.assertRaisesRegex(ValueError, "model.classes"):
                sprintnet_data.load_train_test(dict(data, train_limit=1), classes=2)

    def test_idx_reader_and_safetensors_round_trip(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "images")
            with open(path, "wb") as f:
                f.write(bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6]))
            np.testing.assert_array_equal(sprintnet_data.read_idx(path), [[[1, 2, 3]], [[4, 5, 6]]])
            tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([7], dtype=np.int32)}
            safetensors_np.save(os.path.join(tmp, "t.safetensors"), tensors, {"k": "v"})
            loaded, metadata = safetensors_np.load(os.path.join(tmp, "t.safetensors"))
            self.assertEqual(metadata, {"k": "v"})
            for name, value in tensors.items():
                np.testing.assert_array_equal(loaded[name], value)
                self.assertEqual(loaded[name].dtype, value.dtype)


class TrainerTest(unittest.TestCase):
    def tiny_data(self):
        d = load_known_answers()["tiny_data"]
        features = math.prod(d["sample_shape"])
        train = (np.array(d["train_images"], dtype=np.uint8).reshape(-1, features), np.array(d["train_labels"]))
        test = (np.array(d["test_images"], dtype=np.uint8).reshape(-1, features), np.array(d["test_labels"]))
        return train, test, int(train[1].max()) + 1

    def test_initial_weights_match_sprintnets_trainer(self):
        (train_x, _), _, classes = self.tiny_data()
        for case in load_known_answers()["trainer_init"]:
            config = sprintnet_config.config_from_dict(case["config"], "known answers")
            m = config["model"]
            widths = sprintnet_model.layer_widths(train_x.shape[1], m["hidden"], classes)
            weights = sprintnet_model.initial_weights(widths, m["bias"], m["init"], config["seed"],
                                                      sprintnet_random.INIT_STREAM, np.float32)
            self.assertEqual(list(weights), list(case["weights"]))
            for name, value in case["weights"].items():
                # Uniform draws are exact; a normal draw may round to the neighbouring float after an ulp of libm.
                np.testing.assert_allclose(weights[name].reshape(-1), value, rtol=1.2e-7, atol=0,
                                           err_msg=f"{m['init']} {name}")

    @unittest.skipUnless(HAS_TORCH, "needs torch")
    def test_the_reference_model_has_model_classes_outputs(self):
        import torch
        import torch_reference

        data = self.tiny_data()  # labels 0..2
        config = sprintnet_config.config_from_dict(load_known_answers()["trainer_runs"][0]["config"], "known answers")
        config["train"]["epochs"] = 1
        config["model"]["classes"] = 5
        weights = torch_reference.train(config, data, torch.device("cpu"), log=lambda _: None)[2]
        last = sorted(weights, key=lambda name: int(name.split(".")[0]))[-1]
        self.assertEqual(weights[last].shape[0], 5, last)
        config["model"]["classes"] = 2
        with self.assertRaisesRegex(ValueError, r"training labels: label 2 is outside \[0, 2\) \(model.classes"):
            torch_reference.train(config, data, torch.device("cpu"), log=lambda _: None)

    @unittest.skipUnless(HAS_TORCH, "needs torch")
    def test_training_runs_match_sprintnet(self):
        import torch
        import torch_reference

        torch.set_num_threads(1)
        data = self.tiny_data()
        for case in load_known_answers()["trainer_runs"]:
            config = sprintnet_config.config_from_dict(case["config"], "known answers")
            rows, steps, weights = torch_reference.train(config, data, torch.device("cpu"), "fp32", log=lambda _: None)
            self.assertEqual(len(rows), len(case["metrics"]))
            self.assertEqual(len(steps), rows[-1]["step"])
            for row, expected in zip(rows, case["metrics"]):
                for key in ("step", "epoch"):
                    self.assertEqual(row[key], expected[key])
                # fp32 training of a few steps with summation orders that differ: ~1e-7 relative.
                for key in ("train_loss", "test_loss", "lr"):
                    self.assertAlmostEqual(row[key], expected[key], delta=1e-5 * abs(expected[key]), msg=key)
                self.assertEqual(row["test_accuracy"], expected["test_accuracy"])
            for name, value in case["final_weights"].items():
                error = torch_reference.relative_error(weights[name].reshape(-1), value)
                self.assertLess(error, 1e-5, f"{name}: relative error {error:.3g}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
