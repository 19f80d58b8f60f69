"""Each loss equals its hand computation on tiny tensors (numbers worked out in the comments)."""
import math

import numpy as np
import pytest
import torch

from scoring.training import losses

E = math.e


def t(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_teacher_mse():
    # ((1 - 0)^2 + (2 - 0)^2) / 2
    assert losses.teacher_mse(t([1.0, 2.0]), t([0.0, 0.0])).item() == pytest.approx(2.5)


def test_info_nce_diagonal_and_shared_image():
    eye = t([1.0, 0.0], [0.0, 1.0])
    # logits = I: each row -log(e / (e + 1)) = log(1 + e^-1), both directions the same
    assert losses.info_nce(eye, eye, 1.0).item() == pytest.approx(math.log(1 + 1 / E), abs=1e-6)
    # both rows show one image: each row averages -log_softmax over both entries
    # = -((1 - log(e + 1)) + (0 - log(e + 1))) / 2 = log(e + 1) - 0.5
    assert losses.info_nce(eye, eye, 1.0, ["a", "a"]).item() == pytest.approx(math.log(E + 1) - 0.5, abs=1e-6)


def test_prmcs_loss():
    image, original = t([1.0, 0.0]), t([1.0, 0.0])
    # one pair: L_CLIP = 0; cos(V,T(o)) = 1 -> L1 = 0; cos(V,T(p)) = cos(T(o),T(p)) = 0.6
    total, parts = losses.prmcs_loss(image, original, t([0.6, 0.8]), 1.0)
    assert total.item() == pytest.approx(0.1 * 0 + 0.05 * 0.6 + 0.05 * 0.6, abs=1e-6)
    assert parts["l2"] == pytest.approx(0.6)
    # orthogonal perturbed caption: both cosines 0, held at the margin 0.1
    total, _ = losses.prmcs_loss(image, original, t([0.0, 1.0]), 1.0)
    assert total.item() == pytest.approx(0.05 * 0.1 + 0.05 * 0.1, abs=1e-6)


def test_pacs_loss():
    eye = t([1.0, 0.0], [0.0, 1.0])
    total, _ = losses.pacs_loss(eye, eye, eye, eye, 1.0, lambda_v=0.05, lambda_t=0.1)
    assert total.item() == pytest.approx(math.log(1 + 1 / E) * 1.15, abs=1e-6)


def test_specs_hinge_margin_is_batch_mean_and_detached():
    # ε = mean(0.1, 0.2) = 0.15: max(0, 0.4 - 0.5 + 0.15) = 0.05, max(0, 0.4 - 0.6 + 0.15) = 0 -> 0.025
    better = torch.tensor([0.5, 0.6], requires_grad=True)
    loss = losses.specs_hinge(better, torch.tensor([0.4, 0.4]))
    assert loss.item() == pytest.approx(0.025, abs=1e-6)
    loss.backward()
    # detached ε: only the active first term has a gradient, -1/2
    assert better.grad.tolist() == pytest.approx([-0.5, 0.0])
    # a negative batch mean is clamped to 0: ε = mean(0.1, -0.1) = 0 -> (0 + 0.1) / 2
    assert losses.specs_hinge(torch.tensor([0.5, 0.3]), torch.tensor([0.4, 0.4])).item() == pytest.approx(0.05, abs=1e-6)


def test_specs_loss():
    # L_pos = 0.025 (above); L_neg: base - negative = (0.1, -0.1), ε = 0 -> (0 + 0.1) / 2 = 0.05
    total, parts = losses.specs_loss(torch.tensor(1.0), torch.tensor([0.4, 0.4]), torch.tensor([0.5, 0.6]),
                                     torch.tensor([0.3, 0.5]))
    assert parts["pos"] == pytest.approx(0.025) and parts["neg"] == pytest.approx(0.05)
    assert total.item() == pytest.approx(1.0 + 8 * 0.025 + 0.8 * 0.05, abs=1e-6)


def test_umic_ranking():
    # 0.2 - (0.9 - s): 0.1, -0.2 -> 0, 0.25, -0.1 -> 0; mean 0.35 / 4
    loss = losses.umic_ranking(torch.tensor([0.9]), torch.tensor([[0.8, 0.5, 0.95, 0.6]]))
    assert loss.item() == pytest.approx(0.0875, abs=1e-6)


def test_umic_ranking_takes_one_margin_per_negative():
    # margins (0.2, 0.2, 0.05, 0.05): 0.2 - 0.1 = 0.1; 0.2 - 0.4 -> 0; 0.05 + 0.05 = 0.1; 0.05 - 0.3 -> 0
    margins = torch.tensor([[0.2, 0.2, 0.05, 0.05]])
    loss = losses.umic_ranking(torch.tensor([0.9]), torch.tensor([[0.8, 0.5, 0.95, 0.6]]), margins)
    assert loss.item() == pytest.approx(0.05, abs=1e-6)


def test_umic_cross_ranking_compares_each_positive_with_the_other_rows_negatives_only():
    # row 0 (0.9) against row 1's (0.6, 0.95): 0, 0.25; row 1 (0.5) against row 0's (0.8, 0.3):
    # 0.5, 0; its own negatives (0.6, 0.95 for row 1) would add 0.3 and 0.65: left out
    positive, negatives = torch.tensor([0.9, 0.5]), torch.tensor([[0.8, 0.3], [0.6, 0.95]])
    assert losses.umic_cross_ranking(positive, negatives).item() == pytest.approx(0.1875, abs=1e-6)
    # margin 0: 0, 0.05 and 0.3, 0
    assert losses.umic_cross_ranking(positive, negatives, margin=0.0).item() == pytest.approx(0.0875, abs=1e-6)
    assert losses.umic_cross_ranking(positive[:1], negatives[:1]).item() == 0.0


def test_teacher_rank_distillation_fits_the_teachers_pairwise_order_across_images_only():
    import math

    # rows 0 and 1 show one image, row 2 another: pairs (0,2), (2,0), (1,2), (2,1) count.
    # (0,2): gap z = 1 - 0 = 1, teacher target sigmoid((0.3 - 0.1) / 0.1) = sigmoid(2)
    # (1,2): gap z = 3 - 0 = 3, target sigmoid((0.2 - 0.1) / 0.1) = sigmoid(1); each reversed pair
    # is the mirror (-z, 1 - target), whose cross-entropy is the same number.
    def bce(z, y):
        return -(y * math.log(1 / (1 + math.exp(-z))) + (1 - y) * math.log(1 - 1 / (1 + math.exp(-z))))

    def sig(x):
        return 1 / (1 + math.exp(-x))

    student, teacher = torch.tensor([1.0, 3.0, 0.0]), torch.tensor([0.3, 0.2, 0.1])
    expected = (bce(1, sig(2)) + bce(3, sig(1))) / 2
    value = losses.teacher_rank_distillation(student, teacher, 0.1, ["a", "a", "b"])
    assert value.item() == pytest.approx(expected, abs=1e-6)
    # without image ids every pair counts, (0,1) too: gap -2 against sigmoid(1)
    every = losses.teacher_rank_distillation(student, teacher, 0.1)
    assert every.item() == pytest.approx((bce(1, sig(2)) + bce(3, sig(1)) + bce(-2, sig(1))) / 3, abs=1e-6)
    assert losses.teacher_rank_distillation(student[:2], teacher[:2], 0.1, ["a", "a"]).item() == 0.0


def test_one_logit_head_in_the_pair_head_is_its_sigmoid():
    from scoring.training.recipes import write_one_logit_head

    one = torch.nn.Linear(2, 1)
    with torch.no_grad():
        one.weight.copy_(t([1.0, 2.0]))
        one.bias.fill_(0.5)
    pair = torch.nn.Linear(2, 2)
    write_one_logit_head(pair, one)
    x = t([1.0, 1.0])
    # z = 1 + 2 + 0.5 = 3.5; softmax([0, z])[1] = sigmoid(3.5)
    assert torch.softmax(pair(x), -1)[0, 1].item() == pytest.approx(1 / (1 + math.exp(-3.5)), abs=1e-6)


def test_caplens_r_features():
    from scoring.metrics.caplens_r import features

    x = features(np.array([[1.0, 0.0]]), np.array([[0.6, 0.8]]), [np.array([[0.0, 1.0], [1.0, 0.0]])])[0]
    r = 1 / math.sqrt(2)  # normalised mean reference (0.5, 0.5)
    expected = [0.6, 0.8, 0.7, r, 1.0, abs(0.6 - r), abs(0.8 - r), 0.6 * r, 0.8 * r, 0.6, 0.0]
    assert x.tolist() == pytest.approx(expected, abs=1e-6)
    no_refs = features(np.array([[1.0, 0.0]]), np.array([[0.6, 0.8]]), [np.zeros((0, 2))])[0]
    assert no_refs[1:5].tolist() == [0.0, 0.0, 0.0, 0.0] and no_refs[5:7].tolist() == pytest.approx([0.6, 0.8])


def test_masked_regression_weights_known_cells_only():
    # cells: (0.5-1)^2=0.25 w1, (0-0)^2=0 w0.5, NaN skipped; (1-0)^2=1 w1, (0.2-0)^2=0.04 w0.5
    # -> (0.25*1 + 0*0.5 + 1*1 + 0.04*0.5) / (1 + 0.5 + 1 + 0.5) = 1.27 / 3
    predicted = t([0.5, 0.0, 0.3], [1.0, 0.2, 0.9])
    target = t([1.0, 0.0, float("nan")], [0.0, 0.0, float("nan")])
    value = losses.masked_regression(predicted, target, t(1.0, 0.5, 2.0))
    assert value.item() == pytest.approx(1.27 / 3)


def test_pairwise_ranking_counts_only_ordered_pairs_of_one_image():
    # image 0: ratings 0.9 > 0.5 (gap 0.4 > 0.05), predictions 0.6, 0.8: margin -0.2
    # image 1: ratings 0.50, 0.52 (gap below 0.05): no pair; image 0 vs image 1 never paired
    # -> softplus(0.2 / 0.1) = log(1 + e^2)
    predicted = t(0.6, 0.8, 0.1, 0.9)
    target = t(0.9, 0.5, 0.50, 0.52)
    groups = torch.tensor([0, 0, 1, 1])
    value = losses.pairwise_ranking(predicted, target, groups, min_gap=0.05, temperature=0.1)
    assert value.item() == pytest.approx(math.log(1 + E ** 2), rel=1e-5)
    # no qualifying pair: 0, and still differentiable
    flat = losses.pairwise_ranking(predicted[2:], target[2:], groups[2:])
    assert flat.item() == 0.0 and flat.requires_grad == predicted.requires_grad


# Written after mutation testing (benchmarks/mutation.py): each test below pins a value that a
# surviving mutant changed, against a computation written independently of losses.py.

def _info_nce_by_loops(image, text, scale, image_ids=None):
    """CLIP's symmetric InfoNCE with plain loops: cosine similarities times scale; for each row
    (image -> texts) and each column (text -> images), minus the mean log-probability of its
    positives (texts of the same image)."""
    def unit(v):
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v]

    images, texts = [unit(v) for v in image.tolist()], [unit(v) for v in text.tolist()]
    n = len(images)
    ids = image_ids or list(range(n))
    s = [[scale * sum(a * b for a, b in zip(images[i], texts[j])) for j in range(n)] for i in range(n)]

    def one_way(matrix):
        total = 0.0
        for i in range(n):
            log_z = math.log(sum(math.exp(x) for x in matrix[i]))
            positives = [j for j in range(n) if ids[j] == ids[i]]
            total += -sum(matrix[i][j] - log_z for j in positives) / len(positives)
        return total / n

    return 0.5 * (one_way(s) + one_way([list(col) for col in zip(*s)]))


# three pairs, rows of very different norms and no symmetry; the first two show one image
IMAGE = t([3.0, 1.0, 0.0], [0.5, 2.0, 1.0], [0.2, 0.1, 4.0])
TEXT = t([1.0, 0.0, 0.5], [0.3, 3.0, 0.2], [1.0, 1.0, 1.0])
PERTURBED = t([0.0, 1.0, 0.2], [2.0, 0.0, 0.1], [0.1, 0.0, 1.0])


def test_positives_mask_is_boolean():
    assert losses.positives_mask(None, 3).dtype == torch.bool
    assert losses.positives_mask(None, 3).tolist() == torch.eye(3, dtype=torch.bool).tolist()
    assert losses.positives_mask(["a", "b", "a"], 3).tolist() == [[True, False, True], [False, True, False],
                                                                 [True, False, True]]


@pytest.mark.parametrize("image_ids", [None, ["a", "a", "b"]])
def test_info_nce_on_unnormalised_rows_equals_the_loops(image_ids):
    expected = _info_nce_by_loops(IMAGE, TEXT, 2.5, image_ids)
    assert losses.info_nce(IMAGE, TEXT, 2.5, image_ids).item() == pytest.approx(expected, abs=1e-5)


def _cos(a, b):
    return [float(x) for x in torch.nn.functional.cosine_similarity(a, b, dim=-1)]


def test_prmcs_loss_weighs_each_term_by_its_own_lambda_and_keeps_shared_images_positive():
    ids = ["a", "a", "b"]
    lambdas = (0.1, 0.2, 0.3)
    total, parts = losses.prmcs_loss(IMAGE, TEXT, PERTURBED, 2.5, margin=0.1, lambdas=lambdas, image_ids=ids)
    clip = _info_nce_by_loops(IMAGE, TEXT, 2.5, ids)
    l1 = sum(1 - c for c in _cos(IMAGE, TEXT)) / 3
    l2 = sum(max(0.1, c) for c in _cos(IMAGE, PERTURBED)) / 3
    l3 = sum(max(0.1, c) for c in _cos(TEXT, PERTURBED)) / 3
    assert parts == pytest.approx({"clip": clip, "l1": l1, "l2": l2, "l3": l3}, abs=1e-5)
    assert total.item() == pytest.approx(clip + 0.1 * l1 + 0.2 * l2 + 0.3 * l3, abs=1e-5)


def test_prmcs_anchor_term_adds_the_drift_of_the_originals_from_the_base_encoder():
    ids = ["a", "a", "b"]
    base, _ = losses.prmcs_loss(IMAGE, TEXT, PERTURBED, 2.5, lambdas=(0.1, 0.2, 0.3), image_ids=ids)
    anchor = TEXT.flip(0)  # where the base encoder put the originals
    total, parts = losses.prmcs_loss(IMAGE, TEXT, PERTURBED, 2.5, lambdas=(0.1, 0.2, 0.3), image_ids=ids,
                                     anchor=anchor, anchor_weight=0.5)
    drift = sum(1 - c for c in _cos(TEXT, anchor)) / 3
    assert parts["anchor"] == pytest.approx(drift, abs=1e-6) and drift > 0.1
    assert total.item() == pytest.approx(base.item() + 0.5 * drift, abs=1e-5)
    same, parts = losses.prmcs_loss(IMAGE, TEXT, PERTURBED, 2.5, lambdas=(0.1, 0.2, 0.3), image_ids=ids,
                                    anchor=TEXT, anchor_weight=0.5)
    assert parts["anchor"] == pytest.approx(0.0, abs=1e-6) and same.item() == pytest.approx(base.item(), abs=1e-5)


def test_prmcs_anchor_weights_per_row_weigh_each_originals_drift():
    ids = ["a", "a", "b"]
    base, _ = losses.prmcs_loss(IMAGE, TEXT, PERTURBED, 2.5, lambdas=(0.1, 0.2, 0.3), image_ids=ids)
    anchor = TEXT.roll(1, 0)
    weights = torch.tensor([0.5, 0.5, 2.0])
    total, parts = losses.prmcs_loss(IMAGE, TEXT, PERTURBED, 2.5, lambdas=(0.1, 0.2, 0.3), image_ids=ids,
                                     anchor=anchor, anchor_weight=weights)
    drifts = [1 - c for c in _cos(TEXT, anchor)]
    assert parts["anchor"] == pytest.approx(sum(drifts) / 3, abs=1e-6)
    assert total.item() == pytest.approx(base.item() + (0.5 * drifts[0] + 0.5 * drifts[1] + 2.0 * drifts[2]) / 3,
                                         abs=1e-5)
    assert drifts[2] != pytest.approx(drifts[0], abs=1e-3)  # so a weight on the wrong row would show


def test_prmcs_anchor_languages_give_each_row_its_languages_factor():
    from types import SimpleNamespace

    from scoring.training.recipes import RECIPES

    rows = [{"language": "en"}, {"language": "ja"}, {"language": "de"}]
    weights = RECIPES["pr-mcs"].anchor_weights(SimpleNamespace(options={"anchor_languages": {"ja": 2.5}}), rows, 8.0,
                                               "cpu")
    assert weights.tolist() == [8.0, 20.0, 8.0]
    assert RECIPES["pr-mcs"].anchor_weights(SimpleNamespace(options={}), rows, 8.0, "cpu") == 8.0
    with pytest.raises(ValueError, match="anchor_languages"):
        RECIPES["pr-mcs"].anchor_weights(SimpleNamespace(options={"anchor_languages": {"ja": -1}}), rows, 8.0, "cpu")


def test_similarity_anchor_is_the_mean_squared_change_of_every_image_text_cosine():
    reference = t([0.5, 0.0, 0.1], [0.2, 0.9, -0.3], [0.0, 0.4, 1.0])
    squared = [(_cos(IMAGE[i:i + 1], TEXT[j:j + 1])[0] - float(reference[i, j])) ** 2
               for i in range(3) for j in range(3)]
    assert losses.similarity_anchor(IMAGE, TEXT, reference).item() == pytest.approx(sum(squared) / 9, abs=1e-6)
    assert losses.similarity_anchor(IMAGE, TEXT, losses.cosine_matrix(IMAGE, TEXT)).item() == pytest.approx(0, abs=1e-12)


def test_pacs_loss_on_shared_images():
    ids = ["a", "a", "b"]
    total, parts = losses.pacs_loss(IMAGE, TEXT, PERTURBED, IMAGE.flip(0), 2.5, lambda_v=0.05, lambda_t=0.1,
                                    image_ids=ids)
    real = _info_nce_by_loops(IMAGE, TEXT, 2.5, ids)
    visual = _info_nce_by_loops(PERTURBED, TEXT, 2.5, ids)
    textual = _info_nce_by_loops(IMAGE, IMAGE.flip(0), 2.5, ids)
    assert parts == pytest.approx({"real": real, "v": visual, "t": textual}, abs=1e-5)
    assert total.item() == pytest.approx(real + 0.05 * visual + 0.1 * textual, abs=1e-5)


def test_style_gap_is_the_mean_squared_change_of_each_long_minus_short_gap():
    # student gaps 0.9 - 0.6 = 0.3 and 0.5 - 0.7 = -0.2; teacher gaps 0.7 - 0.4 = 0.3 and 0.4 - 0.5 = -0.1:
    # ((0.3 - 0.3)^2 + (-0.2 - -0.1)^2) / 2 = 0.005
    long, short, teacher_long, teacher_short = t(0.9, 0.5), t(0.6, 0.7), t(0.7, 0.4), t(0.4, 0.5)
    assert losses.style_gap(long, short, teacher_long, teacher_short).item() == pytest.approx(0.005, abs=1e-7)
    # both styles of an image moving together (+0.25, -0.3) keep its gap: nothing to pay
    assert losses.style_gap(long + t(0.25, -0.3), short + t(0.25, -0.3), teacher_long, teacher_short).item() == \
        pytest.approx(0.005, abs=1e-7)


def test_specs_hinge_clamps_the_margin_to_0_and_1():
    # better - worse = (2.0, 0.4): mean 1.2, clamped to ε = 1: max(0, -2 + 1) = 0, max(0, -0.4 + 1) = 0.6
    assert losses.specs_hinge(t(2.5, 0.9), t(0.5, 0.5)).item() == pytest.approx(0.3, abs=1e-6)
    # better - worse = (0.1, -0.3): mean -0.1, clamped to ε = 0: 0 and 0.3
    assert losses.specs_hinge(t(0.6, 0.2), t(0.5, 0.5)).item() == pytest.approx(0.15, abs=1e-6)


def test_specs_loss_multiplies_the_contrastive_term_and_names_its_parts():
    total, parts = losses.specs_loss(torch.tensor(0.5), t(0.4, 0.4), t(0.5, 0.6), t(0.3, 0.5))
    assert parts == pytest.approx({"contrastive": 0.5, "pos": 0.025, "neg": 0.05})
    assert total.item() == pytest.approx(1.0 * 0.5 + 8 * 0.025 + 0.8 * 0.05, abs=1e-6)


def test_itm_cross_entropy_and_regression_mse():
    # row 1: logits (0, 0), label 1: log 2; row 2: logits (2, 0), label 0: log(1 + e^-2)
    value = losses.itm_cross_entropy(t([0.0, 0.0], [2.0, 0.0]), torch.tensor([1, 0]))
    assert value.item() == pytest.approx((math.log(2) + math.log(1 + E ** -2)) / 2, abs=1e-6)
    # ((1 - 0)^2 + (0.5 - 0)^2) / 2
    assert losses.regression_mse(t(1.0, 0.5), t(0.0, 0.0)).item() == pytest.approx(0.625)


def test_masked_regression_with_weights_summing_below_one_and_in_another_dtype():
    # one known cell, error 1, weight 0.25: 0.25 / 0.25 = 1 (the weights' sum is not floored at 1)
    value = losses.masked_regression(t([1.0, 0.0]), t([0.0, float("nan")]),
                                     torch.tensor([0.25, 0.5], dtype=torch.float64))
    assert value.item() == pytest.approx(1.0) and value.dtype == torch.float32  # the predictions' dtype


def test_pairwise_ranking_defaults_gap_above_005_and_temperature_01():
    # image 0: ratings 0.05 and 0.0 differ by exactly the gap 0.05: not "more than", no pair
    # image 1: ratings 0.8 > 0.7, predictions 0.3, 0.5: margin -0.2 -> softplus(0.2 / 0.1)
    predicted = t(0.4, 0.4, 0.3, 0.5)
    target = t(0.05, 0.0, 0.8, 0.7)
    value = losses.pairwise_ranking(predicted, target, torch.tensor([0, 0, 1, 1]))
    assert value.item() == pytest.approx(math.log(1 + E ** 2), rel=1e-5)


def test_hard_negative_nce_adds_each_rows_swapped_caption_to_the_image_to_text_softmax():
    eye = t([1.0, 0.0], [0.0, 1.0])
    # negative 0 has cos 0.6 to image 0 and 0.8 to image 1, negative 1 the reverse: row 0 [1, 0, 0.6, 0.8]
    negative = t([0.6, 0.8], [0.8, 0.6])
    by_hand = [-(1 - math.log(E + 1 + E ** 0.6 + E ** 0.8)), -(1 - math.log(1 + E + E ** 0.8 + E ** 0.6))]
    assert losses.hard_negative_nce(eye, eye, negative, 1.0).item() == pytest.approx(sum(by_hand) / 2, abs=1e-6)
    # scale 2 and a shared image: each row averages -log_softmax over both real captions
    logits = [2.0, 0.0, 1.2, 1.6]
    log_z = math.log(sum(math.exp(x) for x in logits))
    row0 = -((2.0 - log_z) + (0.0 - log_z)) / 2
    logits = [0.0, 2.0, 1.6, 1.2]  # the same four values: the same log_z
    row1 = -((0.0 - log_z) + (2.0 - log_z)) / 2
    assert losses.hard_negative_nce(eye, eye, negative, 2.0, ["a", "a"]).item() == pytest.approx((row0 + row1) / 2,
                                                                                                    abs=1e-6)


def test_twin_match_bce_is_binary_cross_entropy_with_each_caption_matching_its_own_image_only():
    z = torch.tensor([[[2.0, -1.0], [0.5, 3.0]], [[-0.5, 1.5], [0.0, -2.0]]])  # [pair, image, caption]
    def nll(logit, label):
        p = 1 / (1 + np.exp(-logit))
        return -np.log(p) if label else -np.log(1 - p)
    by_hand = np.mean([nll(float(z[n, i, c]), i == c) for n in range(2) for i in range(2) for c in range(2)])
    assert float(losses.twin_match_bce(z)) == pytest.approx(by_hand, rel=1e-6)
