"""The demo behind ``python -m wengert demo``: an MLP (or, with ``--model cnn``, a small convolutional
network on the 8x8 images, channels first) learns scikit-learn's handwritten digits.

Fixed seed, 80/20 stratified split, Adam with a cosine schedule, a progress bar per epoch. Writes
into ``--out``: ``curves.png`` (loss and accuracy per epoch), ``step.dot`` (+ ``step.svg`` when
Graphviz is installed: the graph of one training step), and ``model.npz``, which it reloads into a
fresh model and evaluates again. Needs the ``demo`` extra (scikit-learn, matplotlib, tqdm).
"""

import os
import sys
import time

import numpy as np

import wengert as wg
from wengert import nn, optim, viz

__all__ = ["run", "DigitsCNN"]

BATCH = 32
BAR = "{desc} {percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


def _need_extras():
    try:
        import matplotlib  # noqa: F401
        import sklearn  # noqa: F401
        import tqdm  # noqa: F401
    except ModuleNotFoundError as e:
        print(f"wengert demo needs {e.name}: install the demo extra: pip install '.[demo]' in a clone "
              f"of wengert (or run `make demo` there), or pip install scikit-learn matplotlib tqdm",
              file=sys.stderr)
        return False
    return True


def load_data(seed):
    """Digits scaled to [0, 1], split 80/20 (stratified) with ``seed``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)


class DigitsCNN(nn.Module):
    """conv 3x3 (1->16), ReLU, conv 3x3 (16->32), ReLU, max-pool 2, then 512-``hidden``-10: for the
    digits' (N, 1, 8, 8) images."""

    def __init__(self, hidden=128, rng=None):
        super().__init__()
        rng = np.random.default_rng(rng)
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, rng=rng)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, rng=rng)
        self.fc1 = nn.Linear(32 * 4 * 4, hidden, rng=rng)
        self.fc2 = nn.Linear(hidden, 10, rng=rng)

    def forward(self, x):
        h = nn.relu(self.conv2(nn.relu(self.conv1(x))))
        h = nn.functional.max_pool2d(h, 2)
        h = h.reshape((h.shape[0], -1))
        return self.fc2(nn.relu(self.fc1(h)))


def shifted(X, rng):
    """Each (1, 8, 8) image moved by up to one pixel in each direction, zeros shifted in (training-time
    augmentation for the CNN)."""
    n = len(X)
    padded = np.pad(X, ((0, 0), (0, 0), (1, 1), (1, 1)))
    dy, dx = rng.integers(0, 3, size=n), rng.integers(0, 3, size=n)
    rows = dy[:, None] + np.arange(8)                       # (n, 8)
    cols = dx[:, None] + np.arange(8)
    return padded[np.arange(n)[:, None, None], 0, rows[:, :, None], cols[:, None, :]][:, None]


def _model(args):
    """A fresh model of the kind ``args.model`` names."""
    if getattr(args, "model", "mlp") == "cnn":
        return DigitsCNN(args.hidden, rng=args.seed)
    return nn.MLP([64, args.hidden, 10], rng=args.seed)


def accuracy(model, X, y):
    """Fraction of ``X`` classified as ``y`` (evaluation mode, nothing recorded)."""
    with wg.no_grad():
        return float((np.asarray(model(X).value).argmax(axis=1) == y).mean())


def run(args):
    """Train, report, write the pictures and the model; returns the exit status."""
    if not _need_extras():
        return 1
    from tqdm import tqdm
    os.makedirs(args.out, exist_ok=True)
    cnn = getattr(args, "model", "mlp") == "cnn"
    what = f"a CNN (two 3x3 convolutions, max-pool, 512-{args.hidden}-10)" if cnn else \
        f"an MLP 64-{args.hidden}-10"
    print(f"wengert demo: {what} learns scikit-learn's handwritten digits "
          f"(seed {args.seed}, {args.epochs} epochs, Adam lr {args.lr})")
    print("(a tape example, in reverse and forward mode: python -m wengert example)")
    Xtr, Xte, ytr, yte = load_data(args.seed)
    print(f"data: {len(Xtr)} training and {len(Xte)} test images of 8x8 pixels, 10 classes")
    if cnn:  # images, channels first: (N, 1, 8, 8)
        Xtr, Xte = Xtr.reshape(-1, 1, 8, 8), Xte.reshape(-1, 1, 8, 8)

    model = _model(args)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    schedule = optim.CosineAnnealingLR(opt, T_max=args.epochs)
    rng = np.random.default_rng(args.seed)
    names = dict(model.named_parameters())

    graph_files = _draw_step(model, Xtr[:BATCH], ytr[:BATCH], names, args.out, viz, nn,
                             "CNN" if cnn else "MLP")

    history = {"loss": [], "train_acc": [], "test_acc": []}
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        order = rng.permutation(len(Xtr))
        total_loss = correct = seen = 0
        starts = range(0, len(order), BATCH)
        bar = tqdm(total=len(starts), desc=f"epoch {epoch + 1:>3}/{args.epochs}", unit="batch",
                   leave=True, mininterval=0.2, file=sys.stderr, bar_format=BAR)
        for i in starts:
            idx = order[i:i + BATCH]
            logits = model(shifted(Xtr[idx], rng) if cnn else Xtr[idx])
            loss = nn.cross_entropy(logits, ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total_loss += float(loss.item()) * len(idx)
            correct += int((np.asarray(logits.detach().value).argmax(axis=1) == ytr[idx]).sum())
            seen += len(idx)
            bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.3f}", refresh=False)
            bar.update(1)
        schedule.step()
        model.eval()
        test_acc = accuracy(model, Xte, yte)
        bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{correct / seen:.3f}", test=f"{test_acc:.3f}")
        bar.close()
        history["loss"].append(total_loss / seen)
        history["train_acc"].append(correct / seen)
        history["test_acc"].append(test_acc)
    elapsed = time.perf_counter() - start

    final = history["test_acc"][-1]
    print(f"test accuracy: {final:.2%} ({round(final * len(yte))}/{len(yte)}) after {args.epochs} epochs, "
          f"trained in {elapsed:.1f} s")

    curves = os.path.join(args.out, "curves.png")
    _plot(history, curves)
    weights = os.path.join(args.out, "model.npz")
    model.save(weights)
    reloaded = _model(args).load(weights).eval()
    again = accuracy(reloaded, Xte, yte)
    same = "the same" if again == final else "DIFFERENT"
    print(f"reloaded {weights}: test accuracy {again:.2%} ({same})")
    print("wrote: " + ", ".join([curves, *graph_files, weights]))
    return 0 if again == final else 1


def _draw_step(model, x, y, names, out, viz, nn, kind="MLP"):
    """The graph of one training step (forward pass up to the loss), as DOT and, with Graphviz, SVG."""
    loss = nn.cross_entropy(model(x), y)
    title = f"one training step: loss = cross_entropy({kind}(x), labels)"
    names = dict(names, x=x, labels=y, loss=loss)
    dot_path = viz.render(loss, os.path.join(out, "step.dot"), names=names, title=title)
    files = [dot_path]
    svg = viz.render(loss, os.path.join(out, "step.svg"), names=names, title=title, quiet=True)
    if svg.endswith(".svg"):
        files.append(svg)
    else:
        print("(Graphviz's dot is not installed: render the graph with  "
              f"dot -Tsvg {dot_path} -o {os.path.join(out, 'step.svg')})")
    return files


def _plot(history, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = np.arange(1, len(history["loss"]) + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
    ax1.plot(epochs, history["loss"], marker="o", ms=3)
    ax1.set(title="training loss", xlabel="epoch", ylabel="cross-entropy")
    ax1.set_yscale("log")
    ax2.plot(epochs, history["train_acc"], marker="o", ms=3, label="train")
    ax2.plot(epochs, history["test_acc"], marker="o", ms=3, label="test")
    ax2.set(title="accuracy", xlabel="epoch", ylabel="fraction correct")
    ax2.legend(loc="lower right")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
