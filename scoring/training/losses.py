"""The recipes' losses as small pure functions of embeddings, similarities and logits.

Each follows the paper it names (formulas and constants: SPEC.md, section "Fine-tuning
recipes"); every one has a hand-computed test in tests/training/test_losses.py.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

PRMCS_MARGIN = 0.1
PRMCS_LAMBDAS = (0.1, 0.05, 0.05)
SPECS_WEIGHTS = (1.0, 8.0, 0.8)  # alpha, beta, gamma
UMIC_MARGIN = 0.2


def teacher_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """MCS teacher learning: mean squared error between the student's embedding of a caption
    and the CLIP text embedding of its English source (PR-MCS §3.1)."""
    return F.mse_loss(student, teacher)


def positives_mask(image_ids: list | None, n: int, device=None) -> torch.Tensor:
    """(n, n) bool: texts i and j belong to the same image (the diagonal when ids are unique)."""
    if image_ids is None:
        return torch.eye(n, dtype=torch.bool, device=device)
    index = {key: k for k, key in enumerate(dict.fromkeys(image_ids))}
    groups = torch.tensor([index[key] for key in image_ids], device=device)
    return groups[:, None] == groups[None, :]


def info_nce(image: torch.Tensor, text: torch.Tensor, scale: torch.Tensor | float,
             image_ids: list | None = None) -> torch.Tensor:
    """CLIP's symmetric InfoNCE over a batch of (image, text) pairs, on cosine similarities
    times `scale` (1/temperature).  Rows that share an image (`image_ids`) are not negatives
    of each other: each row's loss averages over all its positives."""
    image = F.normalize(image, dim=-1)
    text = F.normalize(text, dim=-1)
    logits = scale * image @ text.T
    positives = positives_mask(image_ids, len(image), logits.device).to(logits.dtype)

    def direction(rows: torch.Tensor) -> torch.Tensor:
        log_prob = rows.log_softmax(dim=-1)
        return -((log_prob * positives).sum(-1) / positives.sum(-1)).mean()

    return 0.5 * (direction(logits) + direction(logits.T))


def hard_negative_nce(image: torch.Tensor, text: torch.Tensor, negative: torch.Tensor, scale: torch.Tensor | float,
                      image_ids: list | None = None) -> torch.Tensor:
    """Image -> text InfoNCE whose softmax also holds `negative`, one hard negative text per row
    (its caption with a keyword swapped, as NegCLIP), as a wrong caption for every image: the
    batch's other captions differ in whole objects, these in one word. A CapLens addition for PAC-S."""
    image, text, negative = (F.normalize(t, dim=-1) for t in (image, text, negative))
    logits = scale * image @ torch.cat([text, negative]).T
    positives = positives_mask(image_ids, len(image), logits.device).to(logits.dtype)
    positives = torch.cat([positives, torch.zeros_like(positives)], dim=1)
    return -((logits.log_softmax(dim=-1) * positives).sum(-1) / positives.sum(-1)).mean()


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(len(a), len(b)) cosine similarities."""
    return F.normalize(a.float(), dim=-1) @ F.normalize(b.float(), dim=-1).T


def similarity_anchor(image: torch.Tensor, text: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Mean squared difference between the batch's image x text cosine matrix and `reference`, the
    same matrix from a frozen model: the other images' captions stand in for wrong ones, so the
    student keeps how its base scores these captions for the right image and the wrong ones (a
    CapLens addition)."""
    return ((cosine_matrix(image, text) - reference.to(image.device)) ** 2).mean()


def prmcs_loss(image: torch.Tensor, original: torch.Tensor, perturbed: torch.Tensor, scale: torch.Tensor | float,
               margin: float = PRMCS_MARGIN, lambdas: tuple[float, float, float] = PRMCS_LAMBDAS,
               image_ids: list | None = None, anchor: torch.Tensor | None = None,
               anchor_weight: float | torch.Tensor = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """PR-MCS: L_CLIP + λ1·(1 − cos(V, T(o))) + λ2·max(m, cos(V, T(p))) + λ3·max(m, cos(T(o), T(p))),
    plus, with `anchor_weight`, λa·(1 − cos(T(o), T₀(o))): the original caption's embedding stays
    where the base encoder put it (`anchor`, a CapLens addition; the paper has none). A tensor
    `anchor_weight` is one λa per row, the term then the mean of λa,i·(1 − cos_i)."""
    l_clip = info_nce(image, original, scale, image_ids)
    cos_vo = F.cosine_similarity(image, original, dim=-1)
    cos_vp = F.cosine_similarity(image, perturbed, dim=-1)
    cos_op = F.cosine_similarity(original, perturbed, dim=-1)
    l1 = (1 - cos_vo).mean()
    l2 = cos_vp.clamp(min=margin).mean()
    l3 = cos_op.clamp(min=margin).mean()
    total = l_clip + lambdas[0] * l1 + lambdas[1] * l2 + lambdas[2] * l3
    parts = {"clip": l_clip.item(), "l1": l1.item(), "l2": l2.item(), "l3": l3.item()}
    if torch.is_tensor(anchor_weight) or anchor_weight:
        term, parts["anchor"] = embedding_anchor(original, anchor, anchor_weight)
        total = total + term
    return total, parts


def embedding_anchor(embedding: torch.Tensor, anchor: torch.Tensor,
                     weight: float | torch.Tensor) -> tuple[torch.Tensor, float]:
    """The mean of λa·(1 − cos(T(x), T₀(x))) over rows, and the mean drift 1 − cos: each caption's
    embedding stays where the base encoder T₀ put it (`anchor`). A tensor `weight` is one λa per row."""
    drift = 1 - F.cosine_similarity(embedding, anchor, dim=-1)
    term = (weight.to(drift) * drift).mean() if torch.is_tensor(weight) else weight * drift.mean()
    return term, drift.mean().item()


def pacs_loss(image: torch.Tensor, text: torch.Tensor, generated_image: torch.Tensor, generated_text: torch.Tensor,
              scale: torch.Tensor | float, lambda_v: float, lambda_t: float,
              image_ids: list | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """PAC-S: L(V, T) + λv·L(V', T) + λt·L(V, T'), each a symmetric InfoNCE. `info_nce` averages
    its two directions where the paper sums them, so this is half the paper's loss: a pure scale
    for the gradient's direction, but it halves the norm that `grad_clip` limits and doubles the
    relative weight of terms added to it (`anchor`, `style_gap`). The shipped presets' numbers
    (lr, grad_clip, weights) are for this scale and stay as they are."""
    real = info_nce(image, text, scale, image_ids)
    visual = info_nce(generated_image, text, scale, image_ids)
    textual = info_nce(image, generated_text, scale, image_ids)
    return real + lambda_v * visual + lambda_t * textual, {"real": real.item(), "v": visual.item(), "t": textual.item()}


def style_gap(long: torch.Tensor, short: torch.Tensor, teacher_long: torch.Tensor,
              teacher_short: torch.Tensor) -> torch.Tensor:
    """Mean squared difference between each image's long-minus-short caption similarity and the
    teacher's (all four: one cosine per row, its image with its own caption). A CapLens addition
    for PAC-S: it keeps the order across caption styles and leaves each style free to move."""
    return (((long - short) - (teacher_long - teacher_short)) ** 2).mean()


def specs_hinge(better: torch.Tensor, worse: torch.Tensor) -> torch.Tensor:
    """SPECS eq. 3: mean max(0, θ(worse) − θ(better) + ε), with ε the batch-mean of
    θ(better) − θ(worse), detached and clamped to [0, 1] (the paper's "clamped for
    numerical stability"; the bounds are CapLens's choice, the seed prints none)."""
    epsilon = (better - worse).mean().detach().clamp(0.0, 1.0)
    return (worse - better + epsilon).clamp(min=0).mean()


def specs_loss(contrastive: torch.Tensor, base: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
               weights: tuple[float, float, float] = SPECS_WEIGHTS) -> tuple[torch.Tensor, dict[str, float]]:
    """SPECS eq. 4: α·L_contrastive + β·L_pos + γ·L_neg on cosine similarities θ(i, ·) of
    the base caption c_j, c_j + d+ and c_j + d−."""
    l_pos = specs_hinge(positive, base)
    l_neg = specs_hinge(base, negative)
    alpha, beta, gamma = weights
    return alpha * contrastive + beta * l_pos + gamma * l_neg, {
        "contrastive": contrastive.item(), "pos": l_pos.item(), "neg": l_neg.item()}


def umic_ranking(positive: torch.Tensor, negatives: torch.Tensor,
                 margin: float | torch.Tensor = UMIC_MARGIN) -> torch.Tensor:
    """UMIC: mean over negatives of max(0, M − (S(I, X) − S(I, X̂))); `positive` (B,) and
    `negatives` (B, K) are scores S = sigmoid(one logit). `margin` is the paper's one M, or a
    (B, K) tensor with one M per negative (the recipe's `options.margin_by_kind`)."""
    return (margin - (positive[:, None] - negatives)).clamp(min=0).mean()


def umic_cross_ranking(positive: torch.Tensor, negatives: torch.Tensor, margin: float = UMIC_MARGIN) -> torch.Tensor:
    """UMIC's ranking loss across images: each positive S(I_i, X_i) above every negative of the
    batch's other rows, S(I_j, X̂_j) with j ≠ i, by the same margin. A CapLens addition: the
    paper's loss compares a caption only with its own negatives on its own image, so it never
    sets one level for "right" across images, which a rating's scale has."""
    b = positive.shape[0]
    gaps = (margin - (positive[:, None, None] - negatives[None, :, :])).clamp(min=0)  # (B, B, K)
    others = ~torch.eye(b, dtype=torch.bool, device=positive.device)
    return gaps[others].mean() if b > 1 else positive.sum() * 0


def teacher_rank_distillation(student: torch.Tensor, teacher: torch.Tensor, temperature: float,
                              image_ids: list | None = None) -> torch.Tensor:
    """RankNet distillation over the batch's pairs of rows: the student's P(i above j) =
    sigmoid(z_i − z_j) (`student`: logits, (B,)) is fitted by cross-entropy to the teacher's
    sigmoid((t_i − t_j) / temperature). Pairs showing the same image are left out, so the term
    sets only how captions of different images compare. A CapLens addition for UMIC, whose
    ranking loss compares a caption only with captions of its own image."""
    b = student.shape[0]
    keep = ~torch.eye(b, dtype=torch.bool, device=student.device)
    if image_ids is not None:
        keep &= ~positives_mask(image_ids, b, student.device)
    if not keep.any():
        return student.sum() * 0
    gaps = student.float()[:, None] - student.float()[None, :]
    target = torch.sigmoid((teacher.float()[:, None] - teacher.float()[None, :]) / temperature).to(gaps.device)
    return F.binary_cross_entropy_with_logits(gaps[keep], target[keep])


def twin_match_bce(logits: torch.Tensor) -> torch.Tensor:
    """Counterfactual twins through a one-logit match head: `logits` (N, 2, 2) over [image (own,
    twin), caption (own, twin's)]; each caption matches its own image only (the diagonal), binary
    cross-entropy averaged over the four pairings."""
    target = torch.eye(2, device=logits.device, dtype=torch.float32).expand_as(logits)
    return F.binary_cross_entropy_with_logits(logits.float(), target)


def itm_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Image-text matching: two-way cross-entropy, label 1 = the caption belongs to the image."""
    return F.cross_entropy(logits.float(), labels)


def regression_mse(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """CapLens-R: squared error to the mean human rating of a caption."""
    return F.mse_loss(predicted, target)


def masked_regression(predicted: torch.Tensor, target: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """CapLens-R with rating aspects: squared error per (caption, aspect), averaged with aspect
    `weights` (A,) over the cells whose target is known; NaN targets (an aspect nobody rated)
    count for nothing.  `predicted` and `target` are (N, A)."""
    known = ~torch.isnan(target)
    cell_weight = weights.to(predicted.dtype)[None, :].expand_as(predicted) * known
    error = (predicted - torch.nan_to_num(target)) ** 2
    return (error * cell_weight).sum() / cell_weight.sum().clamp(min=1e-12)


def pairwise_ranking(predicted: torch.Tensor, target: torch.Tensor, groups: torch.Tensor,
                     min_gap: float = 0.05, temperature: float = 0.1) -> torch.Tensor:
    """RankNet-style logistic loss on the pairs (i, j) of one group (one image) whose mean
    ratings differ by more than `min_gap`: softplus(-(p_i - p_j) / temperature) for the better
    caption i.  Kendall's tau counts orders, not distances, so the order within an image is
    trained directly; 0 when no pair qualifies."""
    better = (target[:, None] - target[None, :]) > min_gap
    same = groups[:, None] == groups[None, :]
    pairs = better & same
    if not bool(pairs.any()):
        return predicted.sum() * 0.0
    margin = (predicted[:, None] - predicted[None, :])[pairs]
    return F.softplus(-margin / temperature).mean()
