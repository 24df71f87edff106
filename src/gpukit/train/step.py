"""One training step, as a plain eager step or replayed from a CUDA graph.

Everything a step needs is a device tensor: the decoded uint8 images, the labels, this epoch's batch indices
(steps, B) and augmentation matrices (steps, B, 2, 3), and a step counter. A step reads its row with the counter,
gathers, augments, sets the learning rate from the epoch's schedule, runs forward/backward/Adam and adds loss
and hits into device accumulators — there is no
``.item()`` and no host sync in a step, so the host only queues work. With ``cuda_graphs`` the whole step is
captured once and replayed: at batch 32 the seed CNN's step is a few dozen tiny kernels, and launching them one by
one from Python costs more than running them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpukit.train.augment import apply_affine, apply_jitter

if TYPE_CHECKING:
    import torch

    from gpukit.train.adam import Adam

__all__ = ["Stepper", "loss_and_hits"]


def loss_and_hits(logits: torch.Tensor, y: torch.Tensor, smoothing: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean loss (binary cross-entropy on one logit, else cross-entropy) and the number of right answers. With
    ``smoothing`` ε the targets are smoothed (label smoothing): ε of each target's mass is spread evenly over the
    classes, for one logit the target 1 becomes 1 - ε/2 and 0 becomes ε/2."""
    import torch.nn.functional as F

    logits = logits.float()
    if logits.shape[1] == 1:
        flat = logits.view(-1)
        target = y.float() * (1 - smoothing) + smoothing / 2 if smoothing else y.float()
        return F.binary_cross_entropy_with_logits(flat, target), ((flat > 0).long() == y).sum()
    return F.cross_entropy(logits, y, label_smoothing=smoothing), (logits.argmax(1) == y).sum()


class Stepper:
    """Runs training steps over one epoch's plan; ``capture()`` turns the step into a CUDA graph."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: Adam,
        images: torch.Tensor,  # (N,3,S,S) uint8, on the device (GPU cache) or pinned on the host
        labels: torch.Tensor,  # (N,) int64, beside the images
        steps: int,
        batch: int,
        device: torch.device,
        amp_dtype: torch.dtype | None,
        channels_last: bool,
        scaler: Any = None,  # torch.amp.GradScaler for fp16
        smoothing: float = 0.0,  # label smoothing of the training loss
    ) -> None:
        import torch

        self.model, self.optimizer, self.scaler = model, optimizer, scaler
        self.images, self.labels = images, labels
        self.device, self.amp_dtype, self.channels_last = device, amp_dtype, channels_last
        self.steps, self.batch, self.smoothing = steps, batch, smoothing
        self.on_device = images.device.type == device.type
        plan_device = device if self.on_device else torch.device("cpu")
        self.perm = torch.zeros(steps, batch, dtype=torch.long, device=plan_device)
        self.theta = torch.zeros(steps, batch, 2, 3, device=device)
        self.counter = torch.zeros(1, dtype=torch.long, device=plan_device)
        self.jitter: torch.Tensor | None = None  # (steps, B, 3) colour factors, when the recipe draws them
        # The learning-rate schedule: a (steps,) table per epoch. A capturable optimizer keeps its lr as a device
        # tensor that the step itself sets from the table (graph-safe); otherwise the host sets a float per step.
        self.lr_table: torch.Tensor | None = None
        self._lr_host: list[float] = []
        group = optimizer.param_groups[0]
        self._lr_on_device = isinstance(group["lr"], torch.Tensor) and group["lr"].device.type == device.type
        self.loss_sum = torch.zeros((), device=device)
        self.hits = torch.zeros((), dtype=torch.long, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.host_step = 0
        self.data_wait_s = 0.0  # host time gathering + queueing copies (host cache only; 0 with the GPU cache)
        self._pinned: list[torch.Tensor] = []
        self._events: list[Any] = []

    # -- the plan -------------------------------------------------------------------------------------------
    def load_epoch(
        self,
        perm: torch.Tensor,
        theta: torch.Tensor,
        start_step: int = 0,
        jitter: torch.Tensor | None = None,
        lr: torch.Tensor | None = None,
    ) -> None:
        """Copy this rank's epoch plan into the static buffers (addresses a CUDA graph keeps). ``jitter``
        (steps, B, 3) and ``lr`` (steps,) are optional: without them no colour jitter is applied and the lr is left
        as it is."""
        import torch

        self.perm.copy_(perm)
        self.theta.copy_(theta)
        if jitter is not None:
            if self.jitter is None:
                self.jitter = jitter.to(self.theta.device).clone()
            else:
                self.jitter.copy_(jitter)
        if lr is not None:
            self._lr_host = lr.tolist()
            if self._lr_on_device:
                if self.lr_table is None:
                    self.lr_table = lr.to(self.device, torch.float32).clone()
                else:
                    self.lr_table.copy_(lr)
        self.counter.fill_(start_step)
        self.host_step = start_step

    def read_and_reset(self) -> tuple[float, int]:
        """Loss sum and hits since the last call; the one host sync of an epoch."""
        out = (float(self.loss_sum.item()), int(self.hits.item()))
        self.loss_sum.zero_()
        self.hits.zero_()
        return out

    # -- the step ------------------------------------------------------------------------------------------
    def _batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        import torch

        if self.on_device:
            idx = self.perm.index_select(0, self.counter).view(-1)  # (B,) read on the device: graph-safe
            theta = self.theta.index_select(0, self.counter.to(self.theta.device)).view(-1, 2, 3)
            return self.images.index_select(0, idx), self.labels.index_select(0, idx), theta
        import time

        t0 = time.perf_counter()
        # host cache: gather into one of two pinned buffers, copy asynchronously (the buffer is reused only
        # after the copy that read it has finished: the event wait below)
        idx = self.perm[self.host_step]
        slot = self.host_step % 2
        if not self._pinned:
            shape = (self.batch, *self.images.shape[1:])
            self._pinned = [torch.empty(shape, dtype=torch.uint8).pin_memory() for _ in range(2)]
            self._events = [None, None]
        if self._events[slot] is not None:
            self._events[slot].synchronize()
        torch.index_select(self.images, 0, idx, out=self._pinned[slot])
        x = self._pinned[slot].to(self.device, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self._events[slot] = event
        y = self.labels.index_select(0, idx).to(self.device, non_blocking=True)
        self.data_wait_s += time.perf_counter() - t0
        return x, y, self.theta[self.host_step]

    def _body(self) -> None:
        import torch

        x_u8, y, theta = self._batch()
        x = apply_affine(x_u8, theta)
        if self.jitter is not None:
            x = apply_jitter(x, self._row(self.jitter))
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        enabled = self.amp_dtype is not None
        # cache_enabled=False: autocast's weight-cast cache must not outlive a CUDA graph capture
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=enabled, cache_enabled=False):
            logits = self.model(x)
        loss, hits = loss_and_hits(logits, y, self.smoothing)
        if self.scaler is not None:
            self._set_lr()
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self._set_lr()
            self.optimizer.step()
        with torch.no_grad():
            self.loss_sum += loss.detach() * y.shape[0]
            self.hits += hits
            self.counter += 1

    def _row(self, table: torch.Tensor) -> torch.Tensor:
        """This step's row of a per-epoch (steps, ...) table, read with the device counter when it can be."""
        if self.on_device:
            return table.index_select(0, self.counter.to(table.device)).squeeze(0)
        return table[self.host_step]

    def _set_lr(self) -> None:
        if not self._lr_host:
            return
        if self._lr_on_device and self.lr_table is not None:
            lr = self.optimizer.param_groups[0]["lr"]
            lr.copy_(self._row(self.lr_table).view(()))  # inside the graph: replays read the table row
        else:
            value = self._lr_host[min(self.host_step, len(self._lr_host) - 1)]
            for group in self.optimizer.param_groups:
                group["lr"] = value

    def step(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.optimizer.zero_grad(set_to_none=True)
            self._body()
        self.host_step += 1

    # -- CUDA graph ----------------------------------------------------------------------------------------
    def capture(self, warmup: int = 3) -> None:
        """Capture the step as a CUDA graph. Warm-up steps run real updates, so the model and optimizer are put
        back exactly as they were afterwards: training is the same as the eager loop's."""
        import torch

        if warmup + 1 > self.steps:
            raise RuntimeError("too few steps per epoch for a CUDA graph")
        snapshot = self.snapshot()
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the default stream, as CUDA graph capture wants
                self.warm_up(warmup)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            self.optimizer.zero_grad(set_to_none=True)  # grads are then allocated inside the graph's pool
            with torch.cuda.graph(graph):
                self._body()
            self.graph = graph
        finally:
            self.restore(snapshot)

    def warm_up(self, steps: int) -> None:
        """Run ``steps`` real steps on the epoch's first batch (cuDNN autotuning, lazy optimizer state)."""
        for _ in range(steps):
            self.counter.fill_(0)
            self.optimizer.zero_grad(set_to_none=True)
            self._body()

    def snapshot(self) -> dict[str, Any]:
        """Copies of everything a step changes: weights and buffers, optimizer state, counter."""
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        return {
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "optim": [{k: v.clone() for k, v in self.optimizer.state.get(p, {}).items()} for p in params],
            "counter": int(self.counter.item()),
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Put a snapshot back *in place* (a captured graph holds these addresses)."""
        import torch

        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        with torch.no_grad():
            self.model.load_state_dict(snapshot["model"])
            for p, saved in zip(params, snapshot["optim"], strict=True):
                for key, value in self.optimizer.state.get(p, {}).items():
                    if key in saved:
                        value.copy_(saved[key])
                    else:
                        value.zero_()  # state the warm-up created: zero is Adam's fresh state (step 0)
        self.counter.fill_(snapshot["counter"])
        self.host_step = snapshot["counter"]
        self.loss_sum.zero_()
        self.hits.zero_()
