"""sprintnet's learning-rate schedules: a port of src/sprintnet/optim/lr_schedule.cpp
(the same formulas in double, evaluated per optimizer step)."""

import math


def _cosine_anneal(start, end, fraction):
    return end + (start - end) * (1.0 + math.cos(math.pi * fraction)) / 2.0


class LrSchedule:
    def __init__(self, schedule_config, base_lr, steps_per_epoch, total_steps):
        self.c = schedule_config
        if self.c["type"] not in ("constant", "step", "cosine", "onecycle"):
            raise ValueError(f"schedule.type = {self.c['type']!r} is not known")
        self.base_lr = base_lr
        self.steps_per_epoch = max(steps_per_epoch, 1)
        self.total_steps = max(total_steps, 1)
        # A cosine needs a step after the warm-up.
        max_warmup = self.total_steps - 1 if self.c["type"] == "cosine" else self.total_steps
        if not 0 <= self.c["warmup_steps"] <= max_warmup:
            raise ValueError(f"schedule.warmup_steps: {self.c['warmup_steps']} is not in [0, {max_warmup}]: the run "
                             f"takes {self.total_steps} steps; lower schedule.warmup_steps (or raise train.epochs)")

    def _base_value(self, step):
        c = self.c
        if c["type"] == "step":
            epoch = step // self.steps_per_epoch
            return self.base_lr * math.pow(c["gamma"], float(epoch // c["step_size"]))
        if c["type"] == "cosine":
            # Steps warmup .. total - 1, the first at lr and the last at min_lr; a cosine of one step runs it at lr.
            span = float(max(self.total_steps - 1 - c["warmup_steps"], 1))
            t = float(min(max(step - c["warmup_steps"], 0), self.total_steps))
            return _cosine_anneal(self.base_lr, c["min_lr"], min(t / span, 1.0))
        if c["type"] == "onecycle":
            initial = self.base_lr / c["div_factor"]
            final_lr = initial / c["final_div_factor"]
            rise_end = c["pct_start"] * float(self.total_steps) - 1.0
            fall_end = float(self.total_steps) - 1.0
            s = float(step)
            if s <= rise_end:
                return _cosine_anneal(initial, self.base_lr, s / rise_end if rise_end > 0.0 else 1.0)
            # The fall may span less than one step; it still ends at final_lr on the last step (torch's OneCycleLR).
            return _cosine_anneal(self.base_lr, final_lr, min((s - rise_end) / (fall_end - rise_end), 1.0))
        return self.base_lr

    def lr_at(self, step):
        """The learning rate of 0-based optimizer step `step`."""
        lr = self._base_value(step)
        warmup = self.c["warmup_steps"]
        if step < warmup:
            start = self.c["warmup_start_factor"]
            lr *= start + (1.0 - start) * (float(step) / float(warmup))
        return lr
