"""GPT-2 small in plain torch.nn (tied embeddings; forward returns the LM loss), as measured on
the H200 (h200_measure.py) and as `tmsim import gpt.py:build --input 1024:int64 --loss sum`
traces it."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h: int, heads: int, p: float) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc, self.out = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
        self.heads, self.p = heads, p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.heads)
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        att = F.dropout(att, self.p, self.training)
        y = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = x + F.dropout(self.proj(y), self.p, self.training)
        return x + F.dropout(self.out(F.gelu(self.fc(self.ln2(x)))), self.p, self.training)


class GPT(nn.Module):
    def __init__(
        self,
        layers: int = 12,
        h: int = 768,
        heads: int = 12,
        vocab: int = 50257,
        ctx: int = 1024,
        p: float = 0.1,
    ) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, h), nn.Embedding(ctx, h)
        self.blocks = nn.ModuleList(Block(h, heads, p) for _ in range(layers))
        self.ln = nn.LayerNorm(h)
        self.p = p

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = F.dropout(self.wte(idx) + self.wpe(pos), self.p, self.training)
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), idx.view(-1))


def build() -> GPT:
    return GPT()
