"""A dynamic network, DyNet style: a character language model whose graph differs per example.

The third seed's DyNet loop -- look up an embedding per input symbol, ``concatenate``, a hidden
layer, softmax cross-entropy (``pickneglogsoftmax``) -- predicting the next character of
"The Zen of Python" (``this.s``, which ships, ROT13-encoded, with Python itself). Each example
sees a context of 1 to ``--context`` previous characters, drawn at random, and the hidden layer
for that length: the recorded graph (how many lookups, which weights) changes from one example to
the next, and Python's own control flow builds it. The losses of a minibatch of such graphs are
summed and differentiated once. Embedding rows get sparse gradients: Adam touches only the rows
of the characters seen.

    python examples/dynamic_charlm.py [--steps 2000] [--seed 0]
"""

import argparse
import codecs
import contextlib
import io
import time

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from wengert import nn, optim


def zen_text():
    """The Zen of Python, decoded (importing ``this`` prints it: that is swallowed)."""
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return codecs.decode(this.s, "rot13")


class CharLM(nn.Module):
    """Embeddings of the context characters, concatenated, a tanh layer chosen by the context
    length, and scores for the next character."""

    def __init__(self, vocab, dim=16, hidden=96, max_context=6, rng=None):
        super().__init__()
        rng = np.random.default_rng(rng)
        self.embed = nn.Embedding(vocab, dim, rng=rng)
        self.hidden = [nn.Linear(k * dim, hidden, rng=rng) for k in range(1, max_context + 1)]
        self.out = nn.Linear(hidden, vocab, rng=rng)

    def forward(self, context):
        vectors = [self.embed(c) for c in context]        # one lookup per character: E[c]
        h = wnp.tanh(self.hidden[len(context) - 1](wnp.concatenate(vectors)))
        return self.out(h)


def train(steps=1500, batch=16, max_context=6, lr=1e-2, seed=0, report_every=100, log=print):
    """Train on the Zen; returns (model, vocabulary, per-step losses)."""
    text = zen_text()
    chars = sorted(set(text))
    code = {c: i for i, c in enumerate(chars)}
    data = np.array([code[c] for c in text])
    rng = np.random.default_rng(seed)
    model = CharLM(len(chars), max_context=max_context, rng=seed)
    opt = optim.Adam(model.parameters(), lr=lr)
    losses = []
    for step in range(1, steps + 1):
        total = 0.0
        for pos in rng.integers(1, len(data), size=batch):
            k = int(rng.integers(1, min(max_context, pos) + 1))   # the graph's shape, per example
            logits = model(data[pos - k:pos])
            total = total + nn.cross_entropy(logits, data[pos])
        loss = total / batch
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
        if report_every and step % report_every == 0:
            log(f"step {step:5d}  loss {np.mean(losses[-report_every:]):.3f}")
    return model, chars, losses


def sample(model, chars, prompt="Beautiful ", length=200, temperature=0.6, seed=0):
    """Text continuing ``prompt``, each character drawn from the model's softmax."""
    code = {c: i for i, c in enumerate(chars)}
    rng = np.random.default_rng(seed)
    ids = [code[c] for c in prompt if c in code]
    max_context = len(model.hidden)
    model.eval()
    with wg.no_grad():  # nothing to differentiate: record nothing
        for _ in range(length):
            logits = model(np.array(ids[-max_context:])).value
            p = np.exp((logits - logits.max()) / temperature)
            ids.append(int(rng.choice(len(chars), p=p / p.sum())))
    return "".join(chars[i] for i in ids)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--context", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    model, chars, losses = train(args.steps, args.batch, args.context, seed=args.seed,
                                 report_every=max(args.steps // 10, 1))
    elapsed = time.perf_counter() - start
    window = max(len(losses) // 10, 1)
    first, last = np.mean(losses[:window]), np.mean(losses[-window:])
    print(f"loss fell from {first:.3f} to {last:.3f} in {args.steps} steps ({elapsed:.1f} s); "
          f"uniform guessing would be {np.log(len(chars)):.3f}")
    text = sample(model, chars, seed=args.seed)
    print("sample:\n" + text)
    return {"losses": losses, "first": first, "last": last, "sample": text}


if __name__ == "__main__":
    main()
