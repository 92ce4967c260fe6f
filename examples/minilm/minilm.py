"""all-MiniLM-L6-v2 as a plain PyTorch BERT module, its weights read from model.safetensors
with numpy, and a WordPiece tokenizer for its vocab.txt (no transformers/safetensors).

Parameter names are the checkpoint's own (embeddings.*, encoder.layer.<i>.*), so a sparse
spec names them as Hugging Face does; the classification head is `head.*`."""

import json
import math
import struct
import unicodedata

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- weights ----

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
           "I32": np.int32}


def read_safetensors(path):
    """{name: np.ndarray} from a .safetensors file: an 8-byte little-endian header length,
    a JSON header {name: {dtype, shape, data_offsets}} (offsets relative to the data that
    follows the header), then the raw little-endian data."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        arr = np.frombuffer(blob, dtype=_DTYPES[e["dtype"]], count=(end - begin) //
                            np.dtype(_DTYPES[e["dtype"]]).itemsize, offset=base + begin)
        out[name] = arr.reshape(e["shape"]).copy()
    return out


# ---- model ----

class SelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)

    def split(self, x):  # (B, T, d) -> (B, H, T, hd)
        return x.reshape(x.shape[0], x.shape[1], self.heads, self.hd).transpose(1, 2)

    def forward(self, x, add_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        y = torch.matmul(torch.softmax(s + add_mask, dim=-1), v)
        return y.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.heads * self.hd)


class DenseNorm(nn.Module):
    """dense, residual, LayerNorm: BERT's post-norm "output" blocks."""

    def __init__(self, din, d, eps):
        super().__init__()
        self.dense = nn.Linear(din, d)
        self.LayerNorm = nn.LayerNorm(d, eps=eps)

    def forward(self, h, residual):
        return self.LayerNorm(self.dense(h) + residual)


class Attention(nn.Module):
    def __init__(self, d, heads, eps):
        super().__init__()
        setattr(self, "self", SelfAttention(d, heads))  # the checkpoint's name
        self.output = DenseNorm(d, d, eps)

    def forward(self, x, add_mask):
        return self.output(getattr(self, "self")(x, add_mask), x)


class Intermediate(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.dense = nn.Linear(d, ff)

    def forward(self, x):
        return F.gelu(self.dense(x))  # exact (erf) GELU, as the config's "gelu"


class Layer(nn.Module):
    def __init__(self, d, heads, ff, eps):
        super().__init__()
        self.attention = Attention(d, heads, eps)
        self.intermediate = Intermediate(d, ff)
        self.output = DenseNorm(ff, d, eps)

    def forward(self, x, add_mask):
        x = self.attention(x, add_mask)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    def __init__(self, d, heads, ff, layers, eps):
        super().__init__()
        self.layer = nn.ModuleList([Layer(d, heads, ff, eps) for _ in range(layers)])


class Embeddings(nn.Module):
    def __init__(self, vocab, d, max_pos, types, eps):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(max_pos, d)
        self.token_type_embeddings = nn.Embedding(types, d)
        self.LayerNorm = nn.LayerNorm(d, eps=eps)
        # buffers, as Hugging Face's: sliced to T they become constant Gather indices
        self.register_buffer("position_ids", torch.arange(max_pos).reshape(1, max_pos),
                             persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, max_pos, dtype=torch.int64),
                             persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = (self.word_embeddings(ids) + self.position_embeddings(self.position_ids[:, :t])
             + self.token_type_embeddings(self.token_type_ids[:, :t]))  # every token type 0
        return self.LayerNorm(x)


class MiniLM(nn.Module):
    """Inputs: token ids (N, T) int64 and an attention mask (N, T) float (1 = token,
    0 = padding). Output: (N, classes) logits of a Linear head on the mean-pooled last
    hidden state (mean over the mask, as sentence-transformers pools)."""

    def __init__(self, config, classes=2):
        super().__init__()
        d, eps = config["hidden_size"], config["layer_norm_eps"]
        assert config["hidden_act"] == "gelu" and config["position_embedding_type"] == "absolute"
        self.embeddings = Embeddings(config["vocab_size"], d, config["max_position_embeddings"],
                                     config["type_vocab_size"], eps)
        self.encoder = Encoder(d, config["num_attention_heads"], config["intermediate_size"],
                               config["num_hidden_layers"], eps)
        self.head = nn.Linear(d, classes)

    def pooled(self, ids, mask):
        x = self.embeddings(ids)
        # (N, T) 1/0 -> additive (N, 1, 1, T): 0 where attended, -1e4 at padding (BERT's)
        add = (1.0 - mask).reshape(mask.shape[0], 1, 1, mask.shape[1]) * -10000.0
        for layer in self.encoder.layer:
            x = layer(x, add)
        m = mask.unsqueeze(-1)
        return (x * m).sum(1) / m.sum(1)

    def forward(self, ids, mask):
        return self.head(self.pooled(ids, mask))


def load(model_dir, classes=2, seed=0):
    """The pretrained MiniLM from model_dir (config.json + model.safetensors), its head
    initialized from `seed` (torch's default Linear init)."""
    with open(f"{model_dir}/config.json") as f:
        config = json.load(f)
    torch.manual_seed(seed)
    m = MiniLM(config, classes)
    weights = read_safetensors(f"{model_dir}/model.safetensors")
    state = m.state_dict()
    missing = [k for k in state if not k.startswith("head.") and k not in weights]
    if missing:
        raise ValueError(f"model.safetensors lacks {missing[:3]}")
    for k in state:
        if k in weights:
            if tuple(weights[k].shape) != tuple(state[k].shape):
                raise ValueError(f"{k}: shape {weights[k].shape}, expected {tuple(state[k].shape)}")
            state[k] = torch.from_numpy(weights[k])
    m.load_state_dict(state)
    return m


# ---- tokenizer ----

def _is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


class WordPiece:
    """BERT's uncased tokenizer: lowercase, strip accents, split on whitespace and
    punctuation (each punctuation mark and CJK character a word), then greedy
    longest-match-first WordPiece with "##" continuations; a word with no match (or longer
    than 100 characters) is [UNK]."""

    def __init__(self, vocab_path):
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = {w.rstrip("\n"): i for i, w in enumerate(f)}
        self.cls, self.sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.pad, self.unk = self.vocab["[PAD]"], self.vocab["[UNK]"]

    def basic(self, text):
        text = unicodedata.normalize("NFD", text.lower())
        words, cur = [], []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\t\n\r":
                continue
            if unicodedata.category(ch) == "Mn":  # accents
                continue
            if ch.isspace() or unicodedata.category(ch) == "Zs":
                if cur:
                    words.append("".join(cur))
                    cur = []
            elif _is_punct(ch) or _is_cjk(cp):
                if cur:
                    words.append("".join(cur))
                    cur = []
                words.append(ch)
            else:
                cur.append(ch)
        if cur:
            words.append("".join(cur))
        return words

    def wordpiece(self, word):
        if len(word) > 100:
            return [self.unk]
        out, start = [], 0
        while start < len(word):
            end, piece = len(word), None
            while start < end:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.vocab:
                    piece = self.vocab[sub]
                    break
                end -= 1
            if piece is None:
                return [self.unk]
            out.append(piece)
            start = end
        return out

    def encode(self, text, length):
        """(ids, mask): [CLS] pieces [SEP], truncated to `length`, padded with [PAD]."""
        pieces = [p for w in self.basic(text) for p in self.wordpiece(w)][:length - 2]
        ids = [self.cls] + pieces + [self.sep]
        mask = [1.0] * len(ids) + [0.0] * (length - len(ids))
        return ids + [self.pad] * (length - len(ids)), mask

    def batch(self, texts, length):
        """ids (N, length) int64 and mask (N, length) float32 numpy arrays."""
        enc = [self.encode(t, length) for t in texts]
        return (np.array([e[0] for e in enc], dtype=np.int64),
                np.array([e[1] for e in enc], dtype=np.float32))
