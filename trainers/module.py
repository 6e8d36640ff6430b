"""`LanguageModel`: the LightningModule of one trial; the same code for every residual design.

Loss: next-token cross-entropy over positions whose target is not -100 (all positions for
text; the answers only for MQAR), from the final norm's output along `train.loss`'s path
(trainers.loss), in training and validation alike. Logs `train_loss`, `val_loss`, `val_ppl`,
`val_bpb` (text data: the validation targets' summed cross-entropy in bits over the UTF-8 bytes
they stand for), `tokens`, the
data module's accuracy metric (`mqar_acc`) and the learning rate `lr`.
"""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch

from arch import build_model
from trainers.checkpoint_files import rng_states, set_rng_states
from trainers.config import TrialConfig
from trainers.errors import TrainingDiverged
from trainers.loss import IGNORE, eval_sums, resolve_loss
from trainers.optim import build_optimizer
from trainers.schedules import lr_multiplier
from trainers.train_step import step_loss

__all__ = ["IGNORE", "LanguageModel"]


class LanguageModel(pl.LightningModule):
    def __init__(self, cfg: TrialConfig, accuracy_metric: str | None = None):
        super().__init__()
        self.cfg = cfg
        self.accuracy_metric = accuracy_metric
        self.model = build_model(cfg.model)
        hidden = self.model.hidden
        object.__setattr__(self, "_hidden", torch.compile(hidden) if cfg.train.compile else hidden)
        self.checkpoint_blocks = cfg.train.activation_checkpointing == "blocks"
        self._loss_kind: str | None = None
        self.record_gates = False  # set by GateStatsCallback on the steps it samples
        self.last_gates: dict[int, torch.Tensor] | None = None
        self.last_val_step = -1

    @property
    def tokens_seen(self) -> int:
        return self.global_step * self.cfg.tokens_per_step

    @property
    def loss_kind(self) -> str:
        """`train.loss` with `auto` resolved for this device and one worker's micro-batch."""
        if self._loss_kind is None:
            cfg = self.cfg
            rows = cfg.train.batch_size // cfg.train.workers
            self._loss_kind = resolve_loss(
                cfg.train.loss, self.device, rows, cfg.data.seq_len, cfg.model.vocab_size
            )
        return self._loss_kind

    def training_step(self, batch, batch_idx):
        inputs, targets = batch
        loss, gates = step_loss(self._hidden, self.model.head.weight, inputs, targets, self.loss_kind,
                                self.checkpoint_blocks, return_gates=self.record_gates)  # fmt: skip
        if gates is not None:
            self.last_gates = gates
        # Data-parallel: the mean over workers (their shares are the same size), so the logged loss
        # is the global batch's and every worker sees a divergence at the same step.
        shown = self.trainer.strategy.reduce(loss.detach().clone(), reduce_op="mean")
        value = shown.item()
        if not math.isfinite(value):
            raise TrainingDiverged(self.global_step, value)
        self.log("train_loss", shown, on_step=True, on_epoch=False)
        self.log("lr", self.lr_schedulers().get_last_lr()[0], on_step=True, on_epoch=False)
        return loss

    def on_validation_epoch_start(self) -> None:
        # loss*n, n, right, UTF-8 bytes of the targets
        self._val_sums = torch.zeros(4, dtype=torch.float64, device=self.device)
        table = getattr(self.trainer.datamodule, "token_bytes", None)
        self._token_bytes = None if table is None else torch.as_tensor(table, device=self.device)

    def validation_step(self, batch, batch_idx):
        inputs, targets = batch
        if not len(inputs):  # a data-parallel worker's share of a short last batch
            return
        sums = eval_sums(
            self.loss_kind, self._hidden(inputs), self.model.head.weight, targets
        )  # loss, n, right
        mask = targets != IGNORE
        nbytes = self._token_bytes[targets[mask]].sum().double() if self._token_bytes is not None else sums[1]
        self._val_sums += torch.cat([sums, nbytes.reshape(1)])

    def on_validation_epoch_end(self) -> None:
        """Token-weighted means over the whole validation set (summed over data-parallel workers)."""
        total, n, right, nbytes = self.trainer.strategy.reduce(self._val_sums, reduce_op="sum").tolist()
        loss = total / max(n, 1.0)
        self.log("val_loss", loss)
        self.log("val_ppl", math.exp(min(loss, 80.0)))
        if self._token_bytes is not None:  # bits per UTF-8 byte: comparable across tokenizers
            self.log("val_bpb", total / math.log(2) / max(nbytes, 1.0))
        if self.accuracy_metric is not None:
            self.log(self.accuracy_metric, right / max(n, 1.0))
        self.log("tokens", float(self.tokens_seen))
        self.last_val_step = self.global_step

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # The resolved trial config travels with the weights, so a checkpoint alone rebuilds the model.
        checkpoint["trial_config"] = self.cfg.to_dict()
        checkpoint["rng_states"] = rng_states()  # torch, CUDA, numpy, Python: a resume continues them

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "rng_states" in checkpoint:
            set_rng_states(checkpoint["rng_states"])

    def configure_optimizers(self):
        optimizer = build_optimizer(self.model, self.cfg.train)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lr_multiplier(self.cfg.train, self.cfg.max_steps)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        """Clips the global gradient norm (the Trainer's gradient_clip_val) as Lightning does, but
        without its precision plugin: bf16-mixed refuses to clip for an optimizer that unscales its
        own gradients (fused AdamW, what trainers.optim builds on CPU and CUDA), a guard meant for
        fp16's GradScaler; bf16 has no scaler, so there is nothing to unscale."""
        if gradient_clip_val:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)
