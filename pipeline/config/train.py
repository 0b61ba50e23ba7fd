"""The `train:` section of a run config: every setting of the training loop, typed.

Steps are optimizer steps. The effective batch is batch_size × grad_accumulation × world
size. Weight decay applies to weight matrices (linear and embedding weights); biases and
normalization weights (every 1-D parameter) are excluded, as in BERT and GPT-2 training.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from pipeline.config.base import Strict

PositiveInt = Annotated[int, Field(gt=0)]
Every = PositiveInt | Literal["epoch"]


class EarlyStopping(Strict):
    patience: PositiveInt = 3  # evaluations without improvement before stopping
    min_delta: Annotated[float, Field(ge=0)] = 0.0  # an improvement is a drop of more than this


WALL_TIME_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MEMORY_UNITS = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
                "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}  # fmt: skip


def _amount(text: str, units: dict[str, int]) -> float:
    number = text.rstrip("".join(units)).strip()
    return float(number) * units[text[len(number) :].strip()]


class Budget(Strict):
    """Limits the plan checks before the first step: a run projected over any is refused."""

    max_wall_time: str | None = Field(None, pattern=r"^\d+(\.\d+)?\s*[smhd]$")  # e.g. 90m, 2h
    max_steps: PositiveInt | None = None
    max_memory: str | None = Field(  # peak RSS on a CPU, peak allocated on a GPU; e.g. 8GiB
        None, pattern=r"^\d+(\.\d+)?\s*(B|kB|MB|GB|TB|KiB|MiB|GiB|TiB)$"
    )
    price_per_hour: Annotated[float, Field(ge=0)] | None = None  # of the device: the plan's cost

    @model_validator(mode="after")
    def _above_zero(self) -> Budget:
        for name, amount in (
            ("max_wall_time", self.wall_seconds),
            ("max_memory", self.memory_bytes),
        ):
            if amount == 0:
                raise ValueError(f"budget.{name} must be above 0 (leave it out for no limit)")
        return self

    @property
    def wall_seconds(self) -> float | None:
        return _amount(self.max_wall_time, WALL_TIME_UNITS) if self.max_wall_time else None

    @property
    def memory_bytes(self) -> int | None:
        return round(_amount(self.max_memory, MEMORY_UNITS)) if self.max_memory else None


class TokenizerConfig(Strict):
    # minilm: the WordPiece tokenizer of all-MiniLM-L6-v2; bpe: a byte-level BPE trained on
    # the train split (causal_lm only).
    kind: Literal["minilm", "bpe"] = "minilm"
    vocab_size: PositiveInt = 8000  # bpe only
    max_length: Annotated[int, Field(ge=8, le=512)] = 128  # longer texts are truncated


class CausalLMModel(Strict):
    """A small decoder-only transformer trained from scratch."""

    d_model: PositiveInt = 256
    layers: PositiveInt = 4
    heads: PositiveInt = 4
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.1

    @model_validator(mode="after")
    def _heads_divide(self) -> CausalLMModel:
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        return self


class TrainConfig(Strict):
    objective: Literal["classification", "causal_lm"] = "classification"
    sources: list[str] | None = None  # train on these sources' records only (default: all)
    # metadata fields the model sees besides the text, as `field: value` lines before it; each
    # must be a published field of the version (not one excluded as known after the outcome)
    features: list[str] = []
    seed: Annotated[int, Field(ge=0)] = 13
    epochs: PositiveInt = 3
    max_steps: PositiveInt | None = None  # when set, overrides epochs
    batch_size: PositiveInt = 32  # per device
    grad_accumulation: PositiveInt = 1
    lr: Annotated[float, Field(gt=0)] = 5.0e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: Annotated[float, Field(gt=0)] = 1.0e-8
    weight_decay: Annotated[float, Field(ge=0)] = 0.01
    warmup_ratio: Annotated[float, Field(ge=0, lt=1)] = 0.06  # of all steps
    warmup_steps: Annotated[int, Field(ge=0)] | None = None  # overrides warmup_ratio
    min_lr_ratio: Annotated[float, Field(ge=0, le=1)] = 0.0  # cosine decays to lr × this
    clip_grad_norm: Annotated[float, Field(gt=0)] | None = 1.0  # global L2 norm; null: off
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # auto: bf16 on a GPU that has it
    gradient_checkpointing: bool = False
    max_nonfinite_steps: PositiveInt = 10  # abort after this many skipped non-finite steps
    eval_every: Every = "epoch"
    early_stopping: EarlyStopping | None = EarlyStopping()
    restore_best: bool = True  # end with the weights of the best validation loss
    checkpoint_every: Every = "epoch"
    keep_checkpoints: PositiveInt = 2  # the latest N, plus the best
    tokenizer: TokenizerConfig = TokenizerConfig()
    model: CausalLMModel = CausalLMModel()  # causal_lm only
    classifier_dropout: Annotated[float, Field(ge=0, lt=1)] = 0.1
    freeze_base: bool = False  # classification: train the head only
    shuffle_window: PositiveInt = 50_000  # rows shuffled together (row groups are shuffled too)
    threads: PositiveInt | None = None  # torch CPU threads; fixed for reproducible runs
    device: Literal["auto", "cpu", "cuda"] = "auto"
    log_every: PositiveInt = 10
    # steps the plan times on a copy of the model before the run (after one unmeasured step);
    # 0: no measurement, so no projected time or memory
    probe_steps: Annotated[int, Field(ge=0)] = 3
    budget: Budget = Budget()

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.tokenizer.kind == "bpe" and self.objective != "causal_lm":
            raise ValueError(
                "tokenizer.kind bpe is for causal_lm; classification fine-tunes MiniLM and must "
                "use its own tokenizer (minilm)"
            )
        measured = {
            "max_wall_time": self.budget.max_wall_time,
            "max_memory": self.budget.max_memory,
        }
        unmeasurable = [name for name, limit in measured.items() if limit and not self.probe_steps]
        if unmeasurable:
            raise ValueError(
                f"train.budget.{unmeasurable[0]} needs a measured plan: set train.probe_steps "
                "above 0 (the steps timed before the run)"
            )
        if not 0 <= self.betas[0] < 1 or not 0 <= self.betas[1] < 1:
            raise ValueError(f"betas must each be in [0, 1), got {list(self.betas)}")
        return self
